//go:build !amd64 || !gc || purego

package cpuid

// detect lists the implementations of this build: pure Go only.
func detect() []Impl { return []Impl{Go} }

// peakLoop returns the pure-Go loop and the flops one iteration does.
func peakLoop(Impl) (run func(n int), flopsPerIter float64) {
	return peakGeneric, 2 * peakGoChains
}
