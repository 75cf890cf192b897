package halfdot

import (
	"math"
	"math/rand/v2"
	"testing"
)

// int8Rows returns k random rows of d int8 values in [−127, 127]; extreme
// makes every value ±127 (the largest sums, for overflow).
func int8Rows(rng *rand.Rand, k, d int, extreme bool) []int8 {
	q := make([]int8, k*d)
	for i := range q {
		if extreme {
			q[i] = int8(127 - 254*rng.IntN(2))
		} else {
			q[i] = int8(rng.IntN(255) - 127)
		}
	}
	return q
}

// TestPackInt8 checks every byte of both packed layouts, the row sums,
// and that nothing past the packed length is written.
func TestPackInt8(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct{ k, d int }{{1, 1}, {12, 5}, {13, 7}, {31, 3}, {65, 9}, {40, 512}} {
		q := int8Rows(rng, c.k, c.d, false)
		d4 := (c.d + 3) &^ 3
		for _, w := range []int{TileRows, TileCols} {
			n := PackedLenInt8(c.k, c.d, w)
			if n != (c.k+w-1)/w*w*d4 {
				t.Fatalf("%+v w=%d: packed length %d", c, w, n)
			}
			u := make([]uint8, n+8)
			s := make([]int8, n+8)
			sums := make([]int32, n/d4+8)
			for i := range u {
				u[i], s[i] = 7, 7
			}
			for i := range sums {
				sums[i] = 99
			}
			if w == TileRows {
				PackUint8(u, q, c.k, c.d)
			} else {
				PackInt8(s, sums, q, c.k, c.d)
			}
			for p := range n / (w * d4) {
				for r := range w {
					row, sum := p*w+r, int32(0)
					for i := range d4 {
						want := 0
						if row < c.k && i < c.d {
							want = int(q[row*c.d+i])
						}
						sum += int32(want)
						at := p*w*d4 + i/4*4*w + 4*r + i%4
						if w == TileRows && int(u[at]) != want+128 || w == TileCols && int(s[at]) != want {
							t.Fatalf("%+v w=%d: panel %d row %d value %d: %d/%d, want %d", c, w, p, r, i, u[at], s[at], want)
						}
					}
					if w == TileCols && sums[row] != sum {
						t.Fatalf("%+v: sum of row %d = %d, want %d", c, row, sums[row], sum)
					}
				}
			}
			for i := n; i < len(u); i++ {
				if u[i] != 7 || s[i] != 7 {
					t.Fatalf("%+v w=%d: byte %d past the packed length written", c, w, i)
				}
			}
			if w == TileCols && sums[n/d4] != 99 {
				t.Fatalf("%+v: a sum past the last panel written", c)
			}
		}
	}
}

// TestTileInt8EveryLength compares every kernel with exact integer
// arithmetic over the rows as given, on lengths 0..600, 1024 and 1040
// (the largest whose sums convert to float32 exactly), random and
// extreme (±127) values, and checks the threshold it reports on either
// side of the largest coarse value.
func TestTileInt8EveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	defer func(prev string) { impl = prev }(impl)
	lengths := []int{1024, 1040}
	for d := 0; d <= 600; d++ {
		lengths = append(lengths, d)
	}
	for _, name := range impls() {
		impl = name
		for _, d := range lengths {
			for _, extreme := range []bool{false, true} {
				checkTileInt8(t, rng, name, d, extreme)
			}
		}
	}
}

