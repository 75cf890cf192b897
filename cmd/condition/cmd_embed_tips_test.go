package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

const tinyTipsDir = "../../testdata/tinytips"

func tipsGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyTipsDir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestEmbedTips runs the tiny TIPSv2 (model_type tipsv2, Tipsv2Tokenizer's
// tokenizer.model, Tipsv2ImageProcessor, no ONNX graphs) end to end: the
// graphs are built from model.safetensors on first use, the prompts
// lower-cased and tokenized (no BOS or EOS, unknown characters as <unk>,
// the longest cut at the model's 16 positions), the images resized
// bilinearly to 16×16 and both towers run; every output is compared with
// torch's (generate.py) and the ids with the SentencePiece library's. The
// logits are cosine / temperature (0.01), Tipsv2Model's; the patches'
// joint-space vectors are the graph's patch rows after the final
// layernorm (patch_embeds), behind the class token and the 2 registers;
// with --readout maskclip, torch's value attention.
func TestEmbedTips(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var prompts []string
	b, err := os.ReadFile(filepath.Join(tinyTipsDir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &prompts); err != nil {
		t.Fatal(err)
	}
	images := []string{filepath.Join(tinyTipsDir, "golden", "images", "wide.png"), filepath.Join(tinyTipsDir, "golden", "images", "tall.png")}
	out := filepath.Join(t.TempDir(), "emb.safetensors")
	args := []string{"embed", "--model", tinyTipsDir, "--threads", "1", "--out", out, "--json", "--truncate"}
	for _, p := range prompts {
		args = append(args, "--prompt", p)
	}
	code, stdout, stderr := embedCLI(t, append(args, images...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res embedResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if res.Family != "TIPSv2" || res.Scores != "softmax" || len(res.Images) != 2 || res.Images[0].Grid != [2]int{4, 4} {
		t.Fatalf("family %q, scores %q, images %+v", res.Family, res.Scores, res.Images)
	}
	ts, meta, err := tensorio.ReadSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	if meta["family"] != "TIPSv2" || meta["readout"] != "raw" {
		t.Errorf("metadata family %q readout %q, want TIPSv2 and raw", meta["family"], meta["readout"])
	}

	ids, _ := ts["input_ids"].Int64()
	mask, _ := ts["attention_mask"].Int64()
	wantIDs, _ := tipsGolden(t, "embed_input_ids").Int64()
	wantMask, _ := tipsGolden(t, "embed_attention_mask").Int64()
	if len(ids) != len(wantIDs) || len(mask) != len(wantMask) {
		t.Fatalf("input_ids %v, attention_mask %v; the library's: %v, %v", ts["input_ids"].Shape, ts["attention_mask"].Shape, wantIDs, wantMask)
	}
	for i := range wantIDs {
		if ids[i] != wantIDs[i] || mask[i] != wantMask[i] {
			t.Fatalf("ids or mask differ from the SentencePiece library's at %d:\n got %v %v\nwant %v %v", i, ids, mask, wantIDs, wantMask)
		}
	}

	for _, c := range []struct {
		got, golden string
	}{
		{"text_embeds", "embed_text_embeds"},
		{"token_states", "embed_text_last_hidden_state"},
		{"image_embeds", "embed_image_embeds"},
		{"patch_states", "embed_vision_last_hidden_state"},
		{"patch_embeds", "embed_patch_embeds"},
	} {
		got, want := asF64(t, ts[c.got]), asF64(t, tipsGolden(t, c.golden))
		if len(got) != len(want) {
			t.Fatalf("%s: %d values (shape %v), torch has %d", c.got, len(got), ts[c.got].Shape, len(want))
		}
		if cos := minCosine(got, want, 32); !(cos >= 0.99999) {
			t.Errorf("%s: smallest cosine with torch's %s %.7f, want ≥ 0.99999", c.got, c.golden, cos)
		} else {
			t.Logf("%s: smallest cosine with torch's %.8f", c.got, cos)
		}
	}
	logits := tipsGolden(t, "embed_logits_per_image").Data.([]float32)
	near(t, "logits_per_image", ts["logits_per_image"].Data.([]float32), logits, 1e-4)
	near(t, "logits_per_image (json)", flatten(res.LogitsPerImage), logits, 1e-4)

	// models info names the family and its scores.
	code, stdout, stderr = embedCLI(t, "models", "info", tinyTipsDir)
	if code != 0 || !strings.Contains(stdout, "TIPSv2 (softmax scores)") {
		t.Errorf("models info: exit %d\n%s%s", code, stdout, stderr)
	}

	// --readout maskclip: the patches from the value attention the TIPS
	// authors evaluate zero-shot segmentation with; image_embeds unchanged.
	vout := filepath.Join(t.TempDir(), "values.safetensors")
	code, _, stderr = embedCLI(t, append([]string{"embed", "--model", tinyTipsDir, "--threads", "1", "--readout", "maskclip", "--out", vout}, images...)...)
	if code != 0 {
		t.Fatalf("--readout maskclip: exit %d\n%s", code, stderr)
	}
	vts, vmeta, err := tensorio.ReadSafetensors(vout)
	if err != nil {
		t.Fatal(err)
	}
	if vmeta["readout"] != "maskclip" {
		t.Errorf("--readout maskclip: metadata readout %q", vmeta["readout"])
	}
	got, want := asF64(t, vts["patch_embeds"]), asF64(t, tipsGolden(t, "embed_values_patch_embeds"))
	if cos := minCosine(got, want, 32); len(got) != len(want) || !(cos >= 0.99999) {
		t.Errorf("--readout maskclip: patch_embeds %v, smallest cosine with torch's value attention %.7f, want ≥ 0.99999", vts["patch_embeds"].Shape, cos)
	} else {
		t.Logf("--readout maskclip: patch_embeds' smallest cosine with torch's value attention %.8f", cos)
	}
	if raw := asF64(t, ts["patch_embeds"]); minCosine(got, raw, 32) > 0.99 {
		t.Errorf("--readout maskclip: patch_embeds as the raw readout's")
	}
	if !slices.Equal(asF64(t, vts["image_embeds"]), asF64(t, ts["image_embeds"])) {
		t.Errorf("--readout maskclip: image_embeds changed")
	}

	// The attention readouts are refused, naming the family and the two it takes.
	code, _, stderr = embedCLI(t, "embed", "--model", tinyTipsDir, "--threads", "1", "--readout", "clearclip", images[0])
	if code == 0 || !strings.Contains(stderr, "TIPSv2") || !strings.Contains(stderr, "raw") || !strings.Contains(stderr, "maskclip") {
		t.Errorf("--readout clearclip: exit %d, want a failure naming TIPSv2, raw and maskclip\n%s", code, stderr)
	}
}

// TestEmbedTipsBadFolders checks the errors of TIPSv2 folders that cannot
// run: text and vision widths that differ (no projection heads to bring
// them together), another family's tokenizer, no tokenizer.model.
func TestEmbedTipsBadFolders(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	copyDir := func(t *testing.T, skip ...string) string {
		t.Helper()
		dir := t.TempDir()
		for _, f := range []string{"config.json", "model.safetensors", "tokenizer.model", "tokenizer_config.json", "preprocessor_config.json"} {
			if slices.Contains(skip, f) {
				continue
			}
			b, err := os.ReadFile(filepath.Join(tinyTipsDir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	img := filepath.Join(tinyTipsDir, "golden", "images", "wide.png")

	// Text 32 wide, vision 48.
	widths := copyDir(t)
	cfg, err := os.ReadFile(filepath.Join(widths, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	c["vision_config"].(map[string]any)["hidden_size"] = 48
	cfg, _ = json.Marshal(c)
	if err := os.WriteFile(filepath.Join(widths, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := embedCLI(t, "embed", "--model", widths, "--prompt", "a cat", img)
	if code == 0 || !strings.Contains(stderr, "text_config.hidden_size 32 and vision_config.hidden_size 48 differ") || !strings.Contains(stderr, "config.json") {
		t.Errorf("widths that differ: exit %d\n%s", code, stderr)
	}

	// MetaCLIP 2's tokenizer (an XLM-V tokenizer.json and its
	// tokenizer_config.json) in place of Tipsv2Tokenizer's.
	other := copyDir(t, "tokenizer.model", "tokenizer_config.json")
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(tinyMetaCLIP2Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = embedCLI(t, "embed", "--model", other, "--prompt", "a cat", img)
	if code == 0 || !strings.Contains(stderr, "config.json") || !strings.Contains(stderr, "tokenizer_config.json") ||
		!strings.Contains(stderr, "XLMRobertaTokenizer") || !strings.Contains(stderr, "Tipsv2Tokenizer") {
		t.Errorf("another family's tokenizer: exit %d\n%s", code, stderr)
	}

	// No tokenizer at all.
	none := copyDir(t, "tokenizer.model", "tokenizer_config.json")
	code, _, stderr = embedCLI(t, "embed", "--model", none, "--prompt", "a cat", img)
	if code == 0 || !strings.Contains(stderr, "tokenizer.model") || !strings.Contains(stderr, "TIPSv2") {
		t.Errorf("no tokenizer.model: exit %d\n%s", code, stderr)
	}
}
