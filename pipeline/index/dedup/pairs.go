package dedup

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/pipeline/index"
)

// vectors is what the pair search knows of an index's rows before it
// compares them: each row's 1/‖v‖ (0 for a failed image or a zero
// vector) and whether it is an image read and encoded.
type vectors struct {
	n, d   int
	f16    bool // every part stores float16: blocks are compared as stored
	inv    []float32
	ok     []bool
	images int
}

// load reads every row once, in blocks, for its norm and status; with
// keep, it also keeps every row in memory (as stored: float16 bits, or
// float32), which the clustered search compares, so the index is read
// once.
func load(x *index.Index, keep bool) (*vectors, *memVectors, error) {
	n, d := x.Rows(), x.Meta().Dim
	v := &vectors{n: n, d: d, f16: x.EmbedsDType() == index.DTypeF16, inv: make([]float32, n), ok: make([]bool, n)}
	var m *memVectors
	if keep {
		m = &memVectors{d: d}
		if v.f16 {
			m.f16 = make([]uint16, n*d)
		} else {
			m.f32 = make([]float32, n*d)
		}
	}
	const rows = 1024
	var buf []float32
	if m == nil || m.f16 != nil {
		buf = make([]float32, rows*d)
	}
	for r0 := 0; r0 < n; r0 += rows {
		k := min(rows, n-r0)
		ok, vals := v.ok[r0:r0+k], buf[:min(len(buf), k*d)]
		var err error
		switch {
		case m == nil:
			err = x.ReadEmbeds(r0, vals, ok)
		case m.f16 != nil:
			half := m.f16[r0*d : (r0+k)*d]
			err = x.ReadEmbedsF16(r0, half, ok)
			for i, h := range half {
				vals[i] = halfdot.ToFloat32(h)
			}
		default:
			vals = m.f32[r0*d : (r0+k)*d]
			err = x.ReadEmbeds(r0, vals, ok)
		}
		if err != nil {
			return nil, nil, err
		}
		v.setNorms(r0, k, vals)
	}
	return v, m, nil
}

// setNorms sets 1/‖row‖ of rows r0 … r0+k-1 from vals [k, D] float32, and
// counts those that are images read and encoded with a nonzero vector.
func (v *vectors) setNorms(r0, k int, vals []float32) {
	d := v.d
	for i := range k {
		s := float64(0)
		for _, e := range vals[i*d : (i+1)*d] {
			s += float64(e) * float64(e)
		}
		if !v.ok[r0+i] || s == 0 {
			v.ok[r0+i] = false
			continue
		}
		v.inv[r0+i] = float32(1 / math.Sqrt(s))
		v.images++
	}
}

// block is the row-by-row searcher: one goroutine's two blocks: a, rows [a0, a0+ka) as float32
// normalised, and b, rows [b0, b0+kb) as stored (float16 bits, or float32
// for other dtypes); amax and bmax are the best cosine each of their rows
// met in the compare calls since the last reset (nearest.go).
type block struct {
	a          []float32
	b16        []uint16
	b32        []float32
	a0, ka     int
	b0, kb     int
	amax, bmax []float32
	track      bool // keep amax and bmax (Options.NoNearest unset)
}

// searcher is one goroutine's comparison of an outer block of rows with
// the inner blocks from its first row on: outer reads the outer block,
// inner reads an inner block and appends the pairs of an outer row and a
// later inner row at or above the threshold.
type searcher interface {
	outer(x *index.Index, v *vectors, r0, k int) error
	inner(x *index.Index, v *vectors, r0, k int, t float32, out []Pair) ([]Pair, error)
}

// newSearcher returns a searcher and its outer block's rows (a multiple
// of bs): the int8 filter's (outerBlocks·bs rows) over qz when not nil;
// the tiled one (outerBlocks·bs rows) where halfdot has its tile kernel
// and no nearest cosines are kept (track false); the row-by-row one (bs
// rows) otherwise.
func newSearcher(v *vectors, qz *quantized, bs int, track bool) (searcher, int) {
	if qz != nil {
		return newFiltered(qz, bs), outerBlocks * bs
	}
	if !track && halfdot.HasTileKernel() {
		return newTiled(v.d, bs), outerBlocks * bs
	}
	blk := &block{a: make([]float32, bs*v.d), amax: make([]float32, bs), bmax: make([]float32, bs), track: track}
	if v.f16 {
		blk.b16 = make([]uint16, bs*v.d)
	} else {
		blk.b32 = make([]float32, bs*v.d)
	}
	return blk, bs
}

