package onnxgraph

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// HiddenName is the output Expose adds.
const HiddenName = "last_hidden_state"

// ErrHasHidden is returned by Expose for a graph that already outputs
// last_hidden_state.
var ErrHasHidden = errors.New("onnxgraph: the graph already outputs " + HiddenName)

// Walk is what FindHidden found between a pooled output and the last hidden state.
type Walk struct {
	Tower      string // "text" (text_embeds) or "vision" (image_embeds)
	Pooled     string // the pooled output's name
	Projection string // op type of the projection node (MatMul, Gemm, MatMulInteger, ...)
	LayerNorm  string // vision: "LayerNormalization" or "decomposed"; text: ""
	Gather     string // op type of the node picking the CLS or EOS position
	Hidden     string // name of the last hidden state [batch, tokens, width] inside the graph
	Width      int64  // its width when the weights tell it, else 0
	// Cast is set when the pooled output is cast from the graph's inner
	// precision (a float16 graph keeping float32 inputs and outputs): the
	// added output is cast to the pooled output's type too.
	Cast bool
	// Steps describes the walk, one line per step, for logs.
	Steps []string
}

type index struct {
	g        *Graph
	producer map[string]int // value name → node index
}

func newIndex(g *Graph) *index {
	ix := &index{g: g, producer: map[string]int{}}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			if o != "" {
				ix.producer[o] = i
			}
		}
	}
	return ix
}

func (ix *index) node(name string) *Node {
	if i, ok := ix.producer[name]; ok {
		return &ix.g.Nodes[i]
	}
	return nil
}

// isConst reports whether a value is an initializer or a Constant's output.
func (ix *index) isConst(name string) bool {
	if _, ok := ix.g.Initializers[name]; ok {
		return true
	}
	n := ix.node(name)
	return n != nil && n.OpType == "Constant"
}

// constTensor returns the tensor of an initializer or a Constant node.
func (ix *index) constTensor(name string) *Tensor {
	if t, ok := ix.g.Initializers[name]; ok {
		return t
	}
	if n := ix.node(name); n != nil && n.OpType == "Constant" {
		if a, ok := n.Attrs["value"]; ok && a.T != nil {
			return a.T
		}
		if a, ok := n.Attrs["value_int"]; ok {
			return &Tensor{DataType: Int64, Int64s: []int64{a.I}}
		}
	}
	return nil
}

// dataInputs returns a node's inputs that are not constants.
func (ix *index) dataInputs(n *Node) []string {
	var out []string
	for _, in := range n.Inputs {
		if in != "" && !ix.isConst(in) {
			out = append(out, in)
		}
	}
	return out
}

// describe names what computes a value, for errors.
func (ix *index) describe(name string) string {
	if n := ix.node(name); n != nil {
		return fmt.Sprintf("%q is computed by %s", name, n.OpType)
	}
	if _, ok := ix.g.Initializers[name]; ok {
		return fmt.Sprintf("%q is an initializer", name)
	}
	for _, in := range ix.g.Inputs {
		if in.Name == name {
			return fmt.Sprintf("%q is a graph input", name)
		}
	}
	return fmt.Sprintf("%q is not computed by any node", name)
}

// dependsOn reports whether value name depends on a node of op type op,
// looking at most limit nodes back.
func (ix *index) dependsOn(name, op string, limit int) bool {
	seen := map[string]bool{}
	queue := []string{name}
	for len(queue) > 0 && limit > 0 {
		v := queue[0]
		queue = queue[1:]
		if seen[v] {
			continue
		}
		seen[v] = true
		n := ix.node(v)
		if n == nil {
			continue
		}
		limit--
		if n.OpType == op {
			return true
		}
		queue = append(queue, n.Inputs...)
	}
	return false
}

var projectionOps = map[string]bool{
	"MatMul": true, "Gemm": true, "FusedMatMul": true, "MatMulInteger": true,
	"MatMulIntegerToFloat": true, "MatMulNBits": true, "MatMulBnb4": true, "DynamicQuantizeMatMul": true,
}

