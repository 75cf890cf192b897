//go:build amd64 && gc && !purego

package cpuid

import "golang.org/x/sys/cpu"

// detect lists the implementations the CPU supports. x/sys/cpu reports
// AVX and AVX-512 only when the OS saves the ymm, zmm and mask registers.
func detect() []Impl {
	impls := []Impl{Go}
	x := cpu.X86
	if x.HasAVX && x.HasAVX2 && x.HasFMA {
		impls = append(impls, AVX2)
		if x.HasAVX512F {
			impls = append(impls, AVX512)
		}
	}
	return impls
}

// peakLoop returns the FMA loop for i and the flops one iteration does.
func peakLoop(i Impl) (run func(n int), flopsPerIter float64) {
	switch i {
	case AVX2:
		return peakAVX2, 4 * 12 * 8 * 2
	case AVX512:
		return peakAVX512, 4 * 24 * 16 * 2
	}
	return peakGeneric, 2 * peakGoChains
}
