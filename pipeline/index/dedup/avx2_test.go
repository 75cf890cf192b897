package dedup_test

import (
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// TestDedupAVX2TileMatchesNumPy: with halfdot's AVX2 kernels forced (an
// AVX2-only CPU's search: the tiled one, no int8 filter), the synthetic
// indexes' pairs at 0.9 are numpy's, and, where the CPU also has
// AVX-512, the very pairs (cosines to the bit) of its float32 tiled
// search; blocks of 62 rows on two goroutines.
func TestDedupAVX2TileMatchesNumPy(t *testing.T) {
	if !slices.Contains(halfdot.Impls(), "avx2") {
		t.Skip("no AVX2 kernel on this CPU or in this build")
	}
	eachGoldenIndex(t, func(t *testing.T, x *index.Index, g *goldenPairs) {
		o := dedup.Options{Threshold: float32(g.Threshold), BlockRows: 62, Workers: 2, NoNearest: true, NoFilter: true}
		var want *dedup.Result
		if halfdot.Impl() == "avx512" {
			want = runDedup(t, x, o)
		}
		restore, err := halfdot.SetImpl("avx2")
		if err != nil {
			t.Fatal(err)
		}
		if !halfdot.HasTileKernel() || halfdot.HasInt8TileKernel() {
			restore()
			t.Fatalf("AVX2 forced: tile kernel %v, int8 tile %v; want the tile alone", halfdot.HasTileKernel(), halfdot.HasInt8TileKernel())
		}
		o.NoFilter = false
		res := runDedup(t, x, o)
		restore()
		if res.Rescored != 0 {
			t.Errorf("AVX2 forced: %d pairs rescored, want no int8 filter", res.Rescored)
		}
		comparePairs(t, x, res, g, 1e-5)
		if want != nil && !slices.Equal(res.Pairs, want.Pairs) {
			t.Errorf("AVX2 tile: %d pairs, AVX-512 tile %d: not the same pairs and cosines", len(res.Pairs), len(want.Pairs))
		}
	})
}
