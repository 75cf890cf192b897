package vision

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes through Decode and, when they decode,
// through Apply: any input gives an image or an error, never a panic, and
// never a pixel buffer over the (lowered) limit.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "src", "*"))
	for _, path := range files {
		if b, err := os.ReadFile(path); err == nil && len(b) < 16<<10 {
			f.Add(b)
		}
	}
	f.Add(pngHeader(100000, 100000))
	f.Add(gifHeader(300, 200))
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8X"))
	f.Add([]byte("II*\x00\x08\x00\x00\x00"))
	f.Add([]byte("BM"))
	p := &Preprocessor{DoConvertRGB: true, DoResize: true, Size: Size{ShortestEdge: 8}, Resample: Bicubic,
		DoCenterCrop: true, CropSize: Size{Height: 8, Width: 8}, DoRescale: true, RescaleFactor: 1.0 / 255,
		DoNormalize: true, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}}
	dst := make([]float32, 3*8*8)
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 20
		img, err := Decode(data, DecodeOptions{MaxPixels: limit})
		if err != nil {
			if img != nil {
				t.Fatal("image and error")
			}
			return
		}
		b := img.Bounds()
		if b.Empty() || int64(b.Dx())*int64(b.Dy()) > limit {
			t.Fatalf("decoded %v past the limit", b)
		}
		if _, _, err := p.ApplyInto(dst, img); err != nil {
			t.Fatalf("decoded image %T %v does not preprocess: %v", img, b, err)
		}
	})
}
