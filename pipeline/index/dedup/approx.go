package dedup

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultProbe is Options.Probe when 0: each image compared within its
// nearest cluster and its second nearest.
const DefaultProbe = 2

// DefaultIterations is Options.Iterations when 0.
const DefaultIterations = 5

// DefaultSeed is the seed of the k-means initialisation and of the recall
// sample.
const DefaultSeed = 1

// approx is the state of the approximate search: the rows in memory, each
// image's nearest and second nearest cluster.
type approx struct {
	m              *memVectors
	best, second   []int32
	prim, sec      [][]int // each cluster's images: nearest, second nearest
	clusterOrder   []int   // largest first
	workers, probe int
}

// approxPairs is findPairs for Options.Clusters > 0: a spherical k-means
// of the images (Options.Iterations rounds from random images), then the
// exact pairs of each cluster's images (its nearest) with each other and
// with the images whose second nearest it is (Options.Probe 2).
func approxPairs(ctx context.Context, m *memVectors, v *vectors, o Options, nn *nearest) ([]Pair, *approx, error) {
	a, err := newApprox(ctx, m, v, o)
	if err != nil {
		return nil, nil, err
	}
	pairs, err := a.search(ctx, v, o, nn)
	return pairs, a, err
}

// newApprox clusters the images of m, every row in memory: the
// same clusters, in the same order, from the same index and options,
// whatever the machine or its workers.
func newApprox(ctx context.Context, m *memVectors, v *vectors, o Options) (*approx, error) {
	a := &approx{m: m, best: make([]int32, v.n), second: make([]int32, v.n), workers: defaultWorkers(o.Workers), probe: o.Probe}
	km := newKMeans(m, v, o.Clusters, DefaultSeed)
	for range o.Iterations {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		km.assign(m, v, a.workers, a.best, a.second, true)
	}
	km.assign(m, v, a.workers, a.best, a.second, false)
	a.prim, a.sec = make([][]int, km.k), make([][]int, km.k)
	for r := range v.n {
		if a.best[r] >= 0 {
			a.prim[a.best[r]] = append(a.prim[a.best[r]], r)
		}
		if a.probe > 1 && a.second[r] >= 0 {
			a.sec[a.second[r]] = append(a.sec[a.second[r]], r)
		}
	}
	a.clusterOrder = make([]int, km.k)
	for c := range a.clusterOrder {
		a.clusterOrder[c] = c
	}
	slices.SortStableFunc(a.clusterOrder, func(p, q int) int { return len(a.prim[q]) - len(a.prim[p]) })
	return a, nil
}

// search compares the clusters on a.workers goroutines, largest first,
// and returns the pairs, each once, in (A, B) order.
func (a *approx) search(ctx context.Context, v *vectors, o Options, nn *nearest) ([]Pair, error) {
	var next, found atomic.Int64
	var mu sync.Mutex
	var firstErr error
	done, total := 0, len(a.clusterOrder)
	out := make([][]Pair, a.workers)
	var wg sync.WaitGroup
	for w := range a.workers {
		wg.Go(func() {
			bs := o.BlockRows
			blk := &block{a: make([]float32, bs*v.d), amax: make([]float32, bs), bmax: make([]float32, bs), track: nn != nil}
			if v.f16 {
				blk.b16 = make([]uint16, bs*v.d)
			} else {
				blk.b32 = make([]float32, bs*v.d)
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= total || ctx.Err() != nil {
					return
				}
				c := a.clusterOrder[i]
				before := len(out[w])
				out[w] = a.cluster(v, blk, c, o.Threshold, nn, out[w])
				mu.Lock()
				if found.Add(int64(len(out[w])-before)) > int64(o.MaxPairs) && firstErr == nil {
					firstErr = fmt.Errorf("dedup: more than %d pairs of cosine ≥ %g: the threshold is too low for this collection (or raise the pair limit)", o.MaxPairs, o.Threshold)
				}
				done++
				if o.Progress != nil {
					o.Progress(done, total)
				}
				stop := firstErr != nil
				mu.Unlock()
				if stop {
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var all []Pair
	for _, p := range out {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(p, q Pair) int {
		if p.A != q.A {
			return p.A - q.A
		}
		return p.B - q.B
	})
	// a pair of two images each in the other's second cluster is found twice
	return slices.CompactFunc(all, func(p, q Pair) bool { return p.A == q.A && p.B == q.B }), nil
}

// cluster appends to out the pairs of cluster c: its images (ext[:len(prim)])
// with each other and with the images whose second nearest it is (the rest
// of ext), in blocks as findPairs compares them, over local row numbers.
func (a *approx) cluster(v *vectors, blk *block, c int, t float32, nn *nearest, out []Pair) []Pair {
	ext := append(slices.Clip(a.prim[c]), a.sec[c]...)
	np, d, bs := len(a.prim[c]), v.d, len(blk.amax)
	lv := &vectors{n: len(ext), d: d, f16: v.f16, inv: make([]float32, len(ext)), ok: make([]bool, len(ext)), images: len(ext)}
	for i, r := range ext {
		lv.inv[i], lv.ok[i] = v.inv[r], true
	}
	for a0 := 0; a0 < np; a0 += bs {
		blk.a0, blk.ka = a0, min(bs, np-a0)
		for i := range blk.ka {
			a.m.unit(v, ext[a0+i], blk.a[i*d:(i+1)*d])
		}
		blk.resetA()
		for b0 := a0; b0 < len(ext); b0 += bs {
			blk.b0, blk.kb = b0, min(bs, len(ext)-b0)
			for j := range blk.kb {
				r := ext[b0+j]
				if blk.b16 != nil {
					copy(blk.b16[j*d:(j+1)*d], a.m.f16[r*d:(r+1)*d])
				} else {
					copy(blk.b32[j*d:(j+1)*d], a.m.f32[r*d:(r+1)*d])
				}
			}
			blk.resetB()
			n0 := len(out)
			out = blk.compare(lv, t, out)
			for k := n0; k < len(out); k++ {
				p, q := ext[out[k].A], ext[out[k].B]
				out[k].A, out[k].B = min(p, q), max(p, q)
			}
			for j, cb := range blk.bmax[:blk.kb] {
				if cb > noCos && nn != nil {
					nn.raise(ext[b0+j], cb)
				}
			}
		}
		for i, ca := range blk.amax[:blk.ka] {
			if ca > noCos && nn != nil {
				nn.raise(ext[a0+i], ca)
			}
		}
	}
	return out
}
