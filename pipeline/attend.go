package pipeline

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"slices"

	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// AttendOptions controls Attend.
type AttendOptions struct {
	// Direction picks the attention to compute, among the engine's (0: all
	// of the engine's).
	Direction xattn.Direction
	// PerHead also returns the maps of each head.
	PerHead bool
	// Conditioned also returns the attention outputs: the patches
	// conditioned on the prompt (image → text) and the tokens conditioned
	// on the image (text → image).
	Conditioned bool
	// Windows makes AttendImages' maps cover the whole image, not the
	// model's centre crop: its short side resized to the model's input
	// side (keeping the aspect), windows of the input size every half side
	// both ways (the last flush with the edge), each encoded (in batches
	// of Options.Batch) and attended, and every map stitched on one patch
	// grid over the whole image (Attention.Grid): a cell is the mean of
	// the window patches covering it, weighted by the area shared.
	// ConditionedTokens, Cosine and Score are the windows' means. An
	// image no larger than one window is one window. Attend, given one
	// encoding, refuses it.
	Windows bool
}

// Attention is one image attended with one prompt.
type Attention struct {
	Prompt *Prompt
	Grid   vision.Grid // the patch grid, P = Grid.H × Grid.W
	// ImageLabel is the label of Heatmap's first panel, the image ("image"
	// when empty): a video frame's time, say.
	ImageLabel string
	// ImageToText [P, T] (head-averaged): row p is what patch p draws on
	// from the prompt's tokens, BOS to EOS. Nil when not computed.
	ImageToText []float32
	// TextToImage [T, P] (head-averaged): row t is where token t looks.
	// Nil when not computed.
	TextToImage []float32
	// Per head, with AttendOptions.PerHead: [Heads, P, T] and [Heads, T, P].
	ImageToTextHeads, TextToImageHeads []float32
	Heads                              int
	// With AttendOptions.Conditioned: the attention outputs,
	// ConditionedPatches [P, DOut] (image → text) and ConditionedTokens
	// [T, DOut] (text → image).
	ConditionedPatches, ConditionedTokens []float32
	DOut                                  int
	// Similarity [T, P] is the cosine of each token and each patch in
	// CLIP's joint space (the attention's scores before the scale and the
	// softmax): an absolute measure, comparable across words and images,
	// where the maps' rows are only relative. Computed when the engine
	// attends both ways in the joint space; nil otherwise.
	Similarity []float32
	// Cosine is cos(image_embeds, text_embeds) and Score the CLIP logit
	// exp(logit_scale)·Cosine (+ logit_bias for SigLIP); HasScore says
	// they were computed (both graphs give embeddings, and the model has a
	// logit scale).
	Cosine, Score float64
	HasScore      bool
	// Prob is the prompt's probability for SigLIP-family models
	// (Engine.Scores is SigmoidScores): sigmoid(Score), the prompt on its
	// own. 0 for CLIP, whose softmax is over a set of prompts (see
	// Engine.Probs).
	Prob float64
	// ImageEmbeds [D], with AttendOptions.Windows, is the image's
	// embedding over its windows: the L2-normalised mean of the windows'
	// normalised embeddings (Cosine and Score are the means of theirs).
	// Nil otherwise, and when the graphs give no pooled embeddings.
	ImageEmbeds []float32

	whole bool // the maps cover the whole image (AttendOptions.Windows)
}

// Attend attends one encoded image with each prepared prompt (made by this
// engine's Prepare), in the directions asked for, and returns one Attention
// per prompt. The image's side of the attention is projected once for all
// the prompts.
func (e *Engine) Attend(ctx context.Context, img *ImageEncoding, prompts Prompts, opts AttendOptions) ([]Attention, error) {
	if opts.Windows {
		return nil, errWindowsNeedImage
	}
	ws := e.getWorkspaces()
	defer e.putWorkspaces(ws)
	return e.attend(ctx, ws, img, prompts, opts)
}

// AttendImages encodes images in batches and attends each with the
// prompts: one []Attention per image (see AttendOptions.Windows for maps
// over the whole image).
func (e *Engine) AttendImages(ctx context.Context, imgs []image.Image, prompts Prompts, opts AttendOptions) ([][]Attention, error) {
	if opts.Windows {
		return e.attendWindows(ctx, imgs, prompts, opts)
	}
	encs, err := e.EncodeImages(ctx, imgs)
	if err != nil {
		return nil, err
	}
	ws := e.getWorkspaces()
	defer e.putWorkspaces(ws)
	out := make([][]Attention, len(encs))
	for i := range encs {
		if out[i], err = e.attend(ctx, ws, &encs[i], prompts, opts); err != nil {
			return nil, fmt.Errorf("%w (image %d)", err, i)
		}
	}
	return out, nil
}

