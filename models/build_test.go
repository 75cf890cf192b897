package models_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
)

// tinyWithoutGraphs copies testdata/tinyclip's config, tokenizer and
// model.safetensors, without onnx/, into a temporary folder.
func tinyWithoutGraphs(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "tinyclip")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBuildIntoDerivedCache builds the graphs of a folder that has none
// (opened with NoBuild, so that Open does not build them first), checks
// that opening the folder then serves them from the derived cache, and
// that a changed model.safetensors makes them stale.
func TestBuildIntoDerivedCache(t *testing.T) {
	orttest.Load(t)
	dir := tinyWithoutGraphs(t)
	opts := models.Options{DerivedCache: t.TempDir(), NoBuild: true}
	m, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Has(models.TextModelFile) {
		t.Fatal("the folder serves a text graph before any was built")
	}
	rep, err := m.Build(context.Background(), models.BuildOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Graphs) != 2 || !strings.Contains(rep.Graphs[1].Check, "image_embeds [2 16] finite") {
		t.Fatalf("report %+v", rep)
	}
	for _, g := range rep.Graphs {
		if !strings.HasPrefix(g.Path, opts.DerivedCache) {
			t.Errorf("%s written to %s, outside the derived cache", g.Graph, g.Path)
		}
		t.Logf("%s: %s (%s)", g.Graph, g.Path, g.Check)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 7 {
		t.Errorf("the model's folder changed: %d entries", len(ents))
	}
	m2, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Graphs {
		if p := m2.Path(g.Graph); p != g.Path {
			t.Errorf("reopened, %s is %s, want the built %s", g.Graph, p, g.Path)
		}
	}
	// A newer checkpoint: the built graphs are not used.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "model.safetensors"), later, later); err != nil {
		t.Fatal(err)
	}
	m3, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if m3.Has(models.TextModelFile) {
		t.Errorf("graphs built from another version of model.safetensors are served: %s", m3.Path(models.TextModelFile))
	}
}

// TestBuildOut writes the graphs to a folder of the caller's, and a bad
// config writes nothing.
func TestBuildOut(t *testing.T) {
	orttest.Load(t)
	dir := tinyWithoutGraphs(t)
	out := t.TempDir()
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Build(context.Background(), models.BuildOptions{Out: out, QKV: "split"}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(g))); err != nil {
			t.Error(err)
		}
	}
	if err := m.UseGraphsFrom(out); err != nil {
		t.Fatal(err)
	}
	if p := m.Path(models.VisionModelFile); p != filepath.Join(out, "onnx", "vision_model.onnx") {
		t.Errorf("vision graph %s", p)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".build-") {
			t.Errorf("the temporary folder %s is left", e.Name())
		}
	}

	// A config whose text width disagrees with the checkpoint.
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	b = []byte(strings.Replace(string(b), `"hidden_size": 32`, `"hidden_size": 40`, 1))
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	m, err = models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	bad := t.TempDir()
	_, err = m.Build(context.Background(), models.BuildOptions{Out: bad})
	if err == nil || !strings.Contains(err.Error(), "text_model.embeddings.token_embedding.weight has shape [562 32], the config gives [562 40]") {
		t.Fatalf("error %v", err)
	}
	if errors.Is(err, models.ErrBuildCheck) {
		t.Errorf("a config mismatch reported as a failed check: %v", err)
	}
	if ents, _ := os.ReadDir(bad); len(ents) > 0 {
		t.Errorf("files written despite the error: %v", ents)
	}
}
