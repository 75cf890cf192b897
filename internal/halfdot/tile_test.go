package halfdot

import (
	"math"
	"math/rand/v2"
	"testing"
)

// packedPanels returns k random rows of d values (unit-vector size), with
// their scales, and those rows packed as panels of w.
func packedPanels(rng *rand.Rand, k, d, w int) (rows, scale, packed []float32) {
	rows = make([]float32, k*d)
	scale = make([]float32, k)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64())
	}
	for r := range scale {
		scale[r] = float32(0.5+rng.Float64()) / float32(math.Sqrt(float64(d)))
	}
	packed = make([]float32, PackedLen(k, d, w))
	for i := range packed {
		packed[i] = float32(math.NaN()) // Pack must write every value
	}
	Pack(packed, rows, scale, k, d, w)
	return rows, scale, packed
}

// TestPack checks every value of the packed layout against the rows.
func TestPack(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ k, d, w int }{{1, 1, 12}, {12, 5, 12}, {13, 7, 12}, {31, 3, 32}, {65, 9, 32}} {
		rows, scale, packed := packedPanels(rng, c.k, c.d, c.w)
		if len(packed)%(c.w*c.d) != 0 || len(packed) < c.k*c.d {
			t.Fatalf("%+v: packed length %d", c, len(packed))
		}
		for p := range len(packed) / (c.w * c.d) {
			for r := range c.w {
				for i := range c.d {
					want := float32(0)
					if row := p*c.w + r; row < c.k {
						want = rows[row*c.d+i] * scale[row]
					}
					if got := packed[p*c.w*c.d+i*c.w+r]; got != want {
						t.Fatalf("%+v: panel %d row %d value %d = %g, want %g", c, p, r, i, got, want)
					}
				}
			}
		}
	}
}

// TestTileEveryLength compares every kernel with a float64 reference on
// lengths 0..600 and 1024, and checks the threshold it reports on either
// side of the largest product.
func TestTileEveryLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	defer func(prev string) { impl = prev }(impl)
	lengths := []int{1024}
	for d := 0; d <= 600; d++ {
		lengths = append(lengths, d)
	}
	for _, name := range impls() {
		impl = name
		for _, d := range lengths {
			ra, sa, a := packedPanels(rng, TileRows, d, TileRows)
			rb, sb, b := packedPanels(rng, TileCols, d, TileCols)
			var out [TileRows * TileCols]float32
			Tile(a, b, d, 2, &out)
			best := math.Inf(-1)
			for r := range TileRows {
				for c := range TileCols {
					var ref, mag float64
					for i := range d {
						p := float64(ra[r*d+i]*sa[r]) * float64(rb[c*d+i]*sb[c])
						ref += p
						mag += math.Abs(p)
					}
					got := float64(out[r*TileCols+c])
					if tol := 1e-6*mag*math.Sqrt(float64(d)+1) + 1e-9; math.Abs(got-ref) > tol {
						t.Fatalf("%s: d=%d: out[%d,%d] = %g, reference %g (diff %g > %g)", name, d, r, c, got, ref, math.Abs(got-ref), tol)
					}
					best = max(best, got)
				}
			}
			if d == 0 {
				continue
			}
			above, below := float32(best), math.Nextafter32(float32(best), float32(math.Inf(1)))
			if !Tile(a, b, d, above, &out) || Tile(a, b, d, below, &out) {
				t.Fatalf("%s: d=%d: Tile's answer at t = the largest product %g or just above is wrong", name, d, best)
			}
		}
	}
}

// TestTileGenericSame checks every assembly kernel against TileGeneric
// on sums whose every product is exact (small integers): they must agree
// to the bit.
func TestTileGenericSame(t *testing.T) {
	if impl == "go" {
		t.Skip("no assembly kernel in this build or on this CPU")
	}
	defer func(prev string) { impl = prev }(impl)
	rng := rand.New(rand.NewPCG(7, 8))
	const d = 512
	a := make([]float32, TileRows*d)
	b := make([]float32, TileCols*d)
	for i := range a {
		a[i] = float32(rng.IntN(9) - 4)
	}
	for i := range b {
		b[i] = float32(rng.IntN(9) - 4)
	}
	var got, want [TileRows * TileCols]float32
	TileGeneric(a, b, d, 1e9, &want)
	for _, name := range impls()[1:] {
		impl = name
		Tile(a, b, d, 1e9, &got)
		if got != want {
			t.Fatalf("%s: assembly and Go tiles differ on integer sums", name)
		}
	}
}

// TestTileKernelsSame checks that the AVX2 kernel's outputs and answers
// are the AVX-512 kernel's to the bit (the same FMA chains in the same
// order) on random values, at lengths around the loop's, and with panels
// at every float offset within a cache line.
func TestTileKernelsSame(t *testing.T) {
	if impl != "avx512" || !hasAVX2 {
		t.Skip("needs a CPU with AVX-512F and AVX2")
	}
	defer func(prev string) { impl = prev }(impl)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, d := range []int{1, 2, 3, 7, 8, 63, 64, 65, 511, 512, 513, 768} {
		for off := range 16 {
			_, _, pa := packedPanels(rng, TileRows, d, TileRows)
			_, _, pb := packedPanels(rng, TileCols, d, TileCols)
			a := append(make([]float32, off), pa...)[off:]
			b := append(make([]float32, 15-off), pb...)[15-off:]
			var o512, o2 [TileRows * TileCols]float32
			for _, th := range []float32{-1, 0, 0.05, 0.2, 2} {
				impl = "avx512"
				r512 := Tile(a, b, d, th, &o512)
				impl = "avx2"
				r2 := Tile(a, b, d, th, &o2)
				if o512 != o2 || r512 != r2 {
					for k := range o2 {
						if math.Float32bits(o2[k]) != math.Float32bits(o512[k]) {
							t.Fatalf("d=%d offset %d: out[%d,%d] AVX2 %g, AVX-512 %g", d, off, k/TileCols, k%TileCols, o2[k], o512[k])
						}
					}
					t.Fatalf("d=%d offset %d t=%g: AVX2 says %v, AVX-512 %v", d, off, th, r2, r512)
				}
			}
		}
	}
}

// BenchmarkTile512 runs Tile over d = 512 with every kernel this CPU and
// build can run (GFLOP/s: two per multiply-add).
func BenchmarkTile512(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const d = 512
	_, _, pa := packedPanels(rng, TileRows, d, TileRows)
	_, _, pb := packedPanels(rng, TileCols, d, TileCols)
	var out [TileRows * TileCols]float32
	defer func(prev string) { impl = prev }(impl)
	for _, name := range impls() {
		b.Run(name, func(b *testing.B) {
			impl = name
			for b.Loop() {
				Tile(pa, pb, d, 0.9, &out)
			}
			b.ReportMetric(float64(b.N)*TileRows*TileCols*2*d/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
