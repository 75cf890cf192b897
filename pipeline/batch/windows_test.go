package batch

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
)

// TestRunWindows: a files-layout job with Windows writes each image's maps
// over the whole image (a 3:1 image: a grid three times as wide as high,
// equal to the engine's windows), no patch_features, "windows" in the
// metadata and a heatmap; the shards layout and the index refuse windows.
func TestRunWindows(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	img := image.NewRGBA(image.Rect(0, 0, 96, 32))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{128, 128, 128, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(4, 8, 20, 24), &image.Uniform{color.RGBA{220, 30, 30, 255}}, image.Point{}, draw.Src)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "wide.png"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, pipeline.Options{})
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a red square"}, Out: out, Windows: true, Heatmaps: true, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 1 || sum.Failed != 0 {
		t.Fatalf("summary %+v", sum)
	}
	ts, meta, err := tensorio.ReadSafetensors(filepath.Join(out, "wide.png.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ts["patch_features"]; ok {
		t.Error("patch_features (the centre crop's) written with windows")
	}
	ps, err := eng.Prepare(context.Background(), "a red square")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := eng.DecodeImage(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	atts, err := eng.AttendImages(context.Background(), []image.Image{dec}, ps, pipeline.AttendOptions{Windows: true, Conditioned: true})
	if err != nil {
		t.Fatal(err)
	}
	a := atts[0][0]
	if meta["grid"] != a.Grid.String() || a.Grid.W != 3*a.Grid.H || meta["windows"] != "true" {
		t.Errorf("metadata grid %q windows %q; the engine's grid %v", meta["grid"], meta["windows"], a.Grid)
	}
	got := ts["prompt.0.text_to_image"]
	if want := []int{ps[0].T(), a.Grid.Patches()}; !slices.Equal(got.Shape, want) {
		t.Fatalf("text_to_image shape %v, want %v", got.Shape, want)
	}
	for i, v := range got.Data.([]float32) {
		if v != a.TextToImage[i] {
			t.Fatalf("text_to_image[%d] = %g, the engine's %g", i, v, a.TextToImage[i])
		}
	}
	// image_embeds is the image's over its windows, not the centre crop's.
	if e := ts["image_embeds"]; !slices.Equal(e.Data.([]float32), a.ImageEmbeds) || a.ImageEmbeds == nil {
		t.Errorf("image_embeds %v, the engine's over the windows %v", e.Data, a.ImageEmbeds)
	}
	if _, err := os.Stat(filepath.Join(out, "wide.png.heatmap.0.png")); err != nil {
		t.Error(err)
	}
	for _, c := range []Config{{Layout: "shards"}, {Index: true}} {
		c.Engine, c.Inputs, c.Prompts, c.Out, c.Windows = eng, []string{in}, []string{"x"}, filepath.Join(t.TempDir(), "o"), true
		if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "windows") {
			t.Errorf("windows with layout %q index %v: %v", c.Layout, c.Index, err)
		}
	}
}

// TestRunWindowsBatched: images of three aspects in one encoder batch,
// their windows encoded together, give each the maps and embedding the
// engine gives the image alone.
func TestRunWindowsBatched(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for i, size := range []image.Point{{96, 32}, {32, 80}, {50, 40}} {
		img := image.NewRGBA(image.Rect(0, 0, size.X, size.Y))
		for k := range img.Pix {
			img.Pix[k] = uint8(k*(i+3) + k/5)
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("img%d.png", i)
		files[name] = b.Bytes()
		if err := os.WriteFile(filepath.Join(in, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a red square", "dots"}, Out: out, Windows: true, Batch: 8, Streams: 1})
	if err != nil || sum.Done != 3 {
		t.Fatalf("%+v, %v", sum, err)
	}
	ps, err := eng.Prepare(context.Background(), "a red square", "dots")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		ts, _, err := tensorio.ReadSafetensors(filepath.Join(out, name+".safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := eng.DecodeImage(data)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := eng.AttendImages(context.Background(), []image.Image{dec}, ps, pipeline.AttendOptions{Windows: true, Conditioned: true})
		if err != nil {
			t.Fatal(err)
		}
		for k := range ps {
			got := ts[fmt.Sprintf("prompt.%d.text_to_image", k)].Data.([]float32)
			want := atts[0][k].TextToImage
			if len(got) != len(want) {
				t.Fatalf("%s prompt %d: %d values, alone %d", name, k, len(got), len(want))
			}
			for i := range want {
				if d := got[i] - want[i]; d > 1e-5 || d < -1e-5 {
					t.Fatalf("%s prompt %d text_to_image[%d] = %g in the job, %g alone", name, k, i, got[i], want[i])
				}
			}
		}
		e := ts["image_embeds"].Data.([]float32)
		for i, v := range atts[0][0].ImageEmbeds {
			if d := e[i] - v; d > 1e-5 || d < -1e-5 {
				t.Fatalf("%s image_embeds[%d] = %g in the job, %g alone", name, i, e[i], v)
			}
		}
	}
}
