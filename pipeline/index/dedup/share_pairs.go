package dedup

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/pipeline/index"
)

// rangePairs is findPairs for the outer rows [lo, hi) only (lo a multiple
// of o.BlockRows): each outer block of them compared with the inner
// blocks from its first row to the last row of the index, on o.Workers
// goroutines; nn, when not nil, gets each row's best cosine over the
// pairs compared. The outer blocks are the searcher's, or where the range has
// too few of those to keep every goroutine busy, runs of o.BlockRows rows
// that give each goroutine two. The int8 filter runs where the whole search
// would run it (its pairs are the tiled search's to the bit). It returns
// the pairs in (A, B) order.
func rangePairs(ctx context.Context, x *index.Index, v *vectors, o Options, nn *nearest, lo, hi int) ([]Pair, error) {
	bs := o.BlockRows
	nb := (v.n + bs - 1) / bs
	workers := defaultWorkers(o.Workers)
	var qz *quantized
	if useFilter(o, v.d, nn != nil) {
		var err error
		if qz, err = quantizeAll(ctx, x, v, workers); err != nil {
			return nil, err
		}
	}
	_, bo := newSearcher(&vectors{d: 0}, qz, bs, nn != nil)
	if (hi-lo+bo-1)/bo < 2*workers {
		// smaller outer blocks, two a goroutine at least, whole blocks of bs
		bo = max(bs, (hi-lo)/(2*workers)/bs*bs)
	}
	no := (hi - lo + bo - 1) / bo
	workers = max(1, min(workers, no))
	total := 0 // block pairs, for Progress
	for b := lo / bs; b*bs < hi; b++ {
		total += nb - b
	}
	var next, found atomic.Int64
	var mu sync.Mutex // guards done, the progress calls and firstErr
	done := 0
	var firstErr error
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	out := make([][]Pair, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s, _ := newSearcher(v, qz, bs, nn != nil)
			blk, _ := s.(*block) // the searcher that keeps nearest cosines
			for {
				i := int(next.Add(1) - 1)
				if i >= no || inner.Err() != nil {
					return
				}
				r0 := lo + i*bo
				k := min(bo, hi-r0)
				if err := s.outer(x, v, r0, k); err != nil {
					fail(err)
					return
				}
				for j := r0 / bs; j < nb; j++ {
					if inner.Err() != nil {
						return
					}
					before := len(out[w])
					var err error
					if out[w], err = s.inner(x, v, j*bs, min(bs, v.n-j*bs), o.Threshold, out[w]); err != nil {
						fail(err)
						return
					}
					if nn != nil {
						nn.mergeB(blk)
					}
					if found.Add(int64(len(out[w])-before)) > int64(o.MaxPairs) {
						fail(fmt.Errorf("dedup: more than %d pairs of cosine ≥ %g: the threshold is too low for this collection (or raise the pair limit)", o.MaxPairs, o.Threshold))
						return
					}
				}
				if nn != nil {
					nn.mergeA(blk)
				}
				mu.Lock()
				for b := r0 / bs; b*bs < r0+k; b++ {
					done += nb - b
				}
				if o.Progress != nil {
					o.Progress(done, total)
				}
				mu.Unlock()
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
	return sortedPairs(out), nil
}

// sortedPairs joins lists of pairs into one in (A, B) order, each pair
// once.
func sortedPairs(lists [][]Pair) []Pair {
	var all []Pair
	for _, p := range lists {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(p, q Pair) int {
		if p.A != q.A {
			return p.A - q.A
		}
		return p.B - q.B
	})
	return slices.CompactFunc(all, func(p, q Pair) bool { return p.A == q.A && p.B == q.B })
}
