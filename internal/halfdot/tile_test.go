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

// TestTileGenericSame checks the assembly kernel against TileGeneric on
// sums whose every product is exact (small integers): they must agree to
// the bit.
func TestTileGenericSame(t *testing.T) {
	if impl == "go" {
		t.Skip("no assembly kernel in this build or on this CPU")
	}
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
	Tile(a, b, d, 1e9, &got)
	TileGeneric(a, b, d, 1e9, &want)
	if got != want {
		t.Fatalf("assembly and Go tiles differ on integer sums")
	}
}

func BenchmarkTile512(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const d = 512
	_, _, pa := packedPanels(rng, TileRows, d, TileRows)
	_, _, pb := packedPanels(rng, TileCols, d, TileCols)
	var out [TileRows * TileCols]float32
	for b.Loop() {
		Tile(pa, pb, d, 0.9, &out)
	}
	b.ReportMetric(float64(b.N)*TileRows*TileCols*2*d/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
