package onnxgraph

import "fmt"

// attention is one self- or cross-attention subgraph found around a
// Softmax:
//
//	q [B, S, D] → (× scale) → Reshape [B, S, H, dh] → Transpose(0,2,1,3) ─┐
//	k [B, L, D] → Reshape [B, L, H, dh] → Transpose(0,2,3,1) ─────────────┴ MatMul
//	  → (× scale) → (+ mask | Where(mask, -big, ·)) → Softmax
//	v [B, L, D] → Reshape → Transpose(0,2,1,3) ─ MatMul(probs, ·)
//	  → Transpose(0,2,1,3) → Reshape [B, S, D] = out
//
// (k may also be Reshape → Transpose(0,2,1,3) → Transpose(0,1,3,2), and the
// scale may be applied to q and k separately, as exports of
// scaled_dot_product_attention do).
type attention struct {
	q, k, v    string  // the projected values [B, S|L, D]
	out        string  // [B, S, D]
	heads      int64   // H
	headSize   int64   // dh
	scale      float64 // applied to q kᵀ
	maskAdd    string  // a float mask added to the scores [B|1, H|1, S, L], or ""
	maskWhere  string  // a bool mask: true where the score is replaced by maskFill, or ""
	maskFill   float32 // the value Where writes
	nodes      []*Node // the nodes the fused op replaces
	selfAttend bool    // q, k and v come from one input
}

// matchAttention recognises the attention subgraph around the Softmax sm.
// It returns nil and why when the subgraph is not one it knows.
func (e *editor) matchAttention(sm *Node) (*attention, string) {
	a := &attention{scale: 1}
	add := func(n *Node) { a.nodes = append(a.nodes, n) }
	if sm.Int("axis", -1) != -1 && sm.Int("axis", -1) != 3 {
		return nil, "Softmax not on the last axis"
	}
	add(sm)
	// The consumer side: MatMul(probs, vh) → Transpose(0,2,1,3) → Reshape.
	if !e.only(sm.Outputs[0]) {
		return nil, "the attention probabilities have several consumers"
	}
	mm2 := e.users[sm.Outputs[0]][0]
	if mm2.OpType != "MatMul" || mm2.Inputs[0] != sm.Outputs[0] || !e.only(mm2.Outputs[0]) {
		return nil, "the probabilities are not multiplied with the values by one MatMul"
	}
	add(mm2)
	tr := e.users[mm2.Outputs[0]][0]
	if tr.OpType == "Reshape" && e.only(tr.Outputs[0]) {
		// Exports that multiply batches of B·H matrices (torch.bmm) view
		// the context as [B, H, T, dh] again here.
		add(tr)
		tr = e.users[tr.Outputs[0]][0]
	}
	if tr.OpType != "Transpose" || !equalInts(perm(tr), 0, 2, 1, 3) || !e.only(tr.Outputs[0]) {
		return nil, "the context is not transposed back with perm (0,2,1,3)"
	}
	add(tr)
	rs := e.users[tr.Outputs[0]][0]
	if rs.OpType != "Reshape" {
		return nil, "the heads are not merged by a Reshape"
	}
	add(rs)
	a.out = rs.Outputs[0]

	// The scores: MatMul(qh, kt) → (× scale) → (mask) → Softmax.
	s := sm.Inputs[0]
	maskSeen, scaleSeen := false, false
	var mm *Node
	for hops := 0; mm == nil; hops++ {
		n := e.node(s)
		if n == nil || hops > 8 || !e.only(s) {
			return nil, "the scores are not a MatMul of queries and keys"
		}
		switch {
		case n.OpType == "MatMul":
			mm = n
		case n.OpType == "Reshape" && hops < 4:
			// The bmm exports' views of the scores [B·H, T, T] ↔ [B, H, T, T]
			// around a mask.
			add(n)
			s = n.Inputs[0]
		case n.OpType == "Add" && !maskSeen && !scaleSeen:
			// The mask is whichever input does not continue the scores.
			x, m := n.Inputs[0], n.Inputs[1]
			if !e.scoreChain(x) && e.scoreChain(m) {
				x, m = m, x
			}
			a.maskAdd, maskSeen = m, true
			add(n)
			s = x
		case n.OpType == "Where" && !maskSeen && !scaleSeen && len(n.Inputs) == 3:
			f, ok := e.scalar(n.Inputs[1])
			if !ok || f > -1e4 {
				return nil, "the mask's Where does not write a large negative constant"
			}
			a.maskWhere, a.maskFill, maskSeen = n.Inputs[0], f, true
			add(n)
			s = n.Inputs[2]
		case (n.OpType == "Mul" || n.OpType == "Div") && !scaleSeen:
			f, x, ok := e.scaleOf(n)
			if !ok {
				return nil, "the scores are scaled by a value that is not a constant scalar"
			}
			a.scale *= f
			scaleSeen = true
			add(n)
			s = x
		default:
			return nil, fmt.Sprintf("the scores come from %s", n.OpType)
		}
	}
	add(mm)

	var why string
	var hq, hk, hv, dq, dk, dv int64
	if a.q, hq, dq, why = e.headsPath(mm.Inputs[0], false, a); why != "" {
		return nil, "queries: " + why
	}
	if a.k, hk, dk, why = e.headsPath(mm.Inputs[1], true, a); why != "" {
		return nil, "keys: " + why
	}
	if a.v, hv, dv, why = e.headsPath(mm2.Inputs[1], false, a); why != "" {
		return nil, "values: " + why
	}
	if hq != hk || hq != hv || dq != dk || dq != dv || hq <= 0 || dq <= 0 {
		return nil, fmt.Sprintf("head counts or sizes differ (%d×%d, %d×%d, %d×%d)", hq, dq, hk, dk, hv, dv)
	}
	a.heads, a.headSize = hq, dq
	// The merge Reshape must give [B, S, H·dh]: a shape of three elements
	// whose last, when constant, is H·dh (the exports read it from the
	// input's shape; the self-check of the rewrite sees any other case).
	if sh, ok := e.shapeTail(rs.Inputs[1]); !ok || sh > 0 && sh != hq*dq {
		return nil, "the heads are not merged to the width H·dh"
	}
	return a, ""
}