// FindHidden walks back from a pooled output (text_embeds or image_embeds) of
// a CLIP tower to its last hidden state:
//
//	text:   text_embeds  = MatMul(Gather(last_hidden_state, EOS position), text_projection)
//	vision: image_embeds = MatMul(LayerNorm(Gather(last_hidden_state, 0)), visual_projection)
//
// (for text, last_hidden_state is after final_layer_norm; for vision it is
// before post_layernorm). Casts, reshapes and the extra nodes of quantized
// graphs are stepped over. An unrecognised graph is an error saying which
// step failed and what it found.
func FindHidden(g *Graph, pooled string) (*Walk, error) {
	out, ok := g.Output(pooled)
	if !ok {
		var names []string
		for _, o := range g.Outputs {
			names = append(names, o.Name)
		}
		return nil, fmt.Errorf("onnxgraph: the graph has no output %s (outputs: %s)", pooled, strings.Join(names, ", "))
	}
	w := &Walk{Pooled: pooled}
	switch {
	case strings.Contains(pooled, "text"):
		w.Tower = "text"
	case strings.Contains(pooled, "image"), strings.Contains(pooled, "vision"):
		w.Tower = "vision"
	default:
		return nil, fmt.Errorf("onnxgraph: cannot tell from the name %q whether it is the text or the vision tower (expected text_embeds or image_embeds)", pooled)
	}
	ix := newIndex(g)
	fail := func(step, what string, args ...any) error {
		return fmt.Errorf("onnxgraph: %s (%s tower): step %s: %s; the graph does not have the layout of a CLIP export", pooled, w.Tower, step, fmt.Sprintf(what, args...))
	}

	// Step 1: the projection.
	const step1 = "1 (the projection MatMul)"
	cur := pooled
	var proj *Node
	for hops := 0; proj == nil; hops++ {
		n := ix.node(cur)
		if n == nil || hops > 8 {
			return nil, fail(step1, "%s, expected a MatMul with the projection weights", ix.describe(cur))
		}
		switch {
		case projectionOps[n.OpType]:
			proj = n
		case n.OpType == "Cast":
			w.Cast = true
			cur = n.Inputs[0]
		case n.OpType == "Identity":
			cur = n.Inputs[0]
		case (n.OpType == "Mul" || n.OpType == "Add") && len(ix.dataInputs(n)) == 1:
			cur = ix.dataInputs(n)[0] // a quantization scale, or a bias
		default:
			return nil, fail(step1, "%s, expected a MatMul with the projection weights", ix.describe(cur))
		}
	}
	w.Projection = proj.OpType
	act := proj.Inputs[0]
	if len(proj.Inputs) > 1 && ix.isConst(act) && !ix.isConst(proj.Inputs[1]) {
		act = proj.Inputs[1] // weights first: x Wᵀ written as Wx
	}
	if ix.isConst(act) {
		return nil, fail(step1, "the %s has no input computed by the graph", proj.OpType)
	}
	if len(proj.Inputs) > 1 {
		if t := ix.constTensor(proj.Inputs[1]); t != nil && len(t.Dims) == 2 {
			w.Width = t.Dims[0]
			if proj.OpType == "Gemm" && proj.Int("transB", 0) == 1 {
				w.Width = t.Dims[1]
			}
		}
	}
	if n := ix.node(act); n != nil && n.OpType == "DynamicQuantizeLinear" {
		act = n.Inputs[0]
	}
	w.Steps = append(w.Steps, fmt.Sprintf("%s = %s(%s, weights)", cur, proj.OpType, act))

	skip := func(v string, ops ...string) string {
		for hops := 0; hops < 8; hops++ {
			n := ix.node(v)
			if n == nil {
				return v
			}
			found := false
			for _, op := range ops {
				if n.OpType == op {
					found = true
				}
			}
			if !found {
				return v
			}
			if n.OpType == "Cast" {
				w.Cast = true
			}
			v = n.Inputs[0]
		}
		return v
	}

	// Step 2 (vision): post_layernorm.
	cur = skip(act, "Cast", "Identity")
	if w.Tower == "vision" {
		const step2 = "2 (post_layernorm before the projection)"
		n := ix.node(cur)
		if n == nil {
			return nil, fail(step2, "%s, expected LayerNormalization", ix.describe(cur))
		}
		if n.OpType == "LayerNormalization" {
			w.LayerNorm = "LayerNormalization"
			if t := ix.constTensor(n.Inputs[1]); t != nil && len(t.Dims) == 1 {
				w.Width = t.Dims[0]
			}
			w.Steps = append(w.Steps, fmt.Sprintf("%s = LayerNormalization(%s)", cur, n.Inputs[0]))
			cur = n.Inputs[0]
		} else {
			x, ok := ix.decomposedLayerNorm(cur)
			if !ok {
				return nil, fail(step2, "%s, expected LayerNormalization (or its decomposed form: ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add)", ix.describe(cur))
			}
			w.LayerNorm = "decomposed"
			w.Steps = append(w.Steps, fmt.Sprintf("%s = layer norm of %s (decomposed)", cur, x))
			cur = x
		}
		cur = skip(cur, "Cast", "Identity")
	}

	// Step 3: the gather of the CLS (vision, position 0) or EOS (text, argmax) position.
	step3 := "3 (the gather of the EOS position, argmax of input_ids)"
	if w.Tower == "vision" {
		step3 = "3 (the gather of the class token, position 0)"
	}
	picked := cur
	cur = skip(cur, "Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity")
	n := ix.node(cur)
	if n == nil {
		return nil, fail(step3, "%s, expected Gather", ix.describe(cur))
	}
	var data string
	switch n.OpType {
	case "Gather", "GatherND", "GatherElements":
		data = n.Inputs[0]
		if len(n.Inputs) < 2 {
			return nil, fail(step3, "the %s has no indices", n.OpType)
		}
		idx := n.Inputs[1]
		if w.Tower == "vision" {
			t := ix.constTensor(idx)
			v, ok := []int64(nil), false
			if t != nil {
				v, ok = t.Int64Values()
			}
			if !ok || len(v) != 1 || v[0] != 0 {
				return nil, fail(step3, "the %s picks %s, expected the constant position 0 (the class token)", n.OpType, ix.describe(idx))
			}
			if n.OpType == "Gather" && n.Int("axis", 0) != 1 {
				return nil, fail(step3, "the Gather of position 0 is on axis %d, expected axis 1 (tokens)", n.Int("axis", 0))
			}
		} else if !ix.dependsOn(idx, "ArgMax", 40) {
			return nil, fail(step3, "the %s's indices %q do not come from an ArgMax (the EOS position)", n.OpType, idx)
		}
		if n.OpType == "Gather" && n.Int("axis", 0) == 0 {
			// Indexing of the flattened [batch*tokens, width] states.
			if f := ix.node(data); f != nil && (f.OpType == "Flatten" || f.OpType == "Reshape") {
				data = f.Inputs[0]
			} else {
				return nil, fail(step3, "the Gather on axis 0 reads %s, expected the flattened hidden states", ix.describe(data))
			}
		}
	case "Slice":
		if w.Tower != "vision" {
			return nil, fail(step3, "%s, expected a Gather at the EOS position", ix.describe(cur))
		}
		data = n.Inputs[0]
	default:
		return nil, fail(step3, "%s, expected Gather", ix.describe(cur))
	}
	w.Gather = n.OpType
	w.Steps = append(w.Steps, fmt.Sprintf("%s = %s(%s, ...)", picked, n.OpType, data))
	if ix.isConst(data) || ix.node(data) == nil {
		return nil, fail("4 (the last hidden state)", "%s, expected the encoder's output", ix.describe(data))
	}
	w.Hidden = data
	_ = out
	return w, nil
}

