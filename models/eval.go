package models

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math"

	"github.com/conditionhq/condition/internal/scenes"
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

// JointText is one prompt in CLIP's joint space.
type JointText struct {
	// Tokens [T][d_p] holds normalize(text_projection(last_hidden_state[i]))
	// for the prompt's tokens, BOS to EOS; padding is left out.
	Tokens [][]float32
	// Embed is text_embeds [d_p] (normalised or not).
	Embed []float32
}

// JointImage is one image in CLIP's joint space.
type JointImage struct {
	// Patches [P][d_p] holds
	// normalize(visual_projection(post_layernorm(last_hidden_state[1+j])))
	// for the patches in row-major grid order.
	Patches [][]float32
	// GridH, GridW is the patch grid (GridH·GridW = P).
	GridH, GridW int
	// Embed is image_embeds [d_p] (normalised or not).
	Embed []float32
}

// JointEncoder puts prompts and images into CLIP's joint space. The
// evaluation is written against it so that it does not depend on the
// encoders (which import this package).
type JointEncoder interface {
	Texts(ctx context.Context, prompts []string) ([]JointText, error)
	Images(ctx context.Context, imgs []image.Image) ([]JointImage, error)
}

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

// Evaluate measures enc on the held-out scenes.
func Evaluate(ctx context.Context, enc JointEncoder, opts EvalOptions) (EvalResult, error) {
	n := opts.Scenes
	if n <= 0 {
		n = 1000
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 100
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
	texts, err := enc.Texts(ctx, prompts)
	if err != nil {
		return res, fmt.Errorf("models: eval: %w", err)
	}
	if len(texts) != len(prompts) {
		return res, fmt.Errorf("models: eval: %d text encodings for %d prompts", len(texts), len(prompts))
	}
	classes := make([][]float32, len(texts))
	for i, t := range texts {
		if t.Embed == nil {
			return res, errors.New("models: eval: the text encoder gives no text_embeds")
		}
		classes[i] = normalized(t.Embed)
	}
	single := scenes.Generator{Seed: EvalSingleSeed, MinObjects: 1, MaxObjects: 1, Distinct: true}
	correct := 0
	for a := 0; a < n; a += batch {
		b := min(n, a+batch)
		sc, imgs := render(single, a, b)
		out, err := enc.Images(ctx, imgs)
		if err != nil {
			return res, fmt.Errorf("models: eval: %w", err)
		}
		if len(out) != len(imgs) {
			return res, fmt.Errorf("models: eval: %d image encodings for %d images", len(out), len(imgs))
		}
		for i, im := range out {
			if im.Embed == nil {
				return res, errors.New("models: eval: the vision encoder gives no image_embeds")
			}
			e := normalized(im.Embed)
			best, at := math.Inf(-1), -1
			for k, c := range classes {
				if len(c) != len(e) {
					return res, fmt.Errorf("models: eval: text_embeds has %d values, image_embeds %d", len(c), len(e))
				}
				if d := dot(c, e); d > best {
					best, at = d, k
				}
			}
			o := sc[i].Objects[0]
			if labels[at] == (label{o.Colour, o.Shape}) {
				correct++
			}
		}
		progress(b - a)
	}
	res.ZeroShotN = n
	res.ZeroShotTop1 = float64(correct) / float64(n)

	// Attention maps on two-object scenes.
	pair := scenes.Generator{Seed: EvalPairSeed, MinObjects: 2, MaxObjects: 2, Distinct: true}
	peakOK, ownOK := 0, 0
	for a := 0; a < n; a += batch {
		b := min(n, a+batch)
		sc, imgs := render(pair, a, b)
		caps := make([]string, len(sc))
		for i, s := range sc {
			caps[i] = s.Caption
		}
		ims, err := enc.Images(ctx, imgs)
		if err != nil {
			return res, fmt.Errorf("models: eval: %w", err)
		}
		txs, err := enc.Texts(ctx, caps)
		if err != nil {
			return res, fmt.Errorf("models: eval: %w", err)
		}
		if len(ims) != len(sc) || len(txs) != len(sc) {
			return res, fmt.Errorf("models: eval: %d image and %d text encodings for %d scenes", len(ims), len(txs), len(sc))
		}
		for i, s := range sc {
			im, tx := ims[i], txs[i]
			if len(tx.Tokens) != len(s.Words)+2 {
				return res, fmt.Errorf("models: eval: caption %q has %d words but %d tokens; the evaluation needs one token per word plus BOS and EOS", s.Caption, len(s.Words), len(tx.Tokens))
			}
			if im.GridH*im.GridW != len(im.Patches) || im.GridH != im.GridW || EvalImageSize%im.GridH != 0 {
				return res, fmt.Errorf("models: eval: patch grid %dx%d (%d patches) does not divide a %d-pixel image", im.GridH, im.GridW, len(im.Patches), EvalImageSize)
			}
			cov := s.Coverage(EvalImageSize, im.GridH)
			// scores[t][j] = t_i·p_j (the scale exp(logit_scale) changes no argmax).
			score := func(tok, j int) float64 { return dot(tx.Tokens[tok], im.Patches[j]) }
			for _, ref := range s.Refs {
				c := cov[ref.Object]
				if maxOf(c) < EvalInside {
					res.PeakSkipped++
					continue
				}
				tok := ref.Word + 1
				best, at := math.Inf(-1), -1
				for j := range im.Patches {
					if v := score(tok, j); v > best {
						best, at = v, j
					}
				}
				res.PeakWords++
				if c[at] >= EvalInside {
					peakOK++
				}
			}
			for j := range im.Patches {
				owner, most := -1, 0.0
				for k := range cov {
					if cov[k][j] > most {
						owner, most = k, cov[k][j]
					}
				}
				if most < EvalOwned {
					continue
				}
				best, at := math.Inf(-1), -1
				for r, ref := range s.Refs {
					if v := score(ref.Word+1, j); v > best {
						best, at = v, r
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

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func normalized(v []float32) []float32 {
	n := math.Sqrt(dot(v, v))
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	for i, x := range v {
		out[i] = float32(float64(x) / n)
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
