// Package orttest loads ONNX Runtime for tests.
package orttest

import (
	"testing"

	"github.com/conditionhq/condition/internal/ort"
)

// Load loads ONNX Runtime the way the program does (the same search, the
// user cache included) and fails the test, rather than skipping it, when no
// usable library is found: tests that need ONNX Runtime must run in CI.
func Load(t testing.TB) *ort.Runtime {
	t.Helper()
	rt, err := ort.Load(ort.LoadOptions{})
	if err != nil {
		t.Fatalf("this test needs ONNX Runtime %s or newer; install it with `go run ./cmd/condition runtime install` (from the repository root), then run the tests again.\n%v", ort.MinVersion, err)
	}
	return rt
}
