package halfdot

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/tensorio"
)

// impls are the kernels this CPU and build can run.
func impls() []string {
	out := []string{"go"}
	if best := impl; best != "go" {
		out = append(out, best)
		if best == "avx512" && hasAVX2 {
			out = append(out, "avx2") // the AVX2 path runs where AVX-512 does
		}
	}
	return out
}

func TestToFloat32Exact(t *testing.T) {
	for h := range 1 << 16 {
		if h&0x7c00 == 0x7c00 {
			continue // infinities and NaNs
		}
		want := tensorio.F16ToFloat32(uint16(h))
		if got := ToFloat32(uint16(h)); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("ToFloat32(%#04x) = %g, want %g", h, got, want)
		}
	}
}

// TestDotEveryLength compares every kernel with a float64 reference and
// with DotGeneric on every length 0..1000, values of unit vectors' size.
func TestDotEveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const maxN = 1000
	a := make([]uint16, maxN+16)
	b := make([]float32, maxN+16)
	for i := range a {
		a[i] = tensorio.Float32ToF16(float32(rng.NormFloat64() * 0.05))
		b[i] = float32(rng.NormFloat64() * 0.05)
	}
	defer func(prev string) { impl = prev }(impl)
	for _, name := range impls() {
		impl = name
		for n := 0; n <= maxN; n++ {
			var ref, mag float64
			for i := range n {
				p := float64(tensorio.F16ToFloat32(a[i])) * float64(b[i])
				ref += p
				mag += math.Abs(p)
			}
			got := Dot(a[:n], b)
			tol := 1e-6*mag + 1e-9
			if d := math.Abs(float64(got) - ref); d > tol {
				t.Fatalf("%s: n=%d: Dot = %g, reference %g (diff %g > %g)", name, n, got, ref, d, tol)
			}
			if g := DotGeneric(a[:n], b); math.Abs(float64(g)-float64(got)) > 2*tol {
				t.Fatalf("%s: n=%d: Dot = %g, DotGeneric %g", name, n, got, g)
			}
		}
	}
}

