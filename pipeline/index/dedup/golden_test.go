package dedup_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// goldenPairs is what scripts/dedup_pairs/dedup_pairs.py writes: the
// pairs of cosine ≥ Threshold − Band, by path, from numpy in float64.
type goldenPairs struct {
	Threshold float64 `json:"threshold"`
	Band      float64 `json:"band"`
	Images    int     `json:"images"`
	Pairs     []struct {
		A   string  `json:"a"`
		B   string  `json:"b"`
		Cos float64 `json:"cos"`
	} `json:"pairs"`
}

func readGolden(t *testing.T, name string) *goldenPairs {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("%v (make it with scripts/dedup_pairs/dedup_pairs.py over the index this test writes with -dedup.keep DIR)", err)
	}
	var g goldenPairs
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// pathOf returns row r's path.
func pathOf(t *testing.T, x *index.Index, r int) string {
	t.Helper()
	_, it, ok := x.RowItem(r)
	if !ok {
		t.Fatalf("row %d: not an image read and encoded", r)
	}
	return it.Path
}

// comparePairs checks res's pairs against the golden ones: every golden
// pair above the threshold by more than the band is found, every pair
// found is golden (so at least the threshold less the band), with its
// cosine within tol of numpy's.
func comparePairs(t *testing.T, x *index.Index, res *dedup.Result, g *goldenPairs, tol float64) {
	t.Helper()
	if res.Images != g.Images {
		t.Errorf("%d images compared, numpy %d", res.Images, g.Images)
	}
	want := map[[2]string]float64{}
	for _, p := range g.Pairs {
		want[[2]string{p.A, p.B}] = p.Cos
	}
	got := map[[2]string]bool{}
	for _, p := range res.Pairs {
		a, b := pathOf(t, x, p.A), pathOf(t, x, p.B)
		if b < a {
			a, b = b, a
		}
		k := [2]string{a, b}
		got[k] = true
		c, ok := want[k]
		switch {
		case !ok:
			t.Errorf("pair %s %s (cosine %.6f) is not one of numpy's (cosine ≥ %g)", a, b, p.Cos, g.Threshold-g.Band)
		case math.Abs(float64(p.Cos)-c) > tol:
			t.Errorf("pair %s %s: cosine %.7f, numpy %.7f", a, b, p.Cos, c)
		}
	}
	missed := 0
	for k, c := range want {
		if c >= g.Threshold+g.Band && !got[k] {
			missed++
			if missed <= 10 {
				t.Errorf("numpy's pair %s %s (cosine %.6f) not found", k[0], k[1], c)
			}
		}
	}
	if missed > 10 {
		t.Errorf("… %d pairs missed in all", missed)
	}
	t.Logf("%d pairs found, numpy %d within %g of %g", len(res.Pairs), len(g.Pairs), g.Band, g.Threshold)
}

// checkGroups checks the groups' invariants: no image in two groups;
// with Star every duplicate at the threshold or more from its kept image
// (its pair's cosine), and of every pair at least one image dropped (the
// images kept hold no pair); with Components every pair's images in one
// group.
func checkGroups(t *testing.T, res *dedup.Result, grouping dedup.Grouping) {
	t.Helper()
	in, dropped := map[int]int{}, map[int]bool{}
	for gi, g := range res.Groups {
		if len(g.Dups) == 0 {
			t.Errorf("group %d: no duplicates", gi)
		}
		for _, r := range append([]int{g.Keep}, rowsOf(g.Dups)...) {
			if prev, ok := in[r]; ok {
				t.Errorf("row %d in groups %d and %d", r, prev, gi)
			}
			in[r] = gi
		}
		for _, m := range g.Dups {
			dropped[m.Row] = true
			if grouping == dedup.Star && m.Cos < res.Threshold {
				t.Errorf("group of %d: row %d at cosine %g, below the threshold %g", g.Keep, m.Row, m.Cos, res.Threshold)
			}
		}
	}
	for _, p := range res.Pairs {
		ga, oka := in[p.A]
		gb, okb := in[p.B]
		switch grouping {
		case dedup.Star:
			if !dropped[p.A] && !dropped[p.B] {
				t.Errorf("pair %d %d (%g): both kept", p.A, p.B, p.Cos)
			}
		case dedup.Components:
			if !oka || !okb || ga != gb {
				t.Errorf("pair %d %d (%g): not in one group", p.A, p.B, p.Cos)
			}
		}
	}
}

func rowsOf(ms []dedup.Member) []int {
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = m.Row
	}
	return out
}

// TestDedupSyntheticMatchesNumPy: over 400 synthetic 64-wide unit vectors
// (planted near copies and chains among independent ones) stored as
// float16, float32 and int8 in three parts, compared in blocks of 62 rows
// (whole fours and the rest) on two goroutines, the pairs at 0.9 are
// numpy's brute force over the same stored values, and both groupings
// keep their invariants.
func TestDedupSyntheticMatchesNumPy(t *testing.T) {
	const n, d, k = 400, 64, 80
	vec := synthVectors(n, d, k, 1)
	for _, dtype := range []string{index.DTypeF16, index.DTypeF32, index.DTypeInt8} {
		t.Run(dtype, func(t *testing.T) {
			dir := t.TempDir()
			if *keep != "" {
				dir = filepath.Join(*keep, "synthetic-"+dtype)
			}
			synthIndex(t, dir, dtype, vec, d, 150)
			x, err := index.Open(context.Background(), dir, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			g := readGolden(t, fmt.Sprintf("synthetic-%s.json", dtype))
			for _, grouping := range []dedup.Grouping{dedup.Star, dedup.Components} {
				for _, kr := range []dedup.Keep{dedup.KeepFirst, dedup.KeepCentral} {
					res, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: float32(g.Threshold), BlockRows: 62, Workers: 2, Group: grouping, Keep: kr})
					if err != nil {
						t.Fatal(err)
					}
					comparePairs(t, x, res, g, 1e-5)
					checkGroups(t, res, grouping)
				}
			}
		})
	}
}

// TestDedupLimits: too many pairs, a bad option and a cancelled context
// are errors naming them; progress reaches every block pair.
func TestDedupLimits(t *testing.T) {
	const d = 64
	dir := synthIndex(t, t.TempDir(), index.DTypeF16, synthVectors(400, d, 80, 1), d, 150)
	x, err := index.Open(context.Background(), dir, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: 0.5, MaxPairs: 10, BlockRows: 16}); err == nil || !strings.Contains(err.Error(), "more than 10 pairs of cosine ≥ 0.5") {
		t.Errorf("10 pairs at most: %v", err)
	}
	for _, o := range []dedup.Options{{Threshold: 1.5}, {Threshold: -0.1}, {Keep: dedup.KeepLargest}, {Group: 7}, {BlockRows: -1}} {
		if _, err := dedup.Run(context.Background(), x, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := dedup.Run(context.Background(), x, dedup.Options{Keep: dedup.KeepLargest}); !errors.Is(err, dedup.ErrNoSizes) {
		t.Errorf("keep largest: %v, want ErrNoSizes", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dedup.Run(ctx, x, dedup.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	var last, total int
	if _, err := dedup.Run(context.Background(), x, dedup.Options{BlockRows: 50, Progress: func(d, n int) { last, total = d, n }}); err != nil {
		t.Fatal(err)
	}
	if last != 36 || total != 36 {
		t.Errorf("progress ended at %d of %d, want 36 of 36 (8 blocks)", last, total)
	}
}
