package jpegdec

import (
	"bytes"
	"fmt"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode: no input panics or hangs,
// and whatever it decodes image/jpeg decodes too, at the same size and
// of the same kind.
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{"../../../testdata/images/src", "../../../testdata/images/jpegdec"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*.jpg"))
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil && len(b) < 16<<10 {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Decode(data, Options{MaxPixels: 1 << 20})
		if err != nil {
			if img != nil {
				t.Fatal("image and error")
			}
			return
		}
		std, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("decoded %T %v, image/jpeg refuses it: %v", img, img.Bounds(), err)
		}
		if std.Bounds() != img.Bounds() {
			t.Fatalf("decoded %v, image/jpeg %v", img.Bounds(), std.Bounds())
		}
		if fmt.Sprintf("%T", std) != fmt.Sprintf("%T", img) {
			t.Fatalf("decoded %T, image/jpeg %T", img, std)
		}
	})
}
