package pipeline

import (
	"context"
	"fmt"
	"image"
	"math"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
)

// JointEncoder puts prompts and images into CLIP's joint space as DESIGN.md
// defines it (tokens through text_projection; patches through
// post_layernorm then visual_projection; both L2-normalised). It implements
// models.JointEncoder, which `condition models eval` measures.
type JointEncoder struct {
	tok      *text.Tokenizer
	te       *text.Encoder
	ve       *vision.Encoder
	pre      *vision.Preprocessor
	textProj []float32 // [d_p, d_t]
	visProj  []float32 // [d_p, d_v]
	lnW, lnB []float32 // vision_model.post_layernorm [d_v]
	eps      float64
	dp       int
}

// NewJointEncoder opens m's tokenizer, encoders and projection heads.
func NewJointEncoder(m *models.Model, threads int) (_ *JointEncoder, err error) {
	j := &JointEncoder{}
	defer func() {
		if err != nil {
			j.Close()
		}
	}()
	if j.tok, err = text.LoadTokenizer(m.FS()); err != nil {
		return nil, err
	}
	if j.pre, err = vision.LoadPreprocessor(m.FS()); err != nil {
		return nil, err
	}
	if j.te, j.ve, err = openEncoders(m, text.EncoderOptions{Threads: threads}, vision.EncoderOptions{Threads: threads}); err != nil {
		return nil, err
	}
	names := []string{"text_projection.weight", "visual_projection.weight", "vision_model.post_layernorm.weight", "vision_model.post_layernorm.bias"}
	w, err := m.ReadWeights(names...)
	if err != nil {
		return nil, err
	}
	vals := make([][]float32, len(names))
	for i, n := range names {
		if vals[i], err = w[n].Float32(); err != nil {
			return nil, fmt.Errorf("pipeline: %s: %w", n, err)
		}
	}
	j.textProj, j.visProj, j.lnW, j.lnB = vals[0], vals[1], vals[2], vals[3]
	j.eps, j.dp = m.Config().VisionConfig.LayerNormEps, m.Config().ProjectionDim
	if j.dp <= 0 || len(j.textProj)%j.dp != 0 || len(j.visProj) != j.dp*len(j.lnW) {
		return nil, fmt.Errorf("pipeline: projection heads of %s do not fit projection_dim %d", m.Name(), j.dp)
	}
	return j, nil
}

// Close releases the encoders. It is safe to call more than once.
func (j *JointEncoder) Close() error {
	if j.te != nil {
		j.te.Close()
	}
	if j.ve != nil {
		j.ve.Close()
	}
	return nil
}

// projectNorm returns normalize(W x) for W [dp, len(x)].
func projectNorm(w []float32, dp int, x []float32) []float32 {
	out := make([]float32, dp)
	var n float64
	for o := range dp {
		var s float64
		for i, v := range w[o*len(x) : (o+1)*len(x)] {
			s += float64(v) * float64(x[i])
		}
		out[o] = float32(s)
		n += s * s
	}
	if n = math.Sqrt(n); n > 0 {
		for o := range out {
			out[o] = float32(float64(out[o]) / n)
		}
	}
	return out
}

// Texts encodes prompts: per prompt its tokens (BOS to EOS) in the joint
// space [T][d_p] and text_embeds.
func (j *JointEncoder) Texts(ctx context.Context, prompts []string) ([]models.JointText, error) {
	longest := 0
	for _, p := range prompts {
		ids, err := j.tok.Encode(p)
		if err != nil {
			return nil, err
		}
		longest = max(longest, len(ids))
	}
	ids := make([][]int64, len(prompts))
	masks := make([][]int64, len(prompts))
	for i, p := range prompts {
		var err error
		if ids[i], masks[i], err = j.tok.EncodePadded(p, longest); err != nil {
			return nil, err
		}
	}
	enc, err := j.te.Encode(ctx, ids, masks)
	if err != nil {
		return nil, err
	}
	out := make([]models.JointText, len(enc))
	for i, e := range enc {
		for k := 0; k < e.T; k++ {
			if e.Mask[k] != 0 {
				out[i].Tokens = append(out[i].Tokens, projectNorm(j.textProj, j.dp, e.States[k*e.Width:(k+1)*e.Width]))
			}
		}
		out[i].Embed = e.Embeds
	}
	return out, nil
}

// Images encodes images: per image its patches in the joint space [P][d_p],
// the grid and image_embeds.
func (j *JointEncoder) Images(ctx context.Context, imgs []image.Image) ([]models.JointImage, error) {
	var pixels []float32
	var h, w int
	for _, img := range imgs {
		p, ph, pw, err := j.pre.Apply(img)
		if err != nil {
			return nil, err
		}
		h, w = ph, pw
		pixels = append(pixels, p...)
	}
	enc, err := j.ve.Encode(ctx, pixels, len(imgs), h, w)
	if err != nil {
		return nil, err
	}
	out := make([]models.JointImage, len(enc))
	for i, e := range enc {
		out[i] = models.JointImage{GridH: e.Grid.H, GridW: e.Grid.W, Embed: e.Embeds}
		x := make([]float32, e.Width)
		for p := 1; p < e.Tokens; p++ {
			layerNorm(x, e.States[p*e.Width:(p+1)*e.Width], j.lnW, j.lnB, j.eps)
			out[i].Patches = append(out[i].Patches, projectNorm(j.visProj, j.dp, x))
		}
	}
	return out, nil
}

// layerNorm writes (x - mean) / sqrt(var + eps) · w + b into dst.
func layerNorm(dst, x, w, b []float32, eps float64) {
	var mean, vr float64
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		vr += (float64(v) - mean) * (float64(v) - mean)
	}
	inv := 1 / math.Sqrt(vr/float64(len(x))+eps)
	for k, v := range x {
		dst[k] = float32((float64(v)-mean)*inv)*w[k] + b[k]
	}
}
