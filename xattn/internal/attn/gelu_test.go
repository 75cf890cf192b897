package attn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGeluTanh checks every implementation against the float64 formula
// over a dense sweep of [-12, 12], special values and every length up to
// 100 (the vector body and the Go tail), with guards around the slice.
func TestGeluTanh(t *testing.T) {
	const n = 1 << 20
	xs := make([]float32, 0, n+64)
	for i := 0; i <= n; i++ {
		xs = append(xs, float32(-12+24*float64(i)/n))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-7, -1e-7, 40, -40, 1e6, -1e6,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32)
	for len(xs)%16 != 0 {
		xs = append(xs, 0.5)
	}
	forEachImpl(t, func(t *testing.T) {
		y := append([]float32(nil), xs...)
		GeluTanh(y)
		worst, at := 0.0, float32(0)
		for i, x := range xs {
			want := geluTanhRef(x)
			got := float64(y[i])
			switch {
			case math.IsInf(float64(x), 1):
				if !math.IsInf(got, 1) {
					t.Errorf("gelu(+Inf) = %v, want +Inf", got)
				}
				continue
			case math.IsInf(float64(x), -1):
				continue // -Inf·0: NaN, as the formula gives
			case x < -10:
				// The true value is below 1e-36 in magnitude.
				if got > 0 || got < -1e-36 {
					t.Errorf("gelu(%v) = %v, want -0 or a tiny negative value", x, got)
				}
				continue
			}
			// Relative to the value, with a floor where the result is a
			// small fraction of x (it is x·sigmoid(2u), and z = -2u holds
			// float32's relative rounding, which exp turns into an
			// absolute error of |z|·2^-24 relative to the result).
			d := math.Abs(got-want) / math.Max(math.Abs(want), 1e-4*math.Abs(float64(x)))
			if d > worst {
				worst, at = d, x
			}
		}
		t.Logf("max relative error %.3g at x = %v", worst, at)
		if worst > 2e-6 {
			t.Errorf("gelu error %.3g at x = %v, want <= 2e-6", worst, at)
		}
		for _, x := range []float32{-1e6, -40, -math.MaxFloat32} {
			y := make([]float32, 16)
			for i := range y {
				y[i] = x
			}
			GeluTanh(y)
			if y[0] != 0 || !math.Signbit(float64(y[0])) {
				t.Errorf("gelu(%v) = %v, want -0", x, y[0])
			}
		}
		y = []float32{float32(math.NaN())}
		for len(y) < 16 {
			y = append(y, 1)
		}
		GeluTanh(y)
		if y[0] == y[0] {
			t.Errorf("gelu(NaN) = %v, want NaN", y[0])
		}
	})
	r := rand.New(rand.NewPCG(7, 8))
	forEachImpl(t, func(t *testing.T) {
		for n := 1; n <= 100; n++ {
			x := randSlice(r, n)
			for i := range x {
				x[i] *= 4
			}
			buf, y := guarded(n)
			copy(y, x)
			GeluTanh(y)
			checkGuard(t, "gelu", buf)
			want := append([]float32(nil), x...)
			GeluTanhGeneric(want)
			for i := range x {
				if d := math.Abs(float64(y[i] - want[i])); d > 1e-6*math.Max(math.Abs(float64(want[i])), 1e-3) {
					t.Fatalf("n=%d: gelu(%v) = %v, the Go reference gives %v", n, x[i], y[i], want[i])
				}
			}
		}
	})
}

// BenchmarkGeluTanh times 196·3072 values, the MLP of SigLIP B/16's pooling
// head over one image's patches.
func BenchmarkGeluTanh(b *testing.B) {
	x := make([]float32, 196*3072)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, len(x))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		copy(y, x)
		GeluTanh(y)
	}
}
