package onnxgraph

// rowsNodes writes x [.., k] · w [k, n] (+ bias) with x quantized per row,
// symmetrically: viewed as x2 [m, k], each row x_i gets the scale s_i =
// max|x_i| / 127, u = QuantizeLinear(x2, s, 128) [m, k] (uint8, zero point
// 128, per axis 0), then y = MatMulIntegerToFloat(u, q, s [m, 1], scales)
// [m, n] (+ bias), viewed as [.., n] again; q [k, n] and scales [n] are w's
// per-column int8 weights (quantizeColumns). The integer products add up
// exactly in 32 bits, and every other step works on one row: a row's result
// is the same whatever the other rows of the call. The bias is added after
// the product: MatMulIntegerToFloat scales its own bias by a per-row scale.
//
// With extra, the product of x's channels extra.channels by extra.w is
// added in float32 (Gather, then Gemm with the bias).
func rowsNodes(e *editor, base, x, out, bias string, q []byte, scales []float32, k, n int, extra *outlierPart) []*Node {
	v := func(s string) string { return base + "_" + s }
	i64 := func(name string, vals ...int64) string {
		return e.addInit(&Tensor{Name: v(name), Dims: []int64{int64(len(vals))}, DataType: Int64, Int64s: vals})
	}
	f32 := func(name string, val float32) string { return e.addInit(FloatTensor(v(name), nil, []float32{val})) }
	node := func(op, name string, ins []string, out string, attrs ...*Attr) *Node {
		nd := &Node{Name: v(name), OpType: op, Inputs: ins, Outputs: []string{out}, Attrs: map[string]*Attr{}}
		for _, a := range attrs {
			nd.Attrs[a.Name] = a
		}
		return nd
	}
	reduce := func(op, name string) *Node {
		if e.m.Opsets[""] >= 18 { // axes became an input
			return node(op, name, []string{v("x2"), i64(name+"_axes", 1)}, v(name), IntAttr("keepdims", 0))
		}
		return node(op, name, []string{v("x2")}, v(name), IntsAttr("axes", 1), IntAttr("keepdims", 0))
	}
	qw := e.addInit(&Tensor{Name: v("w"), Dims: []int64{int64(k), int64(n)}, DataType: Int8, Raw: q})
	sc := e.addInit(FloatTensor(v("scale"), []int64{int64(n)}, scales))
	zp := e.addInit(&Tensor{Name: v("azero"), DataType: Uint8, Raw: []byte{128}})
	y := v("y2")
	if bias != "" || extra != nil {
		y = v("y2nb")
	}
	nodes := []*Node{
		node("Reshape", "view", []string{x, i64("rows", -1, int64(k))}, v("x2")),
		// s = max(max_i x, -min_i x) / 127, at least 1e-30 (a row of zeros).
		reduce("ReduceMax", "hi"),
		reduce("ReduceMin", "lo"),
		node("Neg", "neg", []string{v("lo")}, v("nlo")),
		node("Max", "absmax", []string{v("hi"), v("nlo")}, v("absmax")),
		node("Mul", "s127", []string{v("absmax"), f32("inv127", 1.0/127)}, v("s127")),
		node("Max", "s", []string{v("s127"), f32("tiny", 1e-30)}, v("s")),
		// The zero points [m], all 128 (QuantizeLinear per axis takes one
		// for each scale).
		node("Mul", "z0", []string{v("s"), f32("zero", 0)}, v("z0")),
		node("Add", "z128", []string{v("z0"), f32("c128", 128)}, v("z128")),
		node("Cast", "zp", []string{v("z128")}, v("zp"), IntAttr("to", int64(Uint8))),
		node("QuantizeLinear", "quant", []string{v("x2"), v("s"), v("zp")}, v("u"), IntAttr("axis", 0)),
		node("Reshape", "scol", []string{v("s"), i64("col", -1, 1)}, v("scol")),
		{Name: v("mmf"), OpType: "MatMulIntegerToFloat", Domain: MSDomain, Inputs: []string{v("u"), qw, v("scol"), sc, zp}, Outputs: []string{y}, Attrs: map[string]*Attr{}},
	}
	switch {
	case extra != nil:
		idx := e.addInit(&Tensor{Name: v("outlier_channels"), Dims: []int64{int64(len(extra.channels))}, DataType: Int64, Int64s: extra.channels})
		ew := e.addInit(FloatTensor(v("outlier_w"), []int64{int64(len(extra.channels)), int64(n)}, extra.w))
		gemm := []string{v("outliers"), ew}
		if bias != "" {
			gemm = append(gemm, bias)
		}
		nodes = append(nodes,
			node("Gather", "gather", []string{v("x2"), idx}, v("outliers"), IntAttr("axis", 1)),
			node("Gemm", "outlier_product", gemm, v("outlier_y")),
			node("Add", "outlier_add", []string{y, v("outlier_y")}, v("y2")))
	case bias != "":
		nodes = append(nodes, node("Add", "bias", []string{y, bias}, v("y2")))
	}
	return append(nodes,
		node("Shape", "shape", []string{x}, v("lead"), IntAttr("end", -1)),
		node("Concat", "outshape", []string{v("lead"), i64("width", int64(n))}, v("outshape"), IntAttr("axis", 0)),
		node("Reshape", "unview", []string{v("y2"), v("outshape")}, out))
}
