// Package eval measures a model trained on the generated scenes (the
// built-in CLIP, or a SigLIP) on held-out scenes of two renderers: zero-shot
// classification (Engine.Classify) and where the attention maps put each
// word. `condition models eval` and the tests use it.
//
// The figures mean the same for both families. Zero-shot top-1 is the
// argmax of the logits, exp(logit_scale)·cosine (+ logit_bias for SigLIP),
// so it is the prompt of the highest cosine whether the model turns logits
// into probabilities with a softmax (CLIP) or a sigmoid per label (SigLIP).
// The maps are the engine's joint space: a token and a patch scored by the
// cosine of their projections (CLIP's projection heads; SigLIP's text head
// and the value path of its pooling head), and each ranking below (over
// patches for a word, over words for a patch) is a ranking of those
// cosines. A caption word's token is found in the prompt's own words
// (pipeline.TextEncoding.Words), whichever tokenizer made them: CLIP's BPE
// (start token, one token per word, a comma its own word) or SigLIP's
// SentencePiece (lower case, punctuation dropped, no start token, "</s>"
// last); every colour and shape word must be one token.
package eval

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"math"
	"slices"
	"strings"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/internal/vecscenes"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// The held-out evaluation of the default model, on two renderers. The first
// is the generator the model was trained on (internal/scenes), drawing its
// one way (Variety off), with seeds that training did not use (training used
// seed 1; see scripts/train_default/settings.json). The second
// (internal/vecscenes) is drawn by code of its own that training never saw.
// The definitions are the same as the Python evaluation in
// scripts/train_default/train.py, which reads the second renderer's scenes
// as tools/evaldata writes them.
const (
	// SingleSeed is the generator seed of the single-object scenes
	// (zero-shot classification).
	SingleSeed = 1001
	// PairSeed is the generator seed of the two-object scenes (the
	// attention maps).
	PairSeed = 1002
	// ImageSize is the side in pixels the scenes are rendered at.
	ImageSize = 64
	// Inside is the least fraction of a patch an object must cover for
	// the patch to be inside the object (text → image peak).
	Inside = 0.25
	// Owned is the least fraction of a patch an object must cover for
	// the patch to count as the object's (image → text).
	Owned = 0.5
)

// The held-out scenes of the independent renderer (internal/vecscenes),
// which draws its own way and is never used for training.
const (
	// VectorSingleSeed is its seed of single-object scenes.
	VectorSingleSeed = 2001
	// VectorPairSeed is its seed of two-object scenes.
	VectorPairSeed = 2002
)

// The renderers Run measures a model on.
const (
	// RendererTraining is internal/scenes, the generator the default model
	// was trained on (its one way of drawing, as the held-out scenes use).
	RendererTraining = "scenes"
	// RendererIndependent is internal/vecscenes, written apart from the
	// first and used only for evaluation.
	RendererIndependent = "vecscenes"
)

// Options controls Run.
type Options struct {
	// Scenes is the number of scenes of each kind (default 1000).
	Scenes int
	// Batch is the number of images encoded at once (default 100).
	Batch int
	// Progress, when set, is called after each batch with the images done
	// and the total.
	Progress func(done, total int)
	// Windows also measures maps over the whole image
	// (pipeline.AttendOptions.Windows) on wide scenes (Result.Wide).
	Windows bool
	// WideOnly measures the wide scenes alone (Result.Wide; the renderers'
	// figures are left zero): SigLIP 2 NaFlex's grids follow each image's
	// size and aspect, which the square scenes' coverage does not follow.
	WideOnly bool
}

// WideSeed draws the single-object scenes of the wide-scene measure.
const WideSeed = 3003

// WideFigures are the maps over the whole image (windows; for SigLIP 2
// NaFlex, the model's own grid over the whole image) on wide scenes: a
// training-renderer scene of one object drawn in the left third of a 3:1
// image whose other two thirds are its plain background, so that the
// object lies wholly outside the centre square a square-input model sees.
type WideFigures struct {
	// PeakInside is the fraction of scenes whose shape word's map over
	// the whole image peaks at a cell the object covers at least half of.
	PeakInside float64 `json:"shape_peak_inside"`
	// MapIoU is DAAM's IoU of the shape word's map with the object's
	// pixels over the whole image (see Figures.MapIoU), the mean.
	MapIoU float64 `json:"shape_miou"`
	Scenes int     `json:"scenes"`
}

