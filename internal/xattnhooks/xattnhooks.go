// Package xattnhooks reaches into the xattn kernels for the module's
// benchmarks: which implementation they run, the machine's measured peak
// and the phase timings of a workspace. Package xattn sets the hooks from
// its init, so any program that links xattn finds them set; they are not
// part of xattn's API.
package xattnhooks

import "time"

// Timings are the durations of the parts of a workspace's forward passes,
// summed over Calls passes since they were last set to zero. The source
// side is a phase of its own (wall clock); the rest runs fused per chunk
// of query rows, so its parts are the workers' time in each divided by the
// number of threads. Projections are Inputs + Output.
type Timings struct {
	Calls int
	// Inputs is the projection of the sides that were not prepared: the
	// keys and values (with packing) and the queries (with layer norm and
	// normalisation).
	Inputs time.Duration
	// Core is the attention core (scores, softmax, P·V over all heads).
	Core time.Duration
	// Output is the output projection; Probs the attention maps returned
	// (head average or scatter past masked keys).
	Output, Probs time.Duration
}

// The hooks, set by package xattn.
var (
	// Impls returns the names of the kernel implementations this machine
	// and build can run ("avx512", "avx2", "go"), fastest first.
	Impls func() []string
	// CurrentImpl returns the name of the implementation in use.
	CurrentImpl func() string
	// SetImpl makes every kernel (GEMM and attention core) in the process
	// use the named implementation ("auto": the fastest available) until
	// restore is called.
	SetImpl func(name string) (restore func(), err error)
	// PeakGFLOPS measures for about d the peak float32 FMA throughput of
	// one core with the named implementation, in GFLOP/s (0 when it is not
	// available).
	PeakGFLOPS func(name string, d time.Duration) float64
	// PhaseTimes returns the timings of an *xattn.Workspace, which its
	// forward passes add to; set them to zero to start a measurement.
	PhaseTimes func(workspace any) *Timings
)
