package onnxgraph_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

var (
	tiny   = filepath.Join("..", "..", "testdata", "tinyclip")
	hubdir = filepath.Join("..", "..", "testdata", "hub")
)

func load(t testing.TB, path string) (*onnxgraph.Model, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnxgraph.Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m, b
}

func TestParse(t *testing.T) {
	m, _ := load(t, filepath.Join(tiny, "onnx", "text_model.onnx"))
	g := m.Graph
	if m.IRVersion == 0 || m.Opsets[""] != 17 {
		t.Errorf("ir %d opsets %v", m.IRVersion, m.Opsets)
	}
	var ins, outs []string
	for _, v := range g.Inputs {
		ins = append(ins, v.Name+":"+onnxgraph.ElemTypeName(v.ElemType))
	}
	for _, v := range g.Outputs {
		var dims []string
		for _, d := range v.Shape {
			dims = append(dims, d.String())
		}
		outs = append(outs, v.Name+":"+onnxgraph.ElemTypeName(v.ElemType)+"["+strings.Join(dims, ",")+"]")
	}
	// Names, types and dims as python onnx reads them from the file.
	if strings.Join(ins, " ") != "input_ids:int64 attention_mask:int64" ||
		strings.Join(outs, " ") != "last_hidden_state:float[batch,sequence,LayerNormalizationlast_hidden_state_dim_2] text_embeds:float[batch,16]" {
		t.Errorf("inputs %v outputs %v", ins, outs)
	}
	if len(g.Nodes) != 218 || g.Initializers["m.text_model.final_layer_norm.weight"] == nil {
		t.Errorf("%d nodes; initializers %d", len(g.Nodes), len(g.Initializers))
	}
	if w := g.Initializers["m.text_model.final_layer_norm.weight"]; len(w.Dims) != 1 || w.Dims[0] != 32 || w.DataType != onnxgraph.Float {
		t.Errorf("final_layer_norm.weight %+v", w)
	}
	if len(m.ExternalFiles()) != 0 {
		t.Error("external files in a self-contained model")
	}
	for _, bad := range [][]byte{nil, []byte("not onnx"), {0x0a, 0xff}} {
		if _, err := onnxgraph.Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}

// The walk from the pooled output of a full export ends at its own
// last_hidden_state output: the walk finds the right tensor.
func TestFindHiddenOnFullExports(t *testing.T) {
	for _, c := range []struct{ file, pooled, ln string }{
		{"text_model.onnx", "text_embeds", ""},
		{"vision_model.onnx", "image_embeds", "LayerNormalization"},
	} {
		m, _ := load(t, filepath.Join(tiny, "onnx", c.file))
		w, err := onnxgraph.FindHidden(m.Graph, c.pooled)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if w.Hidden != "last_hidden_state" || w.LayerNorm != c.ln || w.Projection != "MatMul" || w.Cast {
			t.Errorf("%s: %+v", c.file, w)
		}
		if _, err := onnxgraph.Expose(m, c.pooled, new(bytes.Buffer)); !errors.Is(err, onnxgraph.ErrHasHidden) {
			t.Errorf("%s: Expose on a full export: %v", c.file, err)
		}
	}
}

func TestFindHiddenErrors(t *testing.T) {
	// The hand-made stand-in: text_embeds = Expand(ReduceMean(Cast(input_ids))).
	m, _ := load(t, filepath.Join(tiny, "onnx", "pooled_only", "text_model.onnx"))
	_, err := onnxgraph.FindHidden(m.Graph, "text_embeds")
	if err == nil || !strings.Contains(err.Error(), "step 1 (the projection MatMul)") || !strings.Contains(err.Error(), "Expand") {
		t.Errorf("stand-in graph: %v", err)
	}
	init := func(name string, dims ...int64) *onnxgraph.Tensor {
		return &onnxgraph.Tensor{Name: name, Dims: dims, DataType: onnxgraph.Float}
	}
	zero := &onnxgraph.Tensor{Name: "zero", DataType: onnxgraph.Int64, Int64s: []int64{0}}
	one := &onnxgraph.Tensor{Name: "one", DataType: onnxgraph.Int64, Int64s: []int64{1}}
	node := func(op string, in []string, out string, attrs ...*onnxgraph.Attr) onnxgraph.Node {
		n := onnxgraph.Node{OpType: op, Inputs: in, Outputs: []string{out}, Attrs: map[string]*onnxgraph.Attr{}}
		for _, a := range attrs {
			n.Attrs[a.Name] = a
		}
		return n
	}
	axis1 := &onnxgraph.Attr{Name: "axis", I: 1}
	graph := func(nodes ...onnxgraph.Node) *onnxgraph.Graph {
		return &onnxgraph.Graph{
			Nodes:   nodes,
			Inputs:  []onnxgraph.ValueInfo{{Name: "pixel_values", ElemType: onnxgraph.Float}},
			Outputs: []onnxgraph.ValueInfo{{Name: "image_embeds", ElemType: onnxgraph.Float}},
			Initializers: map[string]*onnxgraph.Tensor{"W": init("W", 24, 16), "g": init("g", 24), "b": init("b", 24),
				"zero": zero, "one": one},
		}
	}
	enc := node("Relu", []string{"pixel_values"}, "h")
	for _, c := range []struct {
		name string
		g    *onnxgraph.Graph
		want string
	}{
		{"no layer norm", graph(enc, node("Gather", []string{"h", "zero"}, "cls", axis1), node("MatMul", []string{"cls", "W"}, "image_embeds")),
			"step 2 (post_layernorm before the projection): \"cls\" is computed by Gather"},
		{"gather of position 1", graph(enc, node("Gather", []string{"h", "one"}, "cls", axis1),
			node("LayerNormalization", []string{"cls", "g", "b"}, "ln"), node("MatMul", []string{"ln", "W"}, "image_embeds")),
			"step 3 (the gather of the class token, position 0): the Gather picks \"one\""},
		{"mean pooling", graph(enc, node("ReduceMean", []string{"h"}, "cls"),
			node("LayerNormalization", []string{"cls", "g", "b"}, "ln"), node("MatMul", []string{"ln", "W"}, "image_embeds")),
			"step 3 (the gather of the class token, position 0): \"cls\" is computed by ReduceMean, expected Gather"},
		{"pooled from an input", graph(node("MatMul", []string{"pixel_values", "W"}, "x"), node("Gather", []string{"pixel_values", "zero"}, "cls", axis1),
			node("LayerNormalization", []string{"cls", "g", "b"}, "ln"), node("MatMul", []string{"ln", "W"}, "image_embeds")),
			"step 4 (the last hidden state): \"pixel_values\" is a graph input"},
	} {
		_, err := onnxgraph.FindHidden(c.g, "image_embeds")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	// A float16 graph keeping float32 outputs, weights first in the MatMul: found, with a Cast.
	g := graph(enc, node("Gather", []string{"h", "zero"}, "cls", axis1),
		node("LayerNormalization", []string{"cls", "g", "b"}, "ln"), node("MatMul", []string{"W", "ln"}, "e16"),
		node("Cast", []string{"e16"}, "image_embeds", &onnxgraph.Attr{Name: "to", I: 1}))
	if w, err := onnxgraph.FindHidden(g, "image_embeds"); err != nil || w.Hidden != "h" || !w.Cast || w.Width != 24 {
		t.Errorf("fp16-style graph: %+v %v", w, err)
	}
	if _, err := onnxgraph.FindHidden(g, "text_embeds"); err == nil || !strings.Contains(err.Error(), "no output text_embeds") {
		t.Errorf("missing output: %v", err)
	}
}

// Expose on real pooled-only exports: the rewritten graph's last_hidden_state
// equals the full export's, and its embeds are unchanged.
func TestExposeRuns(t *testing.T) {
	orttest.Load(t)
	ids := mustNPY(t, filepath.Join(tiny, "golden", "text_input_ids.npy"))
	mask := mustNPY(t, filepath.Join(tiny, "golden", "text_attention_mask.npy"))
	px := mustNPY(t, filepath.Join(tiny, "golden", "vision_pixel_values.npy"))
	for _, c := range []struct {
		pooledOnly, full string
		pooled           string
		ln               string
		inputs           []string
		feed             []tensorio.Tensor
	}{
		{filepath.Join(hubdir, "pooled_only", "text_model.onnx"), filepath.Join(tiny, "onnx", "text_model.onnx"),
			"text_embeds", "", []string{"input_ids", "attention_mask"}, []tensorio.Tensor{ids, mask}},
		{filepath.Join(tiny, "onnx", "pooled_only", "vision_model.onnx"), filepath.Join(tiny, "onnx", "vision_model.onnx"),
			"image_embeds", "LayerNormalization", []string{"pixel_values"}, []tensorio.Tensor{px}},
		{filepath.Join(hubdir, "pooled_only", "vision_model_opset14.onnx"), filepath.Join(tiny, "onnx", "vision_model.onnx"),
			"image_embeds", "decomposed", []string{"pixel_values"}, []tensorio.Tensor{px}},
	} {
		t.Run(filepath.Base(c.pooledOnly), func(t *testing.T) {
			m, _ := load(t, c.pooledOnly)
			var buf bytes.Buffer
			w, err := onnxgraph.Expose(m, c.pooled, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if w.LayerNorm != c.ln {
				t.Errorf("walk %+v", w)
			}
			// The rewritten file parses, and declares the new output.
			m2, err := onnxgraph.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			o, ok := m2.Graph.Output("last_hidden_state")
			if !ok || o.ElemType != onnxgraph.Float || len(o.Shape) != 3 || len(m2.Graph.Nodes) != len(m.Graph.Nodes)+1 {
				t.Fatalf("rewritten outputs %+v, %d nodes", m2.Graph.Outputs, len(m2.Graph.Nodes))
			}
			outs := []string{"last_hidden_state", c.pooled}
			got := run(t, buf.Bytes(), c.inputs, outs, c.feed)
			want := run(t, mustRead(t, c.full), c.inputs, outs, c.feed)
			for i, name := range outs {
				if d := maxDiff(t, got[i], want[i]); d > 1e-5 {
					t.Errorf("%s differs from the full export's by %g", name, d)
				}
			}
		})
	}
}

func run(t *testing.T, graph []byte, inputs, outputs []string, feed []tensorio.Tensor) []tensorio.Tensor {
	t.Helper()
	s, err := ort.NewSession(graph, "test", inputs, outputs, ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(context.Background(), feed)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maxDiff(t *testing.T, a, b tensorio.Tensor) float64 {
	t.Helper()
	if len(a.Shape) != len(b.Shape) {
		t.Fatalf("shapes %v and %v", a.Shape, b.Shape)
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			t.Fatalf("shapes %v and %v", a.Shape, b.Shape)
		}
	}
	x, _ := a.Float32()
	y, _ := b.Float32()
	d := 0.0
	for i := range x {
		d = math.Max(d, math.Abs(float64(x[i]-y[i])))
	}
	return d
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustNPY(t *testing.T, p string) tensorio.Tensor {
	x, err := tensorio.ReadNPY(p)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{filepath.Join(tiny, "onnx", "bad", "text_float_ids.onnx"), filepath.Join(tiny, "onnx", "pooled_only", "text_model.onnx")} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := onnxgraph.Parse(b)
		if err != nil {
			return
		}
		for _, o := range m.Graph.Outputs {
			onnxgraph.FindHidden(m.Graph, o.Name)
		}
		var buf bytes.Buffer
		if err := m.WriteAppended(&buf, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := onnxgraph.Parse(buf.Bytes()); err != nil {
			t.Fatalf("rewritten model does not parse: %v", err)
		}
	})
}
