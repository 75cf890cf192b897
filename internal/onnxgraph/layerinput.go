package onnxgraph

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// LayerInputName is the output name the project gives the last encoder
// layer's input when ExposeLayerInput adds it.
const LayerInputName = "readout_input"

// ErrHasOutput is returned by ExposeLayerInput for a graph that already has
// an output of the name asked for.
var ErrHasOutput = errors.New("onnxgraph: the graph already has an output of that name")

// attentionOps are the op types an attention sublayer computes its
// probabilities with (Softmax when written out; the contrib operators of
// fused graphs).
var attentionOps = map[string]bool{
	"Softmax": true, "Attention": true, "MultiHeadAttention": true, "PackedAttention": true,
	"PackedMultiHeadAttention": true, "GroupQueryAttention": true, "DecoderMaskedMultiHeadAttention": true,
	"SparseAttention": true, "QAttention": true,
}

// layerNormOps are the op types that normalise their first input alone.
var layerNormOps = map[string]bool{"LayerNormalization": true, "SimplifiedLayerNormalization": true}

// skipLayerNormOps are the fused residual-sum-plus-norm op types: the
// outputs are the normalised sum, mean, inverse deviation and (output 3) the
// sum itself.
var skipLayerNormOps = map[string]bool{"SkipLayerNormalization": true, "SkipSimplifiedLayerNormalization": true}

// blockIndex adds to index what the walk through an encoder block needs: who
// reads each value, and the element types the graph declares.
type blockIndex struct {
	*index
	users    map[string][]*Node // value → nodes reading it, each once
	outputs  map[string]bool    // graph outputs
	declared map[string]int32   // element types of graph inputs, outputs and value_info
	types    map[string]int32   // elemType's memo
}

func newBlockIndex(g *Graph) *blockIndex {
	b := &blockIndex{index: newIndex(g), users: map[string][]*Node{}, outputs: map[string]bool{},
		declared: map[string]int32{}, types: map[string]int32{}}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		seen := map[string]bool{}
		for _, in := range n.Inputs {
			if in != "" && !seen[in] {
				seen[in] = true
				b.users[in] = append(b.users[in], n)
			}
		}
	}
	for _, o := range g.Outputs {
		b.outputs[o.Name] = true
	}
	for _, vis := range [][]ValueInfo{g.Inputs, g.Outputs, g.ValueInfo} {
		for _, v := range vis {
			if v.ElemType != 0 {
				b.declared[v.Name] = v.ElemType
			}
		}
	}
	return b
}

// uses counts the readers of v, a graph output counting as one.
func (b *blockIndex) uses(v string) int {
	n := len(b.users[v])
	if b.outputs[v] {
		n++
	}
	return n
}

// isInput reports whether v is a graph input.
func (b *blockIndex) isInput(v string) bool {
	for _, in := range b.g.Inputs {
		if in.Name == v {
			return true
		}
	}
	return false
}

// through returns v with the Casts and Identities computing it stepped over.
func (b *blockIndex) through(v string) string {
	for hops := 0; hops < 8; hops++ {
		n := b.node(v)
		if n == nil || (n.OpType != "Cast" && n.OpType != "Identity") || len(n.Inputs) == 0 {
			return v
		}
		v = n.Inputs[0]
	}
	return v
}

// aliases returns v and the values that are v cast or copied (Cast and
// Identity readers, a few steps on).
func (b *blockIndex) aliases(v string) []string {
	out := []string{v}
	for i := 0; i < len(out) && len(out) < 16; i++ {
		for _, n := range b.users[out[i]] {
			if (n.OpType == "Cast" || n.OpType == "Identity") && len(n.Outputs) > 0 && n.Outputs[0] != "" {
				out = append(out, n.Outputs[0])
			}
		}
	}
	return out
}

// sumOperands returns the two operands of the residual sum computing v: an
// Add of two computed values, or the sum output (output 3) of a
// SkipLayerNormalization. why says what v is when it is neither.
func (b *blockIndex) sumOperands(v string) (ops []string, why string) {
	n := b.node(v)
	if n == nil {
		return nil, b.describe(v)
	}
	switch {
	case n.OpType == "Add":
		data := b.dataInputs(n)
		if len(data) == 2 {
			return data, ""
		}
		if len(data) == 1 {
			return nil, fmt.Sprintf("%s with a constant operand (a bias)", b.describe(v))
		}
		return nil, fmt.Sprintf("%s of %d computed values", b.describe(v), len(data))
	case skipLayerNormOps[n.OpType]:
		if len(n.Outputs) > 3 && n.Outputs[3] == v && len(n.Inputs) > 1 && !b.isConst(n.Inputs[0]) && !b.isConst(n.Inputs[1]) {
			return []string{n.Inputs[0], n.Inputs[1]}, ""
		}
		return nil, fmt.Sprintf("%s, but not as its sum output (output 3)", b.describe(v))
	}
	return nil, b.describe(v)
}

