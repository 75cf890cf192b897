package pipeline

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"

	"github.com/conditionhq/condition/vision"
)

// Maps over the whole image (AttendOptions.Windows). The image's short side
// is resized to the model's input side, keeping its aspect (the
// preprocessor's resample and rounding, without its centre crop or
// squeeze); windows of the input size slide over it with a stride of half
// the input side, both ways, the last one flush with the edge; each window
// is encoded as an image is, and the windows' maps are stitched on one
// patch grid over the whole resized image: a cell's value is the mean of
// the window patches covering it, weighted by the area they share.

// windowPlan is one image's windows.
type windowPlan struct {
	pixels []float32 // the resized image, [3, h, w], normalised
	h, w   int
	side   int
	at     []image.Point // each window's top-left corner in the resized image
}

// windowStarts returns the starts of windows of side n over length l:
// 0, n/2, …, and l−n last.
func windowStarts(l, n int) []int {
	if l <= n {
		return []int{0}
	}
	var out []int
	for x := 0; ; x += max(n/2, 1) {
		if x+n >= l {
			return append(out, l-n)
		}
		out = append(out, x)
	}
}

// planWindows resizes img for windows and places them.
func (e *Engine) planWindows(img image.Image) (*windowPlan, error) {
	if e.naflex != nil {
		return nil, fmt.Errorf("pipeline: windows: %s is SigLIP 2 NaFlex, which sees the whole image on its own patch grid already; windows are for models of a fixed square input", e.Model().Name())
	}
	if e.inH != e.inW {
		return nil, fmt.Errorf("pipeline: windows: the model's input is %dx%d; windows take a square input", e.inW, e.inH)
	}
	side := e.inH
	p := *e.pre
	p.DoCenterCrop = false
	p.Size = vision.Size{ShortestEdge: side}
	pixels, h, w, err := p.Apply(img)
	if err != nil {
		return nil, fmt.Errorf("pipeline: windows: %w", err)
	}
	if h < side || w < side {
		return nil, fmt.Errorf("pipeline: windows: the image resized to %dx%d is smaller than one %d-pixel window", w, h, side)
	}
	wp := &windowPlan{pixels: pixels, h: h, w: w, side: side}
	for _, y := range windowStarts(h, side) {
		for _, x := range windowStarts(w, side) {
			wp.at = append(wp.at, image.Pt(x, y))
		}
	}
	return wp, nil
}

// window copies window k's pixels into dst [3, side, side].
func (wp *windowPlan) window(dst []float32, k int) {
	s, at := wp.side, wp.at[k]
	for c := range 3 {
		for y := range s {
			src := wp.pixels[(c*wp.h+at.Y+y)*wp.w+at.X:]
			copy(dst[(c*s+y)*s:(c*s+y+1)*s], src[:s])
		}
	}
}

// stitch is how the windows' patches fall on the whole image's grid: for
// each window and each of its patches, the cells it covers with the area
// shared, and each cell's total.
type stitch struct {
	grid  vision.Grid // the whole image's
	parts [][]cellShare
	total []float64
}

type cellShare struct {
	patch, cell int
	w           float64
}

// newStitch places windows of patch grid g on the image's grid: cells of
// the windows' patch size (the image's sides rounded to whole cells, each
// cell then a little larger or smaller).
func newStitch(wp *windowPlan, g vision.Grid) stitch {
	ph, pw := float64(wp.side)/float64(g.H), float64(wp.side)/float64(g.W)
	gh, gw := max(1, int(math.Round(float64(wp.h)/ph))), max(1, int(math.Round(float64(wp.w)/pw)))
	ch, cw := float64(wp.h)/float64(gh), float64(wp.w)/float64(gw)
	st := stitch{grid: vision.Grid{H: gh, W: gw}, parts: make([][]cellShare, len(wp.at)), total: make([]float64, gh*gw)}
	overlap := func(a0, a1, b0, b1 float64) float64 { return max(0, min(a1, b1)-max(a0, b0)) }
	for k, at := range wp.at {
		for i := range g.H {
			y0 := float64(at.Y) + float64(i)*ph
			y1 := y0 + ph
			for j := range g.W {
				x0 := float64(at.X) + float64(j)*pw
				x1 := x0 + pw
				for ci := max(0, int(y0/ch)); ci < gh && float64(ci)*ch < y1; ci++ {
					oy := overlap(y0, y1, float64(ci)*ch, float64(ci+1)*ch)
					for cj := max(0, int(x0/cw)); cj < gw && float64(cj)*cw < x1; cj++ {
						a := oy * overlap(x0, x1, float64(cj)*cw, float64(cj+1)*cw)
						if a <= 0 {
							continue
						}
						c := ci*gw + cj
						st.parts[k] = append(st.parts[k], cellShare{patch: i*g.W + j, cell: c, w: a})
						st.total[c] += a
					}
				}
			}
		}
	}
	return st
}

