package models_test

import (
	"errors"
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
