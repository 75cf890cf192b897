package onnxgraph_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// fp16LayerInputTol bounds |readout_input - torch| for the float16 graph
// (make_variants.py: float16 pixel values, weights and activations). The
// layer input reaches 4.03, where one float16 ulp is 2^-8 ≈ 0.004, after
// the patch embedding, pre_layrnorm and one encoder layer in float16;
// measured worst 0.0035 (ONNX Runtime 1.30, x86-64), logged with -v.
const fp16LayerInputTol = 1e-2

// lastLayerNorm1 is the initializer the tiny CLIP's last encoder layer
// normalises its input with (layers.1: two layers), named by the exporter
// after the Hugging Face parameter.
const lastLayerNorm1 = "m.vision_model.encoder.layers.1.layer_norm1.weight"

// readsWithin reports whether value v reaches a node reading init within
// depth nodes forward.
func readsWithin(g *onnxgraph.Graph, v, init string, depth int) bool {
	frontier := []string{v}
	for ; depth > 0 && len(frontier) > 0; depth-- {
		var next []string
		for _, n := range g.Nodes {
			for _, in := range n.Inputs {
				if slices.Contains(frontier, in) {
					if slices.Contains(n.Inputs, init) {
						return true
					}
					next = append(next, n.Outputs...)
					break
				}
			}
		}
		frontier = next
	}
	return false
}

// hiddenOf returns the last hidden state of a vision graph: its
// last_hidden_state output, or what FindHidden finds from image_embeds.
func hiddenOf(t *testing.T, g *onnxgraph.Graph) string {
	t.Helper()
	if _, ok := g.Output(onnxgraph.HiddenName); ok {
		return onnxgraph.HiddenName
	}
	w, err := onnxgraph.FindHidden(g, "image_embeds")
	if err != nil {
		t.Fatal(err)
	}
	return w.Hidden
}

// layerInputGraphs are the real vision exports: torch.onnx at opset 17
// (LayerNormalization), its float16 variant, the pooled-only export (no
// last_hidden_state output) and the opset-14 one (layer norms decomposed).
var layerInputGraphs = []string{
	filepath.Join(tiny, "onnx", "vision_model.onnx"),
	filepath.Join(tiny, "onnx", "variants", "vision_model_fp16.onnx"),
	filepath.Join(tiny, "onnx", "pooled_only", "vision_model.onnx"),
	filepath.Join(hubdir, "pooled_only", "vision_model_opset14.onnx"),
}

// The value found is the one the last layer's layer_norm1 (its weights
// named after the Hugging Face parameter by the exporter) normalises, and
// every value of the graph but the blocks' outputs is refused.
func TestFindLayerInputOnExports(t *testing.T) {
	for _, path := range layerInputGraphs {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			m, _ := load(t, path)
			g := m.Graph
			x, err := onnxgraph.FindLayerInput(g, hiddenOf(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if !readsWithin(g, x, lastLayerNorm1, 6) {
				t.Errorf("found %q, which does not reach %s", x, lastLayerNorm1)
			}
			// Only the two blocks' outputs (the last hidden state, and the
			// first block's output, which is x itself) are recognised.
			var found []string
			for _, n := range g.Nodes {
				for _, o := range n.Outputs {
					if _, err := onnxgraph.FindLayerInput(g, o); err == nil {
						found = append(found, o)
					}
				}
			}
			if len(found) != 2 || !slices.Contains(found, x) {
				t.Errorf("recognised as a block's output: %v; want 2 of them, %s among them", found, x)
			}
		})
	}
}

