package onnxgraph

import (
	"math"
	"slices"
)

// outlierRole is what the outlier rule makes of one MatMul in a tower with
// outlier channels: fed by the layer norm norm (its outlier channels
// multiplied in float32, see splitOutliers), or downstream of a layer norm
// (kept in float32; norm and ratio are then the tower's worst norm and its
// largest |gain| over its median).
type outlierRole struct {
	norm       *Node
	downstream bool
	ratio      float64
}

// outlierNorms applies the outlier rule to the MatMuls mms of a graph
// (one tower): a LayerNormalization with constant gains γ whose largest
// |γ_c| is at least ratio times the median |γ_c| has outlier channels.
// When one of the graph's layer norms has them, every MatMul reading a
// layer norm's output (alone, through its input, the norm's gains and
// biases its own) has the norm's outlier channels multiplied in float32
// (see splitOutliers), and every MatMul whose input leads back to
// a layer norm within a few nodes (attention's output projection through
// MultiHeadAttention and the q, k, v projections; the MLP's second layer
// through its activation) is kept in float32. All of them, not only those
// of the layers with outliers: an error anywhere in the residual stream
// reaches the outlier channels, whose gains multiply it many times over
// (on a ViT-B/32-size model with three channels at 40× in layers 3–12, the
// outlier channels smoothed into the weights, keeping only those layers'
// downstream products in float32 left image_embeds at a smallest cosine of
// 0.9945 to float32, all of them 0.9983).
func outlierNorms(e *editor, mms []*Node, ratio float64) map[*Node]outlierRole {
	roles := map[*Node]outlierRole{}
	worst := outlierRole{}
	for _, mm := range mms {
		if e.tensor(mm.Inputs[1]) == nil {
			continue
		}
		v := mm.Inputs[0]
		for depth := 0; depth < 6 && v != ""; depth++ {
			p := e.node(v)
			if p == nil {
				break
			}
			if p.OpType == "LayerNormalization" && len(p.Inputs) >= 2 {
				direct := depth == 0 && e.only(v) && e.uses(p.Inputs[1]) == 1 && (len(p.Inputs) < 3 || e.uses(p.Inputs[2]) == 1)
				r := outlierRole{norm: p, downstream: !direct, ratio: gainRatio(e, p)}
				roles[mm] = r
				if r.ratio > worst.ratio {
					worst = r
				}
				break
			}
			v = firstData(e, p)
		}
	}
	if worst.ratio < ratio {
		return nil
	}
	for mm, r := range roles {
		r.norm, r.ratio = worst.norm, worst.ratio
		if !r.downstream {
			r.norm = roles[mm].norm // the norm whose outlier channels it takes
		}
		roles[mm] = r
	}
	return roles
}

// firstData is the first input of n that is not a constant ("" when
// none is).
func firstData(e *editor, n *Node) string {
	for _, in := range n.Inputs {
		if in != "" && !e.isConst(in) {
			return in
		}
	}
	return ""
}

// gainRatio is a LayerNormalization's largest |gain| over its median
// |gain| (0 when its gains are not a constant).
func gainRatio(e *editor, ln *Node) float64 {
	if len(ln.Inputs) < 2 {
		return 0
	}
	t := e.tensor(ln.Inputs[1])
	if t == nil {
		return 0
	}
	g, ok := t.Float32Values()
	if !ok || len(g) == 0 {
		return 0
	}
	a := make([]float64, len(g))
	for i, v := range g {
		a[i] = math.Abs(float64(v))
	}
	slices.Sort(a)
	med := a[len(a)/2]
	if med == 0 {
		return math.Inf(1)
	}
	return a[len(a)-1] / med
}

// outlierPart is the float32 part of a MatMul whose layer norm has
// outlier channels: channels [c] of the norm's output (as rescaled by
// splitOutliers) times w [len(channels), n].
type outlierPart struct {
	channels []int64
	ratios   []float64 // s_c of each channel: the norm writes y_c / s_c
	w        []float32
}

// splitOutliers splits the product of the layer norm ln's output y [.., k]
// by w [k, n] (read by one MatMul alone) into an int8 part and an exact
// float32 one. Each channel c whose size a_c = sqrt(γ_c² + β_c²) (its
// normalised input has unit variance) is more than 4 times the median
// size is an outlier: the norm's γ_c and β_c are divided by s_c = a_c /
// median, so that the norm writes y'_c = y_c / s_c, of the size of the
// other channels, and the product is y'·w (int8, every channel of the
// size its row's scale is made for) plus Σ_c (s_c − 1)·y'_c·w[c, :] in
// float32 (LLM.int8()'s decomposition, with the outlier channels read from
// the gains instead of measured). w is left as it was. ok is false when the
// norm has no such channel.
func splitOutliers(e *editor, ln *Node, w []float32, k, n int) (part outlierPart, ok bool) {
	gt := e.tensor(ln.Inputs[1])
	if gt == nil {
		return part, false
	}
	g, _ := gt.Float32Values()
	var b []float32
	if len(ln.Inputs) > 2 && ln.Inputs[2] != "" {
		bt := e.tensor(ln.Inputs[2])
		if bt == nil {
			return part, false // a bias computed at run time
		}
		if b, _ = bt.Float32Values(); len(b) != k {
			return part, false
		}
	}
	if len(g) != k {
		return part, false
	}
	size := make([]float64, k)
	for c := range k {
		beta := 0.0
		if b != nil {
			beta = float64(b[c])
		}
		size[c] = math.Hypot(float64(g[c]), beta)
	}
	sorted := slices.Clone(size)
	slices.Sort(sorted)
	med := sorted[k/2]
	if med == 0 {
		return part, false
	}
	ng, nb := slices.Clone(g), make([]float32, k)
	if b != nil {
		copy(nb, b)
	}
	for c := range k {
		if size[c] <= 4*med {
			continue
		}
		s := size[c] / med
		ng[c], nb[c] = float32(float64(g[c])/s), float32(float64(nb[c])/s)
		part.channels = append(part.channels, int64(c))
		part.ratios = append(part.ratios, s)
		for j := range n {
			part.w = append(part.w, float32((s-1)*float64(w[c*n+j])))
		}
	}
	if len(part.channels) == 0 {
		return part, false
	}
	base := e.name("outliers")
	split := &Node{Name: ln.Name, OpType: ln.OpType, Domain: ln.Domain, Inputs: slices.Clone(ln.Inputs), Outputs: ln.Outputs, Attrs: ln.Attrs}
	split.Inputs[1] = e.addInit(FloatTensor(base+"_gamma", []int64{int64(k)}, ng))
	beta := e.addInit(FloatTensor(base+"_beta", []int64{int64(k)}, nb))
	if len(split.Inputs) > 2 {
		split.Inputs[2] = beta
	} else {
		split.Inputs = append(split.Inputs, beta)
	}
	e.replace([]*Node{ln}, split)
	e.reindex()
	return part, true
}
