package dedup_test

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// TestDedupNearestSampled: above the bound of exact nearest cosines
// (lowered to 100 images, a sample of 150 of 400), the sampled images'
// nearest cosines are the float64 reference's within 1e-5, every other
// image has none, the histogram counts the sample and says so, the pairs
// (bit for bit) and groups are those of the search without pictures, and
// Near holds the pairs closest below the threshold, as the reference ranks
// them. Without the tile kernel every image's nearest cosine is kept.
func TestDedupNearestSampled(t *testing.T) {
	defer dedup.SetNearestSample(100, 150)()
	const n, d, k, th, margin = 400, 64, 80, 0.9, 0.05
	vec := synthVectors(n, d, k, 3)
	for _, dtype := range []string{index.DTypeF16, index.DTypeF32, index.DTypeInt8} {
		t.Run(dtype, func(t *testing.T) {
			x, err := index.Open(context.Background(), synthIndex(t, t.TempDir(), dtype, vec, d, 150), index.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			res := runDedup(t, x, dedup.Options{Threshold: th, BlockRows: 62, Workers: 2, NearMargin: margin, NearPairs: 5})
			plain := runDedup(t, x, dedup.Options{Threshold: th, BlockRows: 62, Workers: 2, NoNearest: true})
			want := 150
			if !halfdot.HasTileKernel() {
				want = 0
			}
			if res.Sampled != want {
				t.Fatalf("Sampled %d, want %d", res.Sampled, want)
			}
			nn, cos := refNearest(t, x)
			measured := 0
			for r, c := range res.NN {
				if c != c {
					continue
				}
				measured++
				if math.Abs(float64(c)-nn[r]) > 1e-5 {
					t.Errorf("row %d: nearest cosine %.7f, reference %.7f", r, c, nn[r])
				}
			}
			if want > 0 && measured != want || want == 0 && measured != res.Images {
				t.Errorf("%d rows with a nearest cosine, want %d (sampled) of %d images", measured, want, res.Images)
			}
			h := res.Histogram()
			sum := 0
			for _, c := range h.Counts {
				sum += c
			}
			if want > 0 && (h.Sampled != want || h.Images != res.Images || sum != want) {
				t.Errorf("histogram: sampled %d, images %d, counts summing to %d; want %d of %d, summing to %d", h.Sampled, h.Images, sum, want, res.Images, want)
			}
			if !slices.Equal(res.Pairs, plain.Pairs) || !reflect.DeepEqual(res.Groups, plain.Groups) || len(res.Pairs) == 0 {
				t.Errorf("%d pairs, %d groups; without pictures %d pairs, %d groups: want the same (and some)", len(res.Pairs), len(res.Groups), len(plain.Pairs), len(plain.Groups))
			}
			var below []float64
			for a := range n {
				for b := a + 1; b < n; b++ {
					if c := cos(a, b); c < th && c >= th-margin {
						below = append(below, c)
					}
				}
			}
			slices.Sort(below)
			slices.Reverse(below)
			if len(below) < 5 || len(res.Near) != 5 {
				t.Fatalf("%d pairs near below %g, reference %d", len(res.Near), th, len(below))
			}
			for i, p := range res.Near {
				if c := cos(p.A, p.B); math.Abs(c-below[i]) > 1e-5 || p.Cos >= th {
					t.Errorf("near pair %d: %d %d at %.6f (reference %.6f), want the %d-th closest below %g: %.6f", i, p.A, p.B, p.Cos, c, i+1, th, below[i])
				}
			}
			b, err := h.PNG()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("histogram PNG: %v", err)
			}
		})
	}
}