// rows stitches the windows' [rows, P] maps (patches last: TextToImage) into
// [rows, G].
func (st stitch) rows(in [][]float32, n, p int) []float32 {
	g := st.grid.Patches()
	acc := make([]float64, n*g)
	for k, m := range in {
		for _, s := range st.parts[k] {
			for r := range n {
				acc[r*g+s.cell] += s.w * float64(m[r*p+s.patch])
			}
		}
	}
	return st.normalise(acc, n, g, false)
}

// cols stitches the windows' [P, cols] rows (patches first: ImageToText,
// ConditionedPatches) into [G, cols].
func (st stitch) cols(in [][]float32, n int) []float32 {
	g := st.grid.Patches()
	acc := make([]float64, g*n)
	for k, m := range in {
		for _, s := range st.parts[k] {
			for c := range n {
				acc[s.cell*n+c] += s.w * float64(m[s.patch*n+c])
			}
		}
	}
	return st.normalise(acc, n, g, true)
}

func (st stitch) normalise(acc []float64, n, g int, cellFirst bool) []float32 {
	out := make([]float32, len(acc))
	for i, v := range acc {
		c := i % g
		if cellFirst {
			c = i / n
		}
		if t := st.total[c]; t > 0 {
			out[i] = float32(v / t)
		}
	}
	return out
}

// softmaxScaled returns [rows, cols]: row r the softmax over c of
// scale·sim[r·rowStride + c·colStride].
func softmaxScaled(sim []float32, rows, cols, rowStride, colStride int, scale float64) []float32 {
	out := make([]float32, rows*cols)
	z := make([]float64, cols)
	for r := range rows {
		hi := math.Inf(-1)
		for c := range cols {
			z[c] = scale * float64(sim[r*rowStride+c*colStride])
			hi = max(hi, z[c])
		}
		sum := 0.0
		for c := range cols {
			z[c] = math.Exp(z[c] - hi)
			sum += z[c]
		}
		for c := range cols {
			out[r*cols+c] = float32(z[c] / sum)
		}
	}
	return out
}

// mean averages the windows' equal-length slices.
func mean(in [][]float32) []float32 {
	out := make([]float32, len(in[0]))
	for i := range out {
		s := 0.0
		for _, m := range in {
			s += float64(m[i])
		}
		out[i] = float32(s / float64(len(in)))
	}
	return out
}

// attendWindows attends each image's windows with the prompts and
// stitches each prompt's attentions over the whole image (see
// AttendOptions.Windows). The windows of all the images are encoded
// together, Options.Batch at a time.
func (e *Engine) attendWindows(ctx context.Context, imgs []image.Image, prompts Prompts, opts AttendOptions) ([][]Attention, error) {
	plans := make([]*windowPlan, len(imgs))
	type ref struct{ img, k int }
	var all []ref
	for i, img := range imgs {
		wp, err := e.planWindows(img)
		if err != nil {
			return nil, fmt.Errorf("%w (image %d)", err, i)
		}
		plans[i] = wp
		for k := range wp.at {
			all = append(all, ref{i, k})
		}
	}
	side := e.inH
	per := 3 * side * side
	encs := make([][]ImageEncoding, len(imgs))
	buf := make([]float32, min(len(all), e.opts.Batch)*per)
	for a := 0; a < len(all); a += e.opts.Batch {
		b := min(len(all), a+e.opts.Batch)
		for j := a; j < b; j++ {
			plans[all[j].img].window(buf[(j-a)*per:(j-a+1)*per], all[j].k)
		}
		got, err := e.EncodePixels(ctx, buf[:(b-a)*per], b-a)
		if err != nil {
			return nil, err
		}
		for j := a; j < b; j++ {
			encs[all[j].img] = append(encs[all[j].img], got[j-a])
		}
	}
	out := make([][]Attention, len(imgs))
	for i := range imgs {
		var err error
		if out[i], err = e.stitchWindows(ctx, plans[i], encs[i], prompts, opts); err != nil {
			return nil, fmt.Errorf("%w (image %d)", err, i)
		}
	}
	return out, nil
}