// isSum reports whether v (Casts stepped over) is a residual sum.
func (b *blockIndex) isSum(v string) bool {
	ops, _ := b.sumOperands(b.through(v))
	return ops != nil
}

// normOf returns the layer norm reading v (or a cast of v): a
// LayerNormalization, a decomposed one (ReduceMean(v) and Sub(v, mean)), or
// the SkipLayerNormalization whose sum output v is. nil when there is none.
func (b *blockIndex) normOf(v string) *Node {
	if n := b.node(v); n != nil && skipLayerNormOps[n.OpType] && len(n.Outputs) > 3 && n.Outputs[3] == v {
		return n
	}
	for _, a := range b.aliases(v) {
		for _, n := range b.users[a] {
			if layerNormOps[n.OpType] && n.Inputs[0] == a {
				return n
			}
			if n.OpType == "ReduceMean" && len(n.Outputs) > 0 {
				for _, s := range b.users[a] {
					if s.OpType == "Sub" && len(s.Inputs) == 2 && s.Inputs[0] == a && s.Inputs[1] == n.Outputs[0] {
						return n
					}
				}
			}
		}
	}
	return nil
}

// traits describes an operand of a residual sum: whether it is read more
// than once, is itself a residual sum, and feeds a layer norm. In a pre-LN
// block the residual stream has these traits and the sublayer's output none.
func (b *blockIndex) traits(v string) (score int, desc string) {
	var t []string
	if b.uses(v) > 1 {
		score++
		t = append(t, fmt.Sprintf("read %d times", b.uses(v)))
	} else {
		t = append(t, "read once")
	}
	if b.isSum(v) {
		score++
		t = append(t, "a residual sum")
	}
	if b.normOf(v) != nil {
		score++
		t = append(t, "feeds a layer norm")
	}
	return score, fmt.Sprintf("%s (%s)", b.describe(v), strings.Join(t, ", "))
}

// residual picks, of a residual sum's two operands, the residual stream (the
// one with more of the traits above, which must feed a layer norm) and the
// sublayer's output.
func (b *blockIndex) residual(ops []string) (stream, branch string, err error) {
	s0, d0 := b.traits(ops[0])
	s1, d1 := b.traits(ops[1])
	switch {
	case s0 > s1:
		stream, branch = ops[0], ops[1]
	case s1 > s0:
		stream, branch, d0, d1 = ops[1], ops[0], d1, d0
	default:
		return "", "", fmt.Errorf("cannot tell the residual stream from the sublayer's output: %s; %s", d0, d1)
	}
	if b.normOf(stream) == nil {
		return "", "", fmt.Errorf("the residual operand does not feed a layer norm (a pre-LN block normalises it): %s; the other operand: %s", d0, d1)
	}
	return stream, branch, nil
}

// sublayerHas reports whether the sublayer computing branch from the
// residual stream has a node of one of the op types in ops. The walk goes
// back from branch and does not enter the node computing stop (the stream),
// nor the inputs of Shape nodes (shapes carry no data).
func (b *blockIndex) sublayerHas(branch, stop string, ops map[string]bool) bool {
	seen := map[string]bool{stop: true}
	queue := []string{branch}
	for visited := 0; len(queue) > 0 && visited < 1000; {
		v := queue[0]
		queue = queue[1:]
		if seen[v] {
			continue
		}
		seen[v] = true
		n := b.node(v)
		if n == nil {
			continue
		}
		visited++
		if ops[n.OpType] {
			return true
		}
		if n.OpType == "Shape" || n.OpType == "Size" {
			continue
		}
		stopsHere := false
		for _, o := range n.Outputs {
			stopsHere = stopsHere || o == stop
		}
		if !stopsHere {
			queue = append(queue, n.Inputs...)
		}
	}
	return false
}

// NormInput returns the input of the layer norm computing v: a
// LayerNormalization (or SimplifiedLayerNormalization), or one written out
// (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add), Casts and Identities stepped
// over on both sides. A tower whose last_hidden_state is after its final
// layer norm (SigLIP's vision tower: post_layernorm) gives FindLayerInput
// and ExposeLayerInput the norm's input, the last encoder layer's output.
// A v that no layer norm computes is an error saying what computes it.
func NormInput(g *Graph, v string) (string, error) {
	return newBlockIndex(g).normInput(v)
}