// checkTileInt8 runs TileInt8 on random rows of d values and checks it.
func checkTileInt8(t *testing.T, rng *rand.Rand, name string, d int, extreme bool) {
	t.Helper()
	qa, qb := int8Rows(rng, TileRows, d, extreme), int8Rows(rng, TileCols, d, extreme)
	a := make([]uint8, PackedLenInt8(TileRows, d, TileRows))
	b := make([]int8, PackedLenInt8(TileCols, d, TileCols))
	var sums [TileCols]int32
	PackUint8(a, qa, TileRows, d)
	PackInt8(b, sums[:], qb, TileCols, d)
	var sa [TileRows]float32
	var sb [TileCols]float32
	for r := range sa {
		sa[r] = float32(0.5+rng.Float64()) / 127
	}
	for c := range sb {
		sb[c] = float32(0.5+rng.Float64()) / 127
	}
	var out [TileRows * TileCols]int32
	TileInt8(a, b, d, &sums, &sa, &sb, 1e30, &out)
	best := float32(math.Inf(-1))
	for r := range TileRows {
		for c := range TileCols {
			var ref int64
			for i := range d {
				ref += int64(qa[r*d+i]) * int64(qb[c*d+i])
			}
			if int64(out[r*TileCols+c]) != ref {
				t.Fatalf("%s: d=%d extreme=%v: out[%d,%d] = %d, want %d", name, d, extreme, r, c, out[r*TileCols+c], ref)
			}
			coarse := float32(float32(float32(ref)*sb[c]) * sa[r])
			if exact := float64(sa[r]) * float64(sb[c]) * float64(ref); math.Abs(float64(coarse)-exact) > 3.0000001*0x1p-24*math.Abs(exact) {
				t.Fatalf("%s: d=%d: coarse value %g is %g from the exact %g", name, d, coarse, float64(coarse)-exact, exact)
			}
			best = max(best, coarse)
		}
	}
	above := math.Nextafter32(best, float32(math.Inf(1)))
	if !TileInt8(a, b, d, &sums, &sa, &sb, best, &out) || TileInt8(a, b, d, &sums, &sa, &sb, above, &out) {
		t.Fatalf("%s: d=%d extreme=%v: TileInt8's answer at t = the largest coarse value %g or just above is wrong", name, d, extreme, best)
	}
}

// TestTileInt8GenericSame checks the assembly kernel against
// TileInt8Generic to the bit, out and answer, at thresholds about the
// largest coarse value.
func TestTileInt8GenericSame(t *testing.T) {
	if !HasInt8TileKernel() {
		t.Skip("no VNNI kernel in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	const d = 512
	for range 50 {
		qa, qb := int8Rows(rng, TileRows, d, false), int8Rows(rng, TileCols, d, false)
		a := make([]uint8, PackedLenInt8(TileRows, d, TileRows))
		b := make([]int8, PackedLenInt8(TileCols, d, TileCols))
		var sums [TileCols]int32
		PackUint8(a, qa, TileRows, d)
		PackInt8(b, sums[:], qb, TileCols, d)
		var sa [TileRows]float32
		var sb [TileCols]float32
		for r := range sa {
			sa[r] = float32(rng.Float64()) / 127
		}
		for c := range sb {
			sb[c] = float32(rng.Float64()) / 127
		}
		var got, want [TileRows * TileCols]int32
		for _, th := range []float32{-1, 0, 0.01, 0.05, 0.1, 1} {
			g := TileInt8(a, b, d, &sums, &sa, &sb, th, &got)
			w := TileInt8Generic(a, b, d, &sums, &sa, &sb, th, &want)
			if got != want || g != w {
				t.Fatalf("t=%g: assembly and Go int8 tiles differ (answers %v, %v)", th, g, w)
			}
		}
	}
}

func BenchmarkTileInt8_512(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const d = 512
	a := make([]uint8, PackedLenInt8(TileRows, d, TileRows))
	bb := make([]int8, PackedLenInt8(TileCols, d, TileCols))
	var sums [TileCols]int32
	PackUint8(a, int8Rows(rng, TileRows, d, false), TileRows, d)
	PackInt8(bb, sums[:], int8Rows(rng, TileCols, d, false), TileCols, d)
	var sa [TileRows]float32
	var sb [TileCols]float32
	var out [TileRows * TileCols]int32
	for b.Loop() {
		TileInt8(a, bb, d, &sums, &sa, &sb, 0.9, &out)
	}
	b.ReportMetric(float64(b.N)*TileRows*TileCols*2*d/b.Elapsed().Seconds()/1e9, "GOP/s")
}
