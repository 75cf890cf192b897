package models_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/embedded" // registers the model "default"
)

// TestDefaultNotLinked: without models/embedded, "default" is a clear error
// saying what to import, not a model.
func TestDefaultNotLinked(t *testing.T) {
	models.RegisterDefault(nil)
	defer models.RegisterDefault(embedded.FS)
	_, err := models.Open(models.DefaultRef, models.Options{})
	if !errors.Is(err, models.ErrNoDefault) {
		t.Fatalf("Open(default) without the built-in model: %v, want ErrNoDefault", err)
	}
	models.RegisterDefault(embedded.FS)
	m, err := models.Open(models.DefaultRef, models.Options{})
	if err != nil {
		t.Fatalf("Open(default) once registered: %v", err)
	}
	if !m.Has(models.WeightsFile) {
		t.Errorf("the built-in model has no %s", models.WeightsFile)
	}
}

// TestBuiltIn: the built-in model is told by its files: opened as
// "default" or as a copy of its folder; a folder whose model.safetensors
// differs by one byte is another model.
func TestBuiltIn(t *testing.T) {
	def, err := models.Open(models.DefaultRef, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !def.BuiltIn() {
		t.Fatal("the reference default is not the built-in model: its model.safetensors' size or SHA-256 in models/default.go is stale")
	}
	dir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dir, embedded.FS()); err != nil {
		t.Fatal(err)
	}
	cp, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if !cp.BuiltIn() {
		t.Error("a copy of the built-in model's folder is not the built-in model")
	}
	w := filepath.Join(dir, models.WeightsFile)
	b, err := os.ReadFile(w)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(w, b, 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if other.BuiltIn() {
		t.Error("a folder with other weights of the same size is the built-in model")
	}
}
