// Package xattn is multi-head cross-attention between two sequences that may
// differ in length and width: queries [T_q, d_q] attend to a source
// [T_k, d_kv] through projections W_Q [inner, d_q], W_K [inner, d_kv],
// W_V [inner, d_kv] and an optional W_O [d_out, inner] (PyTorch [out, in]
// layout, y = x Wᵀ + b), split into heads of head_dim = inner/heads:
//
//	out = concat_h softmax(scale · Q_h K_hᵀ, masked) V_h · W_Oᵀ + b_O
//
// It works both ways (image → text with patches as queries and prompt tokens
// as keys and values; text → image the reverse). The side that stays fixed
// for a job can be prepared once (PrepareSource, PrepareQuery) and reused;
// a side that changes per item but meets several partners (an image's
// patches and many prompts) is prepared per item into reused buffers
// (Workspace.PrepareSource, Workspace.PrepareQuery), and rows projected by
// one layer can become another's source (PrepareSourceProjected).
// Weights come from diffusers-named tensors (FromDiffusers), CLIP's joint
// embedding space (Joint) or nothing (Identity); xattn reads no files.
//
// A key padding mask is a []bool of length T_k, true where the key is
// attended (like Hugging Face's attention_mask). A query row whose keys are
// all masked attends to nothing: its attention probabilities are 0 and its
// attention output is 0 (so the layer outputs b_O), never NaN.
//
// Projections run on the packed GEMM of xattn/internal/gemm, split by rows
// across a workspace's goroutines. The attention core runs on the fused
// kernel of xattn/internal/attn: per head, tiles of 4 query rows take the
// scores against keys packed in 16-key panels in register tiles, an exact
// softmax (row max, a vectorised exp, row sum) and P·V, one kernel call for
// all the tiles a goroutine takes; each kernel has AVX-512, AVX2+FMA and
// pure-Go versions chosen by xattn/internal/cpuid. All arithmetic is
// float32.
package xattn

import (
	"errors"
	"fmt"
	"math"

	"github.com/conditionhq/condition/xattn/internal/gemm"
)

// LayerNorm is a layer normalisation applied to a side's rows before its
// projection: y = (x - mean) / sqrt(var + Eps) · Weight + Bias, Weight and
// Bias [d] (Bias may be nil).
type LayerNorm struct {
	Weight, Bias []float32
	Eps          float32
}

// Weights describes a cross-attention layer. Matrices are PyTorch [out, in],
// row-major. A nil Q means the queries are used as they are (inner = DQ);
// likewise K (inner = DKV). A nil V with ValueIsKey uses the (normalised)
// projected keys as values; a nil V without it uses the source as it is. A
// nil O means no output projection (DOut = Inner).
type Weights struct {
	DQ, DKV, Inner, DOut int
	Heads                int
	// Scale multiplies the scores; 0 means 1/sqrt(Inner/Heads).
	Scale float32

	Q, K, V, O     []float32 // [Inner, DQ], [Inner, DKV], [Inner, DKV], [DOut, Inner]
	BQ, BK, BV, BO []float32 // [Inner], [Inner], [Inner], [DOut]; each optional

	// QNorm and KVNorm, when set, normalise the query and source rows
	// before projection.
	QNorm, KVNorm *LayerNorm
	// NormalizeQ and NormalizeK L2-normalise the projected query and key
	// rows (over the whole inner width), as CLIP's joint space does.
	NormalizeQ, NormalizeK bool
	// ValueIsKey uses the projected (and normalised) keys as values.
	ValueIsKey bool
}

// Layer is a cross-attention layer with its weights packed for the GEMM
// kernels. It is immutable and safe for concurrent use; run it through a
// Workspace (or the allocating Forward).
type Layer struct {
	dq, dkv, inner, dout, heads, hd int
	scale                           float32

	wq, wk, wv, wo *gemm.Packed
	bq, bk, bv, bo []float32
	qln, kvln      *LayerNorm
	normQ, normK   bool
	vIsK           bool
}

// ErrShape is wrapped by errors about sizes that do not fit the layer.
var ErrShape = errors.New("shape mismatch")