// useFilter says findPairs runs the int8 filter: halfdot has its VNNI
// tile, no nearest cosines are kept (track false), o does not turn it off
// and d is small enough for its int32 sums.
func useFilter(o Options, d int, track bool) bool {
	return halfdot.HasInt8TileKernel() && !track && !o.NoFilter && d < 60_000
}

// findPairs compares every outer block of rows with every inner block
// (o.BlockRows rows) from its first row on, on o.Workers goroutines taking
// the outer blocks in turn, and returns the pairs at or above the
// threshold in (A, B) order and the pairs the int8 filter let through to
// float32 (its tiles'; 0 without it); nn, when not nil, gets each row's
// best cosine to any other.
func findPairs(ctx context.Context, x *index.Index, v *vectors, o Options, nn *nearest) ([]Pair, int64, error) {
	bs := o.BlockRows
	nb := (v.n + bs - 1) / bs
	_, bo := newSearcher(&vectors{d: 0}, nil, bs, nn != nil)
	per := bo / bs // inner blocks per outer block
	no := (v.n + bo - 1) / bo
	workers := o.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, no))
	var qz *quantized
	if useFilter(o, v.d, nn != nil) {
		var err error
		if qz, err = quantizeAll(ctx, x, v, workers); err != nil {
			return nil, 0, err
		}
	}
	var rescored atomic.Int64
	total := nb * (nb + 1) / 2 // pairs of blocks of bs rows, the one of Progress
	var next, found atomic.Int64
	var mu sync.Mutex // guards done, the progress calls and firstErr
	done := 0
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	out := make([][]Pair, workers)
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			s, _ := newSearcher(v, qz, bs, nn != nil)
			blk, _ := s.(*block) // the searcher that keeps nearest cosines
			if f, ok := s.(*filtered); ok {
				defer func() { rescored.Add(f.rescored) }()
			}
			for {
				i := int(next.Add(1) - 1)
				if i >= no || inner.Err() != nil {
					return
				}
				if err := s.outer(x, v, i*bo, min(bo, v.n-i*bo)); err != nil {
					fail(err)
					cancel()
					return
				}
				for j := i * per; j < nb; j++ {
					if inner.Err() != nil {
						return
					}
					before := len(out[w])
					var err error
					if out[w], err = s.inner(x, v, j*bs, min(bs, v.n-j*bs), o.Threshold, out[w]); err != nil {
						fail(err)
						cancel()
						return
					}
					if nn != nil {
						nn.mergeB(blk)
					}
					if found.Add(int64(len(out[w])-before)) > int64(o.MaxPairs) {
						fail(fmt.Errorf("dedup: more than %d pairs of cosine ≥ %g: the threshold is too low for this collection (or raise the pair limit)", o.MaxPairs, o.Threshold))
						cancel()
						return
					}
				}
				if nn != nil {
					nn.mergeA(blk)
				}
				mu.Lock()
				for a := i * per; a < min((i+1)*per, nb); a++ {
					done += nb - a
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
		return nil, 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
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
	return all, rescored.Load(), nil
}

// outer reads the outer block (readA) and forgets its rows' best cosines.
func (b *block) outer(x *index.Index, v *vectors, r0, k int) error {
	if err := b.readA(x, v, r0, k); err != nil {
		return err
	}
	b.resetA()
	return nil
}

// inner reads an inner block (readB) and compares it with the outer one,
// its rows' best cosines starting afresh.
func (b *block) inner(x *index.Index, v *vectors, r0, k int, t float32, out []Pair) ([]Pair, error) {
	if err := b.readB(x, v.d, r0, k); err != nil {
		return out, err
	}
	b.resetB()
	return b.compare(v, t, out), nil
}

// readA reads rows [r0, r0+k) as float32 and normalises them.
func (b *block) readA(x *index.Index, v *vectors, r0, k int) error {
	b.a0, b.ka = r0, k
	a := b.a[:k*v.d]
	if err := x.ReadEmbeds(r0, a, nil); err != nil {
		return err
	}
	for i := range k {
		s := v.inv[r0+i]
		for j := range a[i*v.d : (i+1)*v.d] {
			a[i*v.d+j] *= s
		}
	}
	return nil
}

// readB reads rows [r0, r0+k) as stored.
func (b *block) readB(x *index.Index, d, r0, k int) error {
	b.b0, b.kb = r0, k
	if b.b16 != nil {
		return x.ReadEmbedsF16(r0, b.b16[:k*d], nil)
	}
	return x.ReadEmbeds(r0, b.b32[:k*d], nil)
}

// compare appends to out the pairs of a row of block a and a later row of
// block b (rows after it when they are the same block) whose cosine is at
// least t: the float32 rows of a, normalised, dotted with b's rows as
// stored, times their 1/‖v‖. Float16 rows of b meet four rows of a at a
// time (halfdot.Dot4); the rest one at a time.
func (b *block) compare(v *vectors, t float32, out []Pair) []Pair {
	i := 0
	if b.b16 != nil {
		out, i = b.compare4(v, t, out)
	}
	return b.compareRows(v, t, out, i)
}

// compare4 is compare for the rows of a in whole fours, b as float16 (two
// rows of b at a time, halfdot.Dot4x2, and a last one alone); it returns
// the first row of a not compared.
func (b *block) compare4(v *vectors, t float32, out []Pair) ([]Pair, int) {
	d, same := v.d, b.b0 == b.a0
	var s [8]float32
	i := 0
	for ; i+4 <= b.ka; i += 4 {
		ra := b.a0 + i
		if !v.ok[ra] && !v.ok[ra+1] && !v.ok[ra+2] && !v.ok[ra+3] {
			continue
		}
		rows := b.a[i*d : (i+4)*d]
		j := 0
		if same {
			j = i + 1
		}
		// am is the four rows' best cosines over this block b; pen keeps
		// a failed row of a (a zero vector: cosine 0) below every cosine.
		am, pen := [4]float32{noCos, noCos, noCos, noCos}, [4]float32{}
		for k := range pen {
			if !v.ok[ra+k] {
				pen[k] = 2 * noCos
			}
		}
		// add appends the pairs of row j+r of b with the four rows of a.
		add := func(r int) {
			rb := b.b0 + j + r
			if !v.ok[rb] {
				return
			}
			inv, bm := v.inv[rb], b.bmax[j+r]
			for k, c := range s[4*r : 4*r+4] {
				if c = c*inv + pen[k]; same && j+r <= i+k {
					continue
				}
				if b.track {
					if c > am[k] {
						am[k] = c
					}
					if c > bm {
						bm = c
					}
				}
				if c >= t {
					out = append(out, Pair{ra + k, rb, c})
				}
			}
			b.bmax[j+r] = bm
		}
		for ; j+2 <= b.kb; j += 2 {
			halfdot.Dot4x2(b.b16[j*d:(j+2)*d], d, rows, d, d, &s)
			add(0)
			add(1)
		}
		if j < b.kb {
			halfdot.Dot4(b.b16[j*d:(j+1)*d], rows, d, (*[4]float32)(s[:4]))
			add(0)
		}
		for k, c := range am {
			b.amax[i+k] = max(b.amax[i+k], c)
		}
	}
	return out, i
}

// compareRows is compare for the rows of a from i0 on, one at a time.
func (b *block) compareRows(v *vectors, t float32, out []Pair, i0 int) []Pair {
	d := v.d
	for i := i0; i < b.ka; i++ {
		ra := b.a0 + i
		if !v.ok[ra] {
			continue
		}
		a := b.a[i*d : (i+1)*d]
		j0 := 0
		if b.b0 == b.a0 {
			j0 = i + 1
		}
		for j := j0; j < b.kb; j++ {
			rb := b.b0 + j
			if !v.ok[rb] {
				continue
			}
			var s float32
			if b.b16 != nil {
				s = halfdot.Dot(b.b16[j*d:(j+1)*d], a)
			} else {
				s = halfdot.DotFloat32(b.b32[j*d:(j+1)*d], a)
			}
			if s *= v.inv[rb]; b.track {
				b.amax[i], b.bmax[j] = max(b.amax[i], s), max(b.bmax[j], s)
			}
			if s >= t {
				out = append(out, Pair{ra, rb, s})
			}
		}
	}
	return out
}
