package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

const tinyMetaCLIP2Dir = "../../testdata/tinymetaclip2"

// metaclip2Prompts are testdata/tinymetaclip2/golden/prompts.json's.
var metaclip2Prompts = []string{
	"a photo of a cat",
	"eine Katze auf dem Sofa",
	"沙发上的猫",
	"кошка на диване",
	"a red car parked on the street near the old house with a small dog",
}

func metaclip2Golden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyMetaCLIP2Dir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// minCosine returns the smallest cosine between rows of width d of a and b.
func minCosine(a, b []float64, d int) float64 {
	least := 1.0
	for r := 0; r+d <= len(a); r += d {
		var ab, aa, bb float64
		for i := r; i < r+d; i++ {
			ab += a[i] * b[i]
			aa += a[i] * a[i]
			bb += b[i] * b[i]
		}
		least = math.Min(least, ab/math.Sqrt(aa*bb))
	}
	return least
}

func asF64(t *testing.T, x tensorio.Tensor) []float64 {
	t.Helper()
	switch v := x.Data.(type) {
	case []float32:
		out := make([]float64, len(v))
		for i, f := range v {
			out[i] = float64(f)
		}
		return out
	case []float64:
		return v
	}
	t.Fatalf("tensor of %T, want float32 or float64", x.Data)
	return nil
}

// TestEmbedMetaCLIP2 runs the tiny MetaCLIP 2 (model_type metaclip_2, an
// XLM-V-layout tokenizer.json, no ONNX graphs) end to end: the graphs are
// built from model.safetensors on first use, the prompts tokenized, the
// images preprocessed and both towers run; every output is compared with
// torch's (generate.py) and the ids with the Hugging Face tokenizers
// library's. Pooling at the first EOS (id 2) is what makes text_embeds
// right: CLIP's legacy rule for an EOS id of 2 would pool at each prompt's
// largest id, another position for every golden prompt.
func TestEmbedMetaCLIP2(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out := filepath.Join(t.TempDir(), "emb.safetensors")
	args := []string{"embed", "--model", tinyMetaCLIP2Dir, "--threads", "1", "--out", out, "--json", "--truncate"}
	for _, p := range metaclip2Prompts {
		args = append(args, "--prompt", p)
	}
	args = append(args, filepath.Join(tinyMetaCLIP2Dir, "golden", "images", "wide.png"), filepath.Join(tinyMetaCLIP2Dir, "golden", "images", "tall.png"))
	code, stdout, stderr := embedCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res embedResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if res.Family != "MetaCLIP 2" || res.Scores != "softmax" || len(res.Images) != 2 || res.Images[0].Grid != [2]int{4, 4} {
		t.Fatalf("family %q, scores %q, images %+v", res.Family, res.Scores, res.Images)
	}
	ts, meta, err := tensorio.ReadSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	if meta["family"] != "MetaCLIP 2" || meta["readout"] != "clearclip" {
		t.Errorf("metadata family %q readout %q, want MetaCLIP 2 and clearclip (a CLIP-family checkpoint's default)", meta["family"], meta["readout"])
	}

	ids, _ := ts["input_ids"].Int64()
	mask, _ := ts["attention_mask"].Int64()
	wantIDs, _ := metaclip2Golden(t, "text_input_ids").Int64()
	wantMask, _ := metaclip2Golden(t, "text_attention_mask").Int64()
	if len(ids) != len(wantIDs) || len(mask) != len(wantMask) {
		t.Fatalf("input_ids %v, attention_mask %v; the tokenizers library's: %v, %v", ts["input_ids"].Shape, ts["attention_mask"].Shape, wantIDs, wantMask)
	}
	for i := range wantIDs {
		if ids[i] != wantIDs[i] || mask[i] != wantMask[i] {
			t.Fatalf("ids or mask differ from the tokenizers library's at %d:\n got %v %v\nwant %v %v", i, ids, mask, wantIDs, wantMask)
		}
	}

	for _, c := range []struct {
		got, golden string
		d           int
	}{
		{"text_embeds", "text_embeds", 16},
		{"token_states", "text_last_hidden_state", 32},
		{"image_embeds", "image_embeds", 16},
		{"patch_states", "vision_last_hidden_state", 24},
		{"patch_embeds", "readout_clearclip_patch_embeds", 16},
	} {
		got, want := asF64(t, ts[c.got]), asF64(t, metaclip2Golden(t, c.golden))
		if len(got) != len(want) {
			t.Fatalf("%s: %d values (shape %v), torch has %d", c.got, len(got), ts[c.got].Shape, len(want))
		}
		if cos := minCosine(got, want, c.d); !(cos >= 0.99999) {
			t.Errorf("%s: smallest cosine with torch's %s %.7f, want ≥ 0.99999", c.got, c.golden, cos)
		} else {
			t.Logf("%s: smallest cosine with torch's %.8f", c.got, cos)
		}
	}
	near(t, "logits_per_image", ts["logits_per_image"].Data.([]float32), metaclip2Golden(t, "logits_per_image").Data.([]float32), 1e-4)
	near(t, "logits_per_image (json)", flatten(res.LogitsPerImage), metaclip2Golden(t, "logits_per_image").Data.([]float32), 1e-4)

	// The raw readout too.
	rawOut := filepath.Join(t.TempDir(), "raw.safetensors")
	if code, _, stderr := embedCLI(t, "embed", "--model", tinyMetaCLIP2Dir, "--threads", "1", "--out", rawOut, "--readout", "raw",
		filepath.Join(tinyMetaCLIP2Dir, "golden", "images", "wide.png"), filepath.Join(tinyMetaCLIP2Dir, "golden", "images", "tall.png")); code != 0 {
		t.Fatalf("--readout raw: exit %d\n%s", code, stderr)
	}
	raw, _, err := tensorio.ReadSafetensors(rawOut)
	if err != nil {
		t.Fatal(err)
	}
	if cos := minCosine(asF64(t, raw["patch_embeds"]), asF64(t, metaclip2Golden(t, "readout_raw_patch_embeds")), 16); !(cos >= 0.99999) {
		t.Errorf("raw patch_embeds: smallest cosine with torch's %.7f, want ≥ 0.99999", cos)
	}

	// models info names the family.
	code, stdout, stderr = embedCLI(t, "models", "info", tinyMetaCLIP2Dir)
	if code != 0 || !strings.Contains(stdout, "MetaCLIP 2 (softmax scores)") {
		t.Errorf("models info: exit %d\n%s%s", code, stdout, stderr)
	}
}
