package onnxgraph

import "math"

// staticRange is the range [lo, hi] (0 in it) the static scheme quantizes
// a MatMul's input with: the calibrated range over every channel, each
// outlier channel of extra (see splitOutliers) divided by its ratio, as
// its layer norm now writes it.
func staticRange(r ChannelRange, extra *outlierPart) (lo, hi float32) {
	div := map[int64]float64{}
	if extra != nil {
		for i, c := range extra.channels {
			div[c] = extra.ratios[i]
		}
	}
	for c := range r.Lo {
		l, h := float64(r.Lo[c]), float64(r.Hi[c])
		if d, ok := div[int64(c)]; ok {
			l, h = l/d, h/d
		}
		lo, hi = min(lo, float32(l)), max(hi, float32(h))
	}
	return lo, hi
}

// staticNodes writes x [.., k] · w [k, n] (+ bias) with x quantized with
// one constant scale and zero point over its calibrated range [lo, hi]:
// s = (hi − lo) / 255, z = round(−lo / s) in [0, 255], u =
// QuantizeLinear(x, s, z) (values past the range clip to 0 or 255), y =
// MatMulIntegerToFloat(u, q, s, scales, z, bias) [.., n]: with a scalar
// a_scale, ONNX Runtime applies s · scales[j] and the bias in its GEMM's
// output stage. q [k, n] and scales [n] are w's per-column int8 weights
// (quantizeColumns). Nothing depends on the other rows of the call. With
// extra, a float32 MatMul adds x's channels extra.channels times extra.w
// (see splitOutliers).
func staticNodes(e *editor, base, x, out, bias string, q []byte, scales []float32, k, n int, lo, hi float32, extra *outlierPart) []*Node {
	r := rowsWriter{e: e, base: base}
	s := float32(float64(hi-lo) / 255)
	if !(s > 0) {
		s = 1e-30
	}
	z := math.Max(0, math.Min(255, math.RoundToEven(-float64(lo)/float64(s))))
	as := e.addInit(FloatTensor(r.v("a_scale"), nil, []float32{s}))
	az := e.addInit(&Tensor{Name: r.v("a_zero"), DataType: Uint8, Raw: []byte{byte(z)}})
	sc := e.addInit(FloatTensor(r.v("scale"), []int64{int64(n)}, scales))
	qw := e.addInit(&Tensor{Name: r.v("w"), Dims: []int64{int64(k), int64(n)}, DataType: Int8, Raw: q})
	y := out
	if extra != nil {
		y = r.v("y")
	}
	ins := []string{r.v("u"), qw, as, sc, az}
	if bias != "" {
		ins = append(ins, "", bias) // no b_zero_point: the weights are symmetric
	}
	nodes := []*Node{
		r.node("QuantizeLinear", "quant", []string{x, as, az}, r.v("u")),
		{Name: r.v("mmf"), OpType: "MatMulIntegerToFloat", Domain: MSDomain, Inputs: ins, Outputs: []string{y}, Attrs: map[string]*Attr{}},
	}
	if extra == nil {
		return nodes
	}
	idx := e.addInit(&Tensor{Name: r.v("outlier_channels"), Dims: []int64{int64(len(extra.channels))}, DataType: Int64, Int64s: extra.channels})
	ow := e.addInit(FloatTensor(r.v("outlier_w"), []int64{int64(len(extra.channels)), int64(n)}, extra.w))
	return append(nodes,
		r.node("Gather", "gather", []string{x, idx}, r.v("outliers"), IntAttr("axis", -1)),
		r.node("MatMul", "outlier_product", []string{r.v("outliers"), ow}, r.v("outlier_y")),
		r.node("Add", "outlier_add", []string{y, r.v("outlier_y")}, out))
}