func (b *blockIndex) normInput(v string) (string, error) {
	cur := b.through(v)
	n := b.node(cur)
	if n == nil {
		return "", fmt.Errorf("onnxgraph: the layer norm computing %s: %s, expected a layer norm", v, b.describe(cur))
	}
	if layerNormOps[n.OpType] && len(n.Inputs) > 0 && n.Inputs[0] != "" {
		return b.through(n.Inputs[0]), nil
	}
	if x, ok := b.decomposedLayerNorm(cur); ok {
		return b.through(x), nil
	}
	return "", fmt.Errorf("onnxgraph: the layer norm computing %s: %s, expected LayerNormalization (or its decomposed form: ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add)", v, b.describe(cur))
}

// normedOutput returns the graph output that is a layer norm of v (the
// norm's nodes and Casts and Identities between), as a tower's
// last_hidden_state after its final norm is of the encoder's output; false
// when there is none.
func (b *blockIndex) normedOutput(v string) (ValueInfo, bool) {
	norm := map[string]bool{"LayerNormalization": true, "SimplifiedLayerNormalization": true, "Add": true,
		"Mul": true, "Div": true, "Sqrt": true, "Pow": true, "ReduceMean": true, "Sub": true, "Reciprocal": true,
		"Cast": true, "Identity": true}
	seen := map[string]bool{v: true}
	queue := []string{v}
	for visited := 0; len(queue) > 0 && visited < 32; visited++ {
		cur := queue[0]
		queue = queue[1:]
		for _, n := range b.users[cur] {
			if !norm[n.OpType] {
				continue
			}
			for _, o := range n.Outputs {
				if o == "" || seen[o] {
					continue
				}
				seen[o] = true
				if out, ok := b.g.Output(o); ok {
					if x, err := b.normInput(o); err == nil && x == b.through(v) {
						return out, true
					}
				}
				queue = append(queue, o)
			}
		}
	}
	return ValueInfo{}, false
}

// layerInput is what the walk found.
type layerInput struct {
	Value string // the last layer's input, x
	Width int64  // its width when the weights tell it (layer_norm1's scale, out_proj's bias), else 0
}

// FindLayerInput walks back from the last hidden state of a pre-LN CLIP
// encoder (for the vision tower, last_hidden_state [batch, 1+P, d_v] before
// post_layernorm, as FindHidden finds it; for a tower whose
// last_hidden_state is after its final norm, as SigLIP's, that norm's
// input, as NormInput finds it) to the input of its last encoder
// layer: the residual stream x [batch, 1+P, d_v] entering
// encoder.layers.{L-1}, which Hugging Face returns as hidden_states[-2]. The
// last block computes
//
//	h = x + out_proj(attention(layer_norm1(x)))
//	y = h + fc2(act(fc1(layer_norm2(h))))      (y = the last hidden state)
//
// At each residual sum (an Add, or the sum output of a fused
// SkipLayerNormalization) the residual operand is told from the sublayer's
// output by three traits, of which the sublayer's output has none in a
// pre-LN block: it is read more than once, is itself a residual sum, and
// feeds a layer norm (LayerNormalization, a decomposed one, or the fused
// norm of the sum it is). It must have more of them than the other operand,
// and feed a layer norm. The sublayer between h and y must have no attention, the
// one between x and h must have one. Casts and Identities are stepped over,
// so x may be of another precision than hidden (float16 inside a graph with
// float32 outputs). An unrecognised graph is an error saying which step failed
// and what it found.
func FindLayerInput(g *Graph, hidden string) (string, error) {
	li, err := findLayerInput(newBlockIndex(g), hidden)
	if err != nil {
		return "", err
	}
	return li.Value, nil
}

