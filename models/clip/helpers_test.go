package clip_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

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