// scaleOf returns the factor a Mul or Div by a constant scalar applies and
// its other input.
func (e *editor) scaleOf(n *Node) (float64, string, bool) {
	if len(n.Inputs) != 2 {
		return 0, "", false
	}
	if f, ok := e.scalar(n.Inputs[1]); ok && f != 0 {
		if n.OpType == "Div" {
			return 1 / float64(f), n.Inputs[0], true
		}
		return float64(f), n.Inputs[0], true
	}
	if f, ok := e.scalar(n.Inputs[0]); ok && n.OpType == "Mul" {
		return float64(f), n.Inputs[1], true
	}
	return 0, "", false
}

// headsPath walks from the MatMul input v back to the projected value that
// was split into heads: Transpose(perm) ← Reshape [B, T, H, dh] ← (× scale)
// ← x. keys expects the transpose that puts the head size before the
// tokens. It returns x, H and dh.
func (e *editor) headsPath(v string, keys bool, a *attention) (x string, heads, size int64, why string) {
	n := e.node(v)
	if n != nil && (n.OpType == "Mul" || n.OpType == "Div") && e.only(v) {
		f, in, ok := e.scaleOf(n)
		if !ok {
			return "", 0, 0, "scaled by a value that is not a constant scalar"
		}
		a.scale *= f
		a.nodes = append(a.nodes, n)
		v, n = in, e.node(in)
	}
	if n != nil && keys && n.OpType == "Transpose" && equalInts(perm(n), 0, 2, 1) && e.only(v) {
		// bmm exports: kᵀ of the [B·H, L, dh] keys.
		if r := e.node(n.Inputs[0]); r != nil && r.OpType == "Reshape" && e.only(n.Inputs[0]) {
			a.nodes = append(a.nodes, n, r)
			v, n = r.Inputs[0], e.node(r.Inputs[0])
			keys = false // what is left is split like the queries and values
		}
	} else if n != nil && n.OpType == "Reshape" && e.only(v) {
		// bmm exports: the heads viewed as [B·H, T, dh].
		if t := e.node(n.Inputs[0]); t != nil && t.OpType == "Transpose" {
			a.nodes = append(a.nodes, n)
			v, n = n.Inputs[0], t
		}
	}
	if n == nil || n.OpType != "Transpose" || !e.only(v) {
		return "", 0, 0, "not a Transpose of the heads"
	}
	a.nodes = append(a.nodes, n)
	p := perm(n)
	switch {
	case keys && equalInts(p, 0, 2, 3, 1):
	case keys && equalInts(p, 0, 1, 3, 2):
		v = n.Inputs[0]
		n = e.node(v)
		if n == nil || n.OpType != "Transpose" || !equalInts(perm(n), 0, 2, 1, 3) || !e.only(v) {
			return "", 0, 0, "the keys' transpose (0,1,3,2) does not follow a transpose (0,2,1,3)"
		}
		a.nodes = append(a.nodes, n)
	case !keys && equalInts(p, 0, 2, 1, 3):
	default:
		return "", 0, 0, fmt.Sprintf("transpose perm %v", p)
	}
	v = n.Inputs[0]
	rs := e.node(v)
	if rs == nil || rs.OpType != "Reshape" || !e.only(v) {
		return "", 0, 0, "the heads are not split by a Reshape"
	}
	a.nodes = append(a.nodes, rs)
	heads, size, ok := e.headShape(rs.Inputs[1])
	if !ok {
		return "", 0, 0, "the split's shape does not give the heads as constants"
	}
	x = rs.Inputs[0]
	if n := e.node(x); n != nil && (n.OpType == "Mul" || n.OpType == "Div") && e.only(x) {
		if f, in, ok := e.scaleOf(n); ok {
			a.scale *= f
			a.nodes = append(a.nodes, n)
			x = in
		}
	}
	return x, heads, size, ""
}

