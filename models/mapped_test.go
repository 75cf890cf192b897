package models_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/models"
)

// tinyCopy copies testdata/tinyclip, graphs included, into a temporary
// folder.
func tinyCopy(t *testing.T) string {
	t.Helper()
	dir := tinyWithoutGraphs(t)
	if err := os.MkdirAll(filepath.Join(dir, "onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		b, err := os.ReadFile(filepath.Join(tiny, filepath.FromSlash(g)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(g)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMapGraphs: the mapped copies are made once into the derived cache
// (never beside the model), keep every weight in the data file beside
// them, are reused while the source is unchanged, and are made again when
// the source changes or the data file is cut; graphs under the size limit
// are left alone.
func TestMapGraphs(t *testing.T) {
	dir := tinyCopy(t)
	opts := models.Options{DerivedCache: t.TempDir()}
	open := func() *models.Model {
		m, err := models.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	if got, err := m.MapGraphs(1 << 40); err != nil || len(got) != 0 {
		t.Fatalf("above 1 TiB: %v, %v; want nothing mapped", got, err)
	}
	got, err := m.MapGraphs(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("mapped %d graphs, want 2", len(got))
	}
	for _, g := range got {
		if !g.Made || !strings.HasPrefix(g.Path, opts.DerivedCache) || !strings.HasSuffix(g.Path, models.MappedSuffix) || m.Path(g.Graph) != g.Path {
			t.Errorf("%+v: want made in the derived cache %s and served (Path %s)", g, opts.DerivedCache, m.Path(g.Graph))
		}
		f, err := os.Open(g.Path)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		ext, err := onnxgraph.ExternalDataFiles(f, fi.Size())
		f.Close()
		if err != nil || len(ext) != 1 || ext[0] != filepath.Base(g.Path)+"_data" {
			t.Errorf("%s: external data %v, %v", g.Path, ext, err)
		}
		di, err := os.Stat(g.Path + "_data")
		if err != nil || di.Size() < g.Bytes || g.Tensors == 0 {
			t.Errorf("%s: data file %v (%v) for %d bytes of %d tensors", g.Path, di, err, g.Bytes, g.Tensors)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "onnx"))
	if len(entries) != 2 {
		t.Errorf("the model's onnx/ holds %d files, want its 2 graphs alone", len(entries))
	}
	again, err := open().MapGraphs(0)
	if err != nil || len(again) != 2 || again[0].Made || again[1].Made || again[1].Path != got[1].Path {
		t.Fatalf("reopened: %+v, %v; want both found in the cache", again, err)
	}
	// A changed source, or a cut data file, is mapped again.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "onnx", "vision_model.onnx"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(got[0].Path+"_data", 100); err != nil {
		t.Fatal(err)
	}
	again, err = open().MapGraphs(0)
	if err != nil || len(again) != 2 || !again[0].Made || !again[1].Made {
		t.Fatalf("after the vision graph changed and the text data was cut: %+v, %v; want both made again", again, err)
	}
	// A graph that is cut is left for ONNX Runtime to name; nothing is mapped.
	b, _ := os.ReadFile(filepath.Join(dir, "onnx", "text_model.onnx"))
	if err := os.WriteFile(filepath.Join(dir, "onnx", "text_model.onnx"), b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	m = open()
	res, err := m.MapGraphs(0)
	for _, g := range res {
		if g.Graph == models.TextModelFile {
			t.Errorf("a cut graph was mapped: %+v", g)
		}
	}
	if err != nil && !strings.Contains(err.Error(), "text_model.onnx") {
		t.Errorf("error %v does not name the graph", err)
	}
}
