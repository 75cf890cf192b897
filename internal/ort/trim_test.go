package ort

import (
	"runtime"
	"testing"
)

// TestReleaseFreed: ReleaseFreed may be called at any time, again and
// again; on Linux with glibc it trims the C heap.
func TestReleaseFreed(t *testing.T) {
	first, second := ReleaseFreed(), ReleaseFreed()
	if first != second {
		t.Errorf("ReleaseFreed reported %v, then %v", first, second)
	}
	if runtime.GOOS == "linux" && !first {
		t.Logf("no malloc_trim in this C library (not glibc?)")
	}
}