// stitchWindows attends one image's encoded windows with the prompts and
// stitches each prompt's attentions over the whole image.
func (e *Engine) stitchWindows(ctx context.Context, wp *windowPlan, encs []ImageEncoding, prompts Prompts, opts AttendOptions) ([]Attention, error) {
	n := len(encs)
	var err error
	inner := opts
	inner.Windows = false
	ws := e.getWorkspaces()
	defer e.putWorkspaces(ws)
	per2 := make([][]Attention, n)
	for k := range encs {
		if per2[k], err = e.attend(ctx, ws, &encs[k], prompts, inner); err != nil {
			return nil, err
		}
	}
	st := newStitch(wp, encs[0].Grid)
	p := encs[0].P()
	embeds := windowsEmbedding(encs)
	out := make([]Attention, len(prompts))
	for i := range prompts {
		first := per2[0][i]
		t := prompts[i].T()
		a := Attention{Prompt: first.Prompt, Grid: st.grid, Heads: first.Heads, DOut: first.DOut, HasScore: first.HasScore, whole: true, ImageEmbeds: embeds}
		gather := func(f func(*Attention) []float32) [][]float32 {
			var ms [][]float32
			for k := range per2 {
				m := f(&per2[k][i])
				if m == nil {
					return nil
				}
				ms = append(ms, m)
			}
			return ms
		}
		if ms := gather(func(a *Attention) []float32 { return a.TextToImage }); ms != nil {
			a.TextToImage = st.rows(ms, t, p)
		}
		if ms := gather(func(a *Attention) []float32 { return a.Similarity }); ms != nil {
			a.Similarity = st.rows(ms, t, p)
		}
		if ms := gather(func(a *Attention) []float32 { return a.ImageToText }); ms != nil {
			a.ImageToText = st.cols(ms, t)
		}
		if a.Similarity != nil {
			// In the joint space the maps are the softmax of the scaled
			// cosines: over the whole image's cells (text → image) and
			// over the tokens (image → text), as one image's are over
			// its patches: a window without the word's object does not
			// lend its map's peak to the whole image's.
			g := st.grid.Patches()
			if a.TextToImage != nil && e.t2i != nil {
				a.TextToImage = softmaxScaled(a.Similarity, t, g, g, 1, float64(e.t2i.Scale()))
			}
			if a.ImageToText != nil && e.i2t != nil {
				a.ImageToText = softmaxScaled(a.Similarity, g, t, 1, g, float64(e.i2t.Scale()))
			}
		}
		if ms := gather(func(a *Attention) []float32 { return a.TextToImageHeads }); ms != nil {
			a.TextToImageHeads = st.rows(ms, a.Heads*t, p)
		}
		if ms := gather(func(a *Attention) []float32 { return a.ImageToTextHeads }); ms != nil {
			heads := make([][][]float32, a.Heads)
			for k := range ms {
				for h := range a.Heads {
					heads[h] = append(heads[h], ms[k][h*p*t:(h+1)*p*t])
				}
			}
			for h := range a.Heads {
				a.ImageToTextHeads = append(a.ImageToTextHeads, st.cols(heads[h], t)...)
			}
		}
		if ms := gather(func(a *Attention) []float32 { return a.ConditionedPatches }); ms != nil {
			a.ConditionedPatches = st.cols(ms, a.DOut)
		}
		if ms := gather(func(a *Attention) []float32 { return a.ConditionedTokens }); ms != nil {
			a.ConditionedTokens = mean(ms)
		}
		for k := range per2 {
			a.Cosine += per2[k][i].Cosine / float64(n)
			a.Score += per2[k][i].Score / float64(n)
		}
		if a.HasScore {
			a.Prob = e.scoreProb(a.Score)
		}
		out[i] = a
	}
	return out, nil
}

// windowsEmbedding returns the L2-normalised mean of the windows'
// normalised embeddings [D], or nil when they have none.
func windowsEmbedding(encs []ImageEncoding) []float32 {
	d := len(encs[0].Embeds)
	if d == 0 {
		return nil
	}
	acc := make([]float64, d)
	for _, enc := range encs {
		if len(enc.Embeds) != d {
			return nil
		}
		var n float64
		for _, v := range enc.Embeds {
			n += float64(v) * float64(v)
		}
		if n == 0 {
			continue
		}
		f := 1 / math.Sqrt(n)
		for i, v := range enc.Embeds {
			acc[i] += float64(v) * f
		}
	}
	var n float64
	for _, v := range acc {
		n += v * v
	}
	out := make([]float32, d)
	if n > 0 {
		f := 1 / math.Sqrt(n)
		for i, v := range acc {
			out[i] = float32(v * f)
		}
	}
	return out
}

// errWindowsNeedImage is Attend's error for AttendOptions.Windows: windows
// are cut from the image, not from one encoding of it.
var errWindowsNeedImage = errors.New("pipeline: attend: windows are cut from the image: give it to AttendImages")
