package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// benchShapes are the projection shapes of xattn (M rows of features, K in,
// N out): Stable Diffusion 1.5 attn2 (to_q/to_out at 64²·320 … 8²·1280,
// to_k/to_v on 77 prompt tokens of width 768) and CLIP towers (ViT-B/32 50
// tokens, ViT-B/16 197, ViT-L/14 257; text 77 tokens of width 512/768), and
// SigLIP B/16's pooling head read out on 196 patches (its MLP, 768 → 3072
// → 768).
var benchShapes = []struct{ m, k, n int }{
	{4096, 320, 320},
	{1024, 640, 640},
	{256, 1280, 1280},
	{64, 1280, 1280},
	{77, 768, 320},
	{77, 768, 1280},
	{50, 768, 768},
	{77, 512, 512},
	{197, 768, 768},
	{257, 1024, 1024},
	{196, 768, 3072},
	{196, 3072, 768},
}

var (
	peakOnce sync.Once
	peaks    map[cpuid.Impl]float64
)

// peak returns the measured peak GFLOP/s of impl (measured once per run).
func peak(impl cpuid.Impl) float64 {
	peakOnce.Do(func() {
		peaks = map[cpuid.Impl]float64{}
		for _, i := range cpuid.Available() {
			peaks[i] = cpuid.PeakGFLOPS(i, 200*time.Millisecond)
		}
	})
	return peaks[impl]
}

// timedLoop runs f b.N times and returns the fastest single call, which on
// a machine shared with other work estimates the uncontended time.
func timedLoop(b *testing.B, f func()) time.Duration {
	best := time.Duration(math.MaxInt64)
	for b.Loop() {
		t := time.Now()
		f()
		best = min(best, time.Since(t))
	}
	return best
}

// reportFlops reports GFLOP/s over the whole run, best-GFLOP/s of the
// fastest call and, with withPeak, that best as a percentage of impl's
// measured peak.
func reportFlops(b *testing.B, flopsPerOp float64, best time.Duration, impl cpuid.Impl, withPeak bool) {
	b.ReportMetric(flopsPerOp*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	bestRate := flopsPerOp / best.Seconds() / 1e9
	b.ReportMetric(bestRate, "best-GFLOP/s")
	if withPeak {
		if pk := peak(impl); pk > 0 {
			b.ReportMetric(100*bestRate/pk, "%peak")
		}
	}
}

// BenchmarkMatMul runs each projection shape on every implementation
// (BenchmarkMatMul/<impl>/<M>x<K>x<N>) and on gonum's blas32.Gemm
// (BenchmarkMatMul/gonum/...) for comparison. GFLOP/s is over the whole
// run; best-GFLOP/s is of the fastest call, and %peak relates it to
// cpuid.PeakGFLOPS of the same implementation (for the Go path, the scalar
// multiply-add peak), which is also a best-of measurement.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, impl := range cpuid.Available() {
		b.Run(impl.String(), func(b *testing.B) {
			for _, s := range benchShapes {
				b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n), func(b *testing.B) {
					defer cpuid.Set(impl)()
					a, bias := randSlice(rng, s.m*s.k), randSlice(rng, s.n)
					p := PackTransposed(randSlice(rng, s.n*s.k), s.n, s.k)
					c := make([]float32, s.m*s.n)
					peak(impl)
					b.ResetTimer()
					best := timedLoop(b, func() { MatMul(c, s.n, a, s.k, s.m, p, bias) })
					reportFlops(b, 2*float64(s.m)*float64(s.k)*float64(s.n), best, impl, true)
				})
			}
		})
	}
	b.Run("gonum", func(b *testing.B) {
		for _, s := range benchShapes {
			b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n), func(b *testing.B) {
				a := blas32.General{Rows: s.m, Cols: s.k, Stride: s.k, Data: randSlice(rng, s.m*s.k)}
				// W in PyTorch layout [n, k], used transposed, as MatMul's B = Wᵀ.
				w := blas32.General{Rows: s.n, Cols: s.k, Stride: s.k, Data: randSlice(rng, s.n*s.k)}
				c := blas32.General{Rows: s.m, Cols: s.n, Stride: s.n, Data: make([]float32, s.m*s.n)}
				best := timedLoop(b, func() { blas32.Gemm(blas.NoTrans, blas.Trans, 1, a, w, 0, c) })
				reportFlops(b, 2*float64(s.m)*float64(s.k)*float64(s.n), best, cpuid.Go, false)
			})
		}
	})
}

// BenchmarkKernel times the AVX-512/AVX2/Go inner kernels alone on one
// L1-resident k block (one row tile, one panel), the ceiling of MatMul.
func BenchmarkKernel(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	const m, k, n = 6, 128, 64
	a := randSlice(rng, m*k)
	p := PackB(randSlice(rng, k*n), k, n, n)
	c := make([]float32, m*n)
	for _, impl := range cpuid.Available() {
		b.Run(impl.String(), func(b *testing.B) {
			defer cpuid.Set(impl)()
			peak(impl)
			b.ResetTimer()
			best := timedLoop(b, func() { MatMul(c, n, a, k, m, p, nil) })
			reportFlops(b, 2*m*k*n, best, impl, true)
		})
	}
}
