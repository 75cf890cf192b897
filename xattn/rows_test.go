package xattn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randRows returns n·d values, some rows far from zero mean and unit
// scale, so that the float64 sums and the rounding to float32 both matter.
func randRows(rng *rand.Rand, n, d int) []float32 {
	x := make([]float32, n*d)
	for i := range n {
		off, scale := float32(rng.NormFloat64()*10), float32(math.Exp(rng.NormFloat64()*2))
		for k := range d {
			x[i*d+k] = off + scale*float32(rng.NormFloat64())
		}
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %v, the reference's %v", what, i, got[i], want[i])
		}
	}
}

// TestLayerNormRows: layerNorm, four rows at a time, gives the bits of
// layerNormGeneric for every row count and width, with and without a bias,
// into another buffer and in place.
func TestLayerNormRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{1, 2, 7, 64, 768} {
		ln := &LayerNorm{Weight: randRows(rng, 1, d), Bias: randRows(rng, 1, d), Eps: 1e-5}
		noBias := &LayerNorm{Weight: ln.Weight, Eps: 1e-6}
		for n := 0; n <= 11; n++ {
			x := randRows(rng, n, d)
			for _, l := range []*LayerNorm{ln, noBias} {
				want := make([]float32, n*d+3)
				layerNormGeneric(want, x, n, d, l)
				got := make([]float32, n*d+3)
				layerNorm(got, x, n, d, l)
				sameBits(t, "layerNorm", got, want) // the guard values stay zero
				in := append([]float32(nil), x...)
				layerNorm(in, in, n, d, l)
				sameBits(t, "layerNorm in place", in, want[:n*d])
			}
		}
	}
}

// TestL2NormalizeRows: l2normalizeRows gives the bits of l2normalize on
// each row, and leaves what follows the rows alone.
func TestL2NormalizeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{1, 3, 8, 512} {
		for n := 0; n <= 11; n++ {
			x := randRows(rng, n+1, d)
			if n > 0 {
				clear(x[:d]) // a zero row: divided by 1e-12
			}
			want := append([]float32(nil), x...)
			for i := range n {
				l2normalize(want[i*d : (i+1)*d])
			}
			got := append([]float32(nil), x...)
			l2normalizeRows(got, n, d)
			sameBits(t, "l2normalizeRows", got, want)
		}
	}
}

func BenchmarkLayerNormRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d = 49, 768
	ln := &LayerNorm{Weight: randRows(rng, 1, d), Bias: randRows(rng, 1, d), Eps: 1e-5}
	x, y := randRows(rng, n, d), make([]float32, n*d)
	b.Run("rows4", func(b *testing.B) {
		for b.Loop() {
			layerNorm(y, x, n, d, ln)
		}
	})
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			layerNormGeneric(y, x, n, d, ln)
		}
	})
}

func BenchmarkL2NormalizeRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d = 49, 512
	x := randRows(rng, n, d)
	b.Run("rows4", func(b *testing.B) {
		for b.Loop() {
			l2normalizeRows(x, n, d)
		}
	})
	b.Run("generic", func(b *testing.B) {
		for b.Loop() {
			for i := range n {
				l2normalize(x[i*d : (i+1)*d])
			}
		}
	})
}
