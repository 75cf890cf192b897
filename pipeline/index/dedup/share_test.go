package dedup_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// runShares runs the n shares of the search of x with o, writes each part
// into dir/part-I and reads them back.
func runShares(t *testing.T, x *index.Index, dir string, o dedup.Options, n int) []*dedup.Part {
	t.Helper()
	var parts []*dedup.Part
	for i := range n {
		p, err := dedup.RunShare(context.Background(), x, "synthetic", o, dedup.Share{Index: i, Count: n})
		if err != nil {
			t.Fatalf("share %d of %d: %v", i, n, err)
		}
		name := filepath.Join(dir, fmt.Sprintf("part-%d", i))
		if err := p.Write(name); err != nil {
			t.Fatal(err)
		}
		back, err := dedup.ReadPart(name)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, back)
	}
	return parts
}

// TestDedupSharesMatchWholeSearch: the exact search split into 1, 3 and 7
// shares (blocks of 16 rows, one and two workers), its parts written,
// read back and merged, gives the pairs of numpy's brute force and
// exactly the pairs, cosines and groups of the whole search, for each
// dtype, grouping and keep rule, and with the pictures' data the same
// nearest cosines and pairs below the threshold; the shares' rows tile
// the index.
func TestDedupSharesMatchWholeSearch(t *testing.T) {
	const n, d, k = 400, 64, 80
	vec := synthVectors(n, d, k, 1)
	for _, dtype := range []string{index.DTypeF16, index.DTypeF32, index.DTypeInt8} {
		t.Run(dtype, func(t *testing.T) {
			dir := synthIndex(t, t.TempDir(), dtype, vec, d, 150)
			x, err := index.Open(context.Background(), dir, index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			g := readGolden(t, fmt.Sprintf("synthetic-%s.json", dtype))
			for _, shares := range []int{1, 3, 7} {
				o := dedup.Options{Threshold: float32(g.Threshold), BlockRows: 16, Workers: 1 + shares%2, NoNearest: true}
				parts := runShares(t, x, t.TempDir(), o, shares)
				next := 0
				for _, p := range parts {
					if p.RowsFrom != next || p.RowsTo < p.RowsFrom {
						t.Fatalf("%d shares: share %d covers rows [%d, %d), want from %d", shares, p.Share, p.RowsFrom, p.RowsTo, next)
					}
					next = p.RowsTo
				}
				if next != n {
					t.Fatalf("%d shares cover rows up to %d of %d", shares, next, n)
				}
				for _, grouping := range []dedup.Grouping{dedup.Star, dedup.Components} {
					for _, kr := range []dedup.Keep{dedup.KeepFirst, dedup.KeepCentral} {
						o.Group, o.Keep = grouping, kr
						whole, err := dedup.Run(context.Background(), x, o)
						if err != nil {
							t.Fatal(err)
						}
						merged, err := dedup.Merge(context.Background(), x, parts, grouping, kr)
						if err != nil {
							t.Fatal(err)
						}
						comparePairs(t, x, merged, g, 1e-5)
						if !reflect.DeepEqual(merged.Pairs, whole.Pairs) || !reflect.DeepEqual(merged.Groups, whole.Groups) {
							t.Errorf("%d shares, %v, keep %v: merged %d pairs, %d groups; whole search %d pairs, %d groups (or their rows or cosines differ)",
								shares, grouping, kr, len(merged.Pairs), len(merged.Groups), len(whole.Pairs), len(whole.Groups))
						}
						checkGroups(t, merged, grouping)
					}
				}
				// With the pictures' nearest cosines and pairs below T.
				o.NoNearest, o.NearMargin = false, 0.02
				whole, err := dedup.Run(context.Background(), x, o)
				if err != nil {
					t.Fatal(err)
				}
				merged, err := dedup.Merge(context.Background(), x, runShares(t, x, t.TempDir(), o, shares), o.Group, o.Keep)
				if err != nil {
					t.Fatal(err)
				}
				if !sameFloats(merged.NN, whole.NN) || !reflect.DeepEqual(merged.Near, whole.Near) || !reflect.DeepEqual(merged.Pairs, whole.Pairs) || len(whole.Near) == 0 {
					t.Errorf("%d shares with nearest cosines: merged %d near pairs, %d pairs; whole %d, %d (or the nearest cosines differ)", shares, len(merged.Near), len(merged.Pairs), len(whole.Near), len(whole.Pairs))
				}
			}
		})
	}
}

// sameFloats reports whether a and b hold the same values, NaN equal to
// NaN.
func sameFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			return false
		}
	}
	return true
}

