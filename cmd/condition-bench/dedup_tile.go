package main

import (
	"math/rand/v2"
	"time"

	"github.com/conditionhq/condition/internal/halfdot"
)

// tileAloneGFLOPS measures halfdot.Tile alone on one goroutine over two
// packed panels of random d-wide rows (the same panels again and again,
// in L1 and L2) for about dur, in GFLOP/s (2·d per product): the best of
// many short timed runs, as the peak is measured, so that on a shared
// machine it estimates one unshared core. 0 without a tile kernel.
func tileAloneGFLOPS(d int, dur time.Duration) float64 {
	if !halfdot.HasTileKernel() || d < 1 {
		return 0
	}
	const tr, tc = halfdot.TileRows, halfdot.TileCols
	rng := rand.New(rand.NewPCG(1, 2))
	a := make([]float32, halfdot.PackedLen(tr, d, tr))
	b := make([]float32, halfdot.PackedLen(tc, d, tc))
	for i := range a {
		a[i] = float32(rng.NormFloat64()) / 23
	}
	for i := range b {
		b[i] = float32(rng.NormFloat64()) / 23
	}
	var out [tr * tc]float32
	calls := max(1, 200_000/d) // about 100 µs a run at peak
	best := 0.0
	for deadline := time.Now().Add(dur); time.Now().Before(deadline); {
		t0 := time.Now()
		for range calls {
			halfdot.Tile(a, b, d, 2, &out)
		}
		if el := time.Since(t0).Seconds(); el > 0 {
			best = max(best, float64(calls)*tr*tc*2*float64(d)/el/1e9)
		}
	}
	return best
}
