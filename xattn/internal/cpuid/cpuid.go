// Package cpuid chooses which kernel implementation the xattn kernels run:
// pure Go, AVX2+FMA or AVX-512. It is the single switch for every kernel
// package: each reads Current at call time and dispatches on it, so a test
// or benchmark that calls Set covers every path in one run.
//
// It also measures the machine's peak float32 FMA throughput per
// implementation (PeakGFLOPS), so benchmarks can report a fraction of the
// peak that is meaningful on any machine.
package cpuid

//go:generate sh -c "cd ../../_asm/peak && go run . -out ../../internal/cpuid/peak_amd64.s -stubs ../../internal/cpuid/peak_stubs_amd64.go -pkg cpuid"

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Impl names a kernel implementation.
type Impl int

// The implementations, from slowest to fastest.
const (
	// Go is the portable pure-Go code, always available.
	Go Impl = iota
	// AVX2 is the ymm code; it needs AVX, AVX2 and FMA.
	AVX2
	// AVX512 is the zmm code; it needs AVX-512F (and OS support for the
	// zmm and mask registers) on top of AVX2.
	AVX512
)

var implNames = [...]string{Go: "go", AVX2: "avx2", AVX512: "avx512"}

// String returns the lower-case name of i: "go", "avx2" or "avx512".
func (i Impl) String() string {
	if i >= 0 && int(i) < len(implNames) {
		return implNames[i]
	}
	return fmt.Sprintf("Impl(%d)", int(i))
}

// ParseImpl returns the implementation named s ("go", "avx2", "avx512",
// any case) or an error naming the accepted values.
func ParseImpl(s string) (Impl, error) {
	for i, name := range implNames {
		if strings.EqualFold(s, name) {
			return Impl(i), nil
		}
	}
	return Go, fmt.Errorf("cpuid: unknown implementation %q (want go, avx2 or avx512)", s)
}

// available lists the implementations this CPU and build support, slowest
// first. It is set once by init.
var available = detect()

// current is the implementation kernels dispatch to.
var current atomic.Int32

func init() { current.Store(int32(Best())) }

// Available returns the implementations this CPU and build support,
// slowest first; it always starts with Go. The slice is a fresh copy.
func Available() []Impl { return append([]Impl(nil), available...) }

// Supported reports whether i can run on this CPU and build.
func Supported(i Impl) bool {
	for _, a := range available {
		if a == i {
			return true
		}
	}
	return false
}

// Best returns the fastest supported implementation.
func Best() Impl { return available[len(available)-1] }

// Current returns the implementation kernels dispatch to: Best unless Set
// changed it.
func Current() Impl { return Impl(current.Load()) }

// Set makes kernels dispatch to i and returns a function that restores the
// previous choice. It panics if i is not supported: callers choose from
// Available. Set is safe for concurrent use, but calls running while it
// changes the choice may use either implementation.
func Set(i Impl) (restore func()) {
	if !Supported(i) {
		panic("cpuid: implementation not supported on this CPU or build: " + i.String())
	}
	prev := current.Swap(int32(i))
	return func() { current.Store(prev) }
}

// PeakGFLOPS measures the peak float32 multiply-add throughput of one core
// with implementation i, in GFLOP/s (an FMA counts as two operations), by
// running a register-only loop of independent FMA chains (ymm for AVX2,
// zmm for AVX512, scalar multiply and add for Go) for about d. It returns
// the best rate seen over many short timed runs, which on a machine shared
// with other work estimates the uncontended peak, or 0 if i is not
// supported.
func PeakGFLOPS(i Impl, d time.Duration) float64 {
	if !Supported(i) {
		return 0
	}
	run, flopsPerIter := peakLoop(i)
	// Size one timed run to about d/100 (at least 100µs): many short runs
	// make it likely that one ran alone on its core on a busy machine.
	n := 1 << 8
	for {
		t := time.Now()
		run(n)
		if el := time.Since(t); el >= max(d/100, 100*time.Microsecond) || n >= 1<<30 {
			break
		}
		n *= 2
	}
	best := 0.0
	deadline := time.Now().Add(d)
	for tries := 0; tries < 3 || time.Now().Before(deadline); tries++ {
		t := time.Now()
		run(n)
		el := time.Since(t).Seconds()
		if el > 0 {
			if r := float64(n) * flopsPerIter / el / 1e9; r > best {
				best = r
			}
		}
	}
	return best
}

// peakGoChains is the number of independent accumulators of peakGeneric.
const peakGoChains = 12

// peakGoSink keeps peakGeneric's results alive.
var peakGoSink float32

// peakGeneric runs n iterations of peakGoChains independent float32
// multiply-then-add chains (x·s + t each), 2·peakGoChains flops per iteration.
func peakGeneric(n int) {
	s, t := peakGoScale, peakGoShift
	var a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 float32 = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
	for ; n > 0; n-- {
		a0 = a0*s + t
		a1 = a1*s + t
		a2 = a2*s + t
		a3 = a3*s + t
		a4 = a4*s + t
		a5 = a5*s + t
		a6 = a6*s + t
		a7 = a7*s + t
		a8 = a8*s + t
		a9 = a9*s + t
		a10 = a10*s + t
		a11 = a11*s + t
	}
	peakGoSink = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11
}

// peakGoScale and peakGoShift are variables so the compiler cannot fold the
// loop; the chains converge to 2 and never overflow or go subnormal.
var peakGoScale, peakGoShift float32 = 0.5, 1