// decomposedLayerNorm recognises layer norm written out (opset < 17 exports):
// the value v depends, through Add/Mul/Div/Sqrt/Pow/ReduceMean/Sub nodes only,
// on Sub(x, ReduceMean(x)); it returns x.
func (ix *index) decomposedLayerNorm(v string) (string, bool) {
	allowed := map[string]bool{"Add": true, "Mul": true, "Div": true, "Sqrt": true, "Pow": true, "ReduceMean": true,
		"Sub": true, "Cast": true, "Reciprocal": true}
	seen := map[string]bool{}
	queue := []string{v}
	for visited := 0; len(queue) > 0 && visited < 24; visited++ {
		cur := queue[0]
		queue = queue[1:]
		if seen[cur] {
			continue
		}
		seen[cur] = true
		n := ix.node(cur)
		if n == nil || !allowed[n.OpType] {
			continue
		}
		if n.OpType == "Sub" && len(n.Inputs) == 2 {
			if m := ix.node(n.Inputs[1]); m != nil && m.OpType == "ReduceMean" && m.Inputs[0] == n.Inputs[0] {
				return n.Inputs[0], true
			}
		}
		queue = append(queue, ix.dataInputs(n)...)
	}
	return "", false
}

// Expose writes m with last_hidden_state added as a graph output, found by
// FindHidden from the pooled output (text_embeds or image_embeds). The new
// output is declared [batch, sequence, width] with the pooled output's
// element type (a Cast is added when the graph computes in another precision).
// A graph that already outputs last_hidden_state gives ErrHasHidden.
func Expose(m *Model, pooled string, w io.Writer) (*Walk, error) {
	g := m.Graph
	if _, ok := g.Output(HiddenName); ok {
		return nil, ErrHasHidden
	}
	walk, err := FindHidden(g, pooled)
	if err != nil {
		return nil, err
	}
	out, _ := g.Output(pooled)
	elem := out.ElemType
	if elem == 0 {
		elem = Float
	}
	batch := Dim{Param: "batch_size"}
	if out.HasShape && len(out.Shape) > 0 && (out.Shape[0].Param != "" || out.Shape[0].Value > 0) {
		batch = out.Shape[0]
	}
	width := Dim{Param: "hidden_size"}
	if walk.Width > 0 {
		width = Dim{Value: walk.Width}
	}
	vi := ValueInfo{Name: HiddenName, ElemType: elem, HasShape: true, Shape: []Dim{batch, {Param: "sequence_length"}, width}}
	var nodes []Node
	if walk.Hidden != HiddenName {
		ix := newIndex(g)
		if ix.node(HiddenName) != nil || g.Initializers[HiddenName] != nil {
			return nil, fmt.Errorf("onnxgraph: the graph has a value named %s that is not its last hidden state (%s is)", HiddenName, walk.Hidden)
		}
		node := Node{Name: "condition_expose_" + HiddenName, OpType: "Identity", Inputs: []string{walk.Hidden}, Outputs: []string{HiddenName}}
		if walk.Cast {
			node.OpType = "Cast"
			node.Attrs = map[string]*Attr{"to": {Name: "to", Type: 2, I: int64(elem)}}
		}
		nodes = append(nodes, node)
	}
	if err := m.WriteAppended(w, nodes, []ValueInfo{vi}); err != nil {
		return nil, err
	}
	return walk, nil
}
