package pipeline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn"
)

// jointHeadNames are the tensors of model.safetensors that CLIP's joint
// space is built from (Hugging Face CLIPModel names).
var jointHeadNames = []string{"text_projection.weight", "visual_projection.weight",
	"vision_model.post_layernorm.weight", "vision_model.post_layernorm.bias", "logit_scale"}

// Layer names the attention layer an engine attends with:
//
//   - CLIP's joint space (Weights "" or "joint"; no extra weights, one head):
//     both sides through the model's own projection heads (text_projection;
//     post_layernorm then visual_projection), L2-normalised, scaled by
//     exp(logit_scale); for TIPSv2, which has no heads, the token and patch
//     rows as the towers give them, L2-normalised, scaled by
//     1/temperature;
//   - "identity": the token and patch states as they are, for models whose
//     two widths agree, in Heads heads (default 1);
//   - a learned layer: Weights is a .safetensors file whose tensors follow
//     Prefix in diffusers names (to_q.weight, to_k.weight, to_v.weight,
//     to_out.0.weight, to_out.0.bias), split into Heads heads (default 8).
//
// A layer serves image → text when it takes patches as queries and tokens
// as source (d_q = d_v, d_kv = d_t) and text → image when it takes them the
// other way round; a direction asked for explicitly that it does not fit is
// an error.
type Layer struct {
	Weights string
	Prefix  string
	Heads   int
}

// ParseLayer reads a layer's canonical name (Layer.String): "joint",
// "identity", "identity/H", "FILE#PREFIX/H", or a bare FILE.
func ParseLayer(s string) (Layer, error) {
	switch s {
	case "", "joint":
		return Layer{}, nil
	case "identity":
		return Layer{Weights: "identity"}, nil
	}
	l := Layer{Weights: s}
	if i := strings.LastIndexByte(s, '/'); i >= 0 && (strings.HasPrefix(s, "identity/") || strings.Contains(s, "#")) {
		h, err := strconv.Atoi(s[i+1:])
		if err != nil || h < 1 {
			return Layer{}, fmt.Errorf("pipeline: layer %q: the heads after / must be a number of 1 or more", s)
		}
		l.Weights, l.Heads = s[:i], h
	}
	if w, p, ok := strings.Cut(l.Weights, "#"); ok && l.Weights != "identity" {
		l.Weights, l.Prefix = w, p
	}
	return l, l.check()
}

// joint reports whether l is CLIP's joint space.
func (l Layer) joint() bool { return l.Weights == "" || l.Weights == "joint" }

// heads returns the heads of l, its default when 0.
func (l Layer) heads() int {
	switch {
	case l.Heads > 0 || l.joint():
		return l.Heads
	case l.Weights == "identity":
		return 1
	}
	return 8
}

// check refuses what the layer cannot be: heads or a prefix on the joint
// space, a prefix on identity, negative heads.
func (l Layer) check() error {
	switch {
	case l.Heads < 0:
		return fmt.Errorf("pipeline: layer %s: %d heads; want 1 or more (0: the default)", l, l.Heads)
	case l.joint() && l.Heads != 0:
		return fmt.Errorf("pipeline: CLIP's joint space has no heads to set (a learned or identity layer has)")
	case l.joint() && l.Prefix != "":
		return fmt.Errorf("pipeline: a tensor prefix applies to a learned layer's file, not to CLIP's joint space")
	case l.Weights == "identity" && l.Prefix != "":
		return fmt.Errorf("pipeline: a tensor prefix applies to a learned layer's file, not to the identity layer")
	}
	return nil
}

// String returns the layer's canonical name, as metadata and the batch
// job's resume settings record it: "joint", "identity" (one head),
// "identity/H", or "FILE#PREFIX/H" for a learned layer.
func (l Layer) String() string {
	switch {
	case l.joint():
		return "joint"
	case l.Weights == "identity":
		if h := l.heads(); h != 1 {
			return fmt.Sprintf("identity/%d", h)
		}
		return "identity"
	}
	return fmt.Sprintf("%s#%s/%d", l.Weights, l.Prefix, l.heads())
}

