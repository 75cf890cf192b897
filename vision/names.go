package vision

import (
	"path/filepath"
	"slices"
	"strings"
)

// imageExts are the extensions of the files a folder walk or a tar shard's
// reader takes as images, sorted: the formats Decode reads.
var imageExts = []string{".bmp", ".gif", ".jpe", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp"}

// IsImageName reports whether name (a file name or path) ends in an image
// extension, case-insensitively:
// .jpg, .jpeg, .jpe, .png, .gif, .bmp, .tif, .tiff or .webp.
func IsImageName(name string) bool {
	return slices.Contains(imageExts, strings.ToLower(filepath.Ext(name)))
}

// ImageExts returns the image extensions IsImageName takes, sorted, in a
// new slice.
func ImageExts() []string { return slices.Clone(imageExts) }
