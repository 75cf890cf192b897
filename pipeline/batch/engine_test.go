package batch

import (
	"context"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// TestDecodeModeInSettings checks that a job decoding JPEGs scaled records
// it and does not count as the exact job's images for --resume: the same
// inputs give another settings hash and the draft side in the metadata.
func TestDecodeModeInSettings(t *testing.T) {
	if !vision.CanDraft() {
		t.Skipf("JPEGs are decoded here by %s, which cannot scale them: install libturbojpeg0 (.ci/run does)", vision.JPEGDecoder())
	}
	m := openTiny(t)
	in := t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "a.jpg"), enginetest.EncodeImage(t, 288, 160, "jpeg"), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := map[pipeline.DecodeMode]string{}
	for _, mode := range []pipeline.DecodeMode{pipeline.DecodeExact, pipeline.DecodeFast} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{Decode: mode}), Inputs: []string{in},
			Prompts: []string{"red"}, Out: out, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		es := readManifest(t, sum.Manifest)
		if len(es) != 1 || es[0].Status != StatusOK {
			t.Fatalf("%s: manifest %+v", mode, es)
		}
		settings[mode] = es[0].Settings
		if es[0].Width != 288 || es[0].Height != 160 {
			t.Errorf("%s: the manifest says %dx%d, want the full 288x160", mode, es[0].Width, es[0].Height)
		}
	}
	if settings[pipeline.DecodeExact] == settings[pipeline.DecodeFast] {
		t.Errorf("exact and fast decoding share the settings hash %s: --resume would take one's images for the other's", settings[pipeline.DecodeFast])
	}
}

// TestEngineAttendEqualsJob: what a program gets from the engine for one
// image is what the job writes for it, tensor for tensor.
func TestEngineAttendEqualsJob(t *testing.T) {
	m := openTiny(t)
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 2)
	prompts := []string{"a photo of a cat", "a red car"}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: prompts, Out: out, PerHead: true}); err != nil {
		t.Fatal(err)
	}
	ts, _, err := tensorio.ReadSafetensors(filepath.Join(out, "img-001.png.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(in, "img-001.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := eng.DecodeImage(data)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := eng.Prepare(context.Background(), prompts...)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, pipeline.AttendOptions{PerHead: true, Conditioned: true})
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string, got []float32) {
		t.Helper()
		want := ts[name].Data.([]float32)
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("%s: %d values, the job wrote %d", name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s[%d]: engine %v, job %v", name, i, got[i], want[i])
			}
		}
	}
	for k, a := range atts[0] {
		pre := fmt.Sprintf("prompt.%d.", k)
		same(pre+"image_to_text", a.ImageToText)
		same(pre+"text_to_image", a.TextToImage)
		same(pre+"image_to_text_heads", a.ImageToTextHeads)
		same(pre+"conditioned_patches", a.ConditionedPatches)
		same(pre+"conditioned_tokens", a.ConditionedTokens)
		if !a.HasScore || float32(a.Score) != ts["scores"].Data.([]float32)[k] {
			t.Errorf("prompt %d: score %v (%v), job %v", k, a.Score, a.HasScore, ts["scores"].Data.([]float32)[k])
		}
		// Each row of a map is a distribution over the other side.
		p, tk := a.Grid.Patches(), a.Prompt.T()
		for r := range tk {
			s := 0.0
			for _, v := range a.TextToImage[r*p : (r+1)*p] {
				s += float64(v)
			}
			if math.Abs(s-1) > 1e-4 {
				t.Fatalf("prompt %d: text_to_image row %d sums to %v", k, r, s)
			}
		}
	}
}
