package dedup_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
	"github.com/conditionhq/condition/tensorio"
)

// TestDedupFilterMatchesNumPy: with the int8 filter (no nearest cosines
// kept, a CPU with AVX512-VNNI), the synthetic indexes' pairs at 0.9 are
// numpy's, and the very pairs (cosines to the bit) of the float32 search,
// in blocks of 62 rows (inner blocks that split the filter's panels of 32)
// and 64, on one and two goroutines.
func TestDedupFilterMatchesNumPy(t *testing.T) {
	eachGoldenIndex(t, func(t *testing.T, x *index.Index, g *goldenPairs) {
		for _, bs := range []int{62, 64} {
			for _, workers := range []int{1, 2} {
				o := dedup.Options{Threshold: float32(g.Threshold), BlockRows: bs, Workers: workers, NoNearest: true}
				res := runDedup(t, x, o)
				comparePairs(t, x, res, g, 1e-5)
				o.NoFilter = true
				samePairs(t, fmt.Sprintf("blocks of %d, %d workers", bs, workers), res, runDedup(t, x, o))
			}
		}
	})
}

func runDedup(t *testing.T, x *index.Index, o dedup.Options) *dedup.Result {
	t.Helper()
	res, err := dedup.Run(context.Background(), x, o)
	if err != nil {
		t.Fatal(err)
	}
	if halfdot.HasInt8TileKernel() && o.NoNearest && !o.NoFilter && res.Rescored == 0 && len(res.Pairs) > 0 {
		t.Errorf("%d pairs found, none rescored: the int8 filter did not run", len(res.Pairs))
	}
	return res
}

// samePairs checks that got and want hold the same pairs with the same
// cosines, bit for bit.
func samePairs(t *testing.T, what string, got, want *dedup.Result) {
	t.Helper()
	if !slices.Equal(got.Pairs, want.Pairs) {
		t.Errorf("%s: %d pairs with the int8 filter, %d in float32: not the same", what, len(got.Pairs), len(want.Pairs))
	}
}

