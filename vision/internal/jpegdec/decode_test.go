package jpegdec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The pixels' exactness is tested in vision, against libjpeg-turbo (see
// TestGoJPEGIsTurbo); these tests check what the decoder accepts and the
// planes' layout against image/jpeg's.

const testdata = "../../../testdata/images"

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, name))
	if err != nil {
		t.Fatalf("committed test data missing: %v", err)
	}
	return b
}

// TestLayoutIsImageJPEGs decodes the baseline fixtures and wants image/jpeg's
// image type, bounds and subsampling ratio, samples within a few levels of
// its own (its IDCT differs) and the planes from Options.Alloc.
func TestLayoutIsImageJPEGs(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(testdata, "jpegdec", "*.jpg"))
	src, _ := filepath.Glob(filepath.Join(testdata, "src", "jpeg_*.jpg"))
	names = append(names, src...)
	if len(names) < 50 {
		t.Fatalf("committed test data missing: %d files", len(names))
	}
	decoded := 0
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		allocs := 0
		img, err := Decode(data, Options{Alloc: func(n int) []byte { allocs++; return make([]byte, n+100) }})
		std, stdErr := jpeg.Decode(bytes.NewReader(data))
		if stdErr != nil {
			t.Fatalf("%s: image/jpeg: %v", n, stdErr)
		}
		if errors.Is(err, ErrUnsupported) {
			t.Logf("%s: %v", filepath.Base(n), err)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(n), err)
			continue
		}
		decoded++
		if allocs != 1 {
			t.Errorf("%s: %d allocations", n, allocs)
		}
		if fmt.Sprintf("%T", img) != fmt.Sprintf("%T", std) || img.Bounds() != std.Bounds() {
			t.Errorf("%s: %T %v, image/jpeg %T %v", n, img, img.Bounds(), std, std.Bounds())
			continue
		}
		maxDiff := 0
		switch m := img.(type) {
		case *image.YCbCr:
			s := std.(*image.YCbCr)
			if m.SubsampleRatio != s.SubsampleRatio || m.YStride != s.YStride || m.CStride != s.CStride {
				t.Errorf("%s: ratio %v strides %d %d, image/jpeg %v %d %d", n, m.SubsampleRatio, m.YStride, m.CStride,
					s.SubsampleRatio, s.YStride, s.CStride)
			}
			b := m.Rect
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					maxDiff = max(maxDiff, absDiff(m.Y[m.YOffset(x, y)], s.Y[s.YOffset(x, y)]),
						absDiff(m.Cb[m.COffset(x, y)], s.Cb[s.COffset(x, y)]), absDiff(m.Cr[m.COffset(x, y)], s.Cr[s.COffset(x, y)]))
				}
			}
		case *image.Gray:
			s := std.(*image.Gray)
			for y := range m.Rect.Dy() {
				for x := range m.Rect.Dx() {
					maxDiff = max(maxDiff, absDiff(m.GrayAt(x, y).Y, s.GrayAt(x, y).Y))
				}
			}
		}
		// image/jpeg dequantizes with the tables in effect at EOI, not those
		// of each component's first scan.
		if maxDiff > 4 && !strings.Contains(n, "dqt_between_scans") {
			t.Errorf("%s: samples up to %d levels from image/jpeg's", n, maxDiff)
		}
	}
	t.Logf("%d of %d files decoded", decoded, len(names))
}

func absDiff(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// TestUnsupported checks that CMYK files and progressive files whose low
// AC coefficients are not fully coded (which libjpeg smooths) are
// ErrUnsupported.
func TestUnsupported(t *testing.T) {
	for _, name := range []string{"src/jpeg_cmyk_40x30.jpg", "jpegdec/prog_unfinished_2x2_37x29.jpg"} {
		img, err := Decode(readFile(t, name), Options{})
		if img != nil || !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %T, %v; want ErrUnsupported", name, img, err)
		}
	}
	// RGB component ids and Adobe transform 0 (RGB).
	data := readFile(t, "jpegdec/s444_17x33_q90.jpg")
	sof := bytes.Index(data, []byte{0xff, 0xc0})
	rgb := bytes.Clone(data)
	rgb[sof+10], rgb[sof+13], rgb[sof+16] = 'R', 'G', 'B'
	sos := bytes.Index(rgb, []byte{0xff, 0xda})
	for i := sos + 5; i < sos+11; i += 2 {
		rgb[i] = map[byte]byte{1: 'R', 2: 'G', 3: 'B'}[rgb[i]]
	}
	adobe := append(append(bytes.Clone(data[:2]), 0xff, 0xee, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0), data[2:]...)
	for name, d := range map[string][]byte{"RGB ids": rgb, "Adobe transform 0": adobe} {
		if _, err := Decode(d, Options{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v; want ErrUnsupported", name, err)
		}
	}
}

// TestTruncated cuts a file at every length: all errors, none panics.
func TestTruncated(t *testing.T) {
	data := readFile(t, "jpegdec/restart_1B_2x2_45x31.jpg")
	for n := range len(data) {
		if img, err := Decode(data[:n], Options{}); err == nil || img != nil {
			t.Fatalf("cut to %d of %d bytes: %T, %v", n, len(data), img, err)
		}
	}
}

// TestTooLarge checks the pixel limit, before allocating.
func TestTooLarge(t *testing.T) {
	data := readFile(t, "jpegdec/s420_45x31_q90.jpg")
	alloc := func(n int) []byte { t.Fatal("allocated"); return nil }
	_, err := Decode(data, Options{MaxPixels: 45*31 - 1, Alloc: alloc})
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Width != 45 || tl.Height != 31 {
		t.Fatalf("%v; want a *TooLargeError for 45x31", err)
	}
	if _, err := Decode(data, Options{MaxPixels: 45 * 31}); err != nil {
		t.Fatal(err)
	}
}
