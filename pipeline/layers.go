package pipeline

import (
	"fmt"
	"strings"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn"
)

// JointHeadNames are the tensors of model.safetensors that CLIP's joint
// space is built from (Hugging Face CLIPModel names).
var JointHeadNames = []string{"text_projection.weight", "visual_projection.weight",
	"vision_model.post_layernorm.weight", "vision_model.post_layernorm.bias", "logit_scale"}

// LoadDiffusersLayer reads the cross-attention layer whose tensors follow
// prefix in a .safetensors file (diffusers names: prefix + to_q.weight,
// to_k.weight, to_v.weight, to_out.0.weight, to_out.0.bias) and splits it
// into heads heads. Only that layer's tensors are read, not the rest of a
// large checkpoint.
func LoadDiffusersLayer(path, prefix string, heads int) (*xattn.Layer, error) {
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
	dir, m := e.opts.Direction, e.m
	if e.opts.Layer == nil {
		e.layerName = "joint"
		if !m.Has(models.WeightsFile) {
			return fmt.Errorf("pipeline: CLIP's joint space needs the projection heads in %s of model %s; give a learned or identity layer instead", models.WeightsFile, m.Name())
		}
		ts, err := m.ReadWeights(JointHeadNames...)
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
	l := e.opts.Layer
	if e.layerName = e.opts.LayerName; e.layerName == "" {
		e.layerName = "custom"
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
