package pipeline

import (
	"context"
	"image"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline/internal/enginetest"
	"github.com/conditionhq/condition/vision"
)

// TestDecodeModes checks what each Options.Decode asks of the decoder on
// the tiny model (resized to a 32-pixel shortest edge): a 288×160 JPEG is
// decoded whole (exact), at 1/2 (fast: sides ≥ 64) or 1/4 (fastest: sides
// ≥ 32) in builds that scale JPEGs, PNGs always whole; and a build that
// cannot scale refuses the fast modes when the engine opens, naming the
// build tag.
func TestDecodeModes(t *testing.T) {
	m := openTiny(t)
	jpg := enginetest.EncodeImage(t, 288, 160, "jpeg")
	pngData := enginetest.EncodeImage(t, 288, 160, "png")
	for _, tc := range []struct {
		mode  DecodeMode
		draft int
		jpeg  image.Rectangle
	}{
		{"", 0, image.Rect(0, 0, 288, 160)},
		{DecodeExact, 0, image.Rect(0, 0, 288, 160)},
		{DecodeFast, 64, image.Rect(0, 0, 144, 80)},
		{DecodeFastest, 32, image.Rect(0, 0, 72, 40)},
	} {
		eng, err := New(context.Background(), m, Options{Decode: tc.mode})
		if tc.draft > 0 && !vision.CanDraft() {
			if err == nil || !strings.Contains(err.Error(), "libturbojpeg0") {
				t.Errorf("%s without scaled JPEG decoding: %v, want an error naming libturbojpeg0", tc.mode, err)
			}
			if eng != nil {
				eng.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if eng.JPEGDraft() != tc.draft {
			t.Errorf("%s: draft %d, want %d", tc.mode, eng.JPEGDraft(), tc.draft)
		}
		img, err := eng.DecodeImage(jpg)
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds() != tc.jpeg {
			t.Errorf("%s: JPEG decoded to %v, want %v", tc.mode, img.Bounds(), tc.jpeg)
		}
		if img, err = eng.DecodeImage(pngData); err != nil || img.Bounds() != image.Rect(0, 0, 288, 160) {
			t.Errorf("%s: PNG decoded to %v (%v), want it whole", tc.mode, img.Bounds(), err)
		}
		eng.Close()
	}
	if _, err := New(context.Background(), m, Options{Decode: "quick"}); err == nil || !strings.Contains(err.Error(), `"quick"`) {
		t.Errorf("an unknown mode: %v", err)
	}
}