// TestDedupFilterAdversarial: vectors whose every value lies about
// half-way between two int8 steps (the quantization error at its
// largest), with errors of the signs that make the int8 dot product of a
// pair fall short of the true one the most, some with one large value (a
// coarse scale), in pairs whose
// cosines crowd about 0.96, and rows repeated so that many pairs share
// one cosine exactly; at thresholds equal to pairs' cosines and one
// float32 step either side, the filtered search keeps every pair of the
// float32 search at or above the threshold and none below, and agrees
// with float64 cosines of the stored values to 1e-5.
func TestDedupFilterAdversarial(t *testing.T) {
	const d = 512
	vec := halfStepPairs(600, d)
	dir := t.TempDir()
	writePart(t, dir+"/index/part-0000", index.DTypeF16, vec, d, 0)
	x, err := index.Open(context.Background(), dir, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	all := runDedup(t, x, dedup.Options{Threshold: 0.9, BlockRows: 64, NoNearest: true, NoFilter: true})
	var near []float32
	for _, p := range all.Pairs {
		if p.Cos >= 0.955 && p.Cos < 0.965 {
			near = append(near, p.Cos)
		}
	}
	slices.Sort(near)
	if len(near) < 200 {
		t.Fatalf("only %d pairs within 0.005 of 0.96", len(near))
	}
	exact := stored64(t, x, d)
	ths := []float32{at36(t, all.Pairs, x.Rows())}
	for i := 0; i < len(near); i += len(near) / 12 {
		ths = append(ths, near[i])
	}
	for _, at := range ths {
		for _, th := range []float32{at, math.Nextafter32(at, 2), math.Nextafter32(at, 0)} {
			res := runDedup(t, x, dedup.Options{Threshold: th, BlockRows: 64, NoNearest: true})
			var want []dedup.Pair
			for _, p := range all.Pairs {
				if p.Cos >= th {
					want = append(want, p)
				}
			}
			if !slices.Equal(res.Pairs, want) {
				t.Fatalf("threshold %.9g: %d pairs with the int8 filter, %d of the float32 search at or above it", th, len(res.Pairs), len(want))
			}
			checkAgainst64(t, th, res.Pairs, exact)
			if th == at {
				t.Logf("threshold %.9g: %d pairs (%d exactly at it), %d rescored of %d", th, len(res.Pairs), countAt(res.Pairs, th), res.Rescored, len(vec)/d*(len(vec)/d-1)/2)
			}
		}
	}
}

// at36 returns the cosine of the last twelve rows' pairs (six copies of
// a base, six of a near copy of it): 36 pairs share it exactly.
func at36(t *testing.T, ps []dedup.Pair, n int) float32 {
	t.Helper()
	a, b := n-12, n-6
	i := slices.IndexFunc(ps, func(p dedup.Pair) bool { return p.A == a && p.B == b })
	if i < 0 {
		t.Fatalf("rows %d and %d: no pair at 0.9", a, b)
	}
	if c := countAt(ps, ps[i].Cos); c < 36 {
		t.Fatalf("%d pairs at %g, want 36 or more", c, ps[i].Cos)
	}
	return ps[i].Cos
}

func countAt(ps []dedup.Pair, th float32) int {
	n := 0
	for _, p := range ps {
		if p.Cos == th {
			n++
		}
	}
	return n
}

// checkAgainst64 checks the pairs found at th against float64 cosines of
// the stored rows (cos, every pair of cosine ≥ 0.9): none below
// th − 1e-5, and every pair of cosine ≥ th + 1e-5 found.
func checkAgainst64(t *testing.T, th float32, found []dedup.Pair, cos map[[2]int]float64) {
	t.Helper()
	got := map[[2]int]bool{}
	for _, p := range found {
		got[[2]int{p.A, p.B}] = true
		if c := cos[[2]int{p.A, p.B}]; c < float64(th)-1e-5 {
			t.Fatalf("threshold %g: pair %d %d at float64 cosine %.7f", th, p.A, p.B, c)
		}
	}
	for k, c := range cos {
		if c >= float64(th)+1e-5 && !got[k] {
			t.Fatalf("threshold %g: pair %d %d at float64 cosine %.7f not found", th, k[0], k[1], c)
		}
	}
}

// stored64 returns the float64 cosines of the rows as stored, every pair
// of 0.9 or more.
func stored64(t *testing.T, x *index.Index, d int) map[[2]int]float64 {
	t.Helper()
	n := x.Rows()
	rows := make([]float32, n*d)
	if err := x.ReadEmbeds(0, rows, nil); err != nil {
		t.Fatal(err)
	}
	unit := make([]float64, n*d)
	for i := range n {
		var s float64
		for _, e := range rows[i*d : (i+1)*d] {
			s += float64(e) * float64(e)
		}
		for k, e := range rows[i*d : (i+1)*d] {
			unit[i*d+k] = float64(e) / math.Sqrt(s)
		}
	}
	cos := map[[2]int]float64{}
	for i := range n {
		for j := i + 1; j < n; j++ {
			var c float64
			for k, a := range unit[i*d : (i+1)*d] {
				c += a * unit[j*d+k]
			}
			if c >= 0.9 {
				cos[[2]int{i, j}] = c
			}
		}
	}
	return cos
}

// halfStepPairs returns unit rows [·, d]: bases random directions, then
// a near copy of each at a cosine drawn in 0.955–0.965 (in another order,
// so that a pair's tile holds no other pair as a rule), then a repeat of
// every third base (its copy's pair repeats exactly), then six repeats of
// a last base and six of a near copy of it (at36). Every value but a
// row's largest lies 0.4 or 0.6 of an int8 step (its row's max|v|/127)
// above the step below it, so that its quantization error is about the
// largest and has the sign of its pair's value there (snap): the int8
// dot product of a pair then falls short of the true one by about as much
// as it can. Every fourth base has one value three times the others'
// largest (a coarse scale: the largest relative error).
func halfStepPairs(bases, d int) []float32 {
	rng := rand.New(rand.NewPCG(21, 22))
	unit := func(v []float64) []float64 {
		var s float64
		for _, e := range v {
			s += e * e
		}
		for i := range v {
			v[i] /= math.Sqrt(s)
		}
		return v
	}
	gauss := func() []float64 {
		v := make([]float64, d)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	// snap moves each value but the largest to 0.4 of a step above the
	// step below it where toward's value is positive, 0.6 where it is
	// negative: the error x − x̂ then has toward's signs.
	snap := func(v, toward []float64) []float32 {
		v = slices.Clone(v)
		m, at := 0.0, 0
		for i, e := range v {
			if math.Abs(e) > m {
				m, at = math.Abs(e), i
			}
		}
		s := m / 127
		for i, e := range v {
			if i != at {
				v[i] = (math.Floor(e/s) + 0.5 - 0.1*math.Copysign(1, toward[i])) * s
			}
		}
		unit(v)
		r := make([]float32, d)
		for i, e := range v {
			r[i] = tensorio.F16ToFloat32(tensorio.Float32ToF16(float32(e)))
		}
		return r
	}
	near := func(base []float64) []float64 {
		z := gauss()
		var p float64
		for i := range z {
			p += z[i] * base[i]
		}
		for i := range z {
			z[i] -= p * base[i]
		}
		unit(z)
		c := 0.955 + 0.01*rng.Float64()
		v := make([]float64, d)
		for i := range v {
			v[i] = c*base[i] + math.Sqrt(1-c*c)*z[i]
		}
		return v
	}
	var rows [][]float32
	var copies [][]float32
	for b := range bases {
		base := gauss()
		if b%4 == 0 {
			base[rng.IntN(d)] = 12
		}
		unit(base)
		v := near(base)
		rows = append(rows, snap(base, v))
		copies = append(copies, snap(v, base))
	}
	rng.Shuffle(len(copies), func(i, j int) { copies[i], copies[j] = copies[j], copies[i] })
	for b := 0; b < bases; b += 3 {
		copies = append(copies, rows[b])
	}
	base := unit(gauss())
	v := near(base)
	copies = append(copies, slices.Repeat([][]float32{snap(base, v)}, 6)...)
	copies = append(copies, slices.Repeat([][]float32{snap(v, base)}, 6)...)
	return slices.Concat(slices.Concat(rows...), slices.Concat(copies...))
}