// loadDiffusers reads the cross-attention layer whose tensors follow
// prefix in a .safetensors file (diffusers names: prefix + to_q.weight,
// to_k.weight, to_v.weight, to_out.0.weight, to_out.0.bias) and splits it
// into heads heads. Only that layer's tensors are read, not the rest of a
// large checkpoint.
func loadDiffusers(path, prefix string, heads int) (*xattn.Layer, error) {
	// The layer's tensors, and the attention tensors an error may list as
	// near misses.
	ts, _, err := tensorio.ReadSafetensorsFunc(path, func(n string) bool {
		return strings.HasPrefix(n, prefix) || strings.Contains(n, "to_")
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	l, err := xattn.FromDiffusers(ts, prefix, heads, 0)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %s: %w", path, err)
	}
	return l, nil
}

// buildLayers makes the image → text and text → image layers the options
// ask for.
func (e *Engine) buildLayers() error {
	dir, m, spec := e.opts.Direction, e.m, e.opts.Layer
	if err := spec.check(); err != nil {
		return err
	}
	e.layerName = spec.String()
	if spec.joint() && m.Family().Sigmoid() {
		return e.buildSiglipJoint()
	}
	if spec.joint() && m.Family() == models.Tipsv2 {
		return e.buildTipsJoint()
	}
	if spec.joint() && m.Config().VisionConfig.PECore != nil {
		return e.buildPEJoint()
	}
	if spec.joint() {
		if !m.Has(models.WeightsFile) {
			return fmt.Errorf("pipeline: CLIP's joint space needs the projection heads in %s of model %s; give a learned or identity layer instead", models.WeightsFile, m.Name())
		}
		ts, err := m.ReadWeights(jointHeadNames...)
		if err != nil {
			return fmt.Errorf("pipeline: joint space: %w", err)
		}
		eps := float32(m.Config().VisionConfig.LayerNormEps)
		if dir&xattn.ImageToText != 0 {
			if e.i2t, err = xattn.Joint(ts, xattn.ImageToText, eps); err != nil {
				return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
			}
		}
		if dir&xattn.TextToImage != 0 {
			if e.t2i, err = xattn.Joint(ts, xattn.TextToImage, eps); err != nil {
				return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
			}
		}
		e.jointPatches = e.i2t != nil && e.t2i != nil
		return nil
	}
	var l *xattn.Layer
	var err error
	if spec.Weights == "identity" {
		if e.dt != e.dv {
			return fmt.Errorf("pipeline: the identity layer needs token and patch states of one width; model %s has %d and %d (use CLIP's joint space)", m.Name(), e.dt, e.dv)
		}
		if l, err = xattn.Identity(e.dt, spec.heads(), 0); err != nil {
			return fmt.Errorf("pipeline: layer %s: %w", spec, err)
		}
	} else if l, err = loadDiffusers(spec.Weights, spec.Prefix, spec.heads()); err != nil {
		return err
	}
	fitsI2T := l.DQ() == e.dv && l.DKV() == e.dt
	fitsT2I := l.DQ() == e.dt && l.DKV() == e.dv
	if dir&xattn.ImageToText != 0 {
		if !fitsI2T {
			if dir == xattn.Both && fitsT2I {
				e.log.Info("the attention layer does not fit image to text; computing text to image only", "layer", e.layerName)
			} else {
				return fmt.Errorf("pipeline: attention layer %s takes queries of width %d and a source of width %d; image to text needs %d (patches of %s) and %d (tokens)",
					e.layerName, l.DQ(), l.DKV(), e.dv, m.Name(), e.dt)
			}
		} else {
			e.i2t = l
		}
	}
	if dir&xattn.TextToImage != 0 {
		if !fitsT2I {
			if dir == xattn.Both && e.i2t != nil {
				e.log.Info("the attention layer does not fit text to image; computing image to text only", "layer", e.layerName)
			} else {
				return fmt.Errorf("pipeline: attention layer %s takes queries of width %d and a source of width %d; text to image needs %d (tokens of %s) and %d (patches)",
					e.layerName, l.DQ(), l.DKV(), e.dt, m.Name(), e.dv)
			}
		} else {
			e.t2i = l
		}
	}
	return nil
}

// buildTipsJoint makes the joint-space layers of a TIPSv2 model, which has
// no heads: the token rows of the text tower's last_hidden_state and the
// patch rows of the vision tower's (its patch_embeds: after the final
// layernorm, the space the model aligns patches and text in), each
// L2-normalised, scaled by 1/temperature (the engine's logit scale).
func (e *Engine) buildTipsJoint() error {
	m, dir := e.m, e.opts.Direction
	if e.dt != e.dv {
		return fmt.Errorf("pipeline: joint space of %s: TIPSv2's towers must share one width; text %d, vision %d", m.Name(), e.dt, e.dv)
	}
	if e.logitScale == 0 {
		return fmt.Errorf("pipeline: joint space of %s: no temperature", m.Name())
	}
	w := xattn.Weights{DQ: e.dt, DKV: e.dv, Inner: e.dt, Heads: 1, Scale: float32(e.logitScale), NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
	var err error
	if dir&xattn.ImageToText != 0 {
		if e.i2t, err = xattn.New(w); err != nil {
			return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
		}
	}
	if dir&xattn.TextToImage != 0 {
		if e.t2i, err = xattn.New(w); err != nil {
			return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
		}
	}
	e.jointPatches = e.i2t != nil && e.t2i != nil
	return nil
}

// buildSiglipJoint makes the joint-space layers of a SigLIP model: tokens
// through the text head (the linear layer SigLIP pools the last position
// with), patches through the vision head's value path (see
// xattn.PoolingHead), both L2-normalised, scaled by exp(logit_scale).
func (e *Engine) buildSiglipJoint() error {
	m, dir := e.m, e.opts.Direction
	if !m.Has(models.WeightsFile) {
		return fmt.Errorf("pipeline: SigLIP's joint space needs the heads in %s of model %s; give a learned or identity layer instead", models.WeightsFile, m.Name())
	}
	ts, err := m.ReadWeights(models.SiglipHeadNames...)
	if err != nil {
		return fmt.Errorf("pipeline: joint space: %w", err)
	}
	if e.patchHead, err = xattn.NewPoolingHead(ts, "vision_model.head.", float32(m.Config().VisionConfig.LayerNormEps)); err != nil {
		return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
	}
	tw, err := ts["text_model.head.weight"].Float32()
	if err != nil {
		return fmt.Errorf("pipeline: joint space of %s: text_model.head.weight: %w", m.Name(), err)
	}
	tb, err := ts["text_model.head.bias"].Float32()
	if err != nil {
		return fmt.Errorf("pipeline: joint space of %s: text_model.head.bias: %w", m.Name(), err)
	}
	d := e.patchHead.Dim()
	if sh := ts["text_model.head.weight"].Shape; len(sh) != 2 || sh[0] != d || sh[1] != e.dt || len(tb) != d {
		return fmt.Errorf("pipeline: joint space of %s: text_model.head.weight is %v and its bias %d values; expected [%d %d] and %d (the vision head's width × the text width)",
			m.Name(), sh, len(tb), d, e.dt, d)
	}
	w := xattn.Weights{Inner: d, Heads: 1, Scale: float32(e.logitScale), NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
	if e.logitScale == 0 {
		return fmt.Errorf("pipeline: joint space of %s: no logit_scale", m.Name())
	}
	if dir&xattn.ImageToText != 0 {
		wi := w
		wi.DQ, wi.DKV, wi.K, wi.BK = d, e.dt, tw, tb
		if e.i2t, err = xattn.New(wi); err != nil {
			return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
		}
	}
	if dir&xattn.TextToImage != 0 {
		wt := w
		wt.DQ, wt.Q, wt.BQ, wt.DKV = e.dt, tw, tb, d
		if e.t2i, err = xattn.New(wt); err != nil {
			return fmt.Errorf("pipeline: joint space of %s: %w", m.Name(), err)
		}
	}
	e.jointPatches = e.i2t != nil && e.t2i != nil
	return nil
}
