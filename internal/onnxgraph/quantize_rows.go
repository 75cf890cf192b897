package onnxgraph

// rowsNodes writes x [.., k] · w [k, n] (+ bias) with x quantized per row.
// Viewed as x2 [m, k], each row x_i gets its own scale s_i and zero point
// z_i, u = QuantizeLinear(x2, s, z) [m, k] (uint8, per axis 0), and y =
// MatMulIntegerToFloat(u, q, s [m, 1], scales, 128) [m, n] (+ bias), viewed
// as [.., n] again; q [k, n] and scales [n] are w's per-column int8 weights
// (quantizeColumns, |q| ≤ qmax). The integer products add up exactly in 32
// bits and every other step works on one row: a row's result is the same
// whatever the other rows of the call.
//
// Over the row's own range [lo_i, hi_i] with 0 in it (sym false): s_i =
// (hi_i − lo_i) / 254, z_i = round(−lo_i / s_i) in [1, 255] (rows mostly on
// one side of 0, as an activation's output is, keep their levels).
// MatMulIntegerToFloat takes one zero point for all rows, 128, so each row
// counts z_i − 128 once too often against each column's weights: P more
// columns of u, each 256 − z_i (that is 128 − z_i past the zero point),
// meet P more rows of weights whose sums are colsum(q) (each entry within
// ±qmax), which gives the products back exactly, in the integer sums.
// Symmetric (sym): s_i = max|x_i| / 127, z_i = 128. Quantize chooses:
// the range form costs a copy of u and more ops (the ViT-B/32-size vision
// graph at batch 8 ran at 0.79× the per-call scheme's speed with it, 0.90×
// symmetric), for fidelity that 7-bit weights need (the built-in text
// graph's last_hidden_state: smallest cosine 0.9954 with it, 0.9869
// symmetric, under the check's 0.99) and 8-bit ones do not (0.99981 and
// 0.99976 on the ViT-B/32-size image_embeds). The outlier rule's layer
// norm outputs are always symmetric (on the ViT-B/32-size model with
// outlier channels, image_embeds 0.987 over the range, 0.9986 symmetric). With
// extra, a float32 Gemm adds x's channels extra.channels times extra.w
// (see splitOutliers), with the bias. The bias is never given to
// MatMulIntegerToFloat, which would scale it by each row's scale.
func rowsNodes(e *editor, base, x, out, bias string, q []byte, scales []float32, k, n, qmax int, sym bool, extra *outlierPart) []*Node {
	r := rowsWriter{e: e, base: base}
	sc := e.addInit(FloatTensor(r.v("scale"), []int64{int64(n)}, scales))
	zp := e.addInit(&Tensor{Name: r.v("azero"), DataType: Uint8, Raw: []byte{128}})
	nodes := []*Node{
		r.node("Reshape", "view", []string{x, r.i64("rows", -1, int64(k))}, r.v("x2")),
		r.reduce("ReduceMax", "hi0"),
		r.reduce("ReduceMin", "lo0"),
	}
	u, rows := r.v("u"), k
	quant := r.node("QuantizeLinear", "quant", []string{r.v("x2"), r.v("s"), r.v("z")}, r.v("u"), IntAttr("axis", 0))
	if sym {
		nodes = append(append(nodes, r.symmetric()...), quant)
	} else {
		nodes = append(append(nodes, r.asymmetric()...), quant)
		var more []byte
		more, rows = zeroPointRows(q, k, n, qmax)
		q = append(q[:k*n:k*n], more...)
		p := int64(rows - k)
		u = r.v("u_more")
		nodes = append(nodes,
			r.node("Expand", "zcols", []string{r.v("zc"), r.i64("pcols", 1, p)}, r.v("zcols")),
			r.node("Concat", "u_more", []string{r.v("u"), r.v("zcols")}, u, IntAttr("axis", 1)))
	}
	qw := e.addInit(&Tensor{Name: r.v("w"), Dims: []int64{int64(rows), int64(n)}, DataType: Int8, Raw: q})
	nodes = append(nodes,
		r.node("Reshape", "scol", []string{r.v("s"), r.i64("col", -1, 1)}, r.v("scol")),
		&Node{Name: r.v("mmf"), OpType: "MatMulIntegerToFloat", Domain: MSDomain, Inputs: []string{u, qw, r.v("scol"), sc, zp}, Outputs: []string{r.v("y")}, Attrs: map[string]*Attr{}})
	y := r.v("y")
	switch {
	case extra != nil:
		idx := e.addInit(&Tensor{Name: r.v("outlier_channels"), Dims: []int64{int64(len(extra.channels))}, DataType: Int64, Int64s: extra.channels})
		gemm := []string{r.v("outliers"), e.addInit(FloatTensor(r.v("outlier_w"), []int64{int64(len(extra.channels)), int64(n)}, extra.w))}
		if bias != "" {
			gemm = append(gemm, bias)
		}
		y = r.v("y_outliers")
		nodes = append(nodes,
			r.node("Gather", "gather", []string{r.v("x2"), idx}, r.v("outliers"), IntAttr("axis", 1)),
			r.node("Gemm", "outlier_product", gemm, r.v("outlier_y")),
			r.node("Add", "outlier_add", []string{r.v("y"), r.v("outlier_y")}, y))
	case bias != "":
		y = r.v("y_bias")
		nodes = append(nodes, r.node("Add", "bias", []string{r.v("y"), bias}, y))
	}
	return append(nodes,
		r.node("Shape", "shape", []string{x}, r.v("lead"), IntAttr("end", -1)),
		r.node("Concat", "outshape", []string{r.v("lead"), r.i64("width", int64(n))}, r.v("outshape"), IntAttr("axis", 0)),
		r.node("Reshape", "unview", []string{y, r.v("outshape")}, out))
}

