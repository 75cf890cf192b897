package onnxgraph_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// graphBuilder makes small graphs for the fusion tests.
type graphBuilder struct {
	g   onnxgraph.Graph
	rng *rand.Rand
}

func newBuilder() *graphBuilder {
	return &graphBuilder{g: onnxgraph.Graph{Name: "test", Initializers: map[string]*onnxgraph.Tensor{}}, rng: rand.New(rand.NewPCG(3, 4))}
}

func (b *graphBuilder) node(op string, ins []string, outs []string, attrs ...*onnxgraph.Attr) {
	n := onnxgraph.Node{OpType: op, Inputs: ins, Outputs: outs, Attrs: map[string]*onnxgraph.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	b.g.Nodes = append(b.g.Nodes, n)
}

func (b *graphBuilder) random(name string, dims ...int64) string {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(b.rng.NormFloat64() * 0.5)
	}
	b.g.Initializers[name] = onnxgraph.FloatTensor(name, dims, v)
	return name
}

func (b *graphBuilder) ints(name string, v ...int64) string {
	b.g.Initializers[name] = &onnxgraph.Tensor{Name: name, Dims: []int64{int64(len(v))}, DataType: onnxgraph.Int64, Int64s: v}
	return name
}

func (b *graphBuilder) scalar(name string, v float32) string {
	b.g.Initializers[name] = onnxgraph.FloatTensor(name, nil, []float32{v})
	return name
}

func floatIO(name string, dims ...string) onnxgraph.ValueInfo {
	v := onnxgraph.ValueInfo{Name: name, ElemType: onnxgraph.Float, HasShape: true, Tensor: true}
	for _, d := range dims {
		v.Shape = append(v.Shape, onnxgraph.Dim{Param: d})
	}
	return v
}

