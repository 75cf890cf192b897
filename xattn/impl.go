package xattn

import (
	"fmt"
	"time"

	"github.com/conditionhq/condition/internal/xattnhooks"
	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// init lends the kernel switch, the peak probe and the phase timings to
// the module's benchmarks (see internal/xattnhooks).
func init() {
	xattnhooks.Impls = implNames
	xattnhooks.CurrentImpl = func() string { return cpuid.Current().String() }
	xattnhooks.SetImpl = setImpl
	xattnhooks.PeakGFLOPS = peakGFLOPS
	xattnhooks.PhaseTimes = func(ws any) *xattnhooks.Timings { return &ws.(*Workspace).times }
}

// implNames returns the names of the implementations this machine and
// build can run, fastest first.
func implNames() []string {
	a := cpuid.Available()
	names := make([]string, 0, len(a))
	for i := len(a) - 1; i >= 0; i-- {
		names = append(names, a[i].String())
	}
	return names
}

// setImpl makes every kernel use the named implementation ("auto" for the
// fastest available) until restore is called.
func setImpl(name string) (restore func(), err error) {
	impl := cpuid.Best()
	if name != "auto" {
		if impl, err = cpuid.ParseImpl(name); err != nil {
			return nil, fmt.Errorf("xattn: %w", err)
		}
		if !cpuid.Supported(impl) {
			return nil, fmt.Errorf("xattn: implementation %s not available here (have %v)", name, implNames())
		}
	}
	return cpuid.Set(impl), nil
}

// peakGFLOPS is cpuid.PeakGFLOPS by name (0 for an unknown one).
func peakGFLOPS(name string, d time.Duration) float64 {
	impl, err := cpuid.ParseImpl(name)
	if err != nil {
		return 0
	}
	return cpuid.PeakGFLOPS(impl, d)
}
