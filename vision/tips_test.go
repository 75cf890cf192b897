package vision

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// TestTipsPixels runs testdata/tinytips's preprocessor (Tipsv2ImageProcessor
// at 16×16) on its two PNGs and compares the pixel values with
// generate.py's transcription (Pillow's bilinear resize, the uint8 values
// times 1/255 in float32, as torch multiplies them): the resized bytes are
// Pillow's, and each value is within one float32 rounding of torch's.
func TestTipsPixels(t *testing.T) {
	dir := filepath.Join("..", "testdata", "tinytips")
	p, err := LoadPreprocessor(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	want, err := tensorio.ReadNPY(filepath.Join(dir, "golden", "embed_pixel_values.npy"))
	if err != nil {
		t.Fatal(err)
	}
	wv := want.Data.([]float32)
	per := 3 * 16 * 16
	for i, name := range []string{"wide.png", "tall.png"} {
		b, err := os.ReadFile(filepath.Join(dir, "golden", "images", name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := Decode(b, DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		px, h, w, err := p.Apply(img)
		if err != nil || h != 16 || w != 16 {
			t.Fatalf("%s: %dx%d, %v", name, h, w, err)
		}
		worst := 0.0
		for j, v := range px {
			g := wv[i*per+j]
			if byteOf(v) != byteOf(g) {
				t.Fatalf("%s: value %d is %v (byte %d), generate.py's %v (byte %d)", name, j, v, byteOf(v), g, byteOf(g))
			}
			worst = math.Max(worst, math.Abs(float64(v)-float64(g)))
		}
		t.Logf("%s: bytes equal, largest difference %.3g", name, worst)
		if worst > 6e-8 {
			t.Errorf("%s: largest difference %.3g, want within one float32 rounding", name, worst)
		}
	}
}

// byteOf returns the 8-bit value a rescaled pixel came from.
func byteOf(v float32) int { return int(math.Round(float64(v) * 255)) }
