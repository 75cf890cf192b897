package pipeline

import (
	"context"
	"fmt"
	"image"
	"math"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/xattn"
)

// The held-out evaluation of the default model. Its scenes come from the
// generator the model was trained on (internal/scenes) with seeds that
// training did not use (training used seed 1; see
// scripts/train_default/settings.json), and its definitions are the same as
// the Python evaluation in scripts/train_default/train.py.
const (
	// EvalSingleSeed is the generator seed of the single-object scenes
	// (zero-shot classification).
	EvalSingleSeed = 1001
	// EvalPairSeed is the generator seed of the two-object scenes (the
	// attention maps).
	EvalPairSeed = 1002
	// EvalImageSize is the side in pixels the scenes are rendered at.
	EvalImageSize = 64
	// EvalInside is the least fraction of a patch an object must cover for
	// the patch to be inside the object (text → image peak).
	EvalInside = 0.25
	// EvalOwned is the least fraction of a patch an object must cover for
	// the patch to count as the object's (image → text).
	EvalOwned = 0.5
)

// EvalOptions controls Evaluate.
type EvalOptions struct {
	// Scenes is the number of scenes of each kind (default 1000).
	Scenes int
	// Batch is the number of images encoded at once (default 100).
	Batch int
	// Progress, when set, is called after each batch with the images done
	// and the total.
	Progress func(done, total int)
}

// EvalResult holds the three quality figures of a model on the held-out
// scenes, with the counts they are over.
type EvalResult struct {
	// ZeroShotTop1 is the fraction of single-object scenes whose image
	// embedding is closest (cosine) to the prompt "a/an <colour> <shape>"
	// of its object, among all colour × shape prompts.
	ZeroShotTop1 float64 `json:"zero_shot_top1"`
	ZeroShotN    int     `json:"zero_shot_scenes"`
	// PeakInside is, over the colour and shape words of two-object
	// captions, the fraction whose text → image map (scores t_i·p_j over
	// the patches j) peaks at a patch the named object covers at least
	// EvalInside of. Words whose object covers no patch that much are
	// skipped (PeakSkipped).
	PeakInside  float64 `json:"text_to_image_peak_inside"`
	PeakWords   int     `json:"text_to_image_words"`
	PeakSkipped int     `json:"text_to_image_skipped"`
	// OwnWord is, over the patches of two-object scenes that one object
	// covers at least EvalOwned of, the fraction whose image → text scores,
	// restricted to the caption's content words (the colour and shape
	// words of both objects), are highest at a word of that object.
	OwnWord    float64 `json:"image_to_text_own_word"`
	OwnPatches int     `json:"image_to_text_patches"`
}

// EvalPrompt returns the zero-shot prompt of a colour and a shape.
func EvalPrompt(colour, shape string) string {
	if colour != "" && (colour[0] == 'a' || colour[0] == 'e' || colour[0] == 'i' || colour[0] == 'o' || colour[0] == 'u') {
		return "an " + colour + " " + shape
	}
	return "a " + colour + " " + shape
}

