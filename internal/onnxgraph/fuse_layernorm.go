package onnxgraph

import "fmt"

// fuseSkipLayerNorm replaces LayerNormalization(Add(x, skip)) over the last
// axis with com.microsoft.SkipLayerNormalization(x, skip, gamma, beta, bias):
// the residual Add goes into the normalisation, and so does the bias Add of
// a projection feeding it (x = MatMul(·, W) + b). When the sum is used
// elsewhere (the residual stream), the fused node outputs it too (its
// fourth output, input_skip_bias_sum). It returns the count fused and, per
// LayerNormalization after an Add left alone, why.
func (e *editor) fuseSkipLayerNorm() (fused, biases int, skipped []string) {
	var lns []*Node
	for _, n := range e.nodes {
		if n.OpType == "LayerNormalization" && n.Domain == "" {
			lns = append(lns, n)
		}
	}
	for _, ln := range lns {
		add := e.node(ln.Inputs[0])
		if add == nil || add.OpType != "Add" || len(add.Inputs) != 2 {
			continue // not a residual sum
		}
		x, skip := add.Inputs[0], add.Inputs[1]
		if e.isConst(x) || e.isConst(skip) {
			continue // a bias or a constant position table
		}
		why := ""
		switch {
		case ln.Int("axis", -1) != -1:
			why = "not over the last axis"
		case len(ln.Inputs) < 2 || e.tensor(ln.Inputs[1]) == nil || len(e.tensor(ln.Inputs[1]).Dims) != 1:
			why = "no constant 1-D scale"
		case len(ln.Inputs) > 2 && ln.Inputs[2] != "" && (e.tensor(ln.Inputs[2]) == nil || len(e.tensor(ln.Inputs[2]).Dims) != 1):
			why = "a bias that is not a constant 1-D tensor"
		case len(ln.Outputs) > 1 && (ln.Outputs[1] != "" && e.uses(ln.Outputs[1]) > 0 || len(ln.Outputs) > 2 && ln.Outputs[2] != "" && e.uses(ln.Outputs[2]) > 0):
			why = "its mean or inverse deviation is used"
		case e.broadcasts(x) || e.broadcasts(skip):
			why = "one side of the sum is broadcast"
		}
		if why != "" {
			skipped = append(skipped, fmt.Sprintf("%s: %s", nodeLabel(ln), why))
			continue
		}
		width := e.tensor(ln.Inputs[1]).Dims[0]
		old := []*Node{add, ln}
		bias := ""
		for i, side := range []string{x, skip} {
			p, ok := e.projectionOf(side)
			if !ok || p.add == nil || !e.only(side) {
				continue
			}
			if bt := e.tensor(p.b); bt == nil || bt.Dims[0] != width {
				continue
			}
			bias = p.b
			old = append(old, p.add)
			if i == 0 {
				x = p.mm
			} else {
				skip = p.mm
			}
			biases++
			break
		}
		beta := ""
		if len(ln.Inputs) > 2 {
			beta = ln.Inputs[2]
		}
		sum := ""
		if e.uses(add.Outputs[0]) > 1 {
			sum = add.Outputs[0]
		}
		outs := []string{ln.Outputs[0]}
		if sum != "" {
			outs = append(outs, "", "", sum)
		}
		ins := []string{x, skip, ln.Inputs[1], beta, bias}
		for ins[len(ins)-1] == "" {
			ins = ins[:len(ins)-1]
		}
		eps := float32(1e-5)
		if a, ok := ln.Attrs["epsilon"]; ok {
			eps = a.F
		}
		node := &Node{Name: e.name("skip_layer_norm"), OpType: "SkipLayerNormalization", Domain: MSDomain,
			Inputs: ins, Outputs: outs, Attrs: map[string]*Attr{"epsilon": FloatAttr("epsilon", eps)}}
		e.replace(old, node)
		e.reindex()
		fused++
	}
	return fused, biases, skipped
}

// broadcasts reports whether v is made by an op that usually gives a
// tensor broadcast against the other side of a sum (position tables
// sliced and unsqueezed, expanded class tokens).
func (e *editor) broadcasts(v string) bool {
	n := e.node(v)
	if n == nil {
		return false
	}
	switch n.OpType {
	case "Unsqueeze", "Expand", "Slice", "Reshape":
		return true
	}
	return false
}

// fuseQuickGelu replaces x · Sigmoid(α x) with com.microsoft.QuickGelu(x)
// with attribute alpha α. It returns the count fused.
func (e *editor) fuseQuickGelu() int {
	var sigs []*Node
	for _, n := range e.nodes {
		if n.OpType == "Sigmoid" {
			sigs = append(sigs, n)
		}
	}
	fused := 0
	for _, sig := range sigs {
		inner := e.node(sig.Inputs[0])
		if inner == nil || inner.OpType != "Mul" || !e.only(sig.Inputs[0]) || !e.only(sig.Outputs[0]) {
			continue
		}
		alpha, x, ok := e.scaleOf(inner)
		if !ok {
			continue
		}
		outer := e.users[sig.Outputs[0]][0]
		if outer.OpType != "Mul" || len(outer.Inputs) != 2 {
			continue
		}
		other := outer.Inputs[0]
		if other == sig.Outputs[0] {
			other = outer.Inputs[1]
		}
		if other != x {
			continue
		}
		node := &Node{Name: e.name("quick_gelu"), OpType: "QuickGelu", Domain: MSDomain,
			Inputs: []string{x}, Outputs: []string{outer.Outputs[0]}, Attrs: map[string]*Attr{"alpha": FloatAttr("alpha", float32(alpha))}}
		e.replace([]*Node{inner, sig, outer}, node)
		e.reindex()
		fused++
	}
	return fused
}
