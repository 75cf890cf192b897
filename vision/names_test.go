package vision

import (
	"slices"
	"testing"
)

func TestIsImageName(t *testing.T) {
	for name, want := range map[string]bool{
		"a.jpg": true, "A.JPEG": true, "dir/b.Jpe": true, "c.png": true, "d.gif": true, "e.BMP": true,
		"f.tif": true, "g.tiff": true, "h.webp": true, "shard/000001.jpg": true,
		"a.txt": false, "jpg": false, "a.jpg.json": false, ".png/x": false, "a.": false, "": false, "a.svg": false,
	} {
		if got := IsImageName(name); got != want {
			t.Errorf("IsImageName(%q) = %v, want %v", name, got, want)
		}
	}
	exts := ImageExts()
	if !slices.IsSorted(exts) || len(exts) != 9 {
		t.Errorf("ImageExts() = %v, want the 9 extensions sorted", exts)
	}
	exts[0] = ".svg"
	if IsImageName("a.svg") {
		t.Error("ImageExts returned the package's own slice: changing it changed IsImageName")
	}
}
