package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub/hubtest"
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
	// Before: info builds nothing, and says the graphs will be built.
	code, out, errs := modelsRun(t, "models", "info", dir)
	if code != 0 || !strings.Contains(out, "onnx/vision_model.onnx: missing (built from the safetensors on first use") {
		t.Errorf("info: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = modelsRun(t, "models", "build", dir, "--int8")
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
		t.Helper()
		return embedScore(t, model, img, extra...)
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

// TestBuildOnFirstUse: a hub repository with model.safetensors and no ONNX
// graphs (and a pytorch_model.bin, never fetched) just works with embed,
// which builds its graphs once, saying so, and scores as the exported
// graphs do; the next run reuses them; models info shows them; models
// build takes the hub id too.
func TestBuildOnFirstUse(t *testing.T) {
	orttest.Load(t)
	files := map[string]hubtest.File{}
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(tinyDir, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = hubtest.File{Data: b, LFS: strings.HasSuffix(f, ".safetensors")}
	}
	files["pytorch_model.bin"] = hubtest.File{Data: []byte("not fetched"), LFS: true}
	commit := strings.Repeat("b1", 20)
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/clip": {Commits: map[string]map[string]hubtest.File{commit: files}, Branches: map[string]string{"main": commit}},
	})
	t.Setenv("HF_ENDPOINT", srv.URL())
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())

	img := filepath.Join(tinyDir, "golden", "images", "square.png")
	score := func(model string, extra ...string) (string, string) {
		t.Helper()
		return embedScore(t, model, img, extra...)
	}
	built, log := score("org/clip")
	t.Logf("first run's log:\n%s", log)
	exported, _ := score(tinyDir, "--variant", "plain")
	if built != exported || !strings.Contains(log, "building the model's ONNX graphs") {
		t.Errorf("built: %q (log %q), exported: %q", built, log, exported)
	}
	again, log := score("org/clip")
	if again != exported || strings.Contains(log, "building") || !strings.Contains(log, "using the graphs built") {
		t.Errorf("second run: %q (log %q)", again, log)
	}
	for _, r := range srv.Requests() {
		if strings.HasSuffix(r.Path, ".bin") {
			t.Errorf("requested %s %s", r.Method, r.Path)
		}
	}
	code, out, errs := modelsRun(t, "models", "info", "org/clip")
	if code != 0 || !strings.Contains(out, "(built from the model's safetensors)") {
		t.Errorf("info: exit %d\n%s%s", code, out, errs)
	}
	outDir := t.TempDir()
	if code, out, errs := modelsRun(t, "models", "build", "org/clip", "--out", outDir); code != 0 || !strings.Contains(out, "model.safetensors") {
		t.Errorf("models build org/clip: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(outDir, "onnx", "vision_model.onnx")); err != nil {
		t.Error(err)
	}
}

