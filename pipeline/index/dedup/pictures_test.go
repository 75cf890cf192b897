package dedup_test

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"slices"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// refNearest is each row's best cosine to any other row and every pair's
// cosine, in float64 from the index's stored values (ReadEmbeds): a
// reference apart from the blocked float16 kernels.
func refNearest(t *testing.T, x *index.Index) (nn []float64, cos func(a, b int) float64) {
	t.Helper()
	n, d := x.Rows(), x.Meta().Dim
	buf, ok := make([]float32, n*d), make([]bool, n)
	if err := x.ReadEmbeds(0, buf, ok); err != nil {
		t.Fatal(err)
	}
	unit := make([]float64, n*d)
	for r := range n {
		s := 0.0
		for _, e := range buf[r*d : (r+1)*d] {
			s += float64(e) * float64(e)
		}
		for j, e := range buf[r*d : (r+1)*d] {
			unit[r*d+j] = float64(e) / math.Sqrt(s)
		}
	}
	cos = func(a, b int) float64 {
		s := 0.0
		for j := range d {
			s += unit[a*d+j] * unit[b*d+j]
		}
		return s
	}
	nn = make([]float64, n)
	for a := range n {
		nn[a] = math.Inf(-1)
		for b := range n {
			if b != a && ok[a] && ok[b] {
				nn[a] = max(nn[a], cos(a, b))
			}
		}
	}
	return nn, cos
}

// TestDedupNearestAndHistogram: every image's nearest-neighbour cosine
// (blocks of 62 rows, two goroutines, float16/float32/int8) is the float64
// reference's within 1e-5, the histogram's counts are the reference's
// binned (a cosine within 1e-5 of a bin's edge may fall either side), and
// Near holds the pairs closest below the threshold, as the reference
// ranks them.
func TestDedupNearestAndHistogram(t *testing.T) {
	const n, d, k = 400, 64, 80
	vec := synthVectors(n, d, k, 1)
	for _, dtype := range []string{index.DTypeF16, index.DTypeF32, index.DTypeInt8} {
		t.Run(dtype, func(t *testing.T) {
			x, err := index.Open(context.Background(), synthIndex(t, t.TempDir(), dtype, vec, d, 150), index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			const th = 0.9
			res, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: th, BlockRows: 62, Workers: 2, NearMargin: 0.05, NearPairs: 5})
			if err != nil {
				t.Fatal(err)
			}
			nn, cos := refNearest(t, x)
			h := res.Histogram()
			want, loose := make([]int, len(h.Counts)), 0
			for r, c := range nn {
				if math.Abs(float64(res.NN[r])-c) > 1e-5 {
					t.Errorf("row %d: nearest cosine %.7f, reference %.7f", r, res.NN[r], c)
				}
				b := (c + 1) / 0.01
				if math.Abs(b-math.Round(b)) < 1e-3 {
					loose++
				}
				want[min(len(want)-1, int(math.Floor(b)))]++
			}
			if h.Images != n || h.Lo != -1 || math.Abs(h.Width-0.01) > 1e-12 {
				t.Errorf("histogram of %d images from %g by %g, want %d from -1 by 0.01", h.Images, h.Lo, h.Width, n)
			}
			diff := 0
			for i := range want {
				diff += max(want[i]-h.Counts[i], h.Counts[i]-want[i])
			}
			if diff > 2*loose {
				t.Errorf("histogram counts differ from the reference's by %d (%d cosines at a bin edge):\n got %v\nwant %v", diff, loose, h.Counts, want)
			}
			var below []float64
			for a := range n {
				for b := a + 1; b < n; b++ {
					if c := cos(a, b); c < th && c >= th-0.05 {
						below = append(below, c)
					}
				}
			}
			slices.Sort(below)
			slices.Reverse(below)
			if len(res.Near) != min(5, len(below)) || len(below) < 5 {
				t.Fatalf("%d pairs near below %g, reference %d", len(res.Near), th, len(below))
			}
			for i, p := range res.Near {
				if c := cos(p.A, p.B); math.Abs(c-below[i]) > 1e-5 || p.Cos >= th {
					t.Errorf("near pair %d: %d %d at %.6f (reference %.6f), want the %d-th closest below %g: %.6f", i, p.A, p.B, p.Cos, c, i+1, th, below[i])
				}
			}
			for _, p := range res.Pairs {
				if p.Cos < th {
					t.Errorf("pair %d %d at %g below the threshold", p.A, p.B, p.Cos)
				}
			}
			checkGroups(t, res, dedup.Star)
			plain, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: th, BlockRows: 62, Workers: 2, NoNearest: true})
			if err != nil {
				t.Fatal(err)
			}
			// Without nearest cosines the tiled search may run (AVX-512),
			// whose float32 sums are in another order: the same pairs, each
			// cosine within 1e-6.
			same := slices.EqualFunc(plain.Pairs, res.Pairs, func(p, q dedup.Pair) bool {
				return p.A == q.A && p.B == q.B && math.Abs(float64(p.Cos-q.Cos)) <= 1e-6
			})
			if plain.NN != nil || !same {
				t.Errorf("NoNearest: NN %v and %d pairs, want none and the same %d pairs", plain.NN != nil, len(plain.Pairs), len(res.Pairs))
			}
			checkPictures(t, x, res, h)
		})
	}
}

// checkPictures checks that the histogram and both sheets decode as PNGs
// of their layout's size, with one label per image drawn.
func checkPictures(t *testing.T, x *index.Index, res *dedup.Result, h dedup.Histogram) {
	t.Helper()
	size := func(name string, b []byte, w, hh int) {
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s := img.Bounds().Size(); s.X != w || s.Y != hh {
			t.Errorf("%s: %v, want %d×%d", name, s, w, hh)
		}
	}
	hp, err := h.PNG()
	if err != nil {
		t.Fatal(err)
	}
	size("histogram", hp, 800, 420)
	g, err := dedup.GroupsSheet(context.Background(), x, res, dedup.SheetOptions{Groups: 3, PerGroup: 4})
	if err != nil {
		t.Fatal(err)
	}
	labels := 0
	groups := slices.Clone(res.Groups)
	slices.SortStableFunc(groups, func(a, b dedup.Group) int { return len(b.Dups) - len(a.Dups) })
	cols := 0
	for _, gr := range groups[:3] {
		labels += min(4, 1+len(gr.Dups))
		cols = max(cols, min(4, 1+len(gr.Dups)))
	}
	if len(g.Labels) != labels {
		t.Errorf("groups sheet: %d labels, want %d", len(g.Labels), labels)
	}
	size("groups sheet", g.PNG, cols*168, 3*196)
	near, err := dedup.NearSheet(context.Background(), x, res, dedup.SheetOptions{Pairs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(near.Labels) != 8 {
		t.Errorf("near sheet: %d labels, want 8 (2 pairs above, 2 below)", len(near.Labels))
	}
	size("near sheet", near.PNG, 2*168, 4*196)
}