// zeroPointRows returns the rows of weights [p, n] (int8 bytes) whose sums
// are the column sums of q [k, n], each entry within ±qmax, and k + p.
func zeroPointRows(q []byte, k, n, qmax int) ([]byte, int) {
	sums := make([]int, n)
	most := 0
	for j := range n {
		for i := range k {
			sums[j] += int(int8(q[i*n+j]))
		}
		most = max(most, sums[j], -sums[j])
	}
	p := max(1, (most+qmax-1)/qmax)
	rows := make([]byte, p*n)
	for j, left := range sums {
		for i := range p {
			v := max(-qmax, min(qmax, left))
			rows[i*n+j] = byte(int8(v))
			left -= v
		}
	}
	return rows, k + p
}

// rowsWriter names and makes the nodes of one rowsNodes.
type rowsWriter struct {
	e    *editor
	base string
}

func (r rowsWriter) v(s string) string { return r.base + "_" + s }

func (r rowsWriter) i64(name string, vals ...int64) string {
	return r.e.addInit(&Tensor{Name: r.v(name), Dims: []int64{int64(len(vals))}, DataType: Int64, Int64s: vals})
}

func (r rowsWriter) f32(name string, val float32) string {
	return r.e.addInit(FloatTensor(r.v(name), nil, []float32{val}))
}

func (r rowsWriter) node(op, name string, ins []string, out string, attrs ...*Attr) *Node {
	nd := &Node{Name: r.v(name), OpType: op, Inputs: ins, Outputs: []string{out}, Attrs: map[string]*Attr{}}
	for _, a := range attrs {
		nd.Attrs[a.Name] = a
	}
	return nd
}

// reduce reduces x2 [m, k] over its rows to [m].
func (r rowsWriter) reduce(op, name string) *Node {
	if r.e.m.Opsets[""] >= 18 { // axes became an input
		return r.node(op, name, []string{r.v("x2"), r.i64(name+"_axes", 1)}, r.v(name), IntAttr("keepdims", 0))
	}
	return r.node(op, name, []string{r.v("x2")}, r.v(name), IntsAttr("axes", 1), IntAttr("keepdims", 0))
}

// symmetric makes s = max(hi0, −lo0) / 127 (at least 1e-30, for a row of
// zeros) and z = 128 [m].
func (r rowsWriter) symmetric() []*Node {
	return []*Node{
		r.node("Neg", "nlo", []string{r.v("lo0")}, r.v("nlo")),
		r.node("Max", "absmax", []string{r.v("hi0"), r.v("nlo")}, r.v("absmax")),
		r.node("Mul", "s127", []string{r.v("absmax"), r.f32("inv127", 1.0/127)}, r.v("s127")),
		r.node("Max", "s", []string{r.v("s127"), r.f32("tiny", 1e-30)}, r.v("s")),
		r.node("Mul", "z0", []string{r.v("s"), r.f32("zero", 0)}, r.v("z0")),
		r.node("Add", "z128", []string{r.v("z0"), r.f32("c128", 128)}, r.v("z128")),
		r.node("Cast", "z", []string{r.v("z128")}, r.v("z"), IntAttr("to", int64(Uint8))),
	}
}

// asymmetric makes, over each row's range with 0 in it, s = (hi − lo) /
// 254 (at least 1e-30), z = round(−lo / s) in [1, 255] and zc = 256 − z
// [m, 1] (uint8).
func (r rowsWriter) asymmetric() []*Node {
	return []*Node{
		r.node("Max", "hi", []string{r.v("hi0"), r.f32("zero", 0)}, r.v("hi")),
		r.node("Min", "lo", []string{r.v("lo0"), r.v("zero")}, r.v("lo")),
		r.node("Sub", "span", []string{r.v("hi"), r.v("lo")}, r.v("span")),
		r.node("Mul", "s254", []string{r.v("span"), r.f32("inv254", 1.0/254)}, r.v("s254")),
		r.node("Max", "s", []string{r.v("s254"), r.f32("tiny", 1e-30)}, r.v("s")),
		r.node("Div", "lo_s", []string{r.v("lo"), r.v("s")}, r.v("lo_s")),
		r.node("Neg", "nlo_s", []string{r.v("lo_s")}, r.v("nlo_s")),
		r.node("Round", "zf0", []string{r.v("nlo_s")}, r.v("zf0")),
		r.node("Clip", "zf", []string{r.v("zf0"), r.f32("c1", 1), r.f32("c255", 255)}, r.v("zf")),
		r.node("Cast", "z", []string{r.v("zf")}, r.v("z"), IntAttr("to", int64(Uint8))),
		r.node("Sub", "zcf", []string{r.f32("c256", 256), r.v("zf")}, r.v("zcf")),
		r.node("Cast", "zc1", []string{r.v("zcf")}, r.v("zc1"), IntAttr("to", int64(Uint8))),
		r.node("Reshape", "zc", []string{r.v("zc1"), r.i64("col1", -1, 1)}, r.v("zc")),
	}
}