// TestAdviseBuildDownload: a checkpoint over the download limit is met with
// the command that downloads it whatever its size.
func TestAdviseBuildDownload(t *testing.T) {
	err := advise(fmt.Errorf("models: org/big@main has no ONNX graphs; ... 4.00 GB: %w", models.ErrBuildDownload), "org/big")
	if !strings.Contains(err.Error(), "`condition models build org/big`") || !errors.Is(err, models.ErrBuildDownload) {
		t.Errorf("advice: %v", err)
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
		t.Helper()
		return embedScore(t, model, img, extra...)
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

// TestModelsListBuiltHubModel: a hub repository with config.json and
// model.safetensors and no onnx/, whose graphs were built on first use
// into the derived cache, is listed as usable, its graphs said to be built
// from that commit's checkpoint; with one of the two gone it is not.
func TestModelsListBuiltHubModel(t *testing.T) {
	orttest.Load(t)
	src := filepath.Join("..", "..", "testdata", "tinyclip")
	repo := map[string]hubtest.File{}
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		repo[f] = hubtest.File{Data: b, LFS: f == "model.safetensors"}
	}
	commit := strings.Repeat("b1", 20)
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/ckpt": {Commits: map[string]map[string]hubtest.File{commit: repo}, Branches: map[string]string{"main": commit}},
	})
	t.Setenv("HF_ENDPOINT", srv.URL())
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("HF_TOKEN", "")
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	type listing struct {
		Models []struct {
			Repo   string                        `json:"repo"`
			Usable map[string]bool               `json:"usable"`
			Built  map[string]models.BuiltGraphs `json:"built"`
		} `json:"models"`
	}
	list := func() (listing, string) {
		t.Helper()
		code, out, errs := modelsRun(t, "models", "list", "--json")
		var l listing
		if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Models) != 1 || l.Models[0].Repo != "org/ckpt" {
			t.Fatalf("list --json: exit %d\n%s%s", code, out, errs)
		}
		code, text, errs := modelsRun(t, "models", "list")
		if code != 0 {
			t.Fatalf("list: exit %d\n%s%s", code, text, errs)
		}
		return l, text
	}

	// Fetching opens the model, which builds its graphs on first use.
	if code, out, errs := modelsRun(t, "models", "fetch", "org/ckpt"); code != 0 || !strings.Contains(errs, "built the model's ONNX graphs") {
		t.Fatalf("fetch: exit %d\n%s%s", code, out, errs)
	}
	l, text := list()
	b, ok := l.Models[0].Built[commit]
	wantDir := filepath.Join(cache, "condition", "derived", "models--org--ckpt", commit)
	if !l.Models[0].Usable[commit] || !ok || b.Commit != commit ||
		b.Text != filepath.Join(wantDir, "onnx", "text_model.onnx") || b.Vision != filepath.Join(wantDir, "onnx", "vision_model.onnx") ||
		!strings.HasSuffix(b.Source, "model.safetensors") {
		t.Errorf("after the build: %+v", l.Models[0])
	}
	want := "graphs: built from model.safetensors of " + commit[:12] + " (" + wantDir + ")"
	if !strings.Contains(text, want) {
		t.Errorf("list lacks %q:\n%s", want, text)
	}
	// The checkpoint gone from the snapshot: the graphs are still served
	// (they are stamped with the commit), so the model is still usable.
	snap := filepath.Join(os.Getenv("HF_HUB_CACHE"), "models--org--ckpt", "snapshots", commit)
	if err := os.Remove(filepath.Join(snap, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if l, _ = list(); !l.Models[0].Usable[commit] {
		t.Errorf("without the checkpoint: %+v", l.Models[0])
	}
	// Half of the pair gone: not usable (Open would not serve it either).
	if err := os.Remove(b.Vision); err != nil {
		t.Fatal(err)
	}
	if l, _ = list(); l.Models[0].Usable[commit] || len(l.Models[0].Built) != 0 {
		t.Errorf("without the vision graph: %+v", l.Models[0])
	}
}

// embedScore runs `condition embed --model model --prompt "a photo of a
// cat" img extra...` and returns the last line it printed (the image's
// score) and its log.
func embedScore(t *testing.T, model, img string, extra ...string) (string, string) {
	t.Helper()
	args := append([]string{"embed", "--model", model, "--prompt", "a photo of a cat", img}, extra...)
	code, out, errs := modelsRun(t, args...)
	if code != 0 {
		t.Fatalf("embed %s: exit %d\n%s\n%s", model, code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1], errs
}

// TestModelsInfoOpenCLIP: info on a folder in OpenCLIP's layout says its
// graphs are built on first use and lists the projections read from
// open_clip_model.safetensors under CLIP's names, with their shapes.
func TestModelsInfoOpenCLIP(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, out, errs := modelsRun(t, "models", "info", filepath.Join("..", "..", "testdata", "tinyopenclip"))
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"onnx/vision_model.onnx: missing (built from the safetensors on first use",
		"text_projection.weight [24 32]", "visual_projection.weight [24 32]"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "heads:    none") {
		t.Errorf("info says the model has no heads:\n%s", out)
	}
}
