package ort

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestThreadAffinities checks the affinity string: one 1-based processor
// per pool thread, none for the calling thread, wrapping around the
// processors there are.
func TestThreadAffinities(t *testing.T) {
	n := runtime.NumCPU()
	if got := threadAffinities(1); got != "" {
		t.Errorf("1 thread: %q, want no pool thread pinned", got)
	}
	got := strings.Split(threadAffinities(2*n+1), ";")
	if len(got) != 2*n {
		t.Fatalf("%d threads: %d entries, want %d", 2*n+1, len(got), 2*n)
	}
	for i, p := range got {
		want := (i+1)%n + 1
		if p != strconv.Itoa(want) {
			t.Errorf("pool thread %d pinned to %q, want %d", i+1, p, want)
		}
	}
}