// headShape reads H and dh from the shape of a heads split: a constant
// [*, *, H, dh] or a Concat of four parts whose last two are constants.
func (e *editor) headShape(v string) (heads, size int64, ok bool) {
	if s, ok := e.ints(v); ok {
		if len(s) == 4 && s[2] > 0 && s[3] > 0 {
			return s[2], s[3], true
		}
		return 0, 0, false
	}
	n := e.node(v)
	if n == nil || n.OpType != "Concat" || len(n.Inputs) != 4 {
		return 0, 0, false
	}
	h, ok1 := e.ints(n.Inputs[2])
	d, ok2 := e.ints(n.Inputs[3])
	if !ok1 || !ok2 || len(h) != 1 || len(d) != 1 || h[0] <= 0 || d[0] <= 0 {
		return 0, 0, false
	}
	return h[0], d[0], true
}

// shapeTail returns the last element of a 3-element shape: a constant, or
// a Concat of three parts whose last is constant; 0 when that part is
// computed.
func (e *editor) shapeTail(v string) (int64, bool) {
	if s, ok := e.ints(v); ok {
		if len(s) == 3 {
			return s[2], true
		}
		return 0, false
	}
	n := e.node(v)
	if n == nil || n.OpType != "Concat" || len(n.Inputs) != 3 {
		return 0, false
	}
	d, ok := e.ints(n.Inputs[2])
	if !ok {
		return 0, true
	}
	if len(d) != 1 {
		return 0, false
	}
	return d[0], true
}

// projection is x W + b with W [in, out] and b [out] constants.
type projection struct {
	x, mm    string // input, MatMul output (the value without bias)
	w, b     string // weight and bias names ("" for no bias)
	add, mul *Node  // the bias Add and the MatMul
}

// projectionOf recognises v = Add(b, MatMul(x, W)) (either order) with a
// constant W [in, out] and b [out], or v = MatMul(x, W).
func (e *editor) projectionOf(v string) (projection, bool) {
	var p projection
	n := e.node(v)
	if n == nil {
		return p, false
	}
	if n.OpType == "Add" && len(n.Inputs) == 2 {
		b, mmv := n.Inputs[0], n.Inputs[1]
		if !e.isConst(b) {
			b, mmv = mmv, b
		}
		bt := e.tensor(b)
		m := e.node(mmv)
		if bt == nil || len(bt.Dims) != 1 || m == nil || m.OpType != "MatMul" || !e.only(mmv) {
			return p, false
		}
		wt := e.tensor(m.Inputs[1])
		if wt == nil || len(wt.Dims) != 2 || wt.Dims[1] != bt.Dims[0] {
			return p, false
		}
		return projection{x: m.Inputs[0], mm: mmv, w: m.Inputs[1], b: b, add: n, mul: m}, true
	}
	if n.OpType == "MatMul" {
		wt := e.tensor(n.Inputs[1])
		if wt == nil || len(wt.Dims) != 2 {
			return p, false
		}
		return projection{x: n.Inputs[0], mm: v, w: n.Inputs[1], mul: n}, true
	}
	return p, false
}

