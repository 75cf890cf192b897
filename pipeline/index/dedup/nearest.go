package dedup

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
)

// noCos is below every cosine: a row not yet met.
const noCos = float32(-2)

// nearest is each row's best cosine to any other row, as float32 bits,
// raised by compare-and-swap from every goroutine: one float per row. The
// blocks keep their rows' best cosines of a block pair (block.amax, bmax)
// and merge them once per block pair, not once per dot.
type nearest struct{ bits []atomic.Uint32 }

func newNearest(n int) *nearest {
	nn := &nearest{bits: make([]atomic.Uint32, n)}
	for i := range nn.bits {
		nn.bits[i].Store(math.Float32bits(noCos))
	}
	return nn
}

// raise makes row r's best cosine at least c.
func (nn *nearest) raise(r int, c float32) {
	for {
		old := nn.bits[r].Load()
		if math.Float32frombits(old) >= c || nn.bits[r].CompareAndSwap(old, math.Float32bits(c)) {
			return
		}
	}
}

// mergeA raises the rows of b's block a by b.amax (nothing when nn is nil).
func (nn *nearest) mergeA(b *block) {
	if nn == nil {
		return
	}
	for i, c := range b.amax[:b.ka] {
		if c > noCos {
			nn.raise(b.a0+i, c)
		}
	}
}

// mergeB raises the rows of b's block b by b.bmax (nothing when nn is nil).
func (nn *nearest) mergeB(b *block) {
	if nn == nil {
		return
	}
	for j, c := range b.bmax[:b.kb] {
		if c > noCos {
			nn.raise(b.b0+j, c)
		}
	}
}

// values returns the best cosines, NaN for a row that met no other (nil
// when nn is nil).
func (nn *nearest) values() []float32 {
	if nn == nil {
		return nil
	}
	out := make([]float32, len(nn.bits))
	for i := range out {
		if out[i] = math.Float32frombits(nn.bits[i].Load()); out[i] == noCos {
			out[i] = float32(math.NaN())
		}
	}
	return out
}

func (b *block) resetA() {
	for i := range b.amax {
		b.amax[i] = noCos
	}
}

func (b *block) resetB() {
	for i := range b.bmax {
		b.bmax[i] = noCos
	}
}

// splitNear returns the pairs at t or above, and up to keep of those below
// it, closest first.
func splitNear(pairs []Pair, t float32, keep int) (above, below []Pair) {
	above = pairs[:0:0]
	for _, p := range pairs {
		if p.Cos >= t {
			above = append(above, p)
		} else {
			below = append(below, p)
		}
	}
	slices.SortStableFunc(below, func(p, q Pair) int { return cmp.Compare(q.Cos, p.Cos) })
	return above, below[:min(keep, len(below))]
}

// Histogram is the images' nearest-neighbour cosines (Result.NN) counted
// in bins of Width from Lo: bin i holds Lo + i·Width ≤ cos < Lo + (i+1)·Width
// (the last bin also holds cos = 1).
type Histogram struct {
	Lo     float64 `json:"lo"`
	Width  float64 `json:"width"`
	Counts []int   `json:"counts"`
	Images int     `json:"images"` // the images counted: every image with another to compare; with Sampled, the index's images
	// Sampled is, when above 0, the images counted: a sample of Images
	// (Result.Sampled).
	Sampled   int     `json:"sampled,omitempty"`
	Threshold float32 `json:"threshold"`
}

// HistogramBins is the bins of Result.Histogram: 200 of 0.01 over [−1, 1].
const HistogramBins = 200

// Histogram counts the images' nearest-neighbour cosines (r.NN).
func (r *Result) Histogram() Histogram {
	h := Histogram{Lo: -1, Width: 2.0 / HistogramBins, Counts: make([]int, HistogramBins), Threshold: r.Threshold}
	for _, c := range r.NN {
		if c != c {
			continue
		}
		h.Counts[max(0, min(HistogramBins-1, int(math.Floor((float64(c)-h.Lo)/h.Width))))]++
		h.Images++
	}
	if r.Sampled > 0 {
		h.Sampled, h.Images = h.Images, r.Images
	}
	return h
}
