package onnxgraph_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// tinySiglip is the tiny random SigLIP of testdata/tinysiglip (generate.py).
var tinySiglip = filepath.Join("..", "..", "testdata", "tinysiglip")

// TestExposeLayerInputSiglip: SigLIP's vision export gives last_hidden_state
// after post_layernorm; NormInput steps back over that LayerNormalization to
// the encoder's output, from which ExposeLayerInput adds the last layer's
// input, declared with the output's 16 rows (no class token), and in ONNX
// Runtime equal to torch's (golden/readout_layer_input.npy, float64,
// make_readout_golden.py), the graph's own outputs unchanged.
func TestExposeLayerInputSiglip(t *testing.T) {
	orttest.Load(t)
	m, raw := load(t, filepath.Join(tinySiglip, "onnx", "vision_model.onnx"))
	g := m.Graph
	hidden, err := onnxgraph.NormInput(g, onnxgraph.HiddenName)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Nodes {
		if slices.Contains(n.Outputs, hidden) && n.OpType != "Add" {
			t.Errorf("NormInput(last_hidden_state) = %q, computed by %s; want the last block's residual Add", hidden, n.OpType)
		}
		if slices.Contains(n.Outputs, onnxgraph.HiddenName) && (n.OpType != "LayerNormalization" || n.Inputs[0] != hidden) {
			t.Errorf("last_hidden_state is %s of %v; NormInput gave %q", n.OpType, n.Inputs, hidden)
		}
	}
	if _, err := onnxgraph.FindLayerInput(g, onnxgraph.HiddenName); err == nil {
		t.Error("FindLayerInput from last_hidden_state (after post_layernorm) found a layer input")
	}
	x, err := onnxgraph.FindLayerInput(g, hidden)
	if err != nil {
		t.Fatal(err)
	}
	if !readsWithin(g, x, "m.vision_model.encoder.layers.1.layer_norm1.weight", 2) {
		t.Errorf("%q is not what the last layer's layer_norm1 normalises", x)
	}

	var buf bytes.Buffer
	if err := onnxgraph.ExposeLayerInput(m, hidden, onnxgraph.LayerInputName, &buf); err != nil {
		t.Fatal(err)
	}
	m2, err := onnxgraph.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	o, ok := m2.Graph.Output(onnxgraph.LayerInputName)
	if !ok || o.ElemType != onnxgraph.Float || len(o.Shape) != 3 || o.Shape[0].Param != "batch_size" ||
		o.Shape[1].Value != 16 || o.Shape[2].Value != 24 {
		t.Errorf("declared %+v, want float [batch_size, 16, 24]", o)
	}

	px := mustNPY(t, filepath.Join(tinySiglip, "golden", "readout_pixel_values.npy"))
	want := mustNPY(t, filepath.Join(tinySiglip, "golden", "readout_layer_input.npy"))
	if want.DType != tensorio.DTypeF64 || !slices.Equal(want.Shape, []int{3, 16, 24}) {
		t.Fatalf("golden %s %v", want.DType, want.Shape)
	}
	outs := []string{onnxgraph.LayerInputName, "last_hidden_state", "pooler_output"}
	descs := []ort.Output{ort.OutputFor(ort.ElementFloat32, 3, 16, 24), ort.OutputFor(ort.ElementFloat32, 3, 16, 24), ort.OutputFor(ort.ElementFloat32, 3, 24)}
	got := runWith(t, buf.Bytes(), outs, px, descs)
	d := maxDiff(t, got[0], want)
	t.Logf("%s: max |ort - torch| %.2g (tolerance 1e-5)", onnxgraph.LayerInputName, d)
	if d > 1e-5 {
		t.Errorf("%s differs from torch's last layer input by %.3g (tolerance 1e-5)", onnxgraph.LayerInputName, d)
	}
	before := runWith(t, raw, outs[1:], px, descs[1:])
	for i := range before {
		if d := maxDiff(t, got[i+1], before[i]); d != 0 {
			t.Errorf("%s changed by %g", outs[i+1], d)
		}
	}
}

// TestNormInput: the decomposed post_layernorm of CLIP's opset-14 export
// (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add) gives the class token's
// gather, as LayerNormalization does in the opset-17 one; a value no layer
// norm computes is an error naming what computes it.
func TestNormInput(t *testing.T) {
	for _, path := range []string{layerInputGraphs[0], layerInputGraphs[3]} {
		m, _ := load(t, path)
		g := m.Graph
		w, err := onnxgraph.FindHidden(g, "image_embeds")
		if err != nil {
			t.Fatal(err)
		}
		var proj *onnxgraph.Node
		for i, n := range g.Nodes {
			if slices.Contains(n.Outputs, "image_embeds") {
				proj = &g.Nodes[i]
			}
		}
		x, err := onnxgraph.NormInput(g, proj.Inputs[0])
		if err != nil {
			t.Fatalf("%s (%s post_layernorm): %v", filepath.Base(path), w.LayerNorm, err)
		}
		gathered := false
		for _, n := range g.Nodes {
			gathered = gathered || slices.Contains(n.Outputs, x) && n.OpType == "Gather" && n.Inputs[0] == w.Hidden
		}
		if !gathered {
			t.Errorf("%s (%s post_layernorm): NormInput gave %q, want the Gather of the class token from %q", filepath.Base(path), w.LayerNorm, x, w.Hidden)
		}
	}
	m, _ := load(t, filepath.Join(tinySiglip, "onnx", "vision_model.onnx"))
	for _, c := range []struct{ v, want string }{
		{"pooler_output", `"pooler_output" is computed by`},
		{"pixel_values", `"pixel_values" is a graph input`},
		{"nothing", `"nothing" is not computed by any node`},
	} {
		if _, err := onnxgraph.NormInput(m.Graph, c.v); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "expected") {
			t.Errorf("NormInput(%s): %v; want %q", c.v, err, c.want)
		}
	}
}