// TestDedupSharesApproximate: with clusters, every share makes the same
// k-means (whatever its workers), the shares' clusters are each dealt to
// one share, and the merged pairs and groups are the whole approximate
// search's; a share of another halfdot kernel is refused.
func TestDedupSharesApproximate(t *testing.T) {
	const n, d, k = 400, 64, 80
	dir := synthIndex(t, t.TempDir(), index.DTypeF16, synthVectors(n, d, k, 1), d, 150)
	x, err := index.Open(context.Background(), dir, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	o := dedup.Options{Threshold: 0.9, Clusters: 6, BlockRows: 16, Workers: 2, NoNearest: true}
	whole, err := dedup.Run(context.Background(), x, o)
	if err != nil {
		t.Fatal(err)
	}
	parts := runShares(t, x, t.TempDir(), o, 3)
	o.Workers = 1
	parts[1], err = dedup.RunShare(context.Background(), x, "synthetic", o, dedup.Share{Index: 1, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	parts[1].Name = "share 1, one worker"
	seen := map[int]int{}
	for _, p := range parts {
		for _, c := range p.ClusterList {
			seen[c]++
		}
	}
	if len(seen) != 6 {
		t.Errorf("clusters dealt: %v, want each of 6 once", seen)
	}
	for c, m := range seen {
		if m != 1 {
			t.Errorf("cluster %d dealt to %d shares", c, m)
		}
	}
	merged, err := dedup.Merge(context.Background(), x, parts, dedup.Star, dedup.KeepFirst)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Pairs) < 50 {
		t.Fatalf("only %d pairs at 0.9: the test needs more", len(whole.Pairs))
	}
	if !reflect.DeepEqual(merged.Pairs, whole.Pairs) || !reflect.DeepEqual(merged.Groups, whole.Groups) {
		t.Errorf("merged %d pairs, %d groups; whole search %d pairs, %d groups (or their rows or cosines differ)", len(merged.Pairs), len(merged.Groups), len(whole.Pairs), len(whole.Groups))
	}
	other := *parts[2]
	other.Kernel, other.Name = "another", "share 2 on another CPU"
	if _, err := dedup.Merge(context.Background(), x, []*dedup.Part{parts[0], parts[1], &other}, dedup.Star, dedup.KeepFirst); err == nil || !strings.Contains(err.Error(), `share 2 on another CPU clustered with halfdot's "another" kernel`) {
		t.Errorf("a share clustered with another kernel: %v", err)
	}
}

// TestDedupMergeRefusals: a share missing or given twice, parts of
// another threshold, of other settings or of another index are refused,
// naming the parts.
func TestDedupMergeRefusals(t *testing.T) {
	const d = 64
	vec := synthVectors(400, d, 80, 1)
	x := func(vec []float32) *index.Index {
		x, err := index.Open(context.Background(), synthIndex(t, t.TempDir(), index.DTypeF16, vec, d, 150), index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Close() })
		return x
	}
	x1 := x(vec)
	other := append([]float32(nil), vec...)
	other[5] *= 2 // one row's norm differs
	x2 := x(other)
	o := dedup.Options{Threshold: 0.9, BlockRows: 16}
	parts := runShares(t, x1, t.TempDir(), o, 3)
	o.Threshold = 0.95
	higher := runShares(t, x1, t.TempDir(), o, 3)
	o.Threshold, o.BlockRows = 0.9, 32
	blocks := runShares(t, x1, t.TempDir(), o, 3)
	for _, c := range []struct {
		name  string
		x     *index.Index
		parts []*dedup.Part
		want  []string
	}{
		{"missing", x1, parts[:2], []string{"share 2 of 3", "missing", parts[0].Name}},
		{"twice", x1, []*dedup.Part{parts[0], parts[1], parts[1], parts[2]}, []string{parts[1].Name, "both share 1 of 3"}},
		{"threshold", x1, []*dedup.Part{parts[0], higher[1], parts[2]}, []string{higher[1].Name, "threshold 0.95", parts[0].Name}},
		{"settings", x1, []*dedup.Part{parts[0], blocks[1], parts[2]}, []string{blocks[1].Name, "blocks of 32 rows"}},
		{"index", x2, parts, []string{parts[0].Name, "another index"}},
		{"none", x1, nil, []string{"no part"}},
	} {
		_, err := dedup.Merge(context.Background(), c.x, c.parts, dedup.Star, dedup.KeepFirst)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, w)
			}
		}
	}
	if _, err := dedup.RunShare(context.Background(), x1, "x", dedup.Options{}, dedup.Share{Index: 3, Count: 3}); err == nil || !strings.Contains(err.Error(), "share 3 of 3") {
		t.Errorf("share 3 of 3: %v", err)
	}
	if err := parts[0].Write(parts[0].Name); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("writing over a part: %v", err)
	}
}
