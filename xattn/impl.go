package xattn

import (
	"fmt"
	"time"

	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// Impls returns the names of the kernel implementations this machine and
// build can run ("avx512", "avx2", "go"), fastest first.
func Impls() []string {
	a := cpuid.Available()
	names := make([]string, 0, len(a))
	for i := len(a) - 1; i >= 0; i-- {
		names = append(names, a[i].String())
	}
	return names
}

// CurrentImpl returns the name of the kernel implementation in use.
func CurrentImpl() string { return cpuid.Current().String() }

// SetImpl makes every kernel (GEMM and attention core) use the named
// implementation ("auto" for the fastest available) until restore is
// called. It affects all layers in the process; it is meant for
// benchmarks and tests.
func SetImpl(name string) (restore func(), err error) {
	impl := cpuid.Best()
	if name != "auto" {
		if impl, err = cpuid.ParseImpl(name); err != nil {
			return nil, fmt.Errorf("xattn: %w", err)
		}
		if !cpuid.Supported(impl) {
			return nil, fmt.Errorf("xattn: implementation %s not available here (have %v)", name, Impls())
		}
	}
	return cpuid.Set(impl), nil
}

// PeakGFLOPS measures for about d the peak float32 FMA throughput of one
// core with the named implementation, in GFLOP/s (0 if unavailable).
func PeakGFLOPS(name string, d time.Duration) float64 {
	impl, err := cpuid.ParseImpl(name)
	if err != nil {
		return 0
	}
	return cpuid.PeakGFLOPS(impl, d)
}
