package pipeline

import (
	"context"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

func openTiny(t testing.TB) *models.Model { return enginetest.TinyModel(t) }

func makeImages(t testing.TB, dir string, n int) { enginetest.MakeImages(t, dir, n) }

// tinyEngine opens the engine of model m with opts, closed when the test
// ends.
func tinyEngine(t testing.TB, m *models.Model, opts Options) *Engine {
	t.Helper()
	eng, err := New(context.Background(), m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}