// FuseOptions chooses the fused forms.
type FuseOptions struct {
	// PackedQKV fuses self-attention whose three projections read one input
	// into com.microsoft.Attention (one MatMul with the weights packed
	// [D, 3D]) instead of MultiHeadAttention after three MatMuls.
	PackedQKV bool
	// SplitQKV computes the three projections of such self-attention as
	// one MatMul by the weights packed [D, 3D], split into q, k and v for
	// MultiHeadAttention (a MatMul that Quantize then quantizes once, where
	// Attention would keep its weights in float32).
	SplitQKV bool
	// NoAttention, NoSkipLayerNorm, NoBiasGelu turn a fusion off.
	NoAttention, NoSkipLayerNorm, NoBiasGelu bool
}

// fuseAttention replaces every attention subgraph it recognises; it returns
// the count fused and, per Softmax left alone, why.
func (e *editor) fuseAttention(opts FuseOptions) (fused, packed int, skipped []string) {
	masks := map[string]string{} // bool mask → its float bias
	var softmaxes []*Node
	for _, n := range e.nodes {
		if n.OpType == "Softmax" {
			softmaxes = append(softmaxes, n)
		}
	}
	for _, sm := range softmaxes {
		a, why := e.matchAttention(sm)
		if a == nil {
			skipped = append(skipped, fmt.Sprintf("%s: %s", nodeLabel(sm), why))
			continue
		}
		var bias string
		var newNodes []*Node
		switch {
		case a.maskAdd != "":
			bias = a.maskAdd
		case a.maskWhere != "":
			if b, ok := masks[a.maskWhere]; ok {
				bias = b
			} else {
				fill := e.addInit(FloatTensor(e.name("mask_fill"), nil, []float32{a.maskFill}))
				zero := e.addInit(FloatTensor(e.name("zero"), nil, []float32{0}))
				bias = e.name("attention_bias")
				newNodes = append(newNodes, &Node{Name: bias, OpType: "Where", Inputs: []string{a.maskWhere, fill, zero}, Outputs: []string{bias}, Attrs: map[string]*Attr{}})
				masks[a.maskWhere] = bias
			}
		}
		pq, okq := e.projectionOf(a.q)
		pk, okk := e.projectionOf(a.k)
		pv, okv := e.projectionOf(a.v)
		attrs := map[string]*Attr{
			"num_heads": IntAttr("num_heads", a.heads),
			"scale":     FloatAttr("scale", float32(a.scale)),
		}
		width := a.heads * a.headSize
		name := e.name("attention")
		if opts.PackedQKV && okq && okk && okv && pq.x == pk.x && pq.x == pv.x &&
			e.only(a.q) && e.only(a.k) && e.only(a.v) {
			w, b, ok := e.packQKV(pq, pk, pv, width)
			if ok {
				node := &Node{Name: name, OpType: "Attention", Domain: MSDomain,
					Inputs: []string{pq.x, w, b, "", "", bias}, Outputs: []string{a.out}, Attrs: attrs}
				if bias == "" {
					node.Inputs = node.Inputs[:3]
				}
				old := append(a.nodes, pq.mul, pk.mul, pv.mul)
				for _, p := range []projection{pq, pk, pv} {
					if p.add != nil {
						old = append(old, p.add)
					}
				}
				e.replace(old, append(newNodes, node)...)
				e.reindex()
				fused++
				packed++
				continue
			}
		}
		if opts.SplitQKV && okq && okk && okv && pq.x == pk.x && pq.x == pv.x &&
			e.only(a.q) && e.only(a.k) && e.only(a.v) {
			if w, b, ok := e.packQKV(pq, pk, pv, width); ok {
				qkv, q, k, v := e.name("qkv"), e.name("q"), e.name("k"), e.name("v")
				split := &Node{Name: e.name("split"), OpType: "Split", Inputs: []string{qkv}, Outputs: []string{q, k, v},
					Attrs: map[string]*Attr{"axis": IntAttr("axis", -1)}}
				if e.m.Opsets[""] >= 13 {
					split.Inputs = append(split.Inputs, e.addInit(&Tensor{Name: e.name("qkv_sizes"), Dims: []int64{3}, DataType: Int64, Int64s: []int64{width, width, width}}))
				} else {
					split.Attrs["split"] = IntsAttr("split", width, width, width)
				}
				node := &Node{Name: name, OpType: "MultiHeadAttention", Domain: MSDomain,
					Inputs: []string{q, k, v, b, "", bias}, Outputs: []string{a.out}, Attrs: attrs}
				if bias == "" {
					node.Inputs = node.Inputs[:4]
				}
				old := append(a.nodes, pq.mul, pk.mul, pv.mul)
				for _, p := range []projection{pq, pk, pv} {
					if p.add != nil {
						old = append(old, p.add)
					}
				}
				mm := &Node{Name: qkv, OpType: "MatMul", Inputs: []string{pq.x, w}, Outputs: []string{qkv}, Attrs: map[string]*Attr{}}
				e.replace(old, append(newNodes, mm, split, node)...)
				e.reindex()
				fused++
				packed++
				continue
			}
		}
		// MultiHeadAttention: the biases of the three projections go into
		// its bias input [3D] when all three can be taken.
		inputs := []string{a.q, a.k, a.v}
		old := a.nodes
		var qkvBias string
		if okq && okk && okv && e.only(a.q) && e.only(a.k) && e.only(a.v) {
			if b, ok := e.concatBiases(width, pq, pk, pv); ok {
				qkvBias = b
				inputs = []string{pq.mm, pk.mm, pv.mm}
				for _, p := range []projection{pq, pk, pv} {
					if p.add != nil {
						old = append(old, p.add)
					}
				}
			}
		}
		node := &Node{Name: name, OpType: "MultiHeadAttention", Domain: MSDomain,
			Inputs: append(inputs, qkvBias, "", bias), Outputs: []string{a.out}, Attrs: attrs}
		for len(node.Inputs) > 3 && node.Inputs[len(node.Inputs)-1] == "" {
			node.Inputs = node.Inputs[:len(node.Inputs)-1]
		}
		e.replace(old, append(newNodes, node)...)
		e.reindex()
		fused++
	}
	return fused, packed, skipped
}

