package video

import (
	"path/filepath"
	"slices"
	"strings"
)

// exts are the extensions IsName takes, sorted.
var exts = []string{".avi", ".m4v", ".mkv", ".mov", ".mp4", ".webm"}

// IsName reports whether name (a file name or path) ends in a video
// extension, case-insensitively: .mp4, .mkv, .webm, .mov, .avi or .m4v.
func IsName(name string) bool {
	return slices.Contains(exts, strings.ToLower(filepath.Ext(name)))
}

// Exts returns the video extensions IsName takes, sorted, in a new slice.
func Exts() []string { return slices.Clone(exts) }
