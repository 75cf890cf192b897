package onnxgraph

import (
	"fmt"
	"io"
	"sort"
)

// FuseReport says what Fuse did to a graph.
type FuseReport struct {
	NodesBefore int `json:"nodes_before"`
	NodesAfter  int `json:"nodes_after"`
	// Attention counts attention subgraphs fused; Packed counts those whose
	// q, k, v projections were packed into one weight (Attention, or one
	// MatMul split for MultiHeadAttention).
	Attention int `json:"attention"`
	Packed    int `json:"packed_qkv"`
	// SkipLayerNorm counts residual Add + LayerNormalization pairs fused,
	// SkipBias the projection biases folded into them.
	SkipLayerNorm int `json:"skip_layer_norm"`
	SkipBias      int `json:"skip_bias"`
	// QuickGelu counts x·sigmoid(αx) fused.
	QuickGelu int `json:"quick_gelu"`
	// Ops counts the nodes of the rewritten graph by op type.
	Ops map[string]int `json:"ops"`
	// Skipped lists the subgraphs that looked like a pattern and were left
	// as they were, with why.
	Skipped []string `json:"skipped,omitempty"`
}

// Fused reports whether anything was fused.
func (r *FuseReport) Fused() bool { return r.Attention+r.SkipLayerNorm+r.QuickGelu > 0 }

// String summarises the report on one line.
func (r *FuseReport) String() string {
	s := fmt.Sprintf("%d → %d nodes: %d attention", r.NodesBefore, r.NodesAfter, r.Attention)
	if r.Packed > 0 {
		s += fmt.Sprintf(" (%d with packed QKV)", r.Packed)
	}
	s += fmt.Sprintf(", %d skip layer norm (%d with the projection bias), %d QuickGelu", r.SkipLayerNorm, r.SkipBias, r.QuickGelu)
	if len(r.Skipped) > 0 {
		s += fmt.Sprintf("; %d left as they were", len(r.Skipped))
	}
	return s
}

// Fuse writes m with the subgraphs ONNX Runtime runs faster as contrib
// operators rewritten to them:
//
//   - attention (see the attention type): com.microsoft.MultiHeadAttention
//     with the q, k and v projection biases in its bias input [3D] and the
//     mask, if any, as attention_bias; or com.microsoft.Attention with the
//     three projections packed in one [D, 3D] weight (opts.PackedQKV);
//   - LayerNormalization(Add(x, skip)) → com.microsoft.SkipLayerNormalization,
//     with the bias Add of the projection feeding it;
//   - x·Sigmoid(αx) → com.microsoft.QuickGelu.
//
// Subgraphs it does not recognise are left as they were (the report says
// which and why). The shape arithmetic the fused subgraphs used is removed,
// and so are initializers nothing reads any more. The graph's inputs and
// outputs are unchanged. m itself is not modified.
func Fuse(m *Model, opts FuseOptions, w io.Writer) (*FuseReport, error) {
	e := newEditor(m)
	r := &FuseReport{NodesBefore: len(m.Graph.Nodes)}
	var skipped []string
	if !opts.NoAttention {
		r.Attention, r.Packed, skipped = e.fuseAttention(opts)
		r.Skipped = append(r.Skipped, skipped...)
	}
	if !opts.NoSkipLayerNorm {
		r.SkipLayerNorm, r.SkipBias, skipped = e.fuseSkipLayerNorm()
		r.Skipped = append(r.Skipped, skipped...)
	}
	if !opts.NoBiasGelu {
		r.QuickGelu = e.fuseQuickGelu()
	}
	if err := e.write(w); err != nil {
		return nil, err
	}
	r.NodesAfter = len(e.nodes)
	r.Ops = opCounts(e.nodes)
	return r, nil
}

func opCounts(nodes []*Node) map[string]int {
	c := map[string]int{}
	for _, n := range nodes {
		c[n.OpType]++
	}
	return c
}

// OpCounts counts a graph's nodes by op type.
func (g *Graph) OpCounts() map[string]int {
	c := map[string]int{}
	for _, n := range g.Nodes {
		c[n.OpType]++
	}
	return c
}

// SortedOps lists op counts as "Op×n", most frequent first.
func SortedOps(c map[string]int) []string {
	type kv struct {
		k string
		v int
	}
	var s []kv
	for k, v := range c {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].v != s[j].v {
			return s[i].v > s[j].v
		}
		return s[i].k < s[j].k
	})
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%s×%d", x.k, x.v)
	}
	return out
}
