package clip_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// tinyclip is the tiny random CLIP made by testdata/tinyclip/generate.py;
// its golden outputs come from torch.
var tinyclip = filepath.Join("..", "..", "testdata", "tinyclip")

// readGolden reads golden/<name>.npy of tinyclip.
func readGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyclip, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// closeWithin fails t when got and want (torch's) differ by more than tol
// anywhere, naming the worst place.
func closeWithin(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, torch has %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if testing.Verbose() {
		t.Logf("%s: max abs difference %.2g", what, worst)
	}
	if worst > tol || math.IsNaN(worst) {
		t.Fatalf("%s: |ort - torch| = %g at %d (ort %g, torch %g), tolerance %g", what, worst, at, got[at], want[at], tol)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