// Figures holds the quality figures of a model on one renderer's
// held-out scenes, with the counts they are over.
type Figures struct {
	// Renderer is RendererTraining or RendererIndependent.
	Renderer string `json:"renderer"`
	// ZeroShotTop1 is the fraction of single-object scenes whose image
	// embedding is closest (cosine) to the prompt "a/an <colour> <shape>"
	// of its object, among all colour × shape prompts.
	ZeroShotTop1 float64 `json:"zero_shot_top1"`
	ZeroShotN    int     `json:"zero_shot_scenes"`
	// ShapeConfusion [true shape][predicted shape] counts the shapes of the
	// single-object scenes against the shape word of their top-1 prompt,
	// both in the order of scenes.Shapes.
	ShapeConfusion [][]int `json:"shape_confusion"`
	// PeakInside is, over the colour and shape words of two-object
	// captions, the fraction whose text → image map (scores t_i·p_j over
	// the patches j) peaks at a patch the named object covers at least
	// Inside of. Words whose object covers no patch that much are
	// skipped (PeakSkipped).
	PeakInside  float64 `json:"text_to_image_peak_inside"`
	PeakWords   int     `json:"text_to_image_words"`
	PeakSkipped int     `json:"text_to_image_skipped"`
	// MapIoU is DAAM's measure of the same words' maps (Tang et al., ACL
	// 2023, their expand_image and threshold): the map min–max normalised,
	// upsampled bilinearly to the image's pixels, thresholded at MapThreshold,
	// and its IoU with the named object's pixels; the mean over the words.
	MapIoU float64 `json:"text_to_image_miou"`
	// OwnWord is, over the patches of two-object scenes that one object
	// covers at least Owned of, the fraction whose image → text scores,
	// restricted to the caption's content words (the colour and shape
	// words of both objects), are highest at a word of that object.
	OwnWord    float64 `json:"image_to_text_own_word"`
	OwnPatches int     `json:"image_to_text_patches"`
}

// ShapeAccuracy returns, per shape of scenes.Shapes, the fraction of its
// single-object scenes whose top-1 prompt names that shape (the diagonal
// of ShapeConfusion over its rows; 0 for a shape with no scenes).
func (f Figures) ShapeAccuracy() []float64 {
	out := make([]float64, len(f.ShapeConfusion))
	for i, row := range f.ShapeConfusion {
		n := 0
		for _, c := range row {
			n += c
		}
		if n > 0 {
			out[i] = float64(row[i]) / float64(n)
		}
	}
	return out
}

// Result holds a model's figures on both renderers' held-out scenes.
type Result struct {
	Training    Figures      `json:"training_renderer"`
	Independent Figures      `json:"independent_renderer"`
	Wide        *WideFigures `json:"wide_windows,omitempty"` // with Options.Windows
}

// Prompt returns the zero-shot prompt of a colour and a shape.
func Prompt(colour, shape string) string {
	if colour != "" && (colour[0] == 'a' || colour[0] == 'e' || colour[0] == 'i' || colour[0] == 'o' || colour[0] == 'u') {
		return "an " + colour + " " + shape
	}
	return "a " + colour + " " + shape
}

// evalRef is one colour or shape word of a caption: its word index and
// the object it names.
type evalRef struct{ word, object int }

// evalScene is one held-out scene as the evaluation needs it, whichever
// renderer drew it.
type evalScene struct {
	img           image.Image
	colour, shape string // the single object's words
	caption       string
	words         []string // the caption split as CLIP's pre-tokenizer splits it
	refs          []evalRef
	// coverage returns [objects][grid*grid]: the share of each patch of
	// what the model sees of the image that each object covers.
	coverage func(grid int) ([][]float64, error)
}

// evalSource draws scenes [a, b) of one kind.
type evalSource func(a, b int) []evalScene

func trainingScenes(seed uint64, objects int) evalSource {
	g := scenes.Generator{Seed: seed, MinObjects: objects, MaxObjects: objects, Distinct: true}
	return eachScene(func(i int) evalScene {
		s := g.Scene(i)
		e := evalScene{img: s.Render(ImageSize), colour: s.Objects[0].Colour, shape: s.Objects[0].Shape,
			caption: s.Caption, words: s.Words,
			coverage: func(grid int) ([][]float64, error) { return s.Coverage(ImageSize, grid), nil }}
		for _, r := range s.Refs {
			e.refs = append(e.refs, evalRef{r.Word, r.Object})
		}
		return e
	})
}

