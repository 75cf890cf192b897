package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestModelsBuild builds the graphs of a copy of testdata/tinyclip without
// onnx/ into a temporary cache (with the int8 variant), checks that embed
// then uses them with the scores of the torch-exported graphs, that --out
// writes elsewhere, and that a config that disagrees with the weights fails
// naming the tensor.
func TestModelsBuild(t *testing.T) {
	orttest.Load(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	src := filepath.Join("..", "..", "testdata", "tinyclip")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	code, out, errs := modelsRun(t, "models", "build", dir, "--int8")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"onnx/text_model.onnx: ", "image_embeds [2 16] finite", "MatMuls to int8", "vision_model_optimized-int8.onnx", "uses them from now on"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	img := filepath.Join(src, "golden", "images", "square.png")
	score := func(model string, extra ...string) (string, string) {
		args := append([]string{"embed", "--model", model, "--prompt", "a photo of a cat", img}, extra...)
		code, out, errs := modelsRun(t, args...)
		if code != 0 {
			t.Fatalf("embed %s: exit %d\n%s\n%s", model, code, out, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1], errs
	}
	built, log := score(dir)
	exported, _ := score(src, "--variant", "plain")
	if built != exported || !strings.Contains(log, "using the graphs built from the model's safetensors") {
		t.Errorf("built: %q (log %q), exported: %q", built, log, exported)
	}
	if _, log := score(dir, "--variant", "optimized-int8"); strings.Contains(log, "error") {
		t.Errorf("int8: %s", log)
	}

	outDir := t.TempDir()
	if code, out, errs := modelsRun(t, "models", "build", dir, "--out", outDir, "--json"); code != 0 || !strings.Contains(out, `"check_seconds"`) {
		t.Fatalf("--out: exit %d\n%s\n%s", code, out, errs)
	}
	for _, f := range []string{"text_model.onnx", "vision_model.onnx"} {
		if _, err := os.Stat(filepath.Join(outDir, "onnx", f)); err != nil {
			t.Error(err)
		}
	}

	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(b), `"projection_dim": 16,`, `"projection_dim": 12,`, 1)), 0o644)
	code, out, errs = modelsRun(t, "models", "build", dir, "--out", t.TempDir())
	if code != 1 || !strings.Contains(errs, "text_projection.weight has shape [16 32], the config gives [12 32]") {
		t.Errorf("bad config: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestModelsBuildSiglip builds the graphs of a copy of testdata/tinysiglip
// without onnx/ (with the int8 variant), and checks that embed then scores
// an image against a prompt with them as with the torch-exported graphs.
func TestModelsBuildSiglip(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	src := filepath.Join("..", "..", "testdata", "tinysiglip")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "special_tokens_map.json", "spiece.model", "tokenizer_config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	code, out, errs := modelsRun(t, "models", "build", dir, "--int8")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"pooler_output [2 24] finite", "last_hidden_state [2 16 24] finite", "vision_model_optimized-int8.onnx", "uses them from now on"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	img := filepath.Join(src, "golden", "images", "square.png")
	score := func(model string, extra ...string) (string, string) {
		args := append([]string{"embed", "--model", model, "--prompt", "a photo of a cat", img}, extra...)
		code, out, errs := modelsRun(t, args...)
		if code != 0 {
			t.Fatalf("embed %s: exit %d\n%s\n%s", model, code, out, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1], errs
	}
	built, log := score(dir)
	exported, _ := score(src, "--variant", "plain")
	if built != exported || !strings.Contains(log, "using the graphs built from the model's safetensors") {
		t.Errorf("built: %q (log %q), exported: %q", built, log, exported)
	}
	t.Logf("built: %s", built)
	if _, log := score(dir, "--variant", "optimized-int8"); strings.Contains(log, "error") {
		t.Errorf("int8: %s", log)
	}
}
