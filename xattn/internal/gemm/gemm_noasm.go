//go:build !amd64 || !gc || purego

package gemm

import "github.com/conditionhq/condition/xattn/internal/cpuid"

// matMulAsm reports false: this build has no assembly kernels.
func matMulAsm(cpuid.Impl, []float32, int, []float32, int, int, *Packed, []float32, int, int) bool {
	return false
}
