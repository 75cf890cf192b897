package graphbuild

import (
	"fmt"
	"math"
)

// PEARL's constants (ReadoutPEARL): the weight of the centred key–key
// term, the Newton–Schulz steps of the polar factor (the authors'
// default), and the epsilons added to the sum of the query norms and to
// M's Frobenius norm.
const (
	PEARLGamma     = 0.08
	PEARLSteps     = 5
	PEARLWeightEps = 1e-6
	PEARLNormEps   = 1e-6
)

// checkPEARL refuses a PEARL readout whose class rows cannot be told
// apart: a Dynamic graph has no fixed S to mask them in.
func (c ReadoutConfig) checkPEARL() error {
	if c.Dynamic && c.Class > 0 {
		return fmt.Errorf("graphbuild: readout %s: a dynamic graph with %d class rows: want none (the class rows are masked out of the centroids by position)", c.Kind, c.Class)
	}
	if c.Dino != nil {
		return fmt.Errorf("graphbuild: readout %s: a DINOv2 block (TIPSv2) takes readout %s only", c.Kind, ReadoutMaskCLIP)
	}
	return nil
}

// pearlGraph adds PEARL's attention (ReadoutPEARL) on h = layer_norm1(x)
// [B, S, d] to g, then out_proj (finish), and writes the graph. Per head,
// with q, k, v [S, d_h] and s = d_h^-½:
//
//	w_i = ‖q_i‖ (0 on the class rows); w ← w / (Σ w + PEARLWeightEps)
//	q_c = q − Σ w_i q_i, k_c = k − Σ w_i k_i
//	X = M / (‖M‖_F + PEARLNormEps), M = k_cᵀ q_c [d_h, d_h]
//	X ← 1.5 X − 0.5 X Xᵀ X, PEARLSteps times; R = X
//	A = softmax((q s)(k R)ᵀ + PEARLGamma (k_c k_cᵀ) s), o = A v
//
// (q and k first turned by rope when it is not nil: PE-Core's RoPE),
// computed without the terms that are constant along a row of the logits
// (the softmax over the keys does not see them): k_c,i · k_c,j =
// k_c,i · k_j − k_c,i · k̄, so the logits are (s q Rᵀ + γ s k_c) kᵀ, one
// product of width d_h.
func (c ReadoutConfig) pearlGraph(g *graph, h string, vals map[string][]float32, w func(string, ...int64) string, wT func(string) string, rope *peRope) ([]byte, error) {
	d, heads := int64(c.Width), int64(c.Heads)
	dh := d / heads
	s := float32(1 / math.Sqrt(float64(dh)))
	p := c.Prefix + "self_attn."
	projs := []string{"q_proj", "k_proj", "v_proj"}
	packed := g.weight(p+"q_proj+k_proj+v_proj.weight.T", []int64{d, 3 * d}, func() ([]float32, error) {
		out := make([]float32, d*3*d)
		for j, name := range projs {
			pw := vals[p+name+".weight"]
			for o := range d {
				for i := range d {
					out[i*3*d+int64(j)*d+o] = pw[o*d+i]
				}
			}
		}
		return out, nil
	})
	packedBias := g.weight(p+"q_proj+k_proj+v_proj.bias", []int64{3 * d}, func() ([]float32, error) {
		out := make([]float32, 0, 3*d)
		for _, name := range projs {
			out = append(out, vals[p+name+".bias"]...)
		}
		return out, nil
	})
	qkv := g.op("Add", "", g.op("MatMul", "", h, packed), packedBias)
	qn, kn, vn := g.tmp("q"), g.tmp("k"), g.tmp("v")
	g.nodes = append(g.nodes, &node{op: "Split", name: qn, in: []string{qkv, g.constInts("qkv_sizes", []int64{3}, d, d, d)},
		out: []string{qn, kn, vn}, attrs: []attr{intAttr("axis", -1)}})
	if rope != nil {
		// PE-Core: q and k turned as the block turns them.
		qn, kn = rope.apply(g, qn, heads), rope.apply(g, kn, heads)
	}
	split := g.constInts("heads_shape", []int64{4}, 0, 0, heads, dh)
	perHead := func(x string) string { // [B, S, d] → [B, H, S, d_h]
		t := g.op("Transpose", "", g.op("Reshape", "", x, split))
		g.last().with(intsAttr("perm", 0, 2, 1, 3))
		return t
	}
	swap := func(x string) string { // the last two axes
		t := g.op("Transpose", "", x)
		g.last().with(intsAttr("perm", 0, 1, 3, 2))
		return t
	}
	scalar := func(stem string, v float32) string { return g.constFloats(stem, nil, v) }
	q, k, v := perHead(qn), perHead(kn), perHead(vn)

	// The query-norm weights [B, H, S, 1], zero on the class rows.
	wq := g.op("ReduceL2", "", q)
	g.last().with(intsAttr("axes", -1), intAttr("keepdims", 1))
	if c.Class > 0 {
		n := c.Class + c.GridH*c.GridW
		mask := make([]float32, n)
		for i := c.Class; i < n; i++ {
			mask[i] = 1
		}
		wq = g.op("Mul", "", wq, g.constFloats("pearl_patch_mask", []int64{int64(n), 1}, mask...))
	}
	tokens := g.constInts("tokens_axis", []int64{1}, 2)
	sum := g.op("ReduceSum", "", wq, tokens)
	g.last().with(intAttr("keepdims", 1))
	wq = g.op("Div", "", wq, g.op("Add", "", sum, scalar("pearl_weight_eps", PEARLWeightEps)))
	centre := func(x string) string {
		bar := g.op("ReduceSum", "", g.op("Mul", "", wq, x), tokens)
		g.last().with(intAttr("keepdims", 1))
		return g.op("Sub", "", x, bar)
	}
	qc, kc := centre(q), centre(k)

	// R, the polar factor of M = k_cᵀ q_c by Newton–Schulz.
	m := g.op("MatMul", "", swap(kc), qc)
	fro := g.op("ReduceL2", "", m)
	g.last().with(intsAttr("axes", 2, 3), intAttr("keepdims", 1))
	x := g.op("Div", "", m, g.op("Add", "", fro, scalar("pearl_norm_eps", PEARLNormEps)))
	half, threeHalves := scalar("half", 0.5), scalar("three_halves", 1.5)
	for range PEARLSteps {
		cube := g.op("MatMul", "", g.op("MatMul", "", x, swap(x)), x)
		x = g.op("Sub", "", g.op("Mul", "", x, threeHalves), g.op("Mul", "", cube, half))
	}
	// Row i's logits less the terms the softmax over j does not see:
	// (q_i s)(k_j R) + γ s (k_c,i · k_j) = (s q_i Rᵀ + γ s k_c,i) · k_j.
	rt := g.op("Mul", "", swap(x), scalar("attn_scale", s))
	left := g.op("Add", "", g.op("MatMul", "", q, rt), g.op("Mul", "", kc, scalar("pearl_gamma_scale", PEARLGamma*s)))
	logits := g.op("MatMul", "", left, swap(k))
	probs := g.op("Softmax", "", logits)
	g.last().with(intAttr("axis", -1))
	oh := g.op("Transpose", "", g.op("MatMul", "", probs, v))
	g.last().with(intsAttr("perm", 0, 2, 1, 3))
	o := g.op("Reshape", "", oh, g.constInts("merge_shape", []int64{3}, 0, 0, d))
	return c.finish(g, o, vals, w, wT)
}
