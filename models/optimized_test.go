package models_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/models"
)

// copyModel copies the tiny model's top-level files and graphs to a new folder.
func copyModel(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, sub := range []string{".", "onnx"} {
		ents, err := os.ReadDir(filepath.Join(tiny, sub))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dst, sub), 0o755)
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(tiny, sub, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, sub, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

// TestDerivedVariants saves optimized graphs for a model folder and checks
// where they go (the derived cache, not the folder), that they are served
// by --variant and by default, that plain gives the originals back, and
// that a changed source graph makes them stale.
func TestDerivedVariants(t *testing.T) {
	dir := copyModel(t)
	derived := t.TempDir()
	opts := models.Options{DerivedCache: derived}
	open := func(variant string) (*models.Model, error) {
		o := opts
		o.Variant = variant
		return models.Open(dir, o)
	}
	if _, err := open(models.VariantOptimized); err == nil || !strings.Contains(err.Error(), "no optimized variant") {
		t.Fatalf("before saving: %v", err)
	}
	m, err := open(models.VariantPlain)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		p, err := m.SaveVariant(models.VariantOptimized, g, map[string]int{"fused": 1}, func(w io.Writer) error {
			_, err := io.WriteString(w, "graph "+g)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(p, derived+string(filepath.Separator)) || !strings.HasSuffix(p, strings.TrimSuffix(g, ".onnx")+"_optimized.onnx") {
			t.Errorf("saved at %s", p)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "onnx")); len(ents) != 2 {
		t.Errorf("the model folder changed: %d files in onnx/", len(ents))
	}
	for _, v := range []string{models.VariantOptimized, ""} {
		m, err := open(v)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.ReadFile(models.VisionModelFile)
		if err != nil || string(b) != "graph "+models.VisionModelFile || m.Variant() != models.VariantOptimized {
			t.Errorf("variant %q: served %q (%v), variant %q", v, b, err, m.Variant())
		}
	}
	m, err = open(models.VariantPlain)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := m.ReadFile(models.VisionModelFile); strings.HasPrefix(string(b), "graph ") {
		t.Error("plain served the optimized graph")
	}
	// A new version of the source graph: the variant is stale.
	src := filepath.Join(dir, "onnx", "vision_model.onnx")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(src, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := open(models.VariantOptimized); err == nil || !strings.Contains(err.Error(), "made from another version") {
		t.Errorf("stale variant: %v", err)
	}
	if m, err := open(""); err != nil || m.Variant() != "" {
		t.Errorf("stale variant picked by default: %v, %q", err, m.Variant())
	}
}

// TestInt8VariantScheme: an int8 variant's stamp names its quantization
// scheme; one made by another scheme than its variant names (a stamp with
// none was written by the per-call scheme) is never served: opening it
// fails with ErrStaleScheme (so that it is made again), and DerivedGraphs
// says which scheme each graph has and why it is not used.
func TestInt8VariantScheme(t *testing.T) {
	dir := copyModel(t)
	opts := models.Options{DerivedCache: t.TempDir(), Variant: models.VariantPlain}
	m, err := models.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	save := func(variant string) {
		for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
			if _, err := m.SaveVariant(variant, g, map[string]int{"matmuls": 1}, func(w io.Writer) error { _, err := io.WriteString(w, variant); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	save(models.VariantOptimizedInt8)
	save(models.VariantOptimizedInt8PerCall)
	save(models.VariantOptimizedInt8Static)
	for _, v := range []string{models.VariantOptimizedInt8, models.VariantOptimizedInt8PerCall, models.VariantOptimizedInt8Static} {
		o := opts
		o.Variant = v
		got, err := models.Open(dir, o)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if b, _ := got.ReadFile(models.VisionModelFile); string(b) != v {
			t.Errorf("%s served %q", v, b)
		}
	}
	if _, ok := m.VariantReport(models.VariantOptimizedInt8, models.VisionModelFile); !ok {
		t.Error("no report for the per-row variant")
	}
	schemes := map[string]string{}
	for _, d := range m.DerivedGraphs() {
		schemes[d.Variant+" "+d.Graph] = d.Scheme
		if !d.Usable {
			t.Errorf("%+v: not usable", d)
		}
	}
	if len(schemes) != 6 || schemes[models.VariantOptimizedInt8+" "+models.VisionModelFile] != models.Int8SchemePerRow ||
		schemes[models.VariantOptimizedInt8PerCall+" "+models.TextModelFile] != models.Int8SchemePerCall ||
		schemes[models.VariantOptimizedInt8Static+" "+models.VisionModelFile] != models.Int8SchemeStatic {
		t.Errorf("schemes: %v", schemes)
	}
	// The vision graph's stamp as the per-call scheme wrote it, with no
	// scheme, under the per-row variant's name.
	p, _ := m.VariantPath(models.VariantOptimizedInt8, models.VisionModelFile)
	b, err := os.ReadFile(p + ".json")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(b), `"scheme": "`+models.Int8SchemePerRow+`"`, `"notes": []`, 1)
	if old == string(b) {
		t.Fatalf("no scheme in the stamp: %s", b)
	}
	if err := os.WriteFile(p+".json", []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts
	o.Variant = models.VariantOptimizedInt8
	if _, err := models.Open(dir, o); !errors.Is(err, models.ErrStaleScheme) || !errors.Is(err, models.ErrNoVariant) ||
		!strings.Contains(err.Error(), "quantization scheme per-call, not "+models.Int8SchemePerRow) {
		t.Errorf("a per-call stamp under the per-row variant: %v", err)
	}
	for _, d := range m.DerivedGraphs() {
		if d.Variant == models.VariantOptimizedInt8 && d.Graph == models.VisionModelFile && (d.Usable || d.Scheme != models.Int8SchemePerCall || !strings.Contains(d.Why, "scheme")) {
			t.Errorf("%+v", d)
		}
	}
	if _, ok := m.VariantReport(models.VariantOptimizedInt8, models.VisionModelFile); ok {
		t.Error("the report of a variant of the other scheme is offered")
	}
}