// TestDot4EveryLength compares every kernel's Dot4 with a float64
// reference on every length 0..600, rows of b len(a) to len(a)+3 apart,
// with guard values after the fourth row that a read past it would add.
func TestDot4EveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const maxN = 600
	a := make([]uint16, maxN)
	for i := range a {
		a[i] = tensorio.Float32ToF16(float32(rng.NormFloat64() * 0.05))
	}
	defer func(prev string) { impl = prev }(impl)
	for _, name := range impls() {
		impl = name
		for n := 0; n <= maxN; n++ {
			ldb := n + n%4
			b := make([]float32, 3*ldb+n+16)
			for i := range b {
				b[i] = float32(rng.NormFloat64() * 0.05)
			}
			for i := 3*ldb + n; i < len(b); i++ {
				b[i] = float32(math.NaN())
			}
			var out [4]float32
			Dot4(a[:n], b[:3*ldb+n], ldb, &out)
			for k := range 4 {
				var ref, mag float64
				for i := range n {
					p := float64(tensorio.F16ToFloat32(a[i])) * float64(b[k*ldb+i])
					ref += p
					mag += math.Abs(p)
				}
				if d := math.Abs(float64(out[k]) - ref); !(d <= 1e-6*mag+1e-9) {
					t.Fatalf("%s: n=%d ldb=%d: Dot4 row %d = %g, reference %g", name, n, ldb, k, out[k], ref)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Dot4 with b shorter than four rows did not panic")
		}
	}()
	var out [4]float32
	Dot4(a[:8], make([]float32, 3*8+7), 8, &out)
}

// TestDot4x2EveryLength compares every kernel's Dot4x2 with a float64
// reference on every length 0..600, rows of a and of b n to n+3 apart,
// with NaN guards after the last rows that a read past them would add.
func TestDot4x2EveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	defer func(prev string) { impl = prev }(impl)
	for _, name := range impls() {
		impl = name
		for n := 0; n <= 600; n++ {
			lda, ldb := n+(n+1)%4, n+n%4
			a := make([]uint16, lda+n+16)
			b := make([]float32, 3*ldb+n+16)
			for i := range a {
				a[i] = tensorio.Float32ToF16(float32(rng.NormFloat64() * 0.05))
				if i >= lda+n {
					a[i] = 0x7e00 // NaN
				}
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64() * 0.05)
				if i >= 3*ldb+n {
					b[i] = float32(math.NaN())
				}
			}
			var out [8]float32
			Dot4x2(a[:lda+n], lda, b[:3*ldb+n], ldb, n, &out)
			for r := range 2 {
				for k := range 4 {
					var ref, mag float64
					for i := range n {
						p := float64(tensorio.F16ToFloat32(a[r*lda+i])) * float64(b[k*ldb+i])
						ref += p
						mag += math.Abs(p)
					}
					if d := math.Abs(float64(out[4*r+k]) - ref); !(d <= 1e-6*mag+1e-9) {
						t.Fatalf("%s: n=%d: Dot4x2 row %d × %d = %g, reference %g", name, n, r, k, out[4*r+k], ref)
					}
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Dot4x2 with a shorter than two rows did not panic")
		}
	}()
	var out [8]float32
	Dot4x2(make([]uint16, 15), 8, make([]float32, 32), 8, 8, &out)
}

func TestDotInt8Float32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 70 {
		a8 := make([]int8, n)
		af := make([]float32, n)
		b := make([]float32, n)
		var r8, rf float64
		for i := range n {
			a8[i] = int8(rng.IntN(255) - 127)
			af[i] = float32(rng.NormFloat64())
			b[i] = float32(rng.NormFloat64())
			r8 += float64(a8[i]) * float64(b[i])
			rf += float64(af[i]) * float64(b[i])
		}
		if g := DotInt8(a8, b); math.Abs(float64(g)-r8) > 1e-3 {
			t.Fatalf("DotInt8 n=%d: %g, want %g", n, g, r8)
		}
		if g := DotFloat32(af, b); math.Abs(float64(g)-rf) > 1e-4 {
			t.Fatalf("DotFloat32 n=%d: %g, want %g", n, g, rf)
		}
	}
}

// BenchmarkDot4x512 is four 512-wide dots of one float16 row against four
// float32 rows: Dot4 against four calls of Dot; and Dot4x2's eight (two
// rows against four) in one call.
func BenchmarkDot4x512(b *testing.B) {
	const d = 512
	a := make([]uint16, d)
	q := make([]float32, 4*d)
	for i := range a {
		a[i] = tensorio.Float32ToF16(float32(i%97) * 0.001)
	}
	for i := range q {
		q[i] = 0.01
	}
	var out [4]float32
	b.Run("Dot4", func(b *testing.B) {
		for b.Loop() {
			Dot4(a, q, d, &out)
		}
	})
	a2 := make([]uint16, 2*d)
	copy(a2, a)
	copy(a2[d:], a)
	var out8 [8]float32
	b.Run("Dot4x2-eight-dots", func(b *testing.B) {
		for b.Loop() {
			Dot4x2(a2, d, q, d, d, &out8)
		}
	})
	b.Run("Dot", func(b *testing.B) {
		for b.Loop() {
			for k := range 4 {
				out[k] = Dot(a, q[k*d:(k+1)*d])
			}
		}
	})
}

func BenchmarkDot512(b *testing.B) {
	const d, rows = 512, 4096
	a := make([]uint16, d*rows)
	q := make([]float32, d)
	for i := range a {
		a[i] = tensorio.Float32ToF16(float32(i%97) * 0.001)
	}
	for i := range q {
		q[i] = 0.01
	}
	defer func(prev string) { impl = prev }(impl)
	for _, name := range impls() {
		b.Run(name, func(b *testing.B) {
			impl = name
			b.SetBytes(d * 2)
			var s float32
			for i := 0; b.Loop(); i++ {
				r := i % rows
				s += Dot(a[r*d:(r+1)*d], q)
			}
			_ = s
		})
	}
}
