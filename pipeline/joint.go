package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// errNotJoint is the error of the joint-space methods on an engine of
// another layer.
var errNotJoint = errors.New("pipeline: the engine does not attend both ways in CLIP's joint space")

// JointPatches returns img's patches in CLIP's joint space, [P, D] unit
// vectors (post_layernorm, visual_projection, L2-normalised): what a
// prompt's tokens compare with, and what a collection's index stores so
// that later prompts attend to its images without encoding them again
// (AttendJoint). It needs an engine in the joint space both ways (the
// default layer).
func (e *Engine) JointPatches(img *ImageEncoding) ([]float32, error) {
	if !e.jointPatches {
		return nil, errNotJoint
	}
	if img == nil {
		return nil, errors.New("pipeline: joint patches: no image encoding")
	}
	p := img.P()
	if p <= 0 || len(img.States) != (e.cls+p)*img.Width || img.Width != e.dv {
		return nil, fmt.Errorf("pipeline: joint patches: image encoding of %d values for %d patches of width %d; the engine's patches have width %d", len(img.States), p, img.Width, e.dv)
	}
	ws := e.getWorkspaces()
	defer e.putWorkspaces(ws)
	patches, err := e.headRows(ws, img)
	if err != nil {
		return nil, err
	}
	if err := ws.i2t.PrepareQuery(&ws.patchQ, patches, p); err != nil {
		return nil, fmt.Errorf("pipeline: joint patches: %w", err)
	}
	return slices.Clone(ws.patchQ.Rows()), nil
}

// JointDim returns the width D of the joint space's vectors (0 when the
// engine is not in the joint space both ways).
func (e *Engine) JointDim() int {
	if !e.jointPatches {
		return 0
	}
	return e.i2t.Inner()
}

// AttendJoint attends each prepared prompt to an image known only by its
// joint-space patches ([P, D], JointPatches' rows, of grid g): text →
// image, the prompt's tokens querying the patches. Each Attention has
// Similarity (every token's cosine with every patch) and TextToImage (its
// attention map), and so its Overlays, TopPatches and Heatmap; image →
// text maps and scores are left out (the image encoding is not there).
func (e *Engine) AttendJoint(ctx context.Context, patches []float32, g vision.Grid, prompts Prompts) ([]Attention, error) {
	if !e.jointPatches {
		return nil, errNotJoint
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, d := g.Patches(), e.i2t.Inner()
	if p <= 0 || len(patches) != p*d {
		return nil, fmt.Errorf("pipeline: attend joint: %d values for a %s grid of %d-wide joint-space patches (want %d)", len(patches), g, d, p*d)
	}
	ws := e.getWorkspaces()
	defer e.putWorkspaces(ws)
	if err := ws.t2i.PrepareSourceProjected(&ws.patchSrc, patches, nil, p, nil); err != nil {
		return nil, fmt.Errorf("pipeline: attend joint: %w", err)
	}
	out := make([]Attention, len(prompts))
	for k, ps := range prompts {
		if ps == nil || ps.eng != e {
			return nil, fmt.Errorf("pipeline: attend joint: prompt %d was not prepared by this engine", k)
		}
		t := ps.T()
		a := &out[k]
		a.Prompt, a.Grid = ps, g
		a.Similarity = similarity(ps.q.Rows(), patches, t, p)
		if err := ws.t2i.ForwardPrepared(&ws.res, ps.q, &ws.patchSrc, xattn.MeanAttention); err != nil {
			return nil, fmt.Errorf("pipeline: attend joint (prompt %d): %w", k, err)
		}
		a.TextToImage, _, _ = take(&ws.res, t*p, xattn.MeanAttention, AttendOptions{})
		a.Heads, a.DOut = ws.res.Heads, ws.res.DOut
	}
	return out, nil
}