// vectorScenes draws the independent renderer's scenes, W×H of their own
// (not all square), whose coverage follows pre (vecscenes.Scene.Coverage;
// Run has checked it with vecscenes.CheckPreprocessor).
func vectorScenes(seed uint64, objects int, pre *vision.Preprocessor) evalSource {
	g := vecscenes.Generator{Seed: seed, Objects: objects}
	return eachScene(func(i int) evalScene {
		s := g.Scene(i)
		e := evalScene{img: s.Render(), colour: s.Objects[0].Colour, shape: s.Objects[0].Shape,
			caption: s.Caption, words: s.Words,
			coverage: func(grid int) ([][]float64, error) { return s.Coverage(pre, grid) }}
		for _, r := range s.Refs {
			e.refs = append(e.refs, evalRef{r.Word, r.Object})
		}
		return e
	})
}

// eachScene is the evalSource that makes scenes a to b-1 with scene.
func eachScene(scene func(i int) evalScene) evalSource {
	return func(a, b int) []evalScene {
		out := make([]evalScene, 0, b-a)
		for i := a; i < b; i++ {
			out = append(out, scene(i))
		}
		return out
	}
}

// Run measures the engine's model (CLIP or SigLIP) on the held-out scenes of
// both renderers, through the engine as a job runs it: zero-shot
// classification by the logits of image_embeds and text_embeds, and the
// attention maps of each two-object scene's caption (the engine's layers:
// the joint space by default, whose scores t·p are what the definitions
// above rank; a softmax keeps each row's order). The engine's preprocessing
// must be CLIP's (shortest edge resized to the crop's side, centre square
// crop) or SigLIP's (resize to a fixed square), so that the scenes' coverage
// follows it onto the patch grid.
func Run(ctx context.Context, eng *pipeline.Engine, opts Options) (Result, error) {
	return run(ctx, eng, opts, nil)
}

// wordsHook, when set, is shown each two-object caption's prompt and the
// token of each of its colour and shape words (its refs, in order).
type wordsHook func(s *evalScene, p *pipeline.Prompt, toks []int)

