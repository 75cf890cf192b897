package pipeline

import (
	"fmt"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/xattn"
)

// buildPEJoint makes the joint-space layers of a model with a PE-Core
// vision tower: tokens through text_projection, as CLIP's; patches (the
// last block's rows, before the trunk's norm) through the attention
// pool's value path (the trunk's norm, kv's value half, proj, then
// y + mlp(norm(y)) with exact GELU: xattn.PoolingHead) and the head
// Linear, as the pool takes the whole image there; both L2-normalised,
// scaled by exp(logit_scale).
func (e *Engine) buildPEJoint() error {
	m, dir := e.m, e.opts.Direction
	ts, err := m.ReadWeights(models.PECoreHeadNames...)
	if err != nil {
		return fmt.Errorf("pipeline: joint space: %w", err)
	}
	var ferr error
	get := func(name string, n int) []float32 {
		v, err := ts[name].Float32()
		if err == nil && len(v) != n {
			err = fmt.Errorf("%v, expected %d values", ts[name].Shape, n)
		}
		if err != nil && ferr == nil {
			ferr = fmt.Errorf("pipeline: joint space of %s: %s: %w", m.Name(), name, err)
		}
		return v
	}
	const t, p = "visual.trunk.", "visual.trunk.attn_pool."
	d, dt := e.dv, e.dt
	inter := m.Config().VisionConfig.PECore.PoolIntermediateSize
	proj := m.Config().ProjectionDim
	eps := float32(m.Config().VisionConfig.LayerNormEps)
	kv, kvb := get(p+"kv.weight", 2*d*d), get(p+"kv.bias", 2*d)
	hw := xattn.PoolingHeadWeights{
		Pre: &xattn.LayerNorm{Weight: get(t+"norm.weight", d), Bias: get(t+"norm.bias", d), Eps: eps},
		O:   get(p+"proj.weight", d*d), BO: get(p+"proj.bias", d),
		Norm: xattn.LayerNorm{Weight: get(p+"norm.weight", d), Bias: get(p+"norm.bias", d), Eps: eps},
		FC1:  get(p+"mlp.fc1.weight", inter*d), B1: get(p+"mlp.fc1.bias", inter),
		FC2: get(p+"mlp.fc2.weight", d*inter), B2: get(p+"mlp.fc2.bias", d),
		ExactGelu: true,
	}
	head, headB := get(t+"head.weight", proj*d), get(t+"head.bias", proj)
	text := get("text_projection.weight", proj*dt)
	if ferr != nil {
		return ferr
	}
	hw.V, hw.BV = kv[d*d:], kvb[d:]
	if e.patchHead, err = xattn.NewPoolingHeadOf(hw); err != nil {
		return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
	}
	if e.logitScale == 0 {
		return fmt.Errorf("pipeline: joint space of %s: no logit_scale", m.Name())
	}
	w := xattn.Weights{Inner: proj, Heads: 1, Scale: float32(e.logitScale), NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
	if dir&xattn.ImageToText != 0 {
		wi := w
		wi.DQ, wi.Q, wi.BQ, wi.DKV, wi.K = d, head, headB, dt, text
		if e.i2t, err = xattn.New(wi); err != nil {
			return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
		}
	}
	if dir&xattn.TextToImage != 0 {
		wt := w
		wt.DQ, wt.Q, wt.DKV, wt.K, wt.BK = dt, text, d, head, headB
		if e.t2i, err = xattn.New(wt); err != nil {
			return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
		}
	}
	e.jointPatches = e.i2t != nil && e.t2i != nil
	return nil
}
