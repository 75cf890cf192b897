package serve

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
)

// TestAttendWindows: "windows": true answers maps over the whole image (a
// 3:1 picture: a grid three times as wide as high, the crop the whole
// image), equal to the engine's, with a heatmap; the server keeps serving
// plain requests, and a bad "windows" field in an upload is a JSON error.
func TestAttendWindows(t *testing.T) {
	_, ts, eng := newTestServer(t, false, Options{})
	img := image.NewRGBA(image.Rect(0, 0, 192, 64))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{128, 128, 128, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(8, 16, 40, 48), &image.Uniform{color.RGBA{30, 60, 220, 255}}, image.Point{}, draw.Src)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	var a attendResponse
	code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(b.Bytes()), "prompts": []string{"a blue square"}, "windows": true, "heatmaps": true}, &a)
	if code != 200 || len(a.Prompts) != 1 {
		t.Fatalf("status %d: %s", code, raw)
	}
	if !a.Windows || a.Grid[1] != 3*a.Grid[0] || a.Crop != [4]int{0, 0, 192, 64} || !strings.HasPrefix(a.Prompts[0].Heatmap, "data:image/png;base64,") {
		t.Errorf("windows %v, grid %v, crop %v, heatmap %.30q", a.Windows, a.Grid, a.Crop, a.Prompts[0].Heatmap)
	}
	ps, err := eng.Prepare(context.Background(), "a blue square")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := eng.DecodeImage(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	atts, err := eng.AttendImages(context.Background(), []image.Image{dec}, ps, pipeline.AttendOptions{Windows: true})
	if err != nil {
		t.Fatal(err)
	}
	want := atts[0][0].TextToImage
	p := a.Grid[0] * a.Grid[1]
	for tok, row := range a.Prompts[0].TextToImage {
		for c, v := range row {
			if v != want[tok*p+c] {
				t.Fatalf("text_to_image[%d][%d] = %g, the engine's %g", tok, c, v, want[tok*p+c])
			}
		}
	}
	var plain attendResponse
	if code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(b.Bytes()), "prompts": []string{"a blue square"}}, &plain); code != 200 || plain.Windows || plain.Grid[0] != plain.Grid[1] {
		t.Errorf("after windows, a plain request: status %d, grid %v: %s", code, plain.Grid, raw)
	}
}
