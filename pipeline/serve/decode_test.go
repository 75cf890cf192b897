package serve

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
)

// TestAttendScaledDecodeSpeaksFullPixels checks that a server decoding JPEGs
// scaled (--decode fast) still answers in the uploaded image's pixels: the
// same image_size as the exact server's, and the crop within one scaled
// pixel (4 here) of it.
func TestAttendScaledDecodeSpeaksFullPixels(t *testing.T) {
	if !vision.CanDraft() {
		t.Skipf("JPEGs are decoded here by %s, which cannot scale them: install libturbojpeg0 (.ci/run does)", vision.JPEGDecoder())
	}
	img := image.NewRGBA(image.Rect(0, 0, 1000, 600))
	for y := range 600 {
		for x := range 1000 {
			img.Set(x, y, color.RGBA{uint8(x / 4), uint8(y / 3), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	uri := "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
	answers := map[pipeline.DecodeMode]attendResponse{}
	for _, mode := range []pipeline.DecodeMode{pipeline.DecodeExact, pipeline.DecodeFast} {
		_, ts, eng := newDecodingServer(t, false, Options{}, mode)
		var a attendResponse
		code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": uri, "prompts": []string{"a red circle"}}, &a)
		if code != 200 {
			t.Fatalf("%s: status %d: %s", mode, code, raw)
		}
		if mode == pipeline.DecodeFast && eng.JPEGDraft() == 0 {
			t.Fatal("the fast server does not scale JPEGs")
		}
		answers[mode] = a
	}
	ex, fa := answers[pipeline.DecodeExact], answers[pipeline.DecodeFast]
	if ex.Size != [2]int{1000, 600} || fa.Size != ex.Size {
		t.Errorf("image_size exact %v, fast %v, want [1000 600]", ex.Size, fa.Size)
	}
	for i := range 4 {
		if d := fa.Crop[i] - ex.Crop[i]; d < -4 || d > 4 {
			t.Errorf("crop exact %v, fast %v: more than one scaled pixel apart", ex.Crop, fa.Crop)
			break
		}
	}
}

// TestFullRegion maps a crop of a decode scaled by 4 back to the full
// image: multiplied, and cut where the last block ran past the border.
func TestFullRegion(t *testing.T) {
	info := vision.Info{Width: 289, Height: 161, Scale: 4}
	for _, tc := range []struct{ in, want image.Rectangle }{
		{image.Rect(0, 0, 73, 41), image.Rect(0, 0, 289, 161)},
		{image.Rect(16, 0, 57, 41), image.Rect(64, 0, 228, 161)},
		{image.Rect(2, 3, 5, 7), image.Rect(8, 12, 20, 28)},
	} {
		if got := fullRegion(tc.in, info); got != tc.want {
			t.Errorf("fullRegion(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if r := image.Rect(1, 2, 3, 4); fullRegion(r, vision.Info{Width: 9, Height: 9, Scale: 1}) != r {
		t.Error("scale 1 changed the region")
	}
}