func (b *graphBuilder) build(t *testing.T) *onnxgraph.Model {
	t.Helper()
	m, err := onnxgraph.Parse(onnxgraph.Build(&b.g, map[string]int64{"": 17}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	tB, tT, tD, tH = 2, 5, 8, 2
	tDh            = tD / tH
)

// attentionGraph builds one self-attention block over x [B, T, D] in the
// layout of an exporter:
//
//	pyclip:  q scaled after its bias, keys transposed (0,2,3,1) at once
//	eager:   keys transposed (0,2,1,3) then (0,1,3,2), scores × scale, + mask input
//	sdpa:    √scale on the split queries and on the transposed keys
//	div:     scores divided by √dh, a Where mask of a bool input
//	bmm:     heads viewed [B·H, T, dh] for torch.bmm, the scores viewed [B, H, T, T] for a mask
func attentionGraph(b *graphBuilder, layout string) {
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "B", "T", "D")}
	split := b.ints("split", 0, 0, tH, tDh)
	proj := func(p string) string {
		b.node("MatMul", []string{"x", b.random(p+"_w", tD, tD)}, []string{p + "_mm"})
		b.node("Add", []string{b.random(p+"_b", tD), p + "_mm"}, []string{p})
		return p
	}
	q, k, v := proj("q"), proj("k"), proj("v")
	scale := float32(1 / math.Sqrt(tDh))
	if layout == "pyclip" || layout == "bmm" {
		b.node("Mul", []string{q, b.scalar("s", scale)}, []string{"qs"})
		q = "qs"
	}
	b.node("Reshape", []string{q, split}, []string{"q4"})
	b.node("Transpose", []string{"q4"}, []string{"qh"}, onnxgraph.IntsAttr("perm", 0, 2, 1, 3))
	qh := "qh"
	b.node("Reshape", []string{k, split}, []string{"k4"})
	kt := "kt"
	if layout == "bmm" {
		// transformers before 4.48: q·scale, heads viewed [B·H, T, dh], torch.bmm, the
		// scores viewed [B, H, T, T] to add the mask and back.
		flat := b.ints("flat", tB*tH, -1, tDh)
		b.node("Reshape", []string{"qh", flat}, []string{"q3"})
		b.node("Transpose", []string{"k4"}, []string{"kh"}, onnxgraph.IntsAttr("perm", 0, 2, 1, 3))
		b.node("Reshape", []string{"kh", flat}, []string{"k3"})
		b.node("Transpose", []string{"k3"}, []string{kt}, onnxgraph.IntsAttr("perm", 0, 2, 1))
		b.node("MatMul", []string{"q3", kt}, []string{"scores"})
		b.node("Reshape", []string{"scores", b.ints("s4", tB, tH, tT, tT)}, []string{"scores4"})
		b.g.Inputs = append(b.g.Inputs, floatIO("mask", "B", "one", "T", "T"))
		b.node("Add", []string{"scores4", "mask"}, []string{"masked4"})
		b.node("Reshape", []string{"masked4", b.ints("s3", tB*tH, tT, tT)}, []string{"masked"})
		b.node("Softmax", []string{"masked"}, []string{"probs"}, onnxgraph.IntAttr("axis", -1))
		b.node("Reshape", []string{v, split}, []string{"v4"})
		b.node("Transpose", []string{"v4"}, []string{"vh"}, onnxgraph.IntsAttr("perm", 0, 2, 1, 3))
		b.node("Reshape", []string{"vh", flat}, []string{"v3"})
		b.node("MatMul", []string{"probs", "v3"}, []string{"ctx3"})
		b.node("Reshape", []string{"ctx3", b.ints("c4", tB, tH, tT, tDh)}, []string{"ctx"})
		attentionTail(b)
		return
	}
	switch layout {
	case "pyclip", "div":
		b.node("Transpose", []string{"k4"}, []string{kt}, onnxgraph.IntsAttr("perm", 0, 2, 3, 1))
	default:
		b.node("Transpose", []string{"k4"}, []string{"kh"}, onnxgraph.IntsAttr("perm", 0, 2, 1, 3))
		b.node("Transpose", []string{"kh"}, []string{kt}, onnxgraph.IntsAttr("perm", 0, 1, 3, 2))
	}
	if layout == "sdpa" {
		r := float32(math.Sqrt(float64(scale)))
		b.node("Mul", []string{qh, b.scalar("sq", r)}, []string{"qhs"})
		b.node("Mul", []string{kt, b.scalar("sk", r)}, []string{"kts"})
		qh, kt = "qhs", "kts"
	}
	b.node("MatMul", []string{qh, kt}, []string{"scores"})
	s := "scores"
	switch layout {
	case "eager":
		b.node("Mul", []string{s, b.scalar("s", scale)}, []string{"scaled"})
		b.g.Inputs = append(b.g.Inputs, floatIO("mask", "B", "one", "T", "T"))
		b.node("Add", []string{"scaled", "mask"}, []string{"masked"})
		s = "masked"
	case "div":
		b.node("Div", []string{s, b.scalar("d", float32(math.Sqrt(tDh)))}, []string{"scaled"})
		b.g.Inputs = append(b.g.Inputs, onnxgraph.ValueInfo{Name: "keep", ElemType: onnxgraph.Bool, HasShape: true, Tensor: true,
			Shape: []onnxgraph.Dim{{Param: "B"}, {Value: 1}, {Param: "T"}, {Param: "T"}}})
		b.node("Not", []string{"keep"}, []string{"drop"})
		b.node("Where", []string{"drop", b.scalar("big", -3.4028234663852886e38), "scaled"}, []string{"masked"})
		s = "masked"
	}
	b.node("Softmax", []string{s}, []string{"probs"}, onnxgraph.IntAttr("axis", -1))
	b.node("Reshape", []string{v, split}, []string{"v4"})
	b.node("Transpose", []string{"v4"}, []string{"vh"}, onnxgraph.IntsAttr("perm", 0, 2, 1, 3))
	b.node("MatMul", []string{"probs", "vh"}, []string{"ctx"})
	attentionTail(b)
}

