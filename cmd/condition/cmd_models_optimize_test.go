package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models/clip"
)

// TestModelsOptimize optimizes the built-in model into a temporary cache,
// checks what was fused and where it went, that embed then uses it (by
// default, saying so) with the same scores as the original graphs, that
// --out writes elsewhere, that int8 weights take --precision int8's width,
// and that a rewrite failing its check is not saved.
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
	code, out, errs = modelsRun(t, "models", "optimize", "default", "--int8", "--out", outDir)
	if code != 0 || !strings.Contains(out, "MatMuls to int8") {
		t.Fatalf("--int8 --out: exit %d\n%s\n%s", code, out, errs)
	}
	// The weights' width is --precision int8's: this CPU's (8 bits with
	// VNNI) for both graphs; with activations per row the built-in text
	// graph passes the check at 8 bits (per call it failed, at 0.988, and
	// was made with 7).
	bits := func(out, graph string) string {
		_, rest, _ := strings.Cut(out, graph)
		_, rest, _ = strings.Cut(rest, "MatMuls to int8 (")
		w, _, _ := strings.Cut(rest, "-bit weights")
		return w
	}
	if v, tx := bits(out, "vision_model.onnx"), bits(out, "text_model.onnx"); v != strconv.Itoa(clip.Int8WeightBits()) || tx != v {
		t.Errorf("--int8: vision %s-bit, text %s-bit weights; want %d for both\n%s", v, tx, clip.Int8WeightBits(), out)
	}
	if strings.Contains(errs, "made with 7-bit ones") || !strings.Contains(out, "activations per row") {
		t.Errorf("--int8: a second try, or not per row\n%s\n%s", out, errs)
	}
	// The earlier scheme, kept for comparison: its own variant.
	code, out, errs = modelsRun(t, "models", "optimize", "default", "--int8", "--int8-scheme", "per-call", "--out", t.TempDir())
	if code != 0 || !strings.Contains(out, "DynamicQuantizeMatMul") || !strings.Contains(out, "optimized-int8-per-call") {
		t.Errorf("--int8-scheme per-call: exit %d\n%s\n%s", code, out, errs)
	}
	// Static scales, calibrated on a folder of images: its own variant.
	// The check's limit is lowered: the built-in text graph does not keep
	// 0.99 with one scale per tensor.
	cal := t.TempDir()
	writeImages(t, cal, 9) // d0/ holds 3 of them
	cal = filepath.Join(cal, "d0")
	code, out, errs = modelsRun(t, "models", "optimize", "default", "--int8", "--int8-scheme", "static", "--calibration", cal, "--min-cosine", "0.5", "--out", t.TempDir())
	if code != 0 || !strings.Contains(out, "activations static") || !strings.Contains(out, "static scales calibrated on 3 images") ||
		!strings.Contains(out, "static scales calibrated on 6 prompts") || !strings.Contains(out, "optimized-int8-static") {
		t.Errorf("--int8-scheme static --calibration: exit %d\n%s\n%s", code, out, errs)
	}
	for _, bad := range [][]string{{"--int8-scheme", "per-tensor"}, {"--int8-integer"}, {"--outlier-ratio", "-1"}, {"--calibration", cal}} {
		code, _, errs = modelsRun(t, append([]string{"models", "optimize", "default", "--int8"}, bad...)...)
		if code != exitUsage || !strings.Contains(errs, bad[0]) {
			t.Errorf("%v: exit %d\n%s", bad, code, errs)
		}
	}
	code, out, errs = modelsRun(t, "models", "optimize", "default", "--int8", "--int8-full-range=false", "--out", t.TempDir())
	if v, tx := bits(out, "vision_model.onnx"), bits(out, "text_model.onnx"); code != 0 || v != "7" || tx != "7" {
		t.Errorf("--int8-full-range=false: exit %d, vision %s-bit, text %s-bit weights\n%s\n%s", code, v, tx, out, errs)
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
