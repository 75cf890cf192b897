package cpuid

import (
	"testing"
	"time"
)

func TestAvailable(t *testing.T) {
	av := Available()
	if len(av) == 0 || av[0] != Go {
		t.Fatalf("Available() = %v, want it to start with go", av)
	}
	for i := 1; i < len(av); i++ {
		if av[i] <= av[i-1] {
			t.Fatalf("Available() = %v, not in increasing order", av)
		}
	}
	if Best() != av[len(av)-1] {
		t.Fatalf("Best() = %v, want %v", Best(), av[len(av)-1])
	}
	if Current() != Best() {
		t.Fatalf("Current() = %v at start, want Best() = %v", Current(), Best())
	}
	t.Logf("available: %v", av)
}

func TestSet(t *testing.T) {
	before := Current()
	for _, i := range Available() {
		restore := Set(i)
		if Current() != i {
			t.Errorf("after Set(%v), Current() = %v", i, Current())
		}
		restore()
		if Current() != before {
			t.Errorf("after restore, Current() = %v, want %v", Current(), before)
		}
	}
}

func TestSetUnsupportedPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("Set(Impl(99)) did not panic")
		}
	}()
	Set(Impl(99))
}

func TestParseImpl(t *testing.T) {
	for _, i := range []Impl{Go, AVX2, AVX512} {
		got, err := ParseImpl(i.String())
		if err != nil || got != i {
			t.Errorf("ParseImpl(%q) = %v, %v; want %v", i.String(), got, err, i)
		}
	}
	if got, err := ParseImpl("AVX512"); err != nil || got != AVX512 {
		t.Errorf("ParseImpl(\"AVX512\") = %v, %v", got, err)
	}
	if _, err := ParseImpl("sse"); err == nil {
		t.Error("ParseImpl(\"sse\") returned no error")
	}
}

// TestPeakGFLOPS checks only that the measurement runs and is positive
// for supported implementations and zero otherwise; rates are not asserted.
func TestPeakGFLOPS(t *testing.T) {
	for _, i := range []Impl{Go, AVX2, AVX512} {
		got := PeakGFLOPS(i, 20*time.Millisecond)
		if Supported(i) && !(got > 0) {
			t.Errorf("PeakGFLOPS(%v) = %v, want > 0", i, got)
		}
		if !Supported(i) && got != 0 {
			t.Errorf("PeakGFLOPS(%v) = %v for an unsupported implementation, want 0", i, got)
		}
		t.Logf("peak %v: %.1f GFLOP/s", i, got)
	}
}

func BenchmarkPeak(b *testing.B) {
	for _, i := range Available() {
		b.Run(i.String(), func(b *testing.B) {
			run, flops := peakLoop(i)
			const n = 1 << 16
			for b.Loop() {
				run(n)
			}
			b.ReportMetric(float64(b.N)*n*flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