// attentionTail merges the heads of ctx [B, H, T, dh] and adds the output
// projection, the residual and the layer norm.
func attentionTail(b *graphBuilder) {
	merge := b.ints("merge", 0, 0, tD)
	b.node("Transpose", []string{"ctx"}, []string{"ctxt"}, onnxgraph.IntsAttr("perm", 0, 2, 1, 3))
	b.node("Reshape", []string{"ctxt", merge}, []string{"attn"})
	b.node("MatMul", []string{"attn", b.random("o_w", tD, tD)}, []string{"o_mm"})
	b.node("Add", []string{b.random("o_b", tD), "o_mm"}, []string{"o"})
	b.node("Add", []string{"x", "o"}, []string{"res"})
	b.node("LayerNormalization", []string{"res", b.random("g", tD), b.random("be", tD)}, []string{"y"}, onnxgraph.FloatAttr("epsilon", 1e-5))
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y", "B", "T", "D"), floatIO("res", "B", "T", "D")}
}

func testInputs(b *graphBuilder) ([]string, []tensorio.Tensor) {
	rng := rand.New(rand.NewPCG(5, 6))
	var names []string
	var ts []tensorio.Tensor
	for _, in := range b.g.Inputs {
		names = append(names, in.Name)
		switch in.Name {
		case "x":
			v := make([]float32, tB*tT*tD)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			ts = append(ts, tensorio.F32([]int{tB, tT, tD}, v))
		case "mask": // padding after 3 tokens in the second sequence
			v := make([]float32, tB*tT*tT)
			for j := 0; j < tT; j++ {
				for k := 3; k < tT; k++ {
					v[tT*tT+j*tT+k] = -1e9
				}
			}
			ts = append(ts, tensorio.F32([]int{tB, 1, tT, tT}, v))
		case "keep": // causal
			v := make([]bool, tB*tT*tT)
			for bb := 0; bb < tB; bb++ {
				for j := 0; j < tT; j++ {
					for k := 0; k <= j; k++ {
						v[bb*tT*tT+j*tT+k] = true
					}
				}
			}
			ts = append(ts, tensorio.Tensor{DType: tensorio.DTypeBool, Shape: []int{tB, 1, tT, tT}, Data: v})
		}
	}
	return names, ts
}

// TestFuseAttentionLayouts fuses one attention block in each exporter
// layout, checks the fused ops, and runs both graphs in ONNX Runtime.
func TestFuseAttentionLayouts(t *testing.T) {
	orttest.Load(t)
	for _, layout := range []string{"pyclip", "eager", "sdpa", "div", "bmm"} {
		for _, form := range []string{"separate", "packed", "split"} {
			packed := form != "separate"
			b := newBuilder()
			attentionGraph(b, layout)
			m := b.build(t)
			var buf bytes.Buffer
			r, err := onnxgraph.Fuse(m, onnxgraph.FuseOptions{PackedQKV: form == "packed", SplitQKV: form == "split"}, &buf)
			if err != nil {
				t.Fatalf("%s: %v", layout, err)
			}
			attn := "MultiHeadAttention"
			if form == "packed" {
				attn = "Attention"
			}
			if form == "split" && (r.Ops["Split"] != 1 || r.Ops["MatMul"] != 2) {
				t.Errorf("%s split: %v", layout, onnxgraph.SortedOps(r.Ops))
			}
			if r.Attention != 1 || r.Packed != map[bool]int{false: 0, true: 1}[packed] || r.Ops[attn] != 1 || r.Ops["Softmax"] != 0 || r.SkipLayerNorm != 1 || r.SkipBias != 1 || r.Ops["Add"] != 0 || r.Ops["LayerNormalization"] != 0 {
				t.Errorf("%s %s: %s; %v; %v", layout, form, r, onnxgraph.SortedOps(r.Ops), r.Skipped)
			}
			names, in := testInputs(b)
			outs := []string{"y", "res"}
			want := runGraph(t, onnxgraph.Build(&b.g, map[string]int64{"": 17}), layout, names, in, outs)
			got := runGraph(t, buf.Bytes(), layout+" fused", names, in, outs)
			for i := range want {
				if d := relDiff(want[i], got[i]); !(d < 1e-5) {
					t.Errorf("%s %s: %s differs by %.3g", layout, form, outs[i], d)
				}
			}
		}
	}
}

