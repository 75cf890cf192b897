package dedup

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// exactNearestMax is the most images whose nearest cosines the exact search
// keeps for every image (the row-by-row searcher, which tracks them as it
// goes); above it, where halfdot has its tile kernel, the fast searcher runs
// and the nearest cosines are those of a sample of nearestSample images.
// Up to 50,000 images every image's costs seconds (N²/2 dot products at
// about a sixth of the fast search's rate); above, the fast search and the
// sample (nearestSample·N dot products in halfdot.Tile) cost less, the more
// so as N grows. Variables, not constants, so that tests can lower them.
var (
	exactNearestMax = 50_000
	nearestSample   = 20_000
)

// sampleNearest says Run takes the nearest cosines from a sample: the
// exact search, nearest cosines asked for, more than exactNearestMax
// images and the tile kernel there.
func sampleNearest(v *vectors, o Options) bool {
	return !o.NoNearest && o.Clusters == 0 && v.images > exactNearestMax && halfdot.HasTileKernel()
}

// drawRows returns n of v's images (all of them when fewer), drawn with
// DefaultSeed on the given stream of the generator, in the order drawn.
func drawRows(v *vectors, n int, stream uint64) []int {
	rows := make([]int, 0, v.images)
	for r := range v.n {
		if v.ok[r] {
			rows = append(rows, r)
		}
	}
	n = min(n, len(rows))
	rng := rand.New(rand.NewPCG(DefaultSeed, stream))
	for i := range n {
		j := i + rng.IntN(len(rows)-i)
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows[:n]
}

// sampleBlock is the rows of x a goroutine reads and packs at a time for
// nearestOfSample: a multiple of halfdot.TileCols.
const sampleBlock = 8 * halfdot.TileCols

// nearestOfSample returns each row's nearest cosine for nearestSample
// images drawn with a fixed seed, NaN for every other row, and how many
// were drawn: the drawn images, normalised and packed once as panels of
// halfdot.TileRows, meet every image of x, read in blocks of sampleBlock
// rows on workers goroutines, in halfdot.Tile (float32, as the tiled
// search compares).
func nearestOfSample(ctx context.Context, x *index.Index, v *vectors, workers int) ([]float32, int, error) {
	const tr, tc = halfdot.TileRows, halfdot.TileCols
	d := v.d
	sample := drawRows(v, nearestSample, 0x5a3)
	slices.Sort(sample) // read in index order
	s := len(sample)
	packed := make([]float32, halfdot.PackedLen(s, d, tr))
	rows, scale := make([]float32, tr*d), make([]float32, tr)
	for p0 := 0; p0 < s; p0 += tr {
		k := min(tr, s-p0)
		for i, r := range sample[p0 : p0+k] {
			if err := x.ReadEmbeds(r, rows[i*d:(i+1)*d], nil); err != nil {
				return nil, 0, err
			}
			scale[i] = v.inv[r]
		}
		halfdot.Pack(packed[p0*d:], rows, scale, k, d, tr)
	}
	best := make([]float32, s)
	for i := range best {
		best[i] = noCos
	}
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			local := make([]float32, s) // merged into best under mu at the end
			for i := range local {
				local[i] = noCos
			}
			buf, pb := make([]float32, sampleBlock*d), make([]float32, halfdot.PackedLen(sampleBlock, d, tc))
			var out [tr * tc]float32
			for {
				b0 := int(next.Add(sampleBlock) - sampleBlock)
				if b0 >= v.n || ctx.Err() != nil {
					break
				}
				kb := min(sampleBlock, v.n-b0)
				if err := x.ReadEmbeds(b0, buf[:kb*d], nil); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					break
				}
				halfdot.Pack(pb, buf, v.inv[b0:b0+kb], kb, d, tc)
				for p := 0; p*tr < s; p++ { // each panel of the sample once a block
					pa := packed[p*tr*d : (p+1)*tr*d]
					for q := 0; q*tc < kb; q++ {
						nb := min(tc, kb-q*tc)
						halfdot.Tile(pa, pb[q*tc*d:(q+1)*tc*d], d, 2, &out)
						for r := range min(tr, s-p*tr) {
							i := p*tr + r
							local[i] = rowBest(v, out[r*tc:r*tc+nb], local[i], sample[i], b0+q*tc)
						}
					}
				}
			}
			mu.Lock()
			for i, c := range local {
				best[i] = max(best[i], c)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	nn := make([]float32, v.n)
	for i := range nn {
		nn[i] = float32(math.NaN())
	}
	for i, r := range sample {
		if best[i] > noCos {
			nn[r] = best[i]
		}
	}
	return nn, s, nil
}

// rowBest returns the larger of m and the cosines in cos (of row ra with
// rows rb0, rb0+1, …) of an image other than ra itself.
func rowBest(v *vectors, cos []float32, m float32, ra, rb0 int) float32 {
	for c, x := range cos {
		if x > m && rb0+c != ra && v.ok[rb0+c] {
			m = x
		}
	}
	return m
}
