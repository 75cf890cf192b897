package xattn

import (
	"fmt"

	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn/internal/attn"
	"github.com/conditionhq/condition/xattn/internal/gemm"
)

// PoolingHead is the value path of an attention-pooling head (SigLIP's
// vision head, Hugging Face's SiglipMultiheadAttentionPoolingHead) applied
// to each row alone: with one key, the probe's softmax is 1, so the
// attention's output is the row's value projected out,
//
//	o = (x·W_vᵀ + b_v)·W_oᵀ + b_o
//	y = o + fc2(gelu_tanh(fc1(layernorm(o))))
//
// which maps a patch's state [d] to the joint space [d] the way the head
// maps the whole image there: the dense readout of attention-pooled towers.
// W_v and b_v are the third block of the head's in_proj_weight [3d, d] and
// in_proj_bias [3d]; W_o·W_v is folded into one matrix at load. A
// PoolingHead is immutable and safe for concurrent use.
type PoolingHead struct {
	d, hidden int
	wvo       *gemm.Packed // (W_o·W_v)ᵀ packed: [d, d]
	bvo       []float32    // W_o·b_v + b_o [d]
	ln        LayerNorm
	fc1, fc2  *gemm.Packed
	b1, b2    []float32
}

// NewPoolingHead reads the head from Hugging Face SiglipModel tensors under
// prefix ("vision_model.head."): attention.in_proj_weight [3d, d],
// attention.in_proj_bias [3d], attention.out_proj.weight [d, d] and .bias
// [d], layernorm.weight and .bias [d], mlp.fc1.weight [h, d] and .bias [h],
// mlp.fc2.weight [d, h] and .bias [d]. lnEps is the layer norm's epsilon
// (vision_config.layer_norm_eps).
func NewPoolingHead(ts map[string]tensorio.Tensor, prefix string, lnEps float32) (*PoolingHead, error) {
	in, sh, err := tensor(ts, prefix+"attention.in_proj_weight", false, -1, -1)
	if err != nil {
		return nil, err
	}
	if sh[0] != 3*sh[1] {
		return nil, fmt.Errorf("xattn: tensor %q has shape %s, want [3d, d]: %w", prefix+"attention.in_proj_weight", shapeString(sh), ErrShape)
	}
	d := sh[1]
	inB, _, err := tensor(ts, prefix+"attention.in_proj_bias", false, 3*d)
	if err != nil {
		return nil, err
	}
	wo, _, err := tensor(ts, prefix+"attention.out_proj.weight", false, d, d)
	if err != nil {
		return nil, err
	}
	bo, _, err := tensor(ts, prefix+"attention.out_proj.bias", false, d)
	if err != nil {
		return nil, err
	}
	lnw, _, err := tensor(ts, prefix+"layernorm.weight", false, d)
	if err != nil {
		return nil, err
	}
	lnb, _, err := tensor(ts, prefix+"layernorm.bias", false, d)
	if err != nil {
		return nil, err
	}
	fc1, sh1, err := tensor(ts, prefix+"mlp.fc1.weight", false, -1, d)
	if err != nil {
		return nil, err
	}
	hidden := sh1[0]
	b1, _, err := tensor(ts, prefix+"mlp.fc1.bias", false, hidden)
	if err != nil {
		return nil, err
	}
	fc2, _, err := tensor(ts, prefix+"mlp.fc2.weight", false, d, hidden)
	if err != nil {
		return nil, err
	}
	b2, _, err := tensor(ts, prefix+"mlp.fc2.bias", false, d)
	if err != nil {
		return nil, err
	}
	// W_vo = W_o·W_v and b_vo = W_o·b_v + b_o, in float64.
	wv, bv := in[2*d*d:3*d*d], inB[2*d:3*d]
	wvo := make([]float32, d*d)
	bvo := make([]float32, d)
	row := make([]float64, d)
	for i := 0; i < d; i++ {
		clear(row)
		b := float64(bo[i])
		for k := 0; k < d; k++ {
			a := float64(wo[i*d+k])
			b += a * float64(bv[k])
			for j, v := range wv[k*d : (k+1)*d] {
				row[j] += a * float64(v)
			}
		}
		for j, v := range row {
			wvo[i*d+j] = float32(v)
		}
		bvo[i] = float32(b)
	}
	return &PoolingHead{
		d: d, hidden: hidden,
		wvo: gemm.PackTransposed(wvo, d, d), bvo: bvo,
		ln:  LayerNorm{Weight: lnw, Bias: lnb, Eps: lnEps},
		fc1: gemm.PackTransposed(fc1, hidden, d), b1: b1,
		fc2: gemm.PackTransposed(fc2, d, hidden), b2: b2,
	}, nil
}

// Dim returns the width d of the rows the head takes and gives.
func (h *PoolingHead) Dim() int { return h.d }

// PoolingScratch is reusable memory for PoolingHead.Apply (one per
// goroutine).
type PoolingScratch struct {
	ln, mid []float32
}

// Apply writes y [n, d] = the head applied to each row of x [n, d]; y must
// not overlap x. s may be nil (Apply then allocates).
func (h *PoolingHead) Apply(y, x []float32, n int, s *PoolingScratch) error {
	d := h.d
	if n < 0 || len(x) < n*d || len(y) < n*d {
		return fmt.Errorf("xattn: pooling head: %d rows of width %d need %d values; x has %d, y %d: %w", n, d, n*d, len(x), len(y), ErrShape)
	}
	if n == 0 {
		return nil
	}
	if s == nil {
		s = new(PoolingScratch)
	}
	s.ln = grow(s.ln, n*d)
	s.mid = grow(s.mid, n*h.hidden)
	gemm.MatMul(y, d, x, d, n, h.wvo, h.bvo) // o
	layerNorm(s.ln, y, n, d, &h.ln)
	gemm.MatMul(s.mid, h.hidden, s.ln, d, n, h.fc1, h.b1)
	attn.GeluTanh(s.mid[:n*h.hidden])
	// y += fc2(mid): fc2's product goes to ln's buffer (free now), then adds.
	gemm.MatMul(s.ln, d, s.mid, h.hidden, n, h.fc2, h.b2)
	for i, v := range s.ln[:n*d] {
		y[i] += v
	}
	return nil
}
