package xattn

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/conditionhq/condition/tensorio"
)

// tensor returns the named tensor as float32, checking its shape; want
// entries < 0 match any size. F16, BF16 and F64 are converted.
func tensor(ts map[string]tensorio.Tensor, name string, optional bool, want ...int) ([]float32, []int, error) {
	t, ok := ts[name]
	if !ok {
		if optional {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("xattn: tensor %q missing%s", name, near(ts, name))
	}
	switch t.DType {
	case tensorio.DTypeF32, tensorio.DTypeF16, tensorio.DTypeBF16, tensorio.DTypeF64:
	default:
		return nil, nil, fmt.Errorf("xattn: tensor %q has dtype %s, want a float type (F32, F16, BF16 or F64)", name, t.DType)
	}
	okShape := len(t.Shape) == len(want)
	for i := 0; okShape && i < len(want); i++ {
		okShape = want[i] < 0 || want[i] == t.Shape[i]
	}
	if !okShape {
		return nil, nil, fmt.Errorf("xattn: tensor %q has shape %v, want %s: %w", name, t.Shape, shapeString(want), ErrShape)
	}
	f, err := t.Float32()
	if err != nil {
		return nil, nil, fmt.Errorf("xattn: tensor %q: %w", name, err)
	}
	return f, t.Shape, nil
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		if v < 0 {
			parts[i] = "?"
		} else {
			parts[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// near lists up to three tensor names sharing the last component of name,
// to help with a wrong prefix.
func near(ts map[string]tensorio.Tensor, name string) string {
	suffix := name
	if i := strings.Index(name, "to_"); i >= 0 {
		suffix = name[i:]
	} else if i := strings.LastIndex(name, "."); i >= 0 {
		suffix = name[i:]
	}
	var found []string
	for k := range ts {
		if strings.HasSuffix(k, suffix) {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return ""
	}
	sort.Strings(found)
	if len(found) > 3 {
		found = append(found[:3], "...")
	}
	return " (tensors with that suffix: " + strings.Join(found, ", ") + ")"
}

// FromDiffusers builds a layer from diffusers-named tensors under prefix
// (for example "down_blocks.1.attentions.0.transformer_blocks.0.attn2."; a
// missing trailing dot is added): to_q.weight [inner, d_q],
// to_k.weight [inner, d_kv], to_v.weight [inner, d_kv], to_out.0.weight
// [d_out, inner] and to_out.0.bias [d_out], with optional to_q.bias,
// to_k.bias, to_v.bias [inner]. Scale is 1/sqrt(inner/heads) unless
// scale != 0. Missing tensors, wrong dtypes and shapes are errors naming
// the tensor.
func FromDiffusers(ts map[string]tensorio.Tensor, prefix string, heads int, scale float32) (*Layer, error) {
	if prefix != "" && !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	var w Weights
	var sh []int
	var err error
	if w.Q, sh, err = tensor(ts, prefix+"to_q.weight", false, -1, -1); err != nil {
		return nil, err
	}
	w.Inner, w.DQ = sh[0], sh[1]
	if w.K, sh, err = tensor(ts, prefix+"to_k.weight", false, w.Inner, -1); err != nil {
		return nil, err
	}
	w.DKV = sh[1]
	if w.V, _, err = tensor(ts, prefix+"to_v.weight", false, w.Inner, w.DKV); err != nil {
		return nil, err
	}
	if w.O, sh, err = tensor(ts, prefix+"to_out.0.weight", false, -1, w.Inner); err != nil {
		return nil, err
	}
	w.DOut = sh[0]
	if w.BO, _, err = tensor(ts, prefix+"to_out.0.bias", true, w.DOut); err != nil {
		return nil, err
	}
	for _, b := range []struct {
		name string
		dst  *[]float32
	}{{"to_q.bias", &w.BQ}, {"to_k.bias", &w.BK}, {"to_v.bias", &w.BV}} {
		if *b.dst, _, err = tensor(ts, prefix+b.name, true, w.Inner); err != nil {
			return nil, err
		}
	}
	if heads <= 0 || w.Inner%heads != 0 {
		return nil, fmt.Errorf("xattn: %d heads do not divide the inner width %d of %sto_q.weight", heads, w.Inner, prefix)
	}
	w.Heads, w.Scale = heads, scale
	return New(w)
}

// Direction says which side provides the queries: image → text (patches
// query tokens), text → image (tokens query patches), or, where a caller
// computes several, both (a bit set).
type Direction int

// Directions.
const (
	// ImageToText: image patches [P, d_v] are the queries, prompt tokens
	// [T, d_t] the keys and values (diffusion style).
	ImageToText Direction = 1 << iota
	// TextToImage: prompt tokens are the queries, image patches the keys
	// and values (VLM style).
	TextToImage
	// Both is ImageToText and TextToImage.
	Both = ImageToText | TextToImage
)

// ParseDirection parses image-to-text, text-to-image or both (the names
// String gives).
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "image-to-text":
		return ImageToText, nil
	case "text-to-image":
		return TextToImage, nil
	case "both":
		return Both, nil
	}
	return 0, fmt.Errorf("xattn: direction %q: want image-to-text, text-to-image or both", s)
}

func (d Direction) String() string {
	switch d {
	case ImageToText:
		return "image-to-text"
	case TextToImage:
		return "text-to-image"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Joint builds the one-head layer of CLIP's joint embedding space from
// Hugging Face CLIPModel tensors: text_projection.weight [d_p, d_t],
// visual_projection.weight [d_p, d_v], vision_model.post_layernorm.weight
// and .bias [d_v], logit_scale (scalar or [1]). Both sides are projected
// into [*, d_p] and L2-normalised per row (patches through post_layernorm,
// eps lnEps or 1e-5 when 0, first); scores are exp(logit_scale)·cos; the
// values are the projected, normalised source rows; there is no W_O, so
// d_out = d_p. dir picks the query side.
func Joint(ts map[string]tensorio.Tensor, dir Direction, lnEps float32) (*Layer, error) {
	tp, sh, err := tensor(ts, "text_projection.weight", false, -1, -1)
	if err != nil {
		return nil, err
	}
	dp, dt := sh[0], sh[1]
	vp, sh, err := tensor(ts, "visual_projection.weight", false, dp, -1)
	if err != nil {
		return nil, err
	}
	dv := sh[1]
	lnw, _, err := tensor(ts, "vision_model.post_layernorm.weight", false, dv)
	if err != nil {
		return nil, err
	}
	lnb, _, err := tensor(ts, "vision_model.post_layernorm.bias", false, dv)
	if err != nil {
		return nil, err
	}
	ls, err := logitScale(ts)
	if err != nil {
		return nil, err
	}
	ln := &LayerNorm{Weight: lnw, Bias: lnb, Eps: lnEps}
	w := Weights{Inner: dp, Heads: 1, Scale: float32(math.Exp(float64(ls))),
		NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
	switch dir {
	case ImageToText:
		w.DQ, w.Q, w.QNorm = dv, vp, ln
		w.DKV, w.K = dt, tp
	case TextToImage:
		w.DQ, w.Q = dt, tp
		w.DKV, w.K, w.KVNorm = dv, vp, ln
	default:
		return nil, fmt.Errorf("xattn: joint space: direction %s: want ImageToText or TextToImage", dir)
	}
	if math.IsInf(float64(w.Scale), 0) {
		return nil, fmt.Errorf("xattn: exp(logit_scale) = exp(%v) overflows", ls)
	}
	return New(w)
}

func logitScale(ts map[string]tensorio.Tensor) (float32, error) {
	t, ok := ts["logit_scale"]
	if !ok {
		return 0, fmt.Errorf("xattn: tensor %q missing", "logit_scale")
	}
	if t.NumElements() != 1 || !(len(t.Shape) == 0 || slices.Equal(t.Shape, []int{1})) {
		return 0, fmt.Errorf("xattn: tensor %q has shape %v, want [] or [1]: %w", "logit_scale", t.Shape, ErrShape)
	}
	f, _, err := tensor(ts, "logit_scale", false, t.Shape...)
	if err != nil {
		return 0, err
	}
	return f[0], nil
}