func (e *Engine) attend(ctx context.Context, ws *workspaces, img *ImageEncoding, prompts Prompts, opts AttendOptions) ([]Attention, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := opts.Direction
	if dir == 0 {
		dir = xattn.Both
	}
	i2t := dir&xattn.ImageToText != 0 && e.i2t != nil
	t2i := dir&xattn.TextToImage != 0 && e.t2i != nil
	if !i2t && !t2i {
		return nil, fmt.Errorf("pipeline: attend %s: the engine computes %s only", dir, e.Direction())
	}
	if img == nil {
		return nil, errors.New("pipeline: attend: no image encoding")
	}
	p := img.P()
	if p <= 0 || len(img.States) != (e.cls+p)*img.Width || img.Width != e.dv {
		return nil, fmt.Errorf("pipeline: attend: image encoding of %d values for %d patches of width %d; the engine's patches have width %d", len(img.States), p, img.Width, e.dv)
	}
	mode := xattn.MeanAttention
	if opts.PerHead {
		mode = xattn.PerHeadAttention
	}
	if err := e.preparePatches(ws, img, i2t, t2i); err != nil {
		return nil, err
	}
	res := &ws.res
	out := make([]Attention, len(prompts))
	for k, ps := range prompts {
		if ps == nil || ps.eng != e {
			return nil, fmt.Errorf("pipeline: attend: prompt %d was not prepared by this engine", k)
		}
		t := ps.T()
		a := &out[k]
		a.Prompt, a.Grid = ps, img.Grid
		if i2t {
			if err := ws.i2t.ForwardPrepared(res, &ws.patchQ, ps.src, mode); err != nil {
				return nil, fmt.Errorf("pipeline: attention (image to text, prompt %d): %w", k, err)
			}
			a.ImageToText, a.ImageToTextHeads, a.ConditionedPatches = take(res, p*t, mode, opts)
			a.Heads, a.DOut = res.Heads, res.DOut
		}
		if e.jointPatches && t2i {
			a.Similarity = similarity(ps.q.Rows(), ws.patchQ.Rows(), t, p)
		}
		if t2i {
			if err := ws.t2i.ForwardPrepared(res, ps.q, &ws.patchSrc, mode); err != nil {
				return nil, fmt.Errorf("pipeline: attention (text to image, prompt %d): %w", k, err)
			}
			a.TextToImage, a.TextToImageHeads, a.ConditionedTokens = take(res, t*p, mode, opts)
			a.Heads, a.DOut = res.Heads, res.DOut
		}
		if img.Embeds != nil && ps.Embeds != nil && e.logitScale != 0 && len(img.Embeds) == len(ps.Embeds) {
			a.Cosine = Cosine(img.Embeds, ps.Embeds)
			a.Score, a.HasScore = e.logitScale*a.Cosine+e.logitBias, true
			a.Prob = e.scoreProb(a.Score)
		}
	}
	return out, nil
}

// workspaces are one call's attention workspaces and result buffers, and
// the image side of the attention, prepared once per image for every
// prompt.
type workspaces struct {
	i2t, t2i *xattn.Workspace
	res      xattn.Result
	patchQ   xattn.Query  // the patches as queries (image → text)
	patchSrc xattn.Source // the patches as keys and values (text → image)
	file     []byte       // the encoding of the last output file (the job's)
	// head and headScratch hold an image's patches through SigLIP's
	// pooling head (the joint space's patch side).
	head        []float32
	headScratch xattn.PoolingScratch
}

// headRows returns img's patches [P, d_v] as the joint space's patch side
// takes them: through SigLIP's pooling head when the engine has one (once
// per encoding the engine made, kept with it; else into ws's buffer), else
// as they are.
func (e *Engine) headRows(ws *workspaces, img *ImageEncoding) ([]float32, error) {
	patches, p := img.jointRows(), img.P()
	if e.patchHead == nil {
		return patches, nil
	}
	if m := img.head; m != nil {
		m.once.Do(func() {
			m.rows = make([]float32, p*e.patchHead.Dim())
			if m.err = e.patchHead.Apply(m.rows, patches, p, &ws.headScratch); m.err != nil {
				m.err = fmt.Errorf("pipeline: joint space: %w", m.err)
			}
		})
		return m.rows, m.err
	}
	ws.head = grow(ws.head, p*e.patchHead.Dim())
	if err := e.patchHead.Apply(ws.head, patches, p, &ws.headScratch); err != nil {
		return nil, fmt.Errorf("pipeline: joint space: %w", err)
	}
	return ws.head, nil
}