// TestFuseLeavesUnknownSubgraphs checks that subgraphs that only look like
// the patterns are left as they were, with the reason reported.
func TestFuseLeavesUnknownSubgraphs(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(b *graphBuilder)
		why  string
	}{
		{"softmax over the heads", func(b *graphBuilder) {
			for i := range b.g.Nodes {
				if b.g.Nodes[i].OpType == "Softmax" {
					b.g.Nodes[i].Attrs["axis"] = onnxgraph.IntAttr("axis", 1)
				}
			}
		}, "Softmax not on the last axis"},
		{"probabilities also an output", func(b *graphBuilder) {
			b.g.Outputs = append(b.g.Outputs, floatIO("probs", "B", "H", "T", "T"))
		}, "several consumers"},
		{"value heads split unevenly", func(b *graphBuilder) {
			for i := range b.g.Nodes {
				if b.g.Nodes[i].OpType == "Reshape" && b.g.Nodes[i].Outputs[0] == "v4" {
					b.g.Nodes[i].Inputs[1] = b.ints("split_v", 0, 0, 4, 2)
				}
			}
		}, "head counts or sizes differ"},
		{"values not split into heads", func(b *graphBuilder) {
			for i := range b.g.Nodes {
				if b.g.Nodes[i].OpType == "Transpose" && b.g.Nodes[i].Outputs[0] == "vh" {
					b.g.Nodes[i].Attrs["perm"] = onnxgraph.IntsAttr("perm", 0, 1, 2, 3)
				}
			}
		}, "values: transpose perm [0 1 2 3]"},
		{"scores scaled by an input", func(b *graphBuilder) {
			b.g.Inputs = append(b.g.Inputs, floatIO("s_in"))
			for i := range b.g.Nodes {
				if b.g.Nodes[i].OpType == "Softmax" {
					b.g.Nodes[i].Inputs[0] = "scaled_in"
				}
			}
			b.node("Mul", []string{"scores", "s_in"}, []string{"scaled_in"})
		}, "not a constant scalar"},
	} {
		b := newBuilder()
		attentionGraph(b, "pyclip")
		c.edit(b)
		r, err := onnxgraph.Fuse(b.build(t), onnxgraph.FuseOptions{}, new(bytes.Buffer))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Attention != 0 || r.Ops["Softmax"] != 1 || len(r.Skipped) == 0 || !strings.Contains(strings.Join(r.Skipped, "\n"), c.why) {
			t.Errorf("%s: %s; skipped %q, want a reason with %q", c.name, r, r.Skipped, c.why)
		}
	}
}

// TestSkipLayerNormLeftAlone: a layer norm whose mean is used, and a sum
// with a broadcast side, stay as they were.
func TestSkipLayerNormLeftAlone(t *testing.T) {
	b := newBuilder()
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "B", "T", "D"), floatIO("h", "B", "T", "D"), floatIO("p", "T", "D")}
	b.node("Add", []string{"x", "h"}, []string{"s1"})
	b.node("LayerNormalization", []string{"s1", b.random("g", tD), b.random("be", tD)}, []string{"y1", "mean"}, onnxgraph.FloatAttr("epsilon", 1e-5))
	b.node("Unsqueeze", []string{"p", b.ints("ax", 0)}, []string{"p1"})
	b.node("Add", []string{"x", "p1"}, []string{"s2"})
	b.node("LayerNormalization", []string{"s2", "g", "be"}, []string{"y2"})
	b.node("Add", []string{"x", "h"}, []string{"s3"})
	b.node("LayerNormalization", []string{"s3", "g", "be"}, []string{"y3"})
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y1"), floatIO("mean"), floatIO("y2"), floatIO("y3")}
	r, err := onnxgraph.Fuse(b.build(t), onnxgraph.FuseOptions{}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(r.Skipped, "\n")
	if r.SkipLayerNorm != 1 || r.SkipBias != 0 || !strings.Contains(s, "mean or inverse deviation is used") || !strings.Contains(s, "broadcast") {
		t.Errorf("%s; skipped %q", r, r.Skipped)
	}
}