func findLayerInput(b *blockIndex, hidden string) (*layerInput, error) {
	fail := func(step, what string, args ...any) error {
		return fmt.Errorf("onnxgraph: the last layer's input from %s: step %s: %s; the graph does not have the layout of a pre-LN CLIP encoder",
			hidden, step, fmt.Sprintf(what, args...))
	}
	li := &layerInput{}

	// Step 1: the block's second residual sum, y = h + mlp.
	const step1 = "1 (the last block's second residual Add, h + mlp(layer_norm2(h)))"
	y := b.through(hidden)
	ops, why := b.sumOperands(y)
	if ops == nil {
		return nil, fail(step1, "%s, expected an Add of two computed values", why)
	}

	// Step 2: h, its residual operand; the other is the MLP.
	const step2 = "2 (the residual operand h of that Add)"
	h, mlp, err := b.residual(ops)
	if err != nil {
		return nil, fail(step2, "%v", err)
	}
	if b.sublayerHas(mlp, h, attentionOps) {
		return nil, fail(step2, "the sublayer computing %q from %q has an attention (%s is the output of a block's attention half, not of a whole block)", mlp, h, hidden)
	}

	// Step 3: the block's first residual sum, h = x + attention.
	const step3 = "3 (the last block's first residual Add, x + attention(layer_norm1(x)))"
	hs := b.through(h)
	ops, why = b.sumOperands(hs)
	if ops == nil {
		return nil, fail(step3, "%s, expected an Add of two computed values", why)
	}

	// Step 4: x, its residual operand; the other is the attention.
	const step4 = "4 (the residual operand x of that Add, the last layer's input)"
	x, attn, err := b.residual(ops)
	if err != nil {
		return nil, fail(step4, "%v", err)
	}
	if !b.sublayerHas(attn, x, attentionOps) {
		return nil, fail(step4, "the sublayer computing %q from %q has no attention (Softmax, or a fused attention operator)", attn, x)
	}
	li.Value = x
	if n := b.normOf(x); n != nil {
		scale := ""
		switch {
		case layerNormOps[n.OpType] && len(n.Inputs) > 1:
			scale = n.Inputs[1]
		case skipLayerNormOps[n.OpType] && len(n.Inputs) > 2:
			scale = n.Inputs[2]
		}
		if t := b.constTensor(scale); t != nil && len(t.Dims) == 1 {
			li.Width = t.Dims[0]
		}
	}
	if n := b.node(b.through(attn)); li.Width == 0 && n != nil {
		// A decomposed layer norm: the width of out_proj's bias or weight.
		for _, in := range n.Inputs {
			t := b.constTensor(in)
			switch {
			case t == nil:
			case n.OpType == "Add" && len(t.Dims) == 1:
				li.Width = t.Dims[0]
			case n.OpType == "MatMul" && len(t.Dims) == 2:
				li.Width = t.Dims[1]
			}
		}
	}
	return li, nil
}

// sameTypeAsInputs are op types whose output has the element type of their
// inputs (any of them); sameTypeAsFirst those whose output has the type of
// their first input.
var (
	sameTypeAsInputs = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Sum": true,
		"Max": true, "Min": true, "Concat": true, "MatMul": true, "Gemm": true}
	sameTypeAsFirst = map[string]bool{"Identity": true, "Reshape": true, "Transpose": true, "Squeeze": true,
		"Unsqueeze": true, "Flatten": true, "Expand": true, "Slice": true, "Gather": true, "Pow": true,
		"Sqrt": true, "Neg": true, "Relu": true, "Sigmoid": true, "Tanh": true, "Erf": true, "Softmax": true,
		"Conv": true, "LayerNormalization": true, "SimplifiedLayerNormalization": true,
		"SkipLayerNormalization": true, "SkipSimplifiedLayerNormalization": true, "Gelu": true,
		"FastGelu": true, "BiasGelu": true, "QuickGelu": true, "Attention": true, "MultiHeadAttention": true,
		"ReduceMean": true, "Dropout": true}
)

// elemType returns the element type of value v: declared by the graph,
// an initializer's or Constant's, a Cast's target, or followed back through
// ops that keep their inputs' type. 0 when it cannot tell.
func (b *blockIndex) elemType(v string, depth int) int32 {
	if t, ok := b.declared[v]; ok {
		return t
	}
	if t, ok := b.types[v]; ok {
		return t
	}
	if t := b.constTensor(v); t != nil {
		return t.DataType
	}
	n := b.node(v)
	if n == nil || depth > 200 {
		return 0
	}
	b.types[v] = 0 // a cycle ends here
	var t int32
	switch {
	case n.OpType == "Cast":
		t = int32(n.Int("to", 0))
	case sameTypeAsInputs[n.OpType]:
		for _, in := range n.Inputs {
			if in != "" && t == 0 {
				t = b.elemType(in, depth+1)
			}
		}
	case sameTypeAsFirst[n.OpType] && len(n.Inputs) > 0:
		t = b.elemType(n.Inputs[0], depth+1)
	}
	b.types[v] = t
	return t
}

