package onnxgraph

// rowsNodes writes x [.., k] · w [k, n] (+ bias) with x quantized per row.
// Viewed as x2 [m, k], each row x_i gets its own scale s_i and zero point
// z_i, u = QuantizeLinear(x2, s, z) [m, k] (uint8, per axis 0), and y =
// MatMulIntegerToFloat(u, q, s [m, 1], scales, 128) [m, n], viewed as
// [.., n] again; q [k, n] and scales [n] are w's per-column int8 weights
// (quantizeColumns). The integer products add up exactly in 32 bits and
// every other step works on one row: a row's result is the same whatever
// the other rows of the call.
//
// By default over the row's own range [lo_i, hi_i] with 0 in it: s_i =
// (hi_i − lo_i) / 255, z_i = round(−lo_i / s_i) (rows mostly on one side of
// 0, as an activation's output is, keep all 255 levels). Symmetric (sym:
// the outlier rule's layer norm outputs, whose outlier channels are
// rescaled): s_i = max|x_i| / 127, z_i = 128; on the ViT-B/32-size model
// with outlier channels, the range form left image_embeds at a smallest
// cosine of 0.987 to float32 there, the symmetric one 0.9986, while on the
// built-in text graph with 7-bit weights the range form gave 0.9988 and
// the symmetric one 0.9869. MatMulIntegerToFloat
// takes one zero point for all rows, 128, and so counts z_i − 128 once too
// often against each column's weights; a float32 Gemm adds (128 − z)·s
// [m, 1] times scales ⊙ colsum(q) [1, n] back, with the bias. With extra,
// the same Gemm adds x's channels extra.channels times extra.w (see
// splitOutliers). The bias is never given to MatMulIntegerToFloat, which
// would scale it by each row's scale.
func rowsNodes(e *editor, base, x, out, bias string, q []byte, scales []float32, k, n int, sym bool, extra *outlierPart) []*Node {
	r := rowsWriter{e: e, base: base}
	qw := e.addInit(&Tensor{Name: r.v("w"), Dims: []int64{int64(k), int64(n)}, DataType: Int8, Raw: q})
	sc := e.addInit(FloatTensor(r.v("scale"), []int64{int64(n)}, scales))
	zp := e.addInit(&Tensor{Name: r.v("azero"), DataType: Uint8, Raw: []byte{128}})
	nodes := []*Node{
		r.node("Reshape", "view", []string{x, r.i64("rows", -1, int64(k))}, r.v("x2")),
		r.reduce("ReduceMax", "hi0"),
		r.reduce("ReduceMin", "lo0"),
	}
	// The Gemm's left columns and right rows.
	var left []string
	var right []float32
	if sym {
		nodes = append(nodes, r.symmetric()...)
	} else {
		nodes = append(nodes, r.asymmetric()...)
		left = append(left, r.v("dzcol"))
		for j := range n {
			t := 0
			for i := range k {
				t += int(int8(q[i*n+j]))
			}
			right = append(right, float32(float64(t)*float64(scales[j])))
		}
	}
	nodes = append(nodes,
		r.node("QuantizeLinear", "quant", []string{r.v("x2"), r.v("s"), r.v("z")}, r.v("u"), IntAttr("axis", 0)),
		r.node("Reshape", "scol", []string{r.v("s"), r.i64("col", -1, 1)}, r.v("scol")),
		&Node{Name: r.v("mmf"), OpType: "MatMulIntegerToFloat", Domain: MSDomain, Inputs: []string{r.v("u"), qw, r.v("scol"), sc, zp}, Outputs: []string{r.v("y")}, Attrs: map[string]*Attr{}})
	if extra != nil {
		idx := e.addInit(&Tensor{Name: r.v("outlier_channels"), Dims: []int64{int64(len(extra.channels))}, DataType: Int64, Int64s: extra.channels})
		nodes = append(nodes, r.node("Gather", "gather", []string{r.v("x2"), idx}, r.v("outliers"), IntAttr("axis", 1)))
		left, right = append(left, r.v("outliers")), append(right, extra.w...)
	}
	y := r.v("y")
	switch {
	case len(left) > 0:
		a := left[0]
		if len(left) > 1 {
			a = r.v("left")
			nodes = append(nodes, r.node("Concat", "left", left, a, IntAttr("axis", 1)))
		}
		gemm := []string{a, e.addInit(FloatTensor(r.v("correction_w"), []int64{int64(len(right) / n), int64(n)}, right))}
		if bias != "" {
			gemm = append(gemm, bias)
		}
		y = r.v("y_corrected")
		nodes = append(nodes,
			r.node("Gemm", "correction", gemm, r.v("correction")),
			r.node("Add", "corrected", []string{r.v("y"), r.v("correction")}, y))
	case bias != "":
		y = r.v("y_bias")
		nodes = append(nodes, r.node("Add", "bias", []string{r.v("y"), bias}, y))
	}
	return append(nodes,
		r.node("Shape", "shape", []string{x}, r.v("lead"), IntAttr("end", -1)),
		r.node("Concat", "outshape", []string{r.v("lead"), r.i64("width", int64(n))}, r.v("outshape"), IntAttr("axis", 0)),
		r.node("Reshape", "unview", []string{y, r.v("outshape")}, out))
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
// 255 (at least 1e-30), z = round(−lo / s) in [0, 255] [m], and dzcol =
// (128 − z)·s [m, 1].
func (r rowsWriter) asymmetric() []*Node {
	return []*Node{
		r.node("Max", "hi", []string{r.v("hi0"), r.f32("zero", 0)}, r.v("hi")),
		r.node("Min", "lo", []string{r.v("lo0"), r.v("zero")}, r.v("lo")),
		r.node("Sub", "span", []string{r.v("hi"), r.v("lo")}, r.v("span")),
		r.node("Mul", "s255", []string{r.v("span"), r.f32("inv255", 1.0/255)}, r.v("s255")),
		r.node("Max", "s", []string{r.v("s255"), r.f32("tiny", 1e-30)}, r.v("s")),
		r.node("Div", "lo_s", []string{r.v("lo"), r.v("s")}, r.v("lo_s")),
		r.node("Neg", "nlo_s", []string{r.v("lo_s")}, r.v("nlo_s")),
		r.node("Round", "zf0", []string{r.v("nlo_s")}, r.v("zf0")),
		r.node("Clip", "zf", []string{r.v("zf0"), r.f32("c0", 0), r.f32("c255", 255)}, r.v("zf")),
		r.node("Cast", "z", []string{r.v("zf")}, r.v("z"), IntAttr("to", int64(Uint8))),
		r.node("Sub", "dz", []string{r.f32("c128", 128), r.v("zf")}, r.v("dz")),
		r.node("Mul", "dzs", []string{r.v("dz"), r.v("s")}, r.v("dzs")),
		r.node("Reshape", "dzcol", []string{r.v("dzs"), r.i64("col1", -1, 1)}, r.v("dzcol")),
	}
}
