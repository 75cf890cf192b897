package pipeline

import (
	"context"
	"fmt"
	"image"
	"os"

	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// Attention is one image attended with one prompt.
type Attention struct {
	Prompt      string
	Tokens      []string    // BOS … EOS, as the vocabulary spells them
	Words       []text.Word // the prompt's words over Tokens
	Grid        vision.Grid // the patch grid, P = Grid.H × Grid.W
	ImageToText []float32   // [P, T]: row p is what patch p draws on (nil if not computed)
	TextToImage []float32   // [T, P]: row t is where token t looks (nil if not computed)
	Score       float64     // CLIP score: exp(logit_scale) · cos(image_embeds, text_embeds); 0 if unknown
	Overlays    []Overlay   // one per content word, for heatmaps
}

// AttendImage runs one image through the model and attends it with every
// prompt of cfg, both ways as cfg.Direction asks. It returns the decoded
// image, the region of it the model saw (for drawing) and one Attention per
// prompt. cfg's Inputs, Out and job settings are ignored.
func AttendImage(ctx context.Context, cfg Config, path string) (image.Image, image.Rectangle, []Attention, error) {
	e, err := newEngine(cfg)
	if err != nil {
		return nil, image.Rectangle{}, nil, err
	}
	defer e.close()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, image.Rectangle{}, nil, fmt.Errorf("pipeline: %w", err)
	}
	img, err := vision.Decode(data, vision.DecodeOptions{MaxPixels: cfg.MaxPixels})
	if err != nil {
		return nil, image.Rectangle{}, nil, fmt.Errorf("pipeline: %s: %w", path, err)
	}
	px, h, w, err := e.pre.Apply(img)
	if err != nil {
		return nil, image.Rectangle{}, nil, fmt.Errorf("pipeline: %s: %w", path, err)
	}
	encs, err := e.venc.Encode(ctx, px, 1, h, w)
	if err != nil {
		return nil, image.Rectangle{}, nil, err
	}
	enc := encs[0]
	p := enc.Tokens - 1
	patches := enc.States[enc.Width:]
	ws := e.newWorkspaces()
	defer ws.close()
	if err := e.preparePatches(ws, patches, p); err != nil {
		return nil, image.Rectangle{}, nil, fmt.Errorf("pipeline: %w", err)
	}
	res := &ws.res
	var out []Attention
	for _, ps := range e.prompts {
		a := Attention{Prompt: ps.text, Words: ps.words, Grid: enc.Grid}
		ids := make([]int, ps.t)
		for i := range ids {
			ids[i] = int(ps.ids[i])
		}
		a.Tokens, _ = e.tok.Tokens(ids)
		if ws.i2t != nil {
			if err := ws.i2t.ForwardPrepared(res, &ws.patchQ, ps.src, xattn.MeanAttention); err != nil {
				return nil, image.Rectangle{}, nil, fmt.Errorf("pipeline: attention: %w", err)
			}
			a.ImageToText = clone(res.Attn[:p*ps.t])
		}
		if ws.t2i != nil {
			if err := ws.t2i.ForwardPrepared(res, ps.q, &ws.patchSrc, xattn.MeanAttention); err != nil {
				return nil, image.Rectangle{}, nil, fmt.Errorf("pipeline: attention: %w", err)
			}
			a.TextToImage = clone(res.Attn[:ps.t*p])
		}
		if enc.Embeds != nil && ps.embeds != nil && e.logitScale != 0 {
			a.Score = e.logitScale * cosine(enc.Embeds, ps.embeds)
		}
		a.Overlays = wordOverlays(ps, a.TextToImage, a.ImageToText, p)
		out = append(out, a)
	}
	return img, e.cropRegion(img.Bounds()), out, nil
}