func (e *Engine) newWorkspaces() *workspaces {
	ws := &workspaces{}
	if e.i2t != nil {
		ws.i2t = e.i2t.NewWorkspace(e.threads)
	}
	if e.t2i != nil {
		ws.t2i = e.t2i.NewWorkspace(e.threads)
	}
	return ws
}

// getWorkspaces takes workspaces from the free list, or makes new ones.
func (e *Engine) getWorkspaces() *workspaces {
	select {
	case ws := <-e.free:
		return ws
	default:
		return e.newWorkspaces()
	}
}

// putWorkspaces gives ws back to the free list, or closes it when the list
// is full or the engine closed.
func (e *Engine) putWorkspaces(ws *workspaces) {
	e.freeMu.RLock()
	defer e.freeMu.RUnlock()
	if e.closed {
		ws.close()
		return
	}
	select {
	case e.free <- ws:
	default:
		ws.close()
	}
}

func (ws *workspaces) close() {
	if ws.i2t != nil {
		ws.i2t.Close()
	}
	if ws.t2i != nil {
		ws.t2i.Close()
	}
}

// preparePatches projects an image's patches [p, width] once for all the
// prompts: as queries (image → text) and as keys and values (text → image),
// the latter from the former in CLIP's joint space, where both are the same
// rows.
func (e *Engine) preparePatches(ws *workspaces, img *ImageEncoding, i2t, t2i bool) error {
	p := img.P()
	patches, err := e.headRows(ws, img)
	if err != nil {
		return err
	}
	if i2t || (t2i && e.jointPatches) {
		if err := ws.i2t.PrepareQuery(&ws.patchQ, patches, p); err != nil {
			return fmt.Errorf("pipeline: attention (image to text): %w", err)
		}
	}
	if !t2i {
		return nil
	}
	if e.jointPatches {
		err = ws.t2i.PrepareSourceProjected(&ws.patchSrc, ws.patchQ.Rows(), nil, p, nil)
	} else {
		err = ws.t2i.PrepareSource(&ws.patchSrc, patches, p, nil)
	}
	if err != nil {
		return fmt.Errorf("pipeline: attention (text to image): %w", err)
	}
	return nil
}

// take copies out of res what opts asks for: the head-averaged map of n
// values, the per-head maps [heads, n] and the attention output.
func take(res *xattn.Result, n int, mode xattn.AttnMode, opts AttendOptions) (mean, perHead, out []float32) {
	mean = headMean(res.Attn, res.Heads, n, mode)
	if opts.PerHead {
		perHead = clone(res.Attn)
	}
	if opts.Conditioned {
		out = clone(res.Out)
	}
	return mean, perHead, out
}

// headMean returns the head-averaged map [n] from attn, which holds it
// already (MeanAttention) or per head [heads, n].
func headMean(attn []float32, heads, n int, mode xattn.AttnMode) []float32 {
	out := make([]float32, n)
	if mode != xattn.PerHeadAttention || heads <= 1 {
		copy(out, attn[:n])
		return out
	}
	for h := range heads {
		for i, v := range attn[h*n : (h+1)*n] {
			out[i] += v
		}
	}
	inv := 1 / float32(heads)
	for i := range out {
		out[i] *= inv
	}
	return out
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// similarity returns tokens·patchesᵀ [t, p] for unit-length rows of tokens
// [t, d] and patches [p, d]: their cosines. Each dot product is a float32
// sum in index order, as similarityGeneric takes it; two tokens against
// four patches at a time, so that the eight sums of a step do not wait on
// one another.
func similarity(tokens, patches []float32, t, p int) []float32 {
	d := len(tokens) / t
	out := make([]float32, t*p)
	i := 0
	for ; i+2 <= t; i += 2 {
		similarityPair(out[i*p:(i+1)*p], out[(i+1)*p:(i+2)*p], tokens[i*d:(i+1)*d], tokens[(i+1)*d:(i+2)*d], patches, p)
	}
	if i < t {
		t0 := tokens[i*d : (i+1)*d]
		o := out[i*p : (i+1)*p]
		for j := range p {
			o[j] = dot32(t0, patches[j*d:(j+1)*d])
		}
	}
	return out
}

// similarityPair writes the dot products of the tokens t0 and t1 [d] with
// each of the p patches [p, d] to o0 and o1 [p].
func similarityPair(o0, o1, t0, t1, patches []float32, p int) {
	d := len(t0)
	t1 = t1[:d]
	j := 0
	for ; j+4 <= p; j += 4 {
		p0 := patches[j*d : (j+1)*d][:d]
		p1 := patches[(j+1)*d : (j+2)*d][:d]
		p2 := patches[(j+2)*d : (j+3)*d][:d]
		p3 := patches[(j+3)*d : (j+4)*d][:d]
		var a0, a1, a2, a3, b0, b1, b2, b3 float32
		for k, u := range t0 {
			v := t1[k]
			x0, x1, x2, x3 := p0[k], p1[k], p2[k], p3[k]
			a0 += u * x0
			a1 += u * x1
			a2 += u * x2
			a3 += u * x3
			b0 += v * x0
			b1 += v * x1
			b2 += v * x2
			b3 += v * x3
		}
		o0[j], o0[j+1], o0[j+2], o0[j+3] = a0, a1, a2, a3
		o1[j], o1[j+1], o1[j+2], o1[j+3] = b0, b1, b2, b3
	}
	for ; j < p; j++ {
		pj := patches[j*d : (j+1)*d]
		o0[j], o1[j] = dot32(t0, pj), dot32(t1, pj)
	}
}

// dot32 returns a·b summed in float32 in index order.
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for k, v := range a {
		s += v * b[k]
	}
	return s
}

