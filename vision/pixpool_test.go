package vision

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// pixOf is the pixel buffer of the image types Release keeps.
func pixOf(img image.Image) []byte {
	switch m := img.(type) {
	case *image.RGBA:
		return m.Pix
	case *image.Gray:
		return m.Pix
	case *image.CMYK:
		return m.Pix
	case *image.YCbCr:
		return slices.Concat(m.Y, m.Cb, m.Cr)
	}
	return nil
}

// TestReleaseReuse decodes the draft fixtures (gray, CMYK, 4:2:0, 4:2:2,
// progressive, rotated; 60 KB to 960 KB of pixels) in turns, releasing each
// image before the next decode: whatever buffer a decode gets back, its
// pixels are those of a decode into fresh memory, with nothing left from
// the image released before it (larger or smaller, of another type).
func TestReleaseReuse(t *testing.T) {
	dir := filepath.Join(goldenDir, "draft", "src")
	names, err := filepath.Glob(filepath.Join(dir, "*.jpg"))
	if err != nil || len(names) < 6 {
		t.Fatalf("committed golden data missing: %v (%d files)", err, len(names))
	}
	var files [][]byte
	var want [][]byte
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		img, err := Decode(data, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
		want = append(want, bytes.Clone(pixOf(img)))
	}
	reused := 0
	var last []byte
	for round := range 4 {
		for i := range files {
			k := (i*3 + round) % len(files) // each size after each other
			img, err := Decode(files[k], DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pix := pixOf(img)
			if want[k] != nil && !bytes.Equal(pix, want[k]) {
				t.Fatalf("%s after a release: pixels differ from a fresh decode", filepath.Base(names[k]))
			}
			if last != nil && pix != nil && cap(pix) == cap(last) && &pix[:1][0] == &last[:1][0] {
				reused++
			}
			last = pix
			Release(img)
		}
	}
	t.Logf("decoder %s: %d decodes got the buffer released just before", JPEGDecoder(), reused)
	Release(image.NewYCbCr(image.Rect(0, 0, 10, 10), image.YCbCrSubsampleRatio420)) // too small to keep
	Release(image.NewNRGBA(image.Rect(0, 0, 200, 200)))                             // ignored
	Release(image.NewRGBA(image.Rect(0, 0, 2, 2)))                                  // too small to keep
}

// TestPixBuffer checks the pool's size classes: a buffer released holds
// any later request up to its capacity, never one larger.
func TestPixBuffer(t *testing.T) {
	for _, n := range []int{1, 1000, 1 << 16, 1<<16 + 1, 3 << 20} {
		b := pixBuffer(n)
		if len(b) != n {
			t.Errorf("pixBuffer(%d): len %d", n, len(b))
		}
		if n >= 1<<minPoolBits && cap(b)&(cap(b)-1) != 0 {
			t.Errorf("pixBuffer(%d): cap %d, want a power of two", n, cap(b))
		}
	}
	for range 20 {
		Release(&image.RGBA{Pix: make([]byte, 100_000)}) // class 16: 65536 ≤ cap < 131072
		if b := pixBuffer(100_000); cap(b) < 100_000 {
			t.Fatalf("pixBuffer(100000) got cap %d", cap(b))
		}
		if b := pixBuffer(70_000); cap(b) < 70_000 {
			t.Fatalf("pixBuffer(70000) got cap %d", cap(b))
		}
	}
}
