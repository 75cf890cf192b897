package vision_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/ort/orttest"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// tinyclip is the tiny random CLIP made by testdata/tinyclip/generate.py;
// its golden outputs come from torch.
var tinyclip = filepath.Join("..", "testdata", "tinyclip")

// encoderTol is the largest difference allowed between ONNX Runtime and torch.
const encoderTol = 1e-4

func readGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyclip, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func closeToTorch(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, torch has %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if testing.Verbose() {
		t.Logf("%s: max abs difference %.2g", what, worst)
	}
	if worst > encoderTol || math.IsNaN(worst) {
		t.Fatalf("%s: |ort - torch| = %g at %d (ort %g, torch %g), tolerance %g", what, worst, at, got[at], want[at], encoderTol)
	}
}

func checkVision(t *testing.T, e *vision.Encoder) {
	t.Helper()
	px := readGolden(t, "vision_pixel_values")
	hs := readGolden(t, "vision_last_hidden_state")
	em := readGolden(t, "image_embeds")
	n, h, w := px.Shape[0], px.Shape[2], px.Shape[3]
	got, err := e.Encode(context.Background(), px.Data.([]float32), n, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d encodings for %d images", len(got), n)
	}
	tok, d, p := hs.Shape[1], hs.Shape[2], em.Shape[1]
	hv, ev := hs.Data.([]float32), em.Data.([]float32)
	for i, g := range got {
		if g.Tokens != tok || g.Width != d || g.Grid != (vision.Grid{H: 4, W: 4}) {
			t.Fatalf("image %d: tokens %d width %d grid %v, want %d %d 4x4", i, g.Tokens, g.Width, g.Grid, tok, d)
		}
		closeToTorch(t, "vision last_hidden_state", g.States, hv[i*tok*d:(i+1)*tok*d])
		closeToTorch(t, "image_embeds", g.Embeds, ev[i*p:(i+1)*p])
	}
	// One image alone gives the same as in the batch.
	one, err := e.Encode(context.Background(), px.Data.([]float32)[2*3*h*w:], 1, h, w)
	if err != nil {
		t.Fatal(err)
	}
	closeToTorch(t, "image_embeds[2] alone", one[0].Embeds, ev[2*p:3*p])
}

func TestEncoderMatchesTorch(t *testing.T) {
	orttest.Load(t)
	p := filepath.Join(tinyclip, "onnx", "vision_model.onnx")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// No patch size: the grid is inferred from 16 patch tokens of a square image.
	e, err := vision.NewEncoder(b, p, vision.EncoderOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c, h, w := e.InputSize(); c != 3 || h != 32 || w != 32 || !e.HasEmbeds() {
		t.Fatalf("input %dx%dx%d, embeds %v", c, h, w, e.HasEmbeds())
	}
	checkVision(t, e)
}

func TestOpenEncoder(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(tinyclip, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := vision.OpenEncoder(m, vision.EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkVision(t, e)
	ctx := context.Background()
	px := make([]float32, 2*3*32*32)
	for _, c := range []struct {
		name    string
		px      []float32
		n, h, w int
		want    string
	}{
		{"short buffer", px[:100], 2, 32, 32, "100 pixel values"},
		{"wrong size", make([]float32, 3*16*16), 1, 16, 16, "takes 32x32"},
		{"bad shape", px, 2, 0, 32, "bad batch shape"},
	} {
		if _, err := e.Encode(ctx, c.px, c.n, c.h, c.w); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.Encode(ctx, px, 2, 32, 32); err == nil {
		t.Error("Encode after Close: no error")
	}
}

func TestEncoderRejectsGraphs(t *testing.T) {
	orttest.Load(t)
	for _, c := range []struct {
		file  string
		wants []string
	}{
		{filepath.Join("pooled_only", "vision_model.onnx"), []string{"pooled_only", "no last_hidden_state output", "image_embeds", "full export", "condition models expose"}},
		{filepath.Join("bad", "vision_float16.onnx"), []string{"vision_float16.onnx", "input pixel_values is float16", "expected a float32"}},
		{"text_model.onnx", []string{"text_model.onnx", "no pixel_values input", "input_ids"}},
	} {
		p := filepath.Join(tinyclip, "onnx", c.file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := vision.NewEncoder(b, p, vision.EncoderOptions{})
		if err == nil {
			e.Close()
			t.Errorf("%s: no error", c.file)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.file, err, w)
			}
		}
	}
}

// BenchmarkEncoderTiny measures images/s of the tiny model (32×32, batch
// of 3) on one ONNX Runtime thread: mostly per-run overhead.
func BenchmarkEncoderTiny(b *testing.B) {
	orttest.Load(b)
	m, err := models.Open(tinyclip, models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := vision.OpenEncoder(m, vision.EncoderOptions{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	px, err := tensorio.ReadNPY(filepath.Join(tinyclip, "golden", "vision_pixel_values.npy"))
	if err != nil {
		b.Fatal(err)
	}
	n := px.Shape[0]
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := e.Encode(ctx, px.Data.([]float32), n, 32, 32); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "images/s")
}
