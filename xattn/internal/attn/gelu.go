package attn

import "math"

// GELU's constants in the form the kernels compute: z = x·(geluK1 +
// geluK2·x²) = -2u with u = sqrt(2/π)·(x + 0.044715·x³).
const (
	geluK1  = float32(-2 * 0.7978845608028654)
	geluK2  = float32(-2 * 0.7978845608028654 * 0.044715)
	geluMax = 88.3762626647949 // the vector exp's clamp
)

// GeluTanhGeneric replaces x[i] by GELU in its tanh form (PyTorch's
// gelu(approximate="tanh")), 0.5·x·(1 + tanh(u)) = x·sigmoid(2u), computed
// as the vector kernels do: x / (1 + Exp(z)), z = -2u in float32, with
// Exp(z) = +Inf above 88.376 (the vector exp's range), so that x below
// about -10 gives -0 (or, just above, a negative value of magnitude below
// 1e-36) and large positive x give x. z's float32 rounding makes the
// result's relative error up to about |z|·2^-24 where it is a small
// fraction of x (below 2e-6 wherever |GELU(x)| ≥ 1e-4·|x|).
func GeluTanhGeneric(x []float32) {
	inf := float32(math.Inf(1))
	for i, v := range x {
		z := v * v
		z *= geluK2
		z += geluK1
		z *= v
		if z > geluMax {
			x[i] = v / inf
			continue
		}
		x[i] = v / (1 + Exp(z))
	}
}

// GeluTanh is GeluTanhGeneric on the fastest kernel.
func GeluTanh(x []float32) {
	if len(x) > 0 {
		geluTanh(x)
	}
}

// geluTanhRef is the float64 formula, for tests.
func geluTanhRef(v float32) float64 {
	f := float64(v)
	return 0.5 * f * (1 + math.Tanh(0.7978845608028654*(f+0.044715*f*f*f)))
}
