package xattn

import (
	"fmt"
	"math"

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
	pre       *LayerNorm   // PoolingHeadWeights.Pre
	exact     bool         // exact GELU
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
	return NewPoolingHeadOf(PoolingHeadWeights{
		V: in[2*d*d : 3*d*d], BV: inB[2*d : 3*d], O: wo, BO: bo,
		Norm: LayerNorm{Weight: lnw, Bias: lnb, Eps: lnEps},
		FC1:  fc1, B1: b1, FC2: fc2, B2: b2,
	})
}

// PoolingHeadWeights is the value path of an attention-pooling head, as
// NewPoolingHeadOf takes it, PyTorch [out, in] row-major, d the rows'
// width and h the MLP's:
//
//	x' = Pre(x)                      (when Pre is not nil)
//	o  = (x'·Vᵀ + BV)·Oᵀ + BO
//	y  = o + FC2ᵀ·gelu(FC1ᵀ·Norm(o) + B1) + B2
//
// with GELU in its tanh form (SigLIP's gelu_pytorch_tanh), or exact (erf:
// nn.GELU) with ExactGelu. PE-Core's head (timm's AttentionPoolLatent
// after the trunk's norm) is Pre the trunk's norm, V and BV the second
// half of kv, O and BO its proj, exact GELU.
type PoolingHeadWeights struct {
	Pre       *LayerNorm
	V, BV     []float32 // [d, d], [d]
	O, BO     []float32 // [d, d], [d]
	Norm      LayerNorm // [d]
	FC1, B1   []float32 // [h, d], [h]
	FC2, B2   []float32 // [d, h], [d]
	ExactGelu bool
}

// NewPoolingHeadOf makes the head of w, checking every shape against the
// width of BV (d) and of B1 (h).
func NewPoolingHeadOf(w PoolingHeadWeights) (*PoolingHead, error) {
	d, hidden := len(w.BV), len(w.B1)
	bad := func(name string, got, want int) error {
		return fmt.Errorf("xattn: pooling head: %s has %d values, want %d (d %d, MLP width %d): %w", name, got, want, d, hidden, ErrShape)
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{{"V", len(w.V), d * d}, {"O", len(w.O), d * d}, {"BO", len(w.BO), d}, {"Norm.Weight", len(w.Norm.Weight), d},
		{"Norm.Bias", len(w.Norm.Bias), d}, {"FC1", len(w.FC1), hidden * d}, {"FC2", len(w.FC2), d * hidden}, {"B2", len(w.B2), d}} {
		if c.got != c.want || d == 0 || hidden == 0 {
			return nil, bad(c.name, c.got, c.want)
		}
	}
	if p := w.Pre; p != nil && (len(p.Weight) != d || len(p.Bias) != d) {
		return nil, bad("Pre", len(p.Weight), d)
	}
	// W_vo = W_o·W_v and b_vo = W_o·b_v + b_o, in float64.
	wv, bv, wo, bo := w.V, w.BV, w.O, w.BO
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
		d: d, hidden: hidden, pre: w.Pre, exact: w.ExactGelu,
		wvo: gemm.PackTransposed(wvo, d, d), bvo: bvo,
		ln:  w.Norm,
		fc1: gemm.PackTransposed(w.FC1, hidden, d), b1: w.B1,
		fc2: gemm.PackTransposed(w.FC2, d, hidden), b2: w.B2,
	}, nil
}

// Dim returns the width d of the rows the head takes and gives.
func (h *PoolingHead) Dim() int { return h.d }

// PoolingScratch is reusable memory for PoolingHead.Apply (one per
// goroutine).
type PoolingScratch struct {
	ln, mid, pre []float32
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
	if h.pre != nil {
		s.pre = grow(s.pre, n*d)
		layerNorm(s.pre, x, n, d, h.pre)
		x = s.pre
	}
	gemm.MatMul(y, d, x, d, n, h.wvo, h.bvo) // o
	layerNorm(s.ln, y, n, d, &h.ln)
	gemm.MatMul(s.mid, h.hidden, s.ln, d, n, h.fc1, h.b1)
	if h.exact {
		geluErf(s.mid[:n*h.hidden])
	} else {
		attn.GeluTanh(s.mid[:n*h.hidden])
	}
	// y += fc2(mid): fc2's product goes to ln's buffer (free now), then adds.
	gemm.MatMul(s.ln, d, s.mid, h.hidden, n, h.fc2, h.b2)
	for i, v := range s.ln[:n*d] {
		y[i] += v
	}
	return nil
}

// geluErf replaces x[i] by exact GELU, x·Φ(x) = 0.5·x·(1 + erf(x/√2)),
// computed in float64.
func geluErf(x []float32) {
	for i, v := range x {
		f := float64(v)
		x[i] = float32(0.5 * f * (1 + math.Erf(f/math.Sqrt2)))
	}
}