// concatBiases makes the [3D] bias of the q, k and v projections (zeros
// for one without bias).
func (e *editor) concatBiases(width int64, ps ...projection) (string, bool) {
	out := make([]float32, 0, 3*width)
	for _, p := range ps {
		if p.b == "" {
			out = append(out, make([]float32, width)...)
			continue
		}
		b, dims, ok := e.floats(p.b)
		if !ok || len(dims) != 1 || dims[0] != width {
			return "", false
		}
		out = append(out, b...)
	}
	return e.addInit(FloatTensor(e.name("qkv_bias"), []int64{3 * width}, out)), true
}

// packQKV makes the [D, 3D] weights and [3D] bias of the packed form.
func (e *editor) packQKV(pq, pk, pv projection, width int64) (w, b string, ok bool) {
	var ws [3][]float32
	var in int64
	for i, p := range []projection{pq, pk, pv} {
		v, dims, ok := e.floats(p.w)
		if !ok || len(dims) != 2 || dims[1] != width || (i > 0 && dims[0] != in) {
			return "", "", false
		}
		in = dims[0]
		ws[i] = v
	}
	packed := make([]float32, 0, in*3*width)
	for r := int64(0); r < in; r++ {
		for i := range ws {
			packed = append(packed, ws[i][r*width:(r+1)*width]...)
		}
	}
	b, ok = e.concatBiases(width, pq, pk, pv)
	if !ok {
		return "", "", false
	}
	w = e.addInit(FloatTensor(e.name("qkv_weight"), []int64{in, 3 * width}, packed))
	return w, b, true
}

func nodeLabel(n *Node) string {
	if n.Name != "" {
		return n.OpType + " " + n.Name
	}
	if len(n.Outputs) > 0 {
		return n.OpType + " → " + n.Outputs[0]
	}
	return n.OpType
}

// scoreChain reports whether v is computed by a node the scores pass
// through before their mask (MatMul, Mul, Div).
func (e *editor) scoreChain(v string) bool {
	n := e.node(v)
	return n != nil && (n.OpType == "MatMul" || n.OpType == "Mul" || n.OpType == "Div")
}
