package onnxgraph

import (
	"math"
	"slices"
)

// outlierRole is what the outlier rule makes of one MatMul: fed by the
// layer norm norm with outlier channels (smoothed), or downstream of it
// (kept in float32); ratio is the norm's largest |gain| over its median.
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
// biases its own) is smoothed, and every MatMul whose input leads back to
// a layer norm within a few nodes (attention's output projection through
// MultiHeadAttention and the q, k, v projections; the MLP's second layer
// through its activation) is kept in float32. All of them, not only those
// of the layers with outliers: an error anywhere in the residual stream
// reaches the outlier channels, whose gains multiply it many times over
// (on a ViT-B/32-size model with three channels at 40× in layers 3–12,
// keeping only those layers' products in float32 left image_embeds at a
// smallest cosine of 0.9945 to float32, all of them 0.9983).
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
			r.norm = roles[mm].norm // the norm to smooth is its own
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

// smoothLayerNorm divides the gain γ_c and bias β_c of the layer norm ln
// (read by one MatMul alone, by weights w [k, n], changed in place) by
// s_c and multiplies row c of w by s_c, which leaves the product as it was:
// s_c = sqrt(a_c / w_c), with a_c = sqrt(γ_c² + β_c²) the size of channel
// c of the norm's output (its normalised input has unit variance) and w_c
// = max |w[c, :]|, so that both end at sqrt(a_c·w_c) (SmoothQuant's
// migration with α = 0.5, from the weights alone). Channels many times
// larger than the rest then no longer set every row's quantization scale.
// The norm's gains and biases must be read by it alone.
func smoothLayerNorm(e *editor, ln *Node, w []float32, k, n int) {
	gt, bt := e.tensor(ln.Inputs[1]), (*Tensor)(nil)
	if len(ln.Inputs) > 2 {
		bt = e.tensor(ln.Inputs[2])
	}
	g, _ := gt.Float32Values()
	var b []float32
	if bt != nil {
		b, _ = bt.Float32Values()
	}
	if len(g) != k || (bt != nil && len(b) != k) {
		return
	}
	ng, nb := make([]float32, k), make([]float32, k)
	for c := range k {
		beta := 0.0
		if b != nil {
			beta = float64(b[c])
		}
		a := math.Hypot(float64(g[c]), beta)
		wc := 0.0
		for j := range n {
			wc = math.Max(wc, math.Abs(float64(w[c*n+j])))
		}
		s := 1.0
		if a > 0 && wc > 0 {
			s = math.Sqrt(a / wc)
		}
		ng[c], nb[c] = float32(float64(g[c])/s), float32(beta/s)
		for j := range n {
			w[c*n+j] = float32(float64(w[c*n+j]) * s)
		}
	}
	base := e.name("smooth")
	smoothed := &Node{Name: ln.Name, OpType: ln.OpType, Domain: ln.Domain, Inputs: slices.Clone(ln.Inputs), Outputs: ln.Outputs, Attrs: ln.Attrs}
	smoothed.Inputs[1] = e.addInit(FloatTensor(base+"_gamma", []int64{int64(k)}, ng))
	if len(smoothed.Inputs) > 2 {
		smoothed.Inputs[2] = e.addInit(FloatTensor(base+"_beta", []int64{int64(k)}, nb))
	} else {
		smoothed.Inputs = append(smoothed.Inputs, e.addInit(FloatTensor(base+"_beta", []int64{int64(k)}, nb)))
	}
	e.replace([]*Node{ln}, smoothed)
	e.reindex()
}
