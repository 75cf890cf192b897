package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestModelsOptimize optimizes the built-in model into a temporary cache,
// checks what was fused and where it went, that embed then uses it (by
// default, saying so) with the same scores as the original graphs, that
// --out writes elsewhere, and that a rewrite failing its check is not saved.
func TestModelsOptimize(t *testing.T) {
	orttest.Load(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	code, out, errs := modelsRun(t, "models", "optimize", "default")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	derived := filepath.Join(cache, "condition", "derived", "default", "onnx")
	for _, want := range []string{
		"fused: 314 → 94 nodes: 4 attention, 0 skip layer norm (0 with the projection bias), 4 QuickGelu",
		"fused: 218 → 106 nodes: 2 attention, 0 skip layer norm (0 with the projection bias), 2 QuickGelu",
		"wrote " + filepath.Join(derived, "vision_model_optimized.onnx"),
		"wrote " + filepath.Join(derived, "text_model_optimized.onnx"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	img := filepath.Join("..", "..", "testdata", "scenes", "images", "scene_001.png")
	score := func(variant string) (string, string) {
		args := []string{"embed", "--model", "default", "--prompt", "a red circle", img}
		if variant != "" {
			args = append(args, "--variant", variant)
		}
		code, out, errs := modelsRun(t, args...)
		if code != 0 {
			t.Fatalf("embed %s: exit %d\n%s\n%s", variant, code, out, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1], errs
	}
	plain, _ := score("plain")
	auto, log := score("")
	if auto != plain || !strings.Contains(log, "using the optimized graphs") {
		t.Errorf("default: %q (log %q), plain %q", auto, log, plain)
	}
	outDir := t.TempDir()
	if code, out, errs := modelsRun(t, "models", "optimize", "default", "--int8", "--out", outDir); code != 0 ||
		!strings.Contains(out, "MatMuls to int8") {
		t.Fatalf("--int8 --out: exit %d\n%s\n%s", code, out, errs)
	}
	for _, f := range []string{"text_model_optimized-int8.onnx", "vision_model_optimized-int8.onnx"} {
		if _, err := os.Stat(filepath.Join(outDir, "onnx", f)); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(derived, f)); err == nil {
			t.Errorf("--out also wrote %s to the cache", f)
		}
	}
	// int8 cannot reach a cosine of 1 - 1e-12: refused, nothing saved.
	code, out, errs = modelsRun(t, "models", "optimize", "default", "--int8", "--min-cosine", "0.999999999999")
	if code != 1 || !strings.Contains(out, "not saved") || !strings.Contains(errs, "differ from the original's past the tolerance") {
		t.Errorf("failing check: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(derived, "vision_model_optimized-int8.onnx")); err == nil {
		t.Error("a graph that failed its check was saved")
	}
}