// ExposeLayerInput on the real exports (and on the opset-17 one fused to
// SkipLayerNormalization and MultiHeadAttention), run in ONNX Runtime:
// readout_input equals torch's input of the last encoder layer
// (golden/readout_layer_input.npy, float64, make_readout_golden.py), and the
// graph's own outputs are unchanged.
func TestExposeLayerInputRuns(t *testing.T) {
	orttest.Load(t)
	px := mustNPY(t, filepath.Join(tiny, "golden", "vision_pixel_values.npy"))
	want := mustNPY(t, filepath.Join(tiny, "golden", "readout_layer_input.npy"))
	if want.DType != tensorio.DTypeF64 || !slices.Equal(want.Shape, []int{3, 17, 24}) {
		t.Fatalf("golden %s %v", want.DType, want.Shape)
	}
	v, _ := px.Float32()
	half := make([]uint16, len(v))
	for i, f := range v {
		half[i] = tensorio.Float32ToF16(f)
	}
	px16 := tensorio.Tensor{DType: tensorio.DTypeF16, Shape: px.Shape, Data: half}

	type graph struct {
		name   string
		raw    []byte
		hidden string // the last hidden state; hiddenOf's when ""
		feed   tensorio.Tensor
		tol    float64
		op     string // the node added
		added  int    // nodes added
	}
	var cases []graph
	for i, path := range layerInputGraphs {
		c := graph{name: filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path), raw: mustRead(t, path), feed: px, tol: 1e-5, op: "Identity", added: 1}
		if i == 1 {
			c.feed, c.tol, c.op = px16, fp16LayerInputTol, "Cast"
		}
		cases = append(cases, c)
	}
	// The float16 graph with its last hidden state cast to float32 (as
	// mixed-precision exports keep their outputs): the walk steps over the Cast.
	m16, _ := load(t, layerInputGraphs[1])
	var cast bytes.Buffer
	if err := m16.WriteAppended(&cast, []onnxgraph.Node{{OpType: "Cast", Inputs: []string{"last_hidden_state"}, Outputs: []string{"hidden_f32"},
		Attrs: map[string]*onnxgraph.Attr{"to": onnxgraph.IntAttr("to", int64(onnxgraph.Float))}}},
		[]onnxgraph.ValueInfo{{Name: "hidden_f32", ElemType: onnxgraph.Float, HasShape: true, Shape: []onnxgraph.Dim{{Param: "batch"}, {Value: 17}, {Value: 24}}}}); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, graph{name: "fp16 cast to float32", raw: cast.Bytes(), hidden: "hidden_f32", feed: px16, tol: fp16LayerInputTol, op: "Cast", added: 1})

	m, _ := load(t, layerInputGraphs[0])
	var fused bytes.Buffer
	r, err := onnxgraph.Fuse(m, onnxgraph.FuseOptions{}, &fused)
	if err != nil {
		t.Fatal(err)
	}
	if r.SkipLayerNorm == 0 || r.Attention != 2 {
		t.Fatalf("fused: %s", r)
	}
	// There both residual sums the walk goes through are SkipLayerNormalization
	// sum outputs (output 3): h with layer_norm2, x with layer_norm1.
	mf, err := onnxgraph.Parse(fused.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	x, err := onnxgraph.FindLayerInput(mf.Graph, onnxgraph.HiddenName)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range mf.Graph.Nodes {
		if slices.Contains(n.Outputs, x) && (n.OpType != "SkipLayerNormalization" || len(n.Outputs) != 4 || n.Outputs[3] != x) {
			t.Errorf("fused: %q is computed by %s %v, want SkipLayerNormalization's sum output", x, n.OpType, n.Outputs)
		}
	}
	cases = append(cases, graph{name: "fused", raw: fused.Bytes(), feed: px, tol: 1e-5, op: "Identity", added: 1})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := onnxgraph.Parse(c.raw)
			if err != nil {
				t.Fatal(err)
			}
			hidden := c.hidden
			if hidden == "" {
				hidden = hiddenOf(t, m.Graph)
			}
			var buf bytes.Buffer
			if err := onnxgraph.ExposeLayerInput(m, hidden, onnxgraph.LayerInputName, &buf); err != nil {
				t.Fatal(err)
			}
			m2, err := onnxgraph.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			g, g2 := m.Graph, m2.Graph
			o, ok := g2.Output(onnxgraph.LayerInputName)
			if !ok || o.ElemType != onnxgraph.Float || len(o.Shape) != 3 || o.Shape[0].Param != "batch" ||
				o.Shape[1].Value != 17 || o.Shape[2].Value != 24 {
				t.Errorf("declared %+v", o)
			}
			if len(g2.Nodes) != len(g.Nodes)+c.added || len(g2.Outputs) != len(g.Outputs)+1 {
				t.Errorf("%d → %d nodes, %d → %d outputs", len(g.Nodes), len(g2.Nodes), len(g.Outputs), len(g2.Outputs))
			} else if n := g2.Nodes[len(g2.Nodes)-1]; n.OpType != c.op || n.Outputs[0] != onnxgraph.LayerInputName {
				t.Errorf("added %s → %v, want %s", n.OpType, n.Outputs, c.op)
			}

			outs := []string{onnxgraph.LayerInputName}
			for _, o := range g.Outputs {
				outs = append(outs, o.Name)
			}
			// Outputs of the graph's element type, allocated before the run
			// when float16 (as internal/ort asks).
			var descs []ort.Output
			for _, name := range outs {
				o, _ := g2.Output(name)
				shape := []int{3, 17, 24}
				if name == "image_embeds" {
					shape = []int{3, 16}
				}
				descs = append(descs, ort.OutputFor(ortElem(o.ElemType), shape...))
			}
			got := runWith(t, buf.Bytes(), outs, c.feed, descs)
			if got[0].DType != tensorio.DTypeF32 {
				t.Errorf("%s is %s", onnxgraph.LayerInputName, got[0].DType)
			}
			d := maxDiff(t, got[0], want)
			if d > c.tol {
				t.Errorf("%s differs from torch's last layer input by %.3g (tolerance %g)", onnxgraph.LayerInputName, d, c.tol)
			}
			t.Logf("%s: max |ort - torch| %.2g (tolerance %g)", onnxgraph.LayerInputName, d, c.tol)
			before := runWith(t, c.raw, outs[1:], c.feed, descs[1:])
			for i := range before {
				if d := maxDiff(t, got[i+1], before[i]); d != 0 {
					t.Errorf("%s changed by %g", outs[i+1], d)
				}
			}
		})
	}
}

