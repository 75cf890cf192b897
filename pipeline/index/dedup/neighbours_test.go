package dedup_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/conditionhq/condition/pipeline/index"
)

// TestIndexNeighboursMatchNumPy: Index.Neighbours of every image of the
// synthetic indexes (float16, float32, int8; parts of 150 rows) finds
// numpy's pairs of that image above the threshold (beyond the golden
// band), only golden pairs, each cosine within 1e-5 of numpy's, most
// alike first, the image itself never; top cuts the list, not the count;
// a row that is no image is ErrNoImage.
func TestIndexNeighboursMatchNumPy(t *testing.T) {
	eachGoldenIndex(t, func(t *testing.T, x *index.Index, g *goldenPairs) {
		golden := map[[2]string]float64{}
		for _, p := range g.Pairs {
			golden[[2]string{p.A, p.B}], golden[[2]string{p.B, p.A}] = p.Cos, p.Cos
		}
		th := float32(g.Threshold)
		total := 0
		for r := range x.Rows() {
			part, it, _ := x.RowItem(r)
			hits, count, err := x.Neighbours(context.Background(), part, it.Row, th, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if count != len(hits) {
				t.Fatalf("%s: %d hits, count %d", it.Path, len(hits), count)
			}
			got := map[string]bool{}
			for i, h := range hits {
				c, ok := golden[[2]string{it.Path, h.Path}]
				if !ok || math.Abs(c-float64(h.Score)) > 1e-5 || h.Path == it.Path || (i > 0 && h.Score > hits[i-1].Score) {
					t.Errorf("%s: neighbour %d %s at %.6f: numpy %.6f (golden %v), want a golden pair, most alike first", it.Path, i, h.Path, h.Score, c, ok)
				}
				got[h.Path] = true
			}
			for pr, c := range golden {
				if pr[0] == it.Path && c >= g.Threshold+g.Band && !got[pr[1]] {
					t.Errorf("%s: numpy's neighbour %s at %.6f not found", it.Path, pr[1], c)
				}
			}
			total += len(hits)
			if len(hits) > 2 {
				top, count, err := x.Neighbours(context.Background(), part, it.Row, th, 2)
				if err != nil || len(top) != 2 || count != len(hits) || top[0].Path != hits[0].Path {
					t.Errorf("%s top 2: %d hits, count %d (%v); want the first 2 of %d", it.Path, len(top), count, err, len(hits))
				}
			}
		}
		if total < 100 {
			t.Errorf("%d neighbours over all images: the test checks too few", total)
		}
		part, _, _ := x.RowItem(0)
		for _, c := range []struct {
			part string
			row  int
		}{{part, -1}, {part, 150}, {"nope", 0}} {
			if _, _, err := x.Neighbours(context.Background(), c.part, c.row, th, 10); !errors.Is(err, index.ErrNoImage) {
				t.Errorf("part %q row %d: %v, want ErrNoImage", c.part, c.row, err)
			}
		}
		if _, _, err := x.Neighbours(context.Background(), part, 0, 0, 10); err == nil {
			t.Error("threshold 0: no error")
		}
	})
}

// BenchmarkIndexNeighbours times Index.Neighbours over 60,000 float16
// rows of 512 (1000 of them near copies), after its first call (which
// computes the rows' norms).
func BenchmarkIndexNeighbours(b *testing.B) {
	const n, d = 60_000, 512
	x, err := index.Open(context.Background(), synthIndex(b, b.TempDir(), index.DTypeF16, synthVectors(n, d, 1000, 2), d, n), index.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	part, _, _ := x.RowItem(0)
	if _, _, err := x.Neighbours(context.Background(), part, 0, 0.96, 10); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, _, err := x.Neighbours(context.Background(), part, i*997%n, 0.96, 10); err != nil {
			b.Fatal(err)
		}
	}
}
