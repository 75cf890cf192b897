package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/internal/halfdot"
)

// neighboursChunk is the rows a goroutine of Neighbours takes at a time.
const neighboursChunk = 1024

// ErrNoImage is the error (wrapped) of Neighbours for a part or row that
// holds no image read and encoded.
var ErrNoImage = errors.New("no such image in the index")

// Neighbours returns the images of x whose stored image embedding has a
// cosine of at least threshold (in (0, 1]) with row's of part, the image
// itself left out, most alike first (then by part and row), at most top
// (1 to MaxSearchTop) of them, and how many there are in all: an exact
// scan of every row, each row's cosine from its own norm, as dedup
// computes it (the norms are computed by the first call, one pass over
// the index, and kept). A hit's Score is its cosine. A collection in a vector
// database has no rows to scan: an error.
func (x *Index) Neighbours(ctx context.Context, part string, row int, threshold float32, top int) ([]Hit, int, error) {
	if !(threshold > 0 && threshold <= 1) {
		return nil, 0, fmt.Errorf("index: neighbours: threshold %g: want a cosine above 0 and at most 1", threshold)
	}
	if top < 1 || top > MaxSearchTop {
		return nil, 0, fmt.Errorf("index: neighbours: top %d: want 1 to %d", top, MaxSearchTop)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.closed {
		return nil, 0, ErrClosed
	}
	if x.coll != nil {
		return nil, 0, errCollectionEmbeds
	}
	pi := slices.IndexFunc(x.parts, func(p *indexPart) bool { return p.name == part })
	if pi < 0 {
		return nil, 0, fmt.Errorf("index: index %s: %w: no part %q", x.where, ErrNoImage, part)
	}
	p := x.parts[pi]
	if row < 0 || row >= p.meta.Rows || p.items[row] < 0 {
		return nil, 0, fmt.Errorf("index: index part %s: %w: row %d (of %d) is not an image read and encoded", p.where, ErrNoImage, row, p.meta.Rows)
	}
	d := x.meta.Dim
	q := make([]float32, d)
	p.rowsFloat32(row, 1, q)
	if n := math.Sqrt(float64(halfdot.DotFloat32(q, q))); n > 0 {
		for i := range q {
			q[i] = float32(float64(q[i]) / n)
		}
	}
	found, err := x.scanCosines(ctx, q, threshold, int32(pi), int32(row))
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(found, func(a, b candidate) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	hits := make([]Hit, 0, min(top, len(found)))
	for _, c := range found[:min(top, len(found))] {
		hits = append(hits, x.parts[c.part].hit(int(c.row), c.score))
	}
	return hits, len(found), nil
}

// scanCosines returns every ok row (but row of part self) whose cosine
// with the unit vector q is at least t, on up to GOMAXPROCS goroutines
// taking chunks of neighboursChunk rows in turn: each row as stored
// dotted with q (halfdot), times its 1/‖v‖ (rowNorms).
func (x *Index) scanCosines(ctx context.Context, q []float32, t float32, self, selfRow int32) ([]candidate, error) {
	type chunk struct{ part, r0, r1 int }
	var chunks []chunk
	for pi, p := range x.parts {
		for r := 0; r < p.meta.Rows; r += neighboursChunk {
			chunks = append(chunks, chunk{pi, r, min(r+neighboursChunk, p.meta.Rows)})
		}
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), len(chunks)))
	out := make([][]candidate, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) || ctx.Err() != nil {
					return
				}
				c := chunks[i]
				p := x.parts[c.part]
				inv := p.invNorms()
				for r := c.r0; r < c.r1; r++ {
					if p.items[r] < 0 || inv[r] == 0 || (int32(c.part) == self && int32(r) == selfRow) {
						continue
					}
					if cos := p.dot(r, q) * inv[r]; cos >= t {
						out[w] = append(out[w], candidate{cos, int32(c.part), int32(r)})
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return slices.Concat(out...), nil
}

// dot returns row r of p's image embeddings, as stored, dotted with q.
func (p *indexPart) dot(r int, q []float32) float32 {
	d := p.meta.Dim
	switch p.dtype {
	case DTypeF16:
		return halfdot.Dot(halves(p.embeds)[r*d:(r+1)*d], q)
	case DTypeF32:
		return halfdot.DotFloat32(floats(p.embeds)[r*d:(r+1)*d], q)
	case DTypeInt8:
		return halfdot.DotInt8(int8s(p.embeds)[r*d:(r+1)*d], q) * p.embScale[r]
	}
	return 0
}

// rowNorms is each row's 1/‖embedding‖ (0 for a failed image or a zero
// vector), made once.
type rowNorms struct {
	once sync.Once
	inv  []float32
}

// invNorms returns p's rows' 1/‖embedding‖, made on the first call: one
// pass over the part.
func (p *indexPart) invNorms() []float32 {
	p.norms.once.Do(func() {
		d, n := p.meta.Dim, p.meta.Rows
		inv := make([]float32, n)
		buf := make([]float32, neighboursChunk*d)
		for r0 := 0; r0 < n; r0 += neighboursChunk {
			k := min(neighboursChunk, n-r0)
			p.rowsFloat32(r0, k, buf)
			for i := range k {
				var s float64
				for _, e := range buf[i*d : (i+1)*d] {
					s += float64(e) * float64(e)
				}
				if p.items[r0+i] >= 0 && s > 0 {
					inv[r0+i] = float32(1 / math.Sqrt(s))
				}
			}
		}
		p.norms.inv = inv
	})
	return p.norms.inv
}
