package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/halfdot"
)

// TestBenchDedupAVX2Rows runs the bench with halfdot's AVX2 kernels forced
// and the row-by-row search beside the tiled one: the kernel reported is
// avx2 with no int8 filter, every planted pair is found, and the two
// searches find the same pairs of rows.
func TestBenchDedupAVX2Rows(t *testing.T) {
	if !slices.Contains(halfdot.Impls(), "avx2") {
		t.Skip("no AVX2 kernel on this CPU or in this build")
	}
	code, out, errs := runCLI(t, "dedup", "--n", "2000", "--planted", "40", "--impl", "avx2", "--compare-rows", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r dedupBenchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Kernel != "avx2" || r.Rescored != 0 || r.PlantedFound != 40 || r.TileGFLOPs <= 0 {
		t.Errorf("kernel %q, %d rescored, %d of 40 planted found, tile alone %g GFLOP/s; want avx2, none, 40, some", r.Kernel, r.Rescored, r.PlantedFound, r.TileGFLOPs)
	}
	if r.Rows == nil || !r.Rows.SameRows || r.Rows.Found != r.Found || r.Rows.MaxCosDiff > 1e-5 {
		t.Errorf("row-by-row search: %+v; want the %d pairs of the tiled search, cosines within 1e-5", r.Rows, r.Found)
	}
	if halfdot.Impl() != halfdot.Impls()[0] {
		t.Errorf("halfdot's kernel left at %q after the bench", halfdot.Impl())
	}
}
