package dedup

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/internal/halfdot"
)

// memVectors is every row of an index in memory, as stored: float16 bits
// (an index of float16) or float32 (float32, and int8 times its scale).
type memVectors struct {
	d   int
	f16 []uint16
	f32 []float32
}

// unit writes row r as float32, normalised, into dst [D].
func (m *memVectors) unit(v *vectors, r int, dst []float32) {
	s, d := v.inv[r], m.d
	if m.f16 != nil {
		for j, h := range m.f16[r*d : (r+1)*d] {
			dst[j] = halfdot.ToFloat32(h) * s
		}
		return
	}
	for j, e := range m.f32[r*d : (r+1)*d] {
		dst[j] = e * s
	}
}

// kmeans is a spherical k-means of the images' unit vectors: centroids
// [K padded to a multiple of 4, D], unit length (the padding zero).
type kmeans struct {
	k, d int
	cent []float32
}

// newKMeans starts k centroids at k distinct images drawn with a fixed
// seed (random initialisation, not k-means++: one pass fewer over the
// rows, and as good here after the iterations; see docs/dedup.md).
func newKMeans(m *memVectors, v *vectors, k int, seed uint64) *kmeans {
	rows := make([]int, 0, v.images)
	for r := range v.n {
		if v.ok[r] {
			rows = append(rows, r)
		}
	}
	k = min(k, len(rows))
	km := &kmeans{k: k, d: v.d, cent: make([]float32, (k+3)/4*4*v.d)}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for c := range k {
		i := c + rng.IntN(len(rows)-c)
		rows[c], rows[i] = rows[i], rows[c]
		m.unit(v, rows[c], km.cent[c*v.d:(c+1)*v.d])
	}
	return km
}

// nearest2 returns the index of row r's nearest centroid and its second
// nearest (−1 with one centroid), by cosine; buf is [D] scratch.
func (km *kmeans) nearest2(m *memVectors, v *vectors, r int, buf []float32) (best, second int32) {
	d := km.d
	best, second = -1, -1
	var bs, ss float32 = -3, -3
	take := func(c int, s float32) {
		if c >= km.k {
			return
		}
		if s > bs {
			second, ss, best, bs = best, bs, int32(c), s
		} else if s > ss {
			second, ss = int32(c), s
		}
	}
	if m.f16 != nil {
		row := m.f16[r*d : (r+1)*d]
		var out [4]float32
		for c := 0; c < km.k; c += 4 {
			halfdot.Dot4(row, km.cent[c*d:], d, &out)
			for i, s := range out {
				take(c+i, s)
			}
		}
		return best, second
	}
	m.unit(v, r, buf)
	for c := range km.k {
		take(c, halfdot.DotFloat32(buf, km.cent[c*d:(c+1)*d]))
	}
	return best, second
}

// assign sets best[r] and second[r] for every image (−1 for a failed one)
// on workers goroutines, and, when update, moves each centroid to the
// normalised mean of its images (a centroid with none stays). Each
// centroid's images are summed in row order, whatever the workers: the
// same index and seed give the same clusters on any machine and in every
// process of a split search.
func (km *kmeans) assign(m *memVectors, v *vectors, workers int, best, second []int32, update bool) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			buf := make([]float32, km.d)
			for r := w * v.n / workers; r < (w+1)*v.n/workers; r++ {
				if !v.ok[r] {
					best[r], second[r] = -1, -1
					continue
				}
				best[r], second[r] = km.nearest2(m, v, r, buf)
			}
		})
	}
	wg.Wait()
	if update {
		km.update(m, v, workers, best)
	}
}

// update moves each centroid to the normalised sum of its images (by
// best), summed in row order, the centroids shared among workers.
func (km *kmeans) update(m *memVectors, v *vectors, workers int, best []int32) {
	d := km.d
	off := make([]int, km.k+1)
	for _, c := range best {
		if c >= 0 {
			off[c+1]++
		}
	}
	for c := range km.k {
		off[c+1] += off[c]
	}
	rows, at := make([]int, off[km.k]), slices.Clone(off[:km.k])
	for r, c := range best {
		if c >= 0 {
			rows[at[c]] = r
			at[c]++
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			buf, s := make([]float32, d), make([]float32, d)
			for {
				c := int(next.Add(1) - 1)
				if c >= km.k {
					return
				}
				clear(s)
				for _, r := range rows[off[c]:off[c+1]] {
					m.unit(v, r, buf)
					for j, e := range buf {
						s[j] += e
					}
				}
				if n := norm(s); n > 0 {
					for j, e := range s {
						km.cent[c*d+j] = e / n
					}
				}
			}
		})
	}
	wg.Wait()
}

// norm returns ‖s‖.
func norm(s []float32) float32 {
	return float32(math.Sqrt(float64(halfdot.DotFloat32(s, s))))
}

// defaultWorkers is n, or GOMAXPROCS when n is 0.
func defaultWorkers(n int) int {
	if n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}