// layerInputShape returns the dims to declare for the last layer's input:
// batch and tokens from the hidden state when the graph outputs it (or a
// layer norm of it: a last_hidden_state after the final norm), else batch
// from the image input and tokens from the patch embedding (1 + the
// patches of a Conv whose stride is its kernel over an input of fixed size);
// the width from the layer norm's weights. Dims it cannot tell are named.
func (b *blockIndex) layerInputShape(hidden string, width int64) []Dim {
	dims := []Dim{{Param: "batch_size"}, {Param: "sequence_length"}, {Param: "hidden_size"}}
	if width > 0 {
		dims[2] = Dim{Value: width}
	}
	o, ok := b.g.Output(hidden)
	normed := false
	if !ok {
		o, normed = b.normedOutput(hidden)
		ok = normed
	}
	for _, n := range b.g.Nodes {
		if normed {
			// The tokens are the normed output's, or named: the patch
			// embedding's count assumes a class token.
			break
		}
		if n.OpType != "Conv" || len(n.Inputs) < 2 {
			continue
		}
		w := b.constTensor(n.Inputs[1])
		var in ValueInfo
		found := false
		for _, i := range b.g.Inputs {
			if i.Name == b.through(n.Inputs[0]) {
				in, found = i, true
			}
		}
		if w == nil || len(w.Dims) != 4 || !found || len(in.Shape) != 4 {
			continue
		}
		if d := in.Shape[0]; d.Param != "" || d.Value > 0 {
			dims[0] = d
		}
		kh, kw := w.Dims[2], w.Dims[3]
		s, p := n.Attrs["strides"], n.Attrs["pads"]
		stride := s != nil && len(s.Ints) == 2 && s.Ints[0] == kh && s.Ints[1] == kw
		unpadded := p == nil || len(p.Ints) == 4 && p.Ints[0] == 0 && p.Ints[1] == 0 && p.Ints[2] == 0 && p.Ints[3] == 0
		ih, iw := in.Shape[2].Value, in.Shape[3].Value
		if stride && unpadded && ih >= kh && iw >= kw && kh > 0 && kw > 0 {
			dims[1] = Dim{Value: (ih/kh)*(iw/kw) + 1}
		}
		break
	}
	if ok && len(o.Shape) == 3 {
		for i := 0; i < 2; i++ {
			if o.Shape[i].Value > 0 || i == 0 && o.Shape[i].Param != "" {
				dims[i] = o.Shape[i]
			}
		}
		if dims[2].Value == 0 && o.Shape[2].Value > 0 {
			dims[2] = o.Shape[2]
		}
	}
	return dims
}

// ExposeLayerInput writes m with one more graph output, name, carrying the
// input of the last encoder layer that FindLayerInput finds from hidden (the
// encoder's output: the last hidden state before post_layernorm, or the
// input of the post_layernorm computing a last_hidden_state output):
// float32, declared [batch, S, d_v] (S = 1+P for CLIP; the tokens of
// the last_hidden_state output that normalises hidden, when there is one;
// dims the graph does not fix are named). A Cast to
// float32 is added when the graph computes that value in another precision,
// an Identity otherwise. A graph that already has an output named name gives
// ErrHasOutput.
func ExposeLayerInput(m *Model, hidden, name string, w io.Writer) error {
	g := m.Graph
	if name == "" {
		return fmt.Errorf("onnxgraph: no name for the last layer's input")
	}
	if _, ok := g.Output(name); ok {
		return fmt.Errorf("%w: %s", ErrHasOutput, name)
	}
	b := newBlockIndex(g)
	li, err := findLayerInput(b, hidden)
	if err != nil {
		return err
	}
	elem := b.elemType(li.Value, 0)
	vi := ValueInfo{Name: name, ElemType: Float, HasShape: true, Tensor: true, Shape: b.layerInputShape(hidden, li.Width)}
	var nodes []Node
	if li.Value == name {
		if elem != Float {
			return fmt.Errorf("onnxgraph: the last layer's input %s is %s, not float, and cannot be cast under its own name", name, ElemTypeName(elem))
		}
	} else {
		if b.node(name) != nil || g.Initializers[name] != nil || b.isInput(name) {
			return fmt.Errorf("onnxgraph: the graph has a value named %s that is not its last layer's input (%s is)", name, li.Value)
		}
		node := Node{Name: "condition_expose_" + name, OpType: "Identity", Inputs: []string{li.Value}, Outputs: []string{name}}
		if elem != Float {
			// float16 (or a type the graph does not tell): Cast to float32,
			// which is also correct on a float32 value.
			node.OpType = "Cast"
			node.Attrs = map[string]*Attr{"to": IntAttr("to", int64(Float))}
		}
		nodes = append(nodes, node)
	}
	return m.WriteAppended(w, nodes, []ValueInfo{vi})
}