// New checks w and packs its matrices. The matrices are copied (packed);
// w may be reused afterwards.
func New(w Weights) (*Layer, error) {
	if w.DQ <= 0 || w.DKV <= 0 || w.Inner <= 0 {
		return nil, fmt.Errorf("xattn: widths must be positive (d_q %d, d_kv %d, inner %d)", w.DQ, w.DKV, w.Inner)
	}
	if w.Heads <= 0 {
		return nil, fmt.Errorf("xattn: heads must be positive, got %d", w.Heads)
	}
	if w.Inner%w.Heads != 0 {
		return nil, fmt.Errorf("xattn: inner width %d is not a multiple of %d heads", w.Inner, w.Heads)
	}
	dout := w.DOut
	if w.O == nil {
		if dout != 0 && dout != w.Inner {
			return nil, fmt.Errorf("xattn: no output projection but d_out %d != inner %d", dout, w.Inner)
		}
		dout = w.Inner
	}
	if dout <= 0 {
		return nil, fmt.Errorf("xattn: d_out must be positive, got %d", dout)
	}
	l := &Layer{dq: w.DQ, dkv: w.DKV, inner: w.Inner, dout: dout, heads: w.Heads, hd: w.Inner / w.Heads,
		normQ: w.NormalizeQ, normK: w.NormalizeK, vIsK: w.ValueIsKey}
	l.scale = w.Scale
	if l.scale == 0 {
		l.scale = float32(1 / math.Sqrt(float64(l.hd)))
	}
	if math.IsNaN(float64(l.scale)) || math.IsInf(float64(l.scale), 0) {
		return nil, fmt.Errorf("xattn: scale %v is not finite", l.scale)
	}
	var err error
	pack := func(name string, m []float32, rows, cols int, identityOK bool) *gemm.Packed {
		if err != nil {
			return nil
		}
		if m == nil {
			if !identityOK {
				err = fmt.Errorf("xattn: W_%s missing and %d != %d rules out identity: %w", name, rows, cols, ErrShape)
			}
			return nil
		}
		if len(m) != rows*cols {
			err = fmt.Errorf("xattn: W_%s has %d elements, want [%d, %d] = %d: %w", name, len(m), rows, cols, rows*cols, ErrShape)
			return nil
		}
		return gemm.PackTransposed(m, rows, cols)
	}
	vec := func(name string, b []float32, n int) []float32 {
		if err != nil || b == nil {
			return nil
		}
		if len(b) != n {
			err = fmt.Errorf("xattn: bias b_%s has %d elements, want %d: %w", name, len(b), n, ErrShape)
			return nil
		}
		return append([]float32(nil), b...)
	}
	l.wq = pack("Q", w.Q, w.Inner, w.DQ, w.Inner == w.DQ)
	l.wk = pack("K", w.K, w.Inner, w.DKV, w.Inner == w.DKV)
	if w.ValueIsKey {
		if w.V != nil || w.BV != nil {
			err = errors.New("xattn: ValueIsKey with W_V or b_V given")
		}
	} else {
		l.wv = pack("V", w.V, w.Inner, w.DKV, w.Inner == w.DKV)
	}
	l.wo = pack("O", w.O, dout, w.Inner, true)
	l.bq = vec("Q", w.BQ, w.Inner)
	l.bk = vec("K", w.BK, w.Inner)
	l.bv = vec("V", w.BV, w.Inner)
	l.bo = vec("O", w.BO, dout)
	if err == nil && w.O == nil && w.BO != nil {
		err = errors.New("xattn: b_O given without W_O")
	}
	if err != nil {
		return nil, err
	}
	if l.qln, err = checkLN("query", w.QNorm, w.DQ); err != nil {
		return nil, err
	}
	if l.kvln, err = checkLN("source", w.KVNorm, w.DKV); err != nil {
		return nil, err
	}
	return l, nil
}

func checkLN(side string, ln *LayerNorm, d int) (*LayerNorm, error) {
	if ln == nil {
		return nil, nil
	}
	if len(ln.Weight) != d || (ln.Bias != nil && len(ln.Bias) != d) {
		return nil, fmt.Errorf("xattn: %s layer norm has weight [%d] and bias [%d], want [%d]: %w", side, len(ln.Weight), len(ln.Bias), d, ErrShape)
	}
	c := &LayerNorm{Weight: append([]float32(nil), ln.Weight...), Eps: ln.Eps}
	if ln.Bias != nil {
		c.Bias = append([]float32(nil), ln.Bias...)
	}
	if c.Eps <= 0 {
		c.Eps = 1e-5
	}
	return c, nil
}

// Identity returns a layer without projections for features that already
// share the width d: Q, K and V are the inputs, split into heads; scale is
// 1/sqrt(d/heads) unless scale != 0.
func Identity(d, heads int, scale float32) (*Layer, error) {
	return New(Weights{DQ: d, DKV: d, Inner: d, Heads: heads, Scale: scale})
}

// DQ returns the query width d_q.
func (l *Layer) DQ() int { return l.dq }

// DKV returns the source width d_kv.
func (l *Layer) DKV() int { return l.dkv }

// Inner returns the projected width heads × head_dim.
func (l *Layer) Inner() int { return l.inner }

// DOut returns the output width.
func (l *Layer) DOut() int { return l.dout }

// Heads returns the number of heads.
func (l *Layer) Heads() int { return l.heads }

// HeadDim returns inner / heads.
func (l *Layer) HeadDim() int { return l.hd }

// Scale returns the factor applied to the scores.
func (l *Layer) Scale() float32 { return l.scale }

// FLOPs returns the floating-point operations of one Forward with tq
// queries and tk keys, counting 2·m·n·k per matrix product: the projections
// (Q, K, V and O, those the layer has) and the attention core (Q Kᵀ and
// P V over all heads). Normalisations, softmax and biases are not counted.
func (l *Layer) FLOPs(tq, tk int) (proj, core float64) {
	q, k, in := float64(tq), float64(tk), float64(l.inner)
	if l.wq != nil {
		proj += 2 * q * float64(l.dq) * in
	}
	if l.wk != nil {
		proj += 2 * k * float64(l.dkv) * in
	}
	if l.wv != nil {
		proj += 2 * k * float64(l.dkv) * in
	}
	if l.wo != nil {
		proj += 2 * q * in * float64(l.dout)
	}
	core = 2 * 2 * q * k * in
	return proj, core
}
