//go:build amd64 && gc && !purego

package rgbx

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestPick checks that the kernel set is the one this CPU should run.
func TestPick(t *testing.T) {
	want := "go"
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX2:
		want = "avx512"
	case cpu.X86.HasAVX2:
		want = "avx2"
	}
	if best != want || Impl() != want {
		t.Fatalf("kernel set %q (best %q) on this CPU, want %q", Impl(), best, want)
	}
}
