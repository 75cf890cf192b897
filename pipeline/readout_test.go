package pipeline

import (
	"bytes"
	"context"
	"github.com/conditionhq/condition/models/clip"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
	"github.com/conditionhq/condition/tensorio"
)

// TestReadoutJointPatchesMatchTorch: an engine's JointPatches under each
// readout equal the torch float64 transcription's patch_embeds
// (testdata/tinyclip/make_readout_golden.py) to a cosine of 0.99999 per
// patch, the tiny CLIP's export rewritten for it.
func TestReadoutJointPatchesMatchTorch(t *testing.T) {
	m := openTiny(t)
	px, err := tensorio.ReadNPY(filepath.Join(enginetest.TinyDir(), "golden", "vision_pixel_values.npy"))
	if err != nil {
		t.Fatal(err)
	}
	pixels, _ := px.Float32()
	n := px.Shape[0]
	for _, r := range []clip.Readout{ReadoutRaw, ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP, ReadoutPEARL} {
		eng := tinyEngine(t, m, Options{Readout: r})
		if got := eng.Options().Readout; got != r {
			t.Fatalf("Options().Readout = %q, want %q", got, r)
		}
		encs, err := eng.EncodePixels(context.Background(), pixels, n)
		if err != nil {
			t.Fatal(err)
		}
		g, err := tensorio.ReadNPY(filepath.Join(enginetest.TinyDir(), "golden", "readout_"+string(r)+"_patch_embeds.npy"))
		if err != nil {
			t.Fatal(err)
		}
		want := g.Data.([]float64)
		d := g.Shape[2]
		least := 1.0
		for i := range encs {
			got, err := eng.JointPatches(&encs[i])
			if err != nil {
				t.Fatal(err)
			}
			for p := 0; p*d < len(got); p++ {
				dot, na, nb := 0.0, 0.0, 0.0
				for k := range d {
					a, b := float64(got[p*d+k]), want[(i*g.Shape[1]+p)*d+k]
					dot, na, nb = dot+a*b, na+a*a, nb+b*b
				}
				least = min(least, dot/math.Sqrt(na*nb))
			}
		}
		t.Logf("%s: min cosine per patch %.9f", r, least)
		if least < 0.99999 {
			t.Errorf("%s: min cosine with torch %.7f, want ≥ 0.99999", r, least)
		}
	}
}

// TestDefaultReadout: clearclip for a CLIP checkpoint in the joint space,
// raw for the built-in model and for other layers; a readout with another
// layer, or an unknown one, is an error naming the choices.
func TestDefaultReadout(t *testing.T) {
	m := openTiny(t)
	if r := tinyEngine(t, m, Options{}).Options().Readout; r != ReadoutClearCLIP {
		t.Errorf("the tiny CLIP's default readout %q, want %s", r, ReadoutClearCLIP)
	}
	def, err := models.Open(models.DefaultRef, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := defaultReadout(def, Layer{}); r != ReadoutRaw {
		t.Errorf("the built-in model's default readout %q, want raw", r)
	}
	if r := defaultReadout(m, Layer{Weights: "identity"}); r != ReadoutRaw {
		t.Errorf("identity layer's default readout %q, want raw", r)
	}
	_, err = New(context.Background(), m, Options{Readout: ReadoutNACLIP, Layer: Layer{Weights: "identity"}})
	if err == nil || !strings.Contains(err.Error(), "readout naclip") {
		t.Errorf("naclip with the identity layer: %v", err)
	}
	_, err = New(context.Background(), m, Options{Readout: "dense"})
	if err == nil || !strings.Contains(err.Error(), "clearclip, naclip, maskclip, raw") {
		t.Errorf("readout dense: %v", err)
	}
}

// TestDefaultReadoutFollowsModel: a copy of the built-in model's folder,
// opened by its path, reads the patches with the same default readout as
// the reference "default" (raw): the default follows the model's files,
// not the reference naming them. The tiny CLIP, another model, does not.
func TestDefaultReadoutFollowsModel(t *testing.T) {
	openTiny(t) // loads ONNX Runtime, or skips
	dir := filepath.Join(t.TempDir(), "builtin-copy")
	if err := os.CopyFS(dir, embedded.FS()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func(ref string) clip.Readout {
		t.Helper()
		eng, err := Open(ctx, ref, Options{Model: models.Options{DerivedCache: t.TempDir()}, KeepGraphs: true})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		return eng.Options().Readout
	}
	def, cp, tiny := read(models.DefaultRef), read(dir), read(enginetest.TinyDir())
	if def != ReadoutRaw || cp != def {
		t.Errorf("default readout: %q for the reference %s, %q for a copy of its folder; want raw for both", def, models.DefaultRef, cp)
	}
	if tiny != ReadoutClearCLIP {
		t.Errorf("default readout of the tiny CLIP %q, want %s", tiny, ReadoutClearCLIP)
	}
}

// TestDefaultReadoutFallsBack: a graph whose last layer cannot be found
// (its attention's Softmax made a Hardmax) keeps an engine opening with the
// default readout: raw, with a warning; asked for explicitly, it fails.
func TestDefaultReadoutFallsBack(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors", "onnx/text_model.onnx", "onnx/vision_model.onnx"} {
		b, err := os.ReadFile(filepath.Join(enginetest.TinyDir(), filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		if f == "onnx/vision_model.onnx" {
			b = bytes.ReplaceAll(b, []byte("Softmax"), []byte("Hardmax"))
		}
		p := filepath.Join(dir, filepath.FromSlash(f))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	odd, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	eng := tinyEngine(t, odd, Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	if r := eng.Options().Readout; r != ReadoutRaw {
		t.Errorf("readout %q, want raw after the default failed", r)
	}
	if !strings.Contains(log.String(), "default readout is not available") {
		t.Errorf("no warning: %s", log.String())
	}
	if _, err := New(context.Background(), odd, Options{Readout: ReadoutClearCLIP}); err == nil || !strings.Contains(err.Error(), "readout_input") {
		t.Errorf("clearclip asked for on that graph: %v", err)
	}
}
