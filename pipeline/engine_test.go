package pipeline

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conditionhq/condition/xattn"
)

// TestEngineConcurrent: many goroutines share one engine and its prepared
// prompts; each gets what a call alone gets (run with -race).
func TestEngineConcurrent(t *testing.T) {
	m := openTiny(t)
	eng := tinyEngine(t, m, Options{Threads: 1})
	ctx := context.Background()
	ps, err := eng.Prepare(ctx, "a photo of a cat", "zebra 42")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 6)
	var imgs []image.Image
	for i := range 6 {
		name := fmt.Sprintf("img-%03d.png", i)
		if i%3 == 0 {
			name = filepath.Join("sub", name)
		}
		data, err := os.ReadFile(filepath.Join(in, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := eng.DecodeImage(data)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	alone := make([][]Attention, len(imgs))
	for i, img := range imgs {
		a, err := eng.AttendImages(ctx, []image.Image{img}, ps, AttendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = a[0]
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(imgs))
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range len(imgs) {
				i := (g + r) % len(imgs)
				// Alternate one image per call and a batch of them.
				var got []Attention
				if r%2 == 0 {
					a, err := eng.AttendImages(ctx, []image.Image{imgs[i]}, ps, AttendOptions{})
					if err != nil {
						errs <- err
						return
					}
					got = a[0]
				} else {
					encs, err := eng.EncodeImages(ctx, []image.Image{imgs[(i+1)%len(imgs)], imgs[i]})
					if err != nil {
						errs <- err
						return
					}
					if got, err = eng.Attend(ctx, &encs[1], ps, AttendOptions{}); err != nil {
						errs <- err
						return
					}
				}
				for k := range got {
					if d := maxAbsDiff(got[k].TextToImage, alone[i][k].TextToImage); d > 1e-5 {
						errs <- fmt.Errorf("goroutine %d, image %d, prompt %d: text_to_image differs from a call alone by %g", g, i, k, d)
						return
					}
					if d := maxAbsDiff(got[k].ImageToText, alone[i][k].ImageToText); d > 1e-5 {
						errs <- fmt.Errorf("goroutine %d, image %d, prompt %d: image_to_text differs from a call alone by %g", g, i, k, d)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestEngineErrors: misuse gets an error naming what was wrong, and Close
// may be called twice.
func TestEngineErrors(t *testing.T) {
	m := openTiny(t)
	ctx := context.Background()
	eng := tinyEngine(t, m, Options{Direction: xattn.TextToImage})
	other := tinyEngine(t, m, Options{})
	ps, err := other.Prepare(ctx, "red")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := eng.EncodeImages(ctx, []image.Image{image.NewRGBA(image.Rect(0, 0, 40, 30))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Attend(ctx, &enc[0], ps, AttendOptions{}); err == nil || !strings.Contains(err.Error(), "not prepared by this engine") {
		t.Errorf("prompts of another engine: %v", err)
	}
	own, err := eng.Prepare(ctx, "red")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Attend(ctx, &enc[0], own, AttendOptions{Direction: xattn.ImageToText}); err == nil || !strings.Contains(err.Error(), "text-to-image only") {
		t.Errorf("a direction the engine does not compute: %v", err)
	}
	for i, p := range []string{"", "   ", strings.Repeat("zebra ", 100)} {
		_, err := eng.Prepare(ctx, "red", p)
		var pe *PromptError
		if !errors.As(err, &pe) || pe.Index != 1 {
			t.Errorf("prompt %d %.20q: %v, want a PromptError for prompt 1", i, p, err)
		} else if len(p) > 100 && strings.Contains(err.Error(), p) {
			t.Errorf("the error quotes the whole prompt: %s", err)
		}
	}
	trunc := tinyEngine(t, m, Options{Truncate: true})
	texts, err := trunc.EncodeTexts(ctx, []string{strings.Repeat("zebra ", 100)})
	if err != nil || !texts[0].Truncated || texts[0].T() != trunc.ContextLength() {
		t.Errorf("Truncate: %v, %d tokens (context %d)", err, len(texts), trunc.ContextLength())
	}
	if _, err := eng.EncodePixels(ctx, make([]float32, 10), 1); err == nil || !strings.Contains(err.Error(), "10 values for 1 images") {
		t.Errorf("EncodePixels with too few values: %v", err)
	}
	if _, err := eng.Attend(ctx, nil, own, AttendOptions{}); err == nil {
		t.Error("Attend of no image: no error")
	}
	if _, err := eng.DecodeImage([]byte("not an image")); err == nil {
		t.Error("DecodeImage of text: no error")
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestEncoderPlan checks how Options.Threads and Options.Streams share the
// cores among vision encoder runs.
func TestEncoderPlan(t *testing.T) {
	for _, tc := range []struct {
		threads, streams, cores int
		wantT, wantS            int
	}{
		{0, 0, 8, 0, 1}, // neither: ONNX Runtime's default threads, one stream
		{4, 0, 8, 4, 1},
		{0, AutoStreams, 1, 1, 1},
		{0, AutoStreams, 2, 1, 2},
		{0, AutoStreams, 3, 1, 3},
		{0, AutoStreams, 8, 2, 4},
		{0, AutoStreams, 64, 16, 4},
		{0, AutoStreams, 0, 1, 1}, // no core count: one of each
		{2, AutoStreams, 2, 2, 1}, // threads alone: one stream of them
		{6, AutoStreams, 8, 6, 1},
		{0, 2, 8, 4, 2}, // streams alone share the cores
		{0, 3, 2, 1, 3},
		{3, 5, 2, 3, 5}, // both as given
	} {
		th, st := encoderPlan(tc.threads, tc.streams, tc.cores)
		if th != tc.wantT || st != tc.wantS {
			t.Errorf("encoderPlan(threads %d, streams %d, cores %d) = %d threads × %d streams; want %d × %d",
				tc.threads, tc.streams, tc.cores, th, st, tc.wantT, tc.wantS)
		}
	}
}

// TestLayerNames: a layer's canonical name (what resume settings and
// metadata record) and ParseLayer of it give back the same layer.
func TestLayerNames(t *testing.T) {
	for _, tc := range []struct {
		l    Layer
		name string
	}{
		{Layer{}, "joint"},
		{Layer{Weights: "joint"}, "joint"},
		{Layer{Weights: "identity"}, "identity"},
		{Layer{Weights: "identity", Heads: 1}, "identity"},
		{Layer{Weights: "identity", Heads: 4}, "identity/4"},
		{Layer{Weights: "w/unet.safetensors", Prefix: "down_blocks.1.attn2."}, "w/unet.safetensors#down_blocks.1.attn2./8"},
		{Layer{Weights: "unet.safetensors", Heads: 2}, "unet.safetensors#/2"},
	} {
		if got := tc.l.String(); got != tc.name {
			t.Errorf("%+v: name %q, want %q", tc.l, got, tc.name)
		}
		back, err := ParseLayer(tc.name)
		if err != nil {
			t.Errorf("ParseLayer(%q): %v", tc.name, err)
		} else if back.String() != tc.name {
			t.Errorf("ParseLayer(%q) = %+v, named %q", tc.name, back, back.String())
		}
	}
	for _, bad := range []string{"identity/0", "identity/x", "f.safetensors#p/-1"} {
		if l, err := ParseLayer(bad); err == nil {
			t.Errorf("ParseLayer(%q) = %+v, want an error", bad, l)
		}
	}
}