func run(ctx context.Context, eng *pipeline.Engine, opts Options, hook wordsHook) (Result, error) {
	n := opts.Scenes
	if n <= 0 {
		n = 1000
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 100
	}
	if eng.Direction() != xattn.Both {
		return Result{}, fmt.Errorf("eval needs attention both ways; the engine computes %s", eng.Direction())
	}
	pre := eng.Preprocessor()
	if pre.NaFlex != nil && !opts.WideOnly {
		return Result{}, errors.New("eval: SigLIP 2 NaFlex is measured on the wide scenes only (Options.WideOnly): its grid follows each image's size and aspect, which the square scenes' coverage does not")
	}
	if opts.WideOnly {
		ev := evaluator{eng: eng, n: n, batch: batch, total: n, progress: opts.Progress, hook: hook}
		w, err := ev.wide(ctx)
		return Result{Wide: w}, err
	}
	if err := vecscenes.CheckPreprocessor(pre); err != nil {
		return Result{}, fmt.Errorf("eval: %w", err)
	}
	var prompts []string
	for _, c := range scenes.Colours {
		for _, s := range scenes.Shapes {
			prompts = append(prompts, Prompt(c, s))
		}
	}
	total := 4 * n
	if opts.Windows {
		total += n
	}
	ev := evaluator{eng: eng, classes: prompts, n: n, batch: batch, total: total, progress: opts.Progress, hook: hook}
	var res Result
	var err error
	if res.Training, err = ev.figures(ctx, RendererTraining, trainingScenes(SingleSeed, 1), trainingScenes(PairSeed, 2)); err != nil {
		return res, err
	}
	if res.Independent, err = ev.figures(ctx, RendererIndependent, vectorScenes(VectorSingleSeed, 1, pre), vectorScenes(VectorPairSeed, 2, pre)); err != nil {
		return res, err
	}
	if opts.Windows {
		if res.Wide, err = ev.wide(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// wide measures the maps over the whole image on ev.n wide scenes (see
// WideFigures).
func (ev *evaluator) wide(ctx context.Context) (*WideFigures, error) {
	eng := ev.eng
	g := scenes.Generator{Seed: WideSeed, MinObjects: 1, MaxObjects: 1, Distinct: true}
	res := &WideFigures{Scenes: ev.n}
	naflex := eng.Preprocessor().NaFlex != nil
	inside, iou := 0, 0.0
	for k := range ev.n {
		s := g.Scene(k)
		s.Background = scenes.Background{Kind: scenes.Plain, A: s.Background.A}
		left := s.Render(ImageSize)
		empty := s
		empty.Objects = nil
		img := image.NewRGBA(image.Rect(0, 0, 3*ImageSize, ImageSize))
		draw.Draw(img, img.Bounds(), &image.Uniform{C: empty.Render(ImageSize).At(0, 0)}, image.Point{}, draw.Src)
		draw.Draw(img, left.Bounds(), left, image.Point{}, draw.Src)
		ps, err := eng.Prepare(ctx, s.Caption)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		var refs []evalRef
		for _, r := range s.Refs {
			if r.Object == 0 && s.Words[r.Word] == s.Objects[0].Shape {
				refs = append(refs, evalRef{r.Word, r.Object})
			}
		}
		toks, err := wordTokens(s.Caption, s.Words, refs, &ps[0].TextEncoding)
		if err != nil || len(toks) != 1 {
			return nil, fmt.Errorf("eval: wide scene %d: the shape word of %q: %v", k, s.Caption, err)
		}
		// SigLIP 2 NaFlex sees the whole image on its own grid: no windows.
		atts, err := eng.AttendImages(ctx, []image.Image{img}, ps, pipeline.AttendOptions{Windows: !naflex})
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		a := &atts[0][0]
		gh, gw := a.Grid.H, a.Grid.W
		if !naflex && (gw != 3*gh || ImageSize%gh != 0) {
			return nil, fmt.Errorf("eval: windows over a %dx%d image gave a %s grid", 3*ImageSize, ImageSize, a.Grid)
		}
		row := a.TextToImage[toks[0]*gh*gw : (toks[0]+1)*gh*gw]
		pix := s.Coverage(ImageSize, ImageSize)[0]
		whole := make([]float64, 3*ImageSize*ImageSize)
		for y := range ImageSize {
			copy(whole[y*3*ImageSize:], pix[y*ImageSize:(y+1)*ImageSize])
		}
		if at := argmax(row); cellCoverage(whole, ImageSize, 3*ImageSize, gh, gw, at/gw, at%gw) >= 0.5 {
			inside++
		}
		iou += mapIoU(row, gh, gw, whole, ImageSize, 3*ImageSize)
		ev.step(1)
	}
	res.PeakInside = float64(inside) / float64(ev.n)
	res.MapIoU = iou / float64(ev.n)
	return res, nil
}

// cellCoverage returns the fraction of cell (r, c) of a gh×gw grid over an
// h×w image that the pixel coverage cov [h·w] covers: the mean over the
// pixels whose centres fall in the cell.
func cellCoverage(cov []float64, h, w, gh, gw, r, c int) float64 {
	sum, n := 0.0, 0
	for y := range h {
		if y*gh/h != r {
			continue
		}
		for x := range w {
			if x*gw/w == c {
				sum += cov[y*w+x]
				n++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// wordTokens returns, for each of refs (words of caption, split into
// words as CLIP's pre-tokenizer splits it), the position of its token in
// enc's tokens. The caption's words are matched in order, by text, with
// enc's non-special words, skipping the caption's words the tokenizer
// dropped (SigLIP's drops punctuation); each word of refs must be matched
// and be one token.
func wordTokens(caption string, words []string, refs []evalRef, enc *pipeline.TextEncoding) ([]int, error) {
	at := make([]int, len(words)) // the index in enc.Words of each word; -1 when dropped
	j := 0
	next := func() {
		for j < len(enc.Words) && enc.Words[j].Special {
			j++
		}
	}
	next()
	for i, w := range words {
		at[i] = -1
		if j < len(enc.Words) && strings.EqualFold(enc.Words[j].Text, w) {
			at[i] = j
			j++
			next()
		}
	}
	if j < len(enc.Words) {
		return nil, fmt.Errorf("eval: caption %q: the tokenizer's word %q (tokens %d to %d) matches none of the caption's words %q, in order",
			caption, enc.Words[j].Text, enc.Words[j].Start, enc.Words[j].End-1, words)
	}
	toks := make([]int, len(refs))
	for r, ref := range refs {
		if ref.word < 0 || ref.word >= len(words) {
			return nil, fmt.Errorf("eval: caption %q: reference to word %d of %d", caption, ref.word, len(words))
		}
		if at[ref.word] < 0 {
			return nil, fmt.Errorf("eval: caption %q: the tokenizer's words %s have none for word %d %q; the evaluation needs every colour and shape word as a word of the prompt",
				caption, wordList(enc.Words), ref.word, words[ref.word])
		}
		tw := enc.Words[at[ref.word]]
		if tw.End-tw.Start != 1 || tw.Start < 0 || tw.End > len(enc.Tokens) {
			return nil, fmt.Errorf("eval: caption %q: word %d %q is tokens %q; the evaluation needs every colour and shape word to be one token",
				caption, ref.word, words[ref.word], enc.Tokens[max(0, tw.Start):min(len(enc.Tokens), tw.End)])
		}
		toks[r] = tw.Start
	}
	return toks, nil
}

// wordList quotes the texts of words for a message.
func wordList(words []text.Word) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w.Text)
	}
	return "[" + strings.Join(q, " ") + "]"
}

type evaluator struct {
	eng         *pipeline.Engine
	classes     []string // the zero-shot labels: every colour and shape
	n, batch    int
	done, total int
	progress    func(done, total int)
	hook        wordsHook
}

func (ev *evaluator) step(k int) {
	ev.done += k
	if ev.progress != nil {
		ev.progress(ev.done, ev.total)
	}
}

// figures measures one renderer: zero-shot on its single-object scenes,
// the maps on its two-object scenes.
func (ev *evaluator) figures(ctx context.Context, renderer string, single, pair evalSource) (Figures, error) {
	eng, n := ev.eng, ev.n
	res := Figures{Renderer: renderer, ShapeConfusion: make([][]int, len(scenes.Shapes))}
	for i := range res.ShapeConfusion {
		res.ShapeConfusion[i] = make([]int, len(scenes.Shapes))
	}
	correct := 0
	for a := 0; a < n; a += ev.batch {
		b := min(n, a+ev.batch)
		sc := single(a, b)
		ims, err := eng.EncodeImages(ctx, images(sc))
		if err != nil {
			return res, fmt.Errorf("eval: %w", err)
		}
		for i := range ims {
			labels, err := eng.Classify(ctx, &ims[i], ev.classes, pipeline.ClassifyOptions{})
			if err != nil {
				return res, fmt.Errorf("eval: %w", err)
			}
			at := labels[0].Index
			c, s := at/len(scenes.Shapes), at%len(scenes.Shapes)
			if scenes.Colours[c] == sc[i].colour && scenes.Shapes[s] == sc[i].shape {
				correct++
			}
			res.ShapeConfusion[slices.Index(scenes.Shapes, sc[i].shape)][s]++
		}
		ev.step(b - a)
	}
	res.ZeroShotN = n
	res.ZeroShotTop1 = float64(correct) / float64(n)

	// Attention maps on two-object scenes, each with its own caption.
	peakOK, ownOK, iou := 0, 0, 0.0
	for a := 0; a < n; a += ev.batch {
		b := min(n, a+ev.batch)
		sc := pair(a, b)
		caps := make([]string, len(sc))
		for i, s := range sc {
			caps[i] = s.caption
		}
		ims, err := eng.EncodeImages(ctx, images(sc))
		if err != nil {
			return res, fmt.Errorf("eval: %w", err)
		}
		ps, err := eng.Prepare(ctx, caps...)
		if err != nil {
			return res, fmt.Errorf("eval: %w", err)
		}
		for i, s := range sc {
			im := &ims[i]
			atts, err := eng.Attend(ctx, im, ps[i:i+1], pipeline.AttendOptions{})
			if err != nil {
				return res, fmt.Errorf("eval: %w", err)
			}
			att := &atts[0]
			t, p := ps[i].T(), im.P()
			toks, err := wordTokens(s.caption, s.words, s.refs, &ps[i].TextEncoding)
			if err != nil {
				return res, err
			}
			if ev.hook != nil {
				ev.hook(&sc[i], ps[i], toks)
			}
			g := im.Grid
			if g.H != g.W || ImageSize%g.H != 0 {
				return res, fmt.Errorf("eval: patch grid %s does not divide a %d-pixel image", g, ImageSize)
			}
			cov, err := s.coverage(g.H)
			if err != nil {
				return res, fmt.Errorf("eval: %w", err)
			}
			pix, err := s.coverage(ImageSize) // each object's pixels
			if err != nil {
				return res, fmt.Errorf("eval: %w", err)
			}
			for r, ref := range s.refs {
				c := cov[ref.object]
				if maxOf(c) < Inside {
					res.PeakSkipped++
					continue
				}
				tok := toks[r]
				at := argmax(att.TextToImage[tok*p : (tok+1)*p])
				iou += mapIoU(att.TextToImage[tok*p:(tok+1)*p], g.H, g.W, pix[ref.object], ImageSize, ImageSize)
				res.PeakWords++
				if c[at] >= Inside {
					peakOK++
				}
			}
			for j := range p {
				owner, most := -1, 0.0
				for k := range cov {
					if cov[k][j] > most {
						owner, most = k, cov[k][j]
					}
				}
				if most < Owned {
					continue
				}
				row := att.ImageToText[j*t : (j+1)*t]
				at := 0
				for r := range s.refs {
					if row[toks[r]] > row[toks[at]] {
						at = r
					}
				}
				res.OwnPatches++
				if s.refs[at].object == owner {
					ownOK++
				}
			}
		}
		ev.step(b - a)
	}
	if res.PeakWords > 0 {
		res.PeakInside = float64(peakOK) / float64(res.PeakWords)
		res.MapIoU = iou / float64(res.PeakWords)
	}
	if res.OwnPatches > 0 {
		res.OwnWord = float64(ownOK) / float64(res.OwnPatches)
	}
	return res, nil
}

// MapThreshold is DAAM's threshold of a normalised map.
const MapThreshold = 0.4

// mapIoU returns the IoU of map m [gh×gw] with the pixel mask obj [sh×sw]
// (a pixel is the object's when it covers at least half of it): m min–max
// normalised, bilinear to sh×sw at pixel centres (align_corners false, as
// torch's interpolate), at or above MapThreshold.
func mapIoU(m []float32, gh, gw int, obj []float64, sh, sw int) float64 {
	lo, hi := m[0], m[0]
	for _, v := range m {
		lo, hi = min(lo, v), max(hi, v)
	}
	sy, sx := float64(gh)/float64(sh), float64(gw)/float64(sw)
	at := func(i, j int) float64 { return float64(m[min(max(i, 0), gh-1)*gw+min(max(j, 0), gw-1)]) }
	inter, union := 0, 0
	for y := range sh {
		fy := (float64(y)+0.5)*sy - 0.5
		y0 := int(math.Floor(fy))
		wy := fy - float64(y0)
		for x := range sw {
			fx := (float64(x)+0.5)*sx - 0.5
			x0 := int(math.Floor(fx))
			wx := fx - float64(x0)
			v := (1-wy)*((1-wx)*at(y0, x0)+wx*at(y0, x0+1)) + wy*((1-wx)*at(y0+1, x0)+wx*at(y0+1, x0+1))
			on := hi > lo && (v-float64(lo))/(float64(hi-lo)+1e-8) >= MapThreshold
			in := obj[y*sw+x] >= 0.5
			if on && in {
				inter++
			}
			if on || in {
				union++
			}
		}
	}
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

func images(sc []evalScene) []image.Image {
	out := make([]image.Image, len(sc))
	for i, s := range sc {
		out[i] = s.img
	}
	return out
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// argmax returns the index of the largest value of v (the first of equals).
func argmax[T float32 | float64](v []T) int {
	at := 0
	for i, x := range v {
		if x > v[at] {
			at = i
		}
	}
	return at
}

// Shapes and Colours are the words of the built-in model's scenes, in the
// order of Figures.ShapeConfusion.
var (
	Shapes  = scenes.Shapes
	Colours = scenes.Colours
)