// Cosine returns cos(a, b) in float64 (0 when either is zero).
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// Similarity returns, for every image and prompt, the cosine of their
// embeddings and the CLIP logit exp(logit_scale)·cosine (Hugging Face's
// logits_per_image), [image][prompt]. Encodings without embeddings, or of
// different widths, are an error.
func (e *Engine) Similarity(images []ImageEncoding, texts []TextEncoding) (cos, logits [][]float32, err error) {
	cos = make([][]float32, len(images))
	logits = make([][]float32, len(images))
	for i, im := range images {
		if im.Embeds == nil {
			return nil, nil, fmt.Errorf("pipeline: similarity: image %d has no image_embeds (the vision graph gives none)", i)
		}
		cos[i] = make([]float32, len(texts))
		logits[i] = make([]float32, len(texts))
		for j, t := range texts {
			if t.Embeds == nil {
				return nil, nil, fmt.Errorf("pipeline: similarity: prompt %d has no text_embeds (the text graph gives none)", j)
			}
			if len(t.Embeds) != len(im.Embeds) {
				return nil, nil, fmt.Errorf("pipeline: similarity: text_embeds have %d dimensions, image_embeds %d: not one joint space", len(t.Embeds), len(im.Embeds))
			}
			c := Cosine(im.Embeds, t.Embeds)
			cos[i][j], logits[i][j] = float32(c), float32(e.logitScale*c+e.logitBias)
		}
	}
	return cos, logits, nil
}

// Overlays makes one heatmap overlay per content word of the prompt. With
// Similarity (the joint space both ways) a word's map is its tokens' mean
// cosine with each patch, on the fixed scale [0, 1], so that a word absent
// from the image is drawn dimmer than a present one; otherwise it is the
// text → image map averaged over the word's tokens or, without it, the
// image → text attention the patches give the word, each stretched over its
// own range (where, not how much).
func (a *Attention) Overlays() []Overlay {
	ps, p := a.Prompt, a.Grid.Patches()
	t := ps.T()
	var out []Overlay
	for _, wd := range ps.Words {
		if !isContentWord(wd) {
			continue
		}
		m := make([]float32, p)
		for tok := wd.Start; tok < wd.End; tok++ {
			for j := range p {
				switch {
				case a.Similarity != nil:
					m[j] += a.Similarity[tok*p+j]
				case a.TextToImage != nil:
					m[j] += a.TextToImage[tok*p+j]
				case a.ImageToText != nil:
					m[j] += a.ImageToText[j*t+tok]
				}
			}
		}
		if n := wd.End - wd.Start; n > 1 {
			for j := range m {
				m[j] /= float32(n)
			}
		}
		o := Overlay{Label: wd.Text, Start: wd.Start, End: wd.End, Map: m, GridH: a.Grid.H, GridW: a.Grid.W}
		if a.Similarity != nil {
			o.Lo, o.Hi = 0, 1
			o.Peak = slices.Max(m)
		}
		out = append(out, o)
	}
	return out
}

// CropRegion is the part of a source image of bounds b that the model
// sees: the centre crop, mapped back from the resized image to source
// pixels (for drawing heatmaps over the source).
func (e *Engine) CropRegion(b image.Rectangle) image.Rectangle {
	w, h := b.Dx(), b.Dy()
	rh, rw := e.pre.ResizedSize(w, h)
	if !e.pre.DoCenterCrop || rh <= 0 || rw <= 0 {
		return b
	}
	ch, cw := e.pre.CropSize.Height, e.pre.CropSize.Width
	top, left := (rh-ch)/2, (rw-cw)/2
	sx, sy := float64(w)/float64(rw), float64(h)/float64(rh)
	r := image.Rect(int(float64(left)*sx), int(float64(top)*sy), int(float64(left+cw)*sx+0.5), int(float64(top+ch)*sy+0.5))
	return r.Add(b.Min).Intersect(b)
}
