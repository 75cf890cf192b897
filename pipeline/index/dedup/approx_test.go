package dedup_test

import (
	"context"
	"math"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// TestDedupApproximateRecall: over 6,000 synthetic 128-wide float16 unit
// vectors, 600 of them near copies (cosines about 0.87–0.999), the
// approximate search (80 clusters, default rounds and probe) finds at
// least 99% of the exact search's pairs at 0.95, every pair it finds is
// an exact pair with the same cosine, and --check-recall over every image
// gives the same recall as counting against the exact search. With
// probe 1 the recall is logged beside probe 2's.
func TestDedupApproximateRecall(t *testing.T) {
	const n, d, k, th = 6000, 128, 600, 0.95
	x, err := index.Open(context.Background(), synthIndex(t, t.TempDir(), index.DTypeF16, synthVectors(n, d, k, 3), d, 2500), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	exact, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: th})
	if err != nil {
		t.Fatal(err)
	}
	want := map[[2]int]float32{}
	for _, p := range exact.Pairs {
		want[[2]int{p.A, p.B}] = p.Cos
	}
	if len(want) < 300 {
		t.Fatalf("%d exact pairs at %g: too few to measure a recall", len(want), th)
	}
	for _, probe := range []int{1, 0} {
		res, err := dedup.Run(context.Background(), x, dedup.Options{Threshold: th, Clusters: 80, Probe: probe, CheckRecall: n, BlockRows: 100})
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, p := range res.Pairs {
			c, ok := want[[2]int{p.A, p.B}]
			if !ok || math.Abs(float64(c-p.Cos)) > 1e-6 {
				t.Errorf("probe %d: pair %d %d (%g) not an exact pair (%g, %v)", probe, p.A, p.B, p.Cos, c, ok)
			}
			found++
		}
		recall := float64(found) / float64(len(want))
		t.Logf("probe %d: %d of %d exact pairs (recall %.4f); sampled recall %+v", probe, found, len(want), recall, *res.Recall)
		if r := res.Recall; r.Sampled != n || r.Exact != 2*len(want) || r.Found != 2*found || math.Abs(r.Ratio-recall) > 1e-12 {
			t.Errorf("probe %d: recall check %+v, want every image, %d pairs counted from both ends, %d found", probe, *r, 2*len(want), 2*found)
		}
		if probe == 0 && recall < 0.99 {
			t.Errorf("default probe: recall %.4f, want 0.99 or more", recall)
		}
		checkGroups(t, res, dedup.Star)
	}
}