// ortElem maps the ONNX element types of these graphs' outputs to ort's.
func ortElem(t int32) ort.ElementType {
	if t == onnxgraph.Float16 {
		return ort.ElementFloat16
	}
	return ort.ElementFloat32
}

// runWith runs graph on pixel values with the given output descriptions.
func runWith(t *testing.T, graph []byte, outputs []string, px tensorio.Tensor, descs []ort.Output) []tensorio.Tensor {
	t.Helper()
	s, err := ort.NewSession(graph, "test", []string{"pixel_values"}, outputs, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(context.Background(), []tensorio.Tensor{px}, descs...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nodeReading returns the index of the node of op type op reading init.
func nodeReading(t *testing.T, g *onnxgraph.Graph, op, init string) int {
	t.Helper()
	for i, n := range g.Nodes {
		if n.OpType == op && slices.Contains(n.Inputs, init) {
			return i
		}
	}
	t.Fatalf("no %s reads %s", op, init)
	return -1
}

// modified returns a copy of g whose node i reads ins.
func modified(g *onnxgraph.Graph, i int, op string, ins ...string) *onnxgraph.Graph {
	c := *g
	c.Nodes = slices.Clone(g.Nodes)
	c.Nodes[i].Inputs = ins
	if op != "" {
		c.Nodes[i].OpType = op
	}
	return &c
}

func TestFindLayerInputErrors(t *testing.T) {
	text, _ := load(t, filepath.Join(tiny, "onnx", "text_model.onnx"))
	vision, _ := load(t, layerInputGraphs[0])
	g := vision.Graph
	const prefix = "m.vision_model.encoder.layers.1."
	ln2 := nodeReading(t, g, "LayerNormalization", prefix+"layer_norm2.weight")
	h := g.Nodes[ln2].Inputs[0]                                           // the last block's first residual sum
	y := nodeReading(t, g, "Add", h)                                      // its second: last_hidden_state
	attnOut := nodeReading(t, g, "Add", prefix+"self_attn.out_proj.bias") // out_proj's bias Add
	var softmax int
	for i, n := range g.Nodes {
		if n.OpType == "Softmax" {
			softmax = i // the last layer's
		}
	}
	for _, c := range []struct {
		name   string
		g      *onnxgraph.Graph
		hidden string
		want   []string
	}{
		{"text: after final_layer_norm", text.Graph, "last_hidden_state",
			[]string{"step 1 (the last block's second residual Add", `"last_hidden_state" is computed by LayerNormalization`}},
		{"text: the pooled output", text.Graph, "text_embeds",
			[]string{"step 1", `"text_embeds" is computed by MatMul`}},
		{"no such value", g, "hidden_states", []string{"step 1", `"hidden_states" is not computed by any node`}},
		{"a graph input", g, "pixel_values", []string{"step 1", `"pixel_values" is a graph input`}},
		{"the pooled output", g, "image_embeds", []string{"step 1", `"image_embeds" is computed by MatMul`}},
		{"the block's attention half", g, h,
			[]string{"step 2 (the residual operand h of that Add)", "has an attention"}},
		{"a bias Add", g, g.Nodes[attnOut].Outputs[0], []string{"step 1", "computed by Add with a constant operand (a bias)"}},
		{"h + h", modified(g, y, "", h, h), "last_hidden_state",
			[]string{"step 2", "cannot tell the residual stream from the sublayer's output"}},
		{"layer_norm2 reading the attention", modified(g, ln2, "", g.Nodes[attnOut].Outputs[0], prefix+"layer_norm2.weight", prefix+"layer_norm2.bias"),
			"last_hidden_state", []string{"step 2", "does not feed a layer norm"}},
		{"no attention", modified(g, softmax, "Relu", g.Nodes[softmax].Inputs...), "last_hidden_state",
			[]string{"step 4 (the residual operand x of that Add, the last layer's input)", "has no attention"}},
	} {
		x, err := onnxgraph.FindLayerInput(c.g, c.hidden)
		if err == nil {
			t.Errorf("%s: found %q", c.name, x)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant %q", c.name, err, w)
			}
		}
	}

	// ExposeLayerInput: refusals, and the model is written only when found.
	for _, c := range []struct {
		name, hidden, out string
		want              string
	}{
		{"an existing output", "last_hidden_state", "image_embeds", "already has an output"},
		{"an existing value", "last_hidden_state", g.Nodes[attnOut].Outputs[0], "has a value named"},
		{"the input's name", "last_hidden_state", "pixel_values", "has a value named"},
		{"no name", "last_hidden_state", "", "no name"},
		{"not found", "image_embeds", onnxgraph.LayerInputName, "step 1"},
	} {
		var buf bytes.Buffer
		err := onnxgraph.ExposeLayerInput(vision, c.hidden, c.out, &buf)
		if err == nil || !strings.Contains(err.Error(), c.want) || buf.Len() != 0 {
			t.Errorf("%s: %v (%d bytes written); want %q", c.name, err, buf.Len(), c.want)
		}
		if c.name == "an existing output" && !errors.Is(err, onnxgraph.ErrHasOutput) {
			t.Errorf("%s: %v is not ErrHasOutput", c.name, err)
		}
	}
}

// Any value of any graph, well-formed or not: an answer or an error, no panic.
func FuzzFindLayerInput(f *testing.F) {
	for _, p := range []string{layerInputGraphs[0], filepath.Join(tiny, "onnx", "bad", "vision_float16.onnx"), filepath.Join(tiny, "onnx", "pooled_only", "text_model.onnx"),
		filepath.Join(tinySiglip, "onnx", "vision_model.onnx")} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := onnxgraph.Parse(b)
		if err != nil {
			return
		}
		for _, n := range m.Graph.Nodes {
			for _, o := range n.Outputs {
				onnxgraph.FindLayerInput(m.Graph, o)
			}
		}
		for _, o := range m.Graph.Outputs {
			onnxgraph.ExposeLayerInput(m, o.Name, onnxgraph.LayerInputName, io.Discard)
			if x, err := onnxgraph.NormInput(m.Graph, o.Name); err == nil {
				onnxgraph.ExposeLayerInput(m, x, onnxgraph.LayerInputName, io.Discard)
			}
		}
	})
}
