package pipeline

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/vision"
)

// OptimizeProbes makes the inputs a rewritten graph of m is checked on
// against its original (clip.Optimize, clip.OptimizeInt8): imgs preprocessed as m does
// (nil: eight drawn scenes of shapes on gradients, 256² pixels), and
// prompts tokenized and padded to one length, the longest prompt's (SigLIP:
// the context length, as the engine pads them) (nil: a few everyday ones).
func OptimizeProbes(m *models.Model, imgs []image.Image, prompts []string) (clip.Probes, error) {
	var p clip.Probes
	pre, err := vision.LoadPreprocessor(m.FS())
	if err != nil {
		return p, err
	}

	tok, err := loadTokenizer(m)
	if err != nil {
		return p, err
	}
	if n := m.Config().TextConfig.MaxPositionEmbeddings; n > 0 {
		tok = tok.ForModel(n)
	}
	if imgs == nil {
		imgs = probeScenes(8, 256)
	}
	if prompts == nil {
		prompts = []string{"a photo of a dog", "a red circle next to a blue square", "two cats sleeping on a sofa in the afternoon sun",
			"a diagram", "a yellow star", "a green cross above a white triangle"}
	}
	if pre.NaFlex != nil {
		if err := naflexProbes(&p, pre, imgs); err != nil {
			return p, err
		}
	} else if err := squareProbes(&p, pre, imgs); err != nil {
		return p, err
	}
	n := 0
	for _, s := range prompts {
		ids, _ := tok.Encode(s)
		n = max(n, len(ids))
	}
	n = min(n, tok.ContextLength())
	if m.Family().Sigmoid() {
		// SigLIP reads the last of its padded positions: its graphs take
		// the whole context (64), as the engine feeds them.
		n = tok.ContextLength()
	}
	ids, mask, err := tok.EncodeBatch(prompts, n)
	if err != nil {
		return p, err
	}
	for i := range prompts {
		p.IDs = append(p.IDs, ids[i*n:(i+1)*n])
		p.Masks = append(p.Masks, mask[i*n:(i+1)*n])
	}
	return p, nil
}

// squareProbes preprocesses the probe images into p (Pixels [N, 3, H, W]),
// which must all come out one size.
func squareProbes(p *clip.Probes, pre *vision.Preprocessor, imgs []image.Image) error {
	for _, img := range imgs {
		px, h, w, err := pre.Apply(img)
		if err != nil {
			return err
		}
		if p.N > 0 && (h != p.Height || w != p.Wd) {
			return fmt.Errorf("probe images preprocess to %dx%d and %dx%d", p.Height, p.Wd, h, w)
		}
		p.Pixels = append(p.Pixels, px...)
		p.N, p.Height, p.Wd = p.N+1, h, w
	}
	return nil
}

// naflexProbes cuts SigLIP 2 NaFlex's probe images on their own grids
// into p (Pixels [N, Patches, C·p²], Grids).
func naflexProbes(p *clip.Probes, pre *vision.Preprocessor, imgs []image.Image) error {
	nf := pre.NaFlex
	p.Patches = nf.MaxNumPatches
	mask, spatial := make([]int32, nf.MaxNumPatches), make([]int64, 2)
	for _, img := range imgs {
		px := make([]float32, nf.MaxNumPatches*nf.PatchDim())
		g, err := pre.ApplyNaFlexInto(px, mask, spatial, img)
		if err != nil {
			return err
		}
		p.Pixels = append(p.Pixels, px...)
		p.Grids = append(p.Grids, [2]int{g.H, g.W})
		p.N++
	}
	return nil
}

// probeScenes draws n images of side pixels: a gradient and two shapes of
// varied colours, sizes and places.
func probeScenes(n, side int) []image.Image {
	out := make([]image.Image, n)
	colours := []color.RGBA{{220, 40, 40, 255}, {40, 90, 220, 255}, {240, 210, 40, 255}, {40, 170, 70, 255}, {250, 250, 250, 255}, {20, 20, 20, 255}}
	for i := range out {
		img := image.NewRGBA(image.Rect(0, 0, side, side))
		for y := range side {
			for x := range side {
				img.SetRGBA(x, y, color.RGBA{uint8(40 + (x*(i+1))%120), uint8(60 + y*100/side), uint8(90 + (i*37)%100), 255})
			}
		}
		for k := range 2 {
			c := colours[(i*2+k)%len(colours)]
			s := side/5 + (i*13+k*29)%(side/4)
			x0, y0 := (i*41+k*97)%(side-s), (i*67+k*53)%(side-s)
			if k == 0 {
				draw.Draw(img, image.Rect(x0, y0, x0+s, y0+s), &image.Uniform{c}, image.Point{}, draw.Src)
				continue
			}
			r := s / 2
			for y := -r; y < r; y++ {
				for x := -r; x < r; x++ {
					if x*x+y*y < r*r {
						img.SetRGBA(x0+r+x, y0+r+y, c)
					}
				}
			}
		}
		out[i] = img
	}
	return out
}