// Evaluate measures the engine's model on the held-out scenes, through the
// engine as a job runs it: zero-shot classification by the cosine of
// image_embeds and text_embeds, and the attention maps of each two-object
// scene's caption (the engine's layers: CLIP's joint space by default,
// whose scores t·p are what the definitions above rank; a softmax keeps
// each row's order).
func Evaluate(ctx context.Context, eng *Engine, opts EvalOptions) (EvalResult, error) {
	n := opts.Scenes
	if n <= 0 {
		n = 1000
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 100
	}
	if eng.Direction() != xattn.Both {
		return EvalResult{}, fmt.Errorf("pipeline: eval needs attention both ways; the engine computes %s", eng.Direction())
	}
	var res EvalResult
	done, total := 0, 2*n
	progress := func(k int) {
		done += k
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
	}

	// Zero-shot classification of single-object scenes.
	type label struct{ colour, shape string }
	var labels []label
	var prompts []string
	for _, c := range scenes.Colours {
		for _, s := range scenes.Shapes {
			labels = append(labels, label{c, s})
			prompts = append(prompts, EvalPrompt(c, s))
		}
	}
	classes, err := eng.EncodeTexts(ctx, prompts)
	if err != nil {
		return res, fmt.Errorf("pipeline: eval: %w", err)
	}
	single := scenes.Generator{Seed: EvalSingleSeed, MinObjects: 1, MaxObjects: 1, Distinct: true}
	correct := 0
	for a := 0; a < n; a += batch {
		b := min(n, a+batch)
		sc, imgs := render(single, a, b)
		ims, err := eng.EncodeImages(ctx, imgs)
		if err != nil {
			return res, fmt.Errorf("pipeline: eval: %w", err)
		}
		cos, _, err := eng.Similarity(ims, classes)
		if err != nil {
			return res, fmt.Errorf("pipeline: eval: %w", err)
		}
		for i, row := range cos {
			at := argmax(row)
			o := sc[i].Objects[0]
			if labels[at] == (label{o.Colour, o.Shape}) {
				correct++
			}
		}
		progress(b - a)
	}
	res.ZeroShotN = n
	res.ZeroShotTop1 = float64(correct) / float64(n)

	// Attention maps on two-object scenes, each with its own caption.
	pair := scenes.Generator{Seed: EvalPairSeed, MinObjects: 2, MaxObjects: 2, Distinct: true}
	peakOK, ownOK := 0, 0
	for a := 0; a < n; a += batch {
		b := min(n, a+batch)
		sc, imgs := render(pair, a, b)
		caps := make([]string, len(sc))
		for i, s := range sc {
			caps[i] = s.Caption
		}
		ims, err := eng.EncodeImages(ctx, imgs)
		if err != nil {
			return res, fmt.Errorf("pipeline: eval: %w", err)
		}
		ps, err := eng.Prepare(ctx, caps...)
		if err != nil {
			return res, fmt.Errorf("pipeline: eval: %w", err)
		}
		for i, s := range sc {
			im := &ims[i]
			atts, err := eng.Attend(ctx, im, ps[i:i+1], AttendOptions{})
			if err != nil {
				return res, fmt.Errorf("pipeline: eval: %w", err)
			}
			att := &atts[0]
			t, p := ps[i].T(), im.P()
			if t != len(s.Words)+2 {
				return res, fmt.Errorf("pipeline: eval: caption %q has %d words but %d tokens; the evaluation needs one token per word plus BOS and EOS", s.Caption, len(s.Words), t)
			}
			g := im.Grid
			if g.H != g.W || EvalImageSize%g.H != 0 {
				return res, fmt.Errorf("pipeline: eval: patch grid %s does not divide a %d-pixel image", g, EvalImageSize)
			}
			cov := s.Coverage(EvalImageSize, g.H)
			for _, ref := range s.Refs {
				c := cov[ref.Object]
				if maxOf(c) < EvalInside {
					res.PeakSkipped++
					continue
				}
				tok := ref.Word + 1
				row := att.TextToImage[tok*p : (tok+1)*p]
				at := argmax(row)
				res.PeakWords++
				if c[at] >= EvalInside {
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
				if most < EvalOwned {
					continue
				}
				row := att.ImageToText[j*t : (j+1)*t]
				at := 0
				for r, ref := range s.Refs {
					if row[ref.Word+1] > row[s.Refs[at].Word+1] {
						at = r
					}
				}
				res.OwnPatches++
				if s.Refs[at].Object == owner {
					ownOK++
				}
			}
		}
		progress(b - a)
	}
	if res.PeakWords > 0 {
		res.PeakInside = float64(peakOK) / float64(res.PeakWords)
	}
	if res.OwnPatches > 0 {
		res.OwnWord = float64(ownOK) / float64(res.OwnPatches)
	}
	return res, nil
}

// render returns scenes [a, b) of g and their images at EvalImageSize.
func render(g scenes.Generator, a, b int) ([]scenes.Scene, []image.Image) {
	sc := make([]scenes.Scene, 0, b-a)
	imgs := make([]image.Image, 0, b-a)
	for i := a; i < b; i++ {
		s := g.Scene(i)
		sc = append(sc, s)
		imgs = append(imgs, s.Render(EvalImageSize))
	}
	return sc, imgs
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
