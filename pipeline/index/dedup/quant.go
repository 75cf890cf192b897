package dedup

import (
	"context"
	"math"
	"sync"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// norms are what the int8 filter's bound needs of a row x (normalised as
// the float32 search packs it: each value times 1/‖v‖, rounded to
// float32), quantized as x̂ = s·q: ‖x̂‖, ‖e‖ = ‖x − x̂‖ and ‖x‖, in
// float64; for a panel of rows, the largest of each.
type norms struct{ hat, err, norm float64 }

func (n *norms) raise(o norms) {
	n.hat, n.err, n.norm = max(n.hat, o.hat), max(n.err, o.err), max(n.norm, o.norm)
}

// quantizeRow sets q (len(x) values) to x/s rounded with s = max|x|/127 as
// float32 (q = 0, s = 0 for a zero row) and returns s and the row's norms.
// e = x − s·q is exact in float64 (s·q has at most 32 significant bits and
// |e| ≤ s/2 ≤ |x|max/254), so ‖e‖ is its rounded float64 norm.
func quantizeRow(q []int8, x []float32) (float32, norms) {
	m := float32(0)
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	if m == 0 {
		clear(q)
		return 0, norms{}
	}
	s := m / 127
	inv := 1 / float64(s) // any rounding of q will do: e is of the q chosen
	var sq int64
	var ee, xx float64
	for i, v := range x {
		k := math.Floor(float64(v)*inv + 0.5)
		k = max(-127, min(127, k))
		q[i] = int8(k)
		sq += int64(k) * int64(k)
		e := float64(v) - float64(s)*k
		ee += e * e
		xx += float64(v) * float64(v)
	}
	return s, norms{hat: float64(s) * math.Sqrt(float64(sq)), err: math.Sqrt(ee), norm: math.Sqrt(xx)}
}

// readQuantized reads rows [r0, r0+k) (k ≤ len(rows)/d) as float32,
// normalises them as halfdot.Pack does (v·(1/‖v‖), rounded to float32)
// and quantizes them into q (row-major), their scales into scale and
// norms into nm.
func readQuantized(x *index.Index, v *vectors, r0, k int, rows []float32, q []int8, scale []float32, nm []norms) error {
	d := v.d
	if err := x.ReadEmbeds(r0, rows[:k*d], nil); err != nil {
		return err
	}
	for i := range k {
		row, inv := rows[i*d:(i+1)*d], v.inv[r0+i]
		for j := range row {
			row[j] *= inv
		}
		scale[i], nm[i] = quantizeRow(q[i*d:(i+1)*d], row)
	}
	return nil
}

// quantized is every row of the index as int8, quantized once: panels of
// halfdot.TileCols rows (halfdot.PackInt8) that the int8 searchers read
// as their inner blocks, with each row's sum and scale and each panel's
// largest norms.
type quantized struct {
	d, n   int
	q      []int8
	sums   []int32
	scale  []float32
	panels []norms
}

// quantizeAll quantizes every row of x, the panels shared out among
// workers goroutines.
func quantizeAll(ctx context.Context, x *index.Index, v *vectors, workers int) (*quantized, error) {
	const w = halfdot.TileCols
	np := (v.n + w - 1) / w
	qz := &quantized{d: v.d, n: v.n, q: make([]int8, halfdot.PackedLenInt8(v.n, v.d, w)),
		sums: make([]int32, np*w), scale: make([]float32, np*w), panels: make([]norms, np)}
	plen := halfdot.PackedLenInt8(w, v.d, w)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for g := range workers {
		wg.Go(func() {
			rows, q, nm := make([]float32, w*v.d), make([]int8, w*v.d), make([]norms, w)
			for p := g; p < np && ctx.Err() == nil; p += workers {
				k := min(w, v.n-p*w)
				if err := readQuantized(x, v, p*w, k, rows, q, qz.scale[p*w:], nm); err != nil {
					errs[g] = err
					return
				}
				halfdot.PackInt8(qz.q[p*plen:(p+1)*plen], qz.sums[p*w:(p+1)*w], q, k, v.d)
				for _, m := range nm[:k] {
					qz.panels[p].raise(m)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return qz, ctx.Err()
}

// u is float32's unit roundoff, 2⁻²⁴.
const u = 0x1p-24

// coarseFloor returns the least coarse value (halfdot.TileInt8's) that a
// pair of a row of panel a and a row of panel b whose float32 cosine (as
// halfdot.Tile computes it over d values) is at least t can have:
// t − (a.hat·b.err + a.err·b.norm) − γ_d·a.norm·b.norm −
// 3.0000001·u·a.hat·b.hat, rounded down to float32, where
//
//   - x·y − x̂·ŷ = e_x·y + x̂·e_y, so |x·y − x̂·ŷ| ≤ ‖e_x‖‖y‖ + ‖x̂‖‖e_y‖;
//   - Tile's float32 sum of d products (fused or not) is within
//     γ_d·Σ|x_i·y_i| ≤ γ_d·‖x‖‖y‖ of x·y, γ_d = d·u/(1 − d·u);
//   - TileInt8's coarse value is within 3.0000001·u·‖x̂‖‖ŷ‖ of x̂·ŷ.
//
// The sum is made 1e-6 larger (relative) to cover its own float64
// roundings and those of the norms.
func coarseFloor(t float32, a, b norms, d int) float32 {
	g := float64(d) * u / (1 - float64(d)*u)
	m := a.hat*b.err + a.err*b.norm + g*a.norm*b.norm + 3.0000001*u*a.hat*b.hat
	f := float64(t) - m*(1+1e-6) - 1e-30
	c := float32(f)
	if float64(c) > f {
		c = math.Nextafter32(c, float32(math.Inf(-1)))
	}
	return c
}
