package onnxgraph

import (
	"fmt"
	"io"
	"math"
)

// QuantOptions chooses how Quantize quantizes.
type QuantOptions struct {
	// FullRange uses the full int8 range [-127, 127] for the weights. By
	// default they take 7 bits, [-63, 63]: on CPUs without VNNI, ONNX
	// Runtime multiplies uint8 activations by int8 weights with an
	// instruction (vpmaddubsw) that saturates pairs of products past 2^15,
	// which 7-bit weights cannot reach.
	FullRange bool
	// Integer writes DynamicQuantizeLinear + MatMulInteger + Cast + Mul
	// (+ Add for the bias) instead of com.microsoft.DynamicQuantizeMatMul.
	Integer bool
	// PerRow quantizes each row of a MatMul's activations (one token of
	// one image or prompt) with its own scale, in the graph, instead of one
	// scale for the whole call: no row's result then depends on the other
	// rows, nor on the other images of a batch (see rowsNodes). The
	// default is com.microsoft.DynamicQuantizeMatMul, one scale per call.
	PerRow bool
	// Static, when not nil, quantizes each MatMul's activations with one
	// constant scale and zero point, from the calibrated range of its
	// input Static[name] (see Calibration and staticNodes): no row's result
	// depends on the other rows, and no scale is computed at run time. A
	// MatMul whose input has no range stays float32.
	Static map[string]ChannelRange
	// OutlierRatio, when not 0, is the rule for layer norms with outlier
	// channels (with PerRow or Static): when a LayerNormalization's largest |gain| is
	// at least OutlierRatio times its median |gain|, the MatMuls the
	// graph's layer norms feed have those channels multiplied in float32
	// (see splitOutliers) and the MatMuls downstream of those
	// (attention's output projection, the MLP's second layer) are kept in
	// float32; see outlierNorms.
	OutlierRatio float64
	// QuantizeLast quantizes the MatMuls whose output is a graph output
	// (the projections into the joint space), which are kept in float32
	// by default.
	QuantizeLast bool
}

// QuantReport says what Quantize did.
type QuantReport struct {
	MatMuls     int            `json:"matmuls"`               // MatMuls quantized
	Biases      int            `json:"biases"`                // bias Adds folded into them
	Kept        []string       `json:"kept"`                  // MatMuls with constant weights left in float32, and why
	Outliers    int            `json:"outliers,omitempty"`    // MatMuls left in float32 by the outlier rule (counted in Kept too)
	Unsupported int            `json:"unsupported,omitempty"` // MatMuls whose weights the scheme cannot take (counted in Kept too)
	Split       int            `json:"split,omitempty"`       // MatMuls whose layer norm's outlier channels are multiplied in float32
	WeightBytes [2]int64       `json:"weight_bytes"`          // float32 bytes of the weights quantized, and their int8 bytes
	Form        string         `json:"form"`
	Bits        int            `json:"bits"`
	Ops         map[string]int `json:"ops"`
}

// String summarises the report on one line.
func (r *QuantReport) String() string {
	s := fmt.Sprintf("%d MatMuls to int8 (%d-bit weights, per output channel, %s; %d biases folded), %d kept in float32",
		r.MatMuls, r.Bits, r.Form, r.Biases, len(r.Kept))
	if r.Outliers > 0 || r.Split > 0 {
		s += fmt.Sprintf(" (%d by the outlier rule; %d with their outlier channels in float32)", r.Outliers, r.Split)
	}
	return s + fmt.Sprintf("; weights %.1f → %.1f MB", float64(r.WeightBytes[0])/(1<<20), float64(r.WeightBytes[1])/(1<<20))
}

// Quantize writes m with its MatMuls by constant 2-D float32 weights W
// [K, N] quantized dynamically: W to int8 per output channel (symmetric,
// scale max|W[:, n]| / q, q = 63 or 127, zero point 0), the activations
// to uint8 at run time, per call by ONNX Runtime or per row
// (opts.PerRow), or with constant calibrated scales (opts.Static). A bias
// Add after the MatMul is folded in (per row: added after it). MatMuls whose output is a graph output (the projections into
// CLIP's joint space) stay float32 unless opts.QuantizeLast; so does
// everything that is not such a MatMul (the patch embedding's Conv, layer
// norms, attention's softmax and its products of activations).
func Quantize(m *Model, opts QuantOptions, w io.Writer) (*QuantReport, error) {
	e := newEditor(m)
	r := &QuantReport{Form: "DynamicQuantizeMatMul", Bits: 7}
	static := opts.Static != nil
	switch {
	case (opts.PerRow || static) && opts.Integer:
		return nil, fmt.Errorf("onnxgraph: per-row and static activations are written with MatMulIntegerToFloat; Integer does not apply")
	case opts.PerRow && static:
		return nil, fmt.Errorf("onnxgraph: activations are quantized per row or with static scales, not both")
	case opts.PerRow:
		r.Form = "activations per row, MatMulIntegerToFloat"
	case static:
		r.Form = "activations static (calibrated, per tensor), MatMulIntegerToFloat"
	case opts.Integer:
		r.Form = "MatMulInteger"
	}
	qmax := float32(63)
	if opts.FullRange {
		qmax, r.Bits = 127, 8
	}
	var mms []*Node
	for _, n := range e.nodes {
		if n.OpType == "MatMul" && n.Domain == "" && len(n.Inputs) == 2 {
			mms = append(mms, n)
		}
	}
	var rule map[*Node]outlierRole
	if opts.OutlierRatio > 0 && (opts.PerRow || static) {
		rule = outlierNorms(e, mms, opts.OutlierRatio)
	}
	for _, mm := range mms {
		wt := e.tensor(mm.Inputs[1])
		if wt == nil {
			continue // a product of activations (attention)
		}
		if len(wt.Dims) != 2 || wt.DataType != Float {
			r.Kept = append(r.Kept, fmt.Sprintf("%s: weights of shape %v, type %s", nodeLabel(mm), wt.Dims, ElemTypeName(wt.DataType)))
			r.Unsupported++
			continue
		}
		bias, add, out := biasAdd(e, mm, wt)
		if !opts.QuantizeLast && e.outputs[out] {
			r.Kept = append(r.Kept, fmt.Sprintf("%s: its output %s is a graph output (the projection)", nodeLabel(mm), out))
			continue
		}
		vals, ok := wt.Float32Values()
		if !ok {
			r.Kept = append(r.Kept, fmt.Sprintf("%s: weights not readable (external data)", nodeLabel(mm)))
			r.Unsupported++
			continue
		}
		k, n := wt.Dims[0], wt.Dims[1]
		var extra *outlierPart
		// Symmetric with 8-bit weights; over each row's range with 7-bit
		// ones, which need the finer activations (see rowsNodes).
		sym := qmax == 127
		rng, calibrated := opts.Static[mm.Inputs[0]]
		if static && !calibrated {
			r.Kept = append(r.Kept, fmt.Sprintf("%s: no calibrated range for its input %s", nodeLabel(mm), mm.Inputs[0]))
			continue
		}
		switch role := rule[mm]; {
		case role.downstream:
			r.Kept = append(r.Kept, fmt.Sprintf("%s: downstream of a layer norm, in a graph whose layer norm %s has outlier channels (largest |gain| %.3g× the median)", nodeLabel(mm), nodeLabel(role.norm), role.ratio))
			r.Outliers++
			continue
		case role.norm != nil:
			sym = true
			if part, ok := splitOutliers(e, role.norm, vals, int(k), int(n)); ok {
				extra = &part
				r.Split++
			}
		}
		q, scales := quantizeColumns(vals, int(k), int(n), qmax)
		base := e.name("q")
		old := []*Node{mm}
		if add != nil {
			old = append(old, add)
			r.Biases++
		}
		var nodes []*Node
		switch {
		case opts.PerRow:
			nodes = rowsNodes(e, base, mm.Inputs[0], out, bias, q, scales, int(k), int(n), int(qmax), sym, extra)
		case static:
			lo, hi := staticRange(rng, extra)
			nodes = staticNodes(e, base, mm.Inputs[0], out, bias, q, scales, int(k), int(n), lo, hi, extra)
		default:
			nodes = perCallNodes(e, base, mm.Inputs[0], out, bias, q, scales, opts.Integer)
		}
		e.replace(old, nodes...)
		e.reindex()
		r.MatMuls++
		r.WeightBytes[0] += 4 * k * n
		r.WeightBytes[1] += k*n + 4*n
	}
	if err := e.write(w); err != nil {
		return nil, err
	}
	r.Ops = opCounts(e.nodes)
	return r, nil
}

// biasAdd finds the bias Add after the MatMul mm by the weights wt [k,
// n]: the Add of a constant [n] to mm's output, when it alone reads it.
// out is the Add's output then (bias and add empty otherwise), else mm's.
func biasAdd(e *editor, mm *Node, wt *Tensor) (bias string, add *Node, out string) {
	out = mm.Outputs[0]
	if !e.only(out) {
		return "", nil, out
	}
	a := e.users[out][0]
	if a.OpType != "Add" || len(a.Inputs) != 2 {
		return "", nil, out
	}
	other := a.Inputs[0]
	if other == out {
		other = a.Inputs[1]
	}
	if bt := e.tensor(other); bt != nil && len(bt.Dims) == 1 && bt.Dims[0] == wt.Dims[1] && bt.DataType == Float {
		return other, a, a.Outputs[0]
	}
	return "", nil, out
}

// perCallNodes writes x [.., k] · w [k, n] (+ bias) with the activations
// quantized with one scale per call: com.microsoft.DynamicQuantizeMatMul,
// or with integer, DynamicQuantizeLinear + MatMulInteger + Cast + Mul (+
// Add); q [k, n] and scales [n] are w's per-column int8 weights.
func perCallNodes(e *editor, base, x, out, bias string, q []byte, scales []float32, integer bool) []*Node {
	n := int64(len(scales))
	k := int64(len(q)) / n
	qw := e.addInit(&Tensor{Name: base + "_w", Dims: []int64{k, n}, DataType: Int8, Raw: q})
	sc := e.addInit(FloatTensor(base+"_scale", []int64{n}, scales))
	zp := e.addInit(&Tensor{Name: base + "_zero", Dims: []int64{n}, DataType: Int8, Raw: make([]byte, n)})
	if !integer {
		ins := []string{x, qw, sc, zp}
		if bias != "" {
			ins = append(ins, bias)
		}
		return []*Node{{Name: base, OpType: "DynamicQuantizeMatMul", Domain: MSDomain, Inputs: ins, Outputs: []string{out}, Attrs: map[string]*Attr{}}}
	}
	aq, as, az := base+"_a", base+"_a_scale", base+"_a_zero"
	acc, f, y := base+"_acc", base+"_f", base+"_y"
	scaled := out
	if bias != "" {
		scaled = base + "_scaled"
	}
	nodes := []*Node{
		{Name: base + "_dql", OpType: "DynamicQuantizeLinear", Inputs: []string{x}, Outputs: []string{aq, as, az}, Attrs: map[string]*Attr{}},
		{Name: base + "_mmi", OpType: "MatMulInteger", Inputs: []string{aq, qw, az, zp}, Outputs: []string{acc}, Attrs: map[string]*Attr{}},
		{Name: base + "_cast", OpType: "Cast", Inputs: []string{acc}, Outputs: []string{f}, Attrs: map[string]*Attr{"to": IntAttr("to", int64(Float))}},
		{Name: base + "_mul_a", OpType: "Mul", Inputs: []string{f, as}, Outputs: []string{y}, Attrs: map[string]*Attr{}},
		{Name: base + "_mul_w", OpType: "Mul", Inputs: []string{y, sc}, Outputs: []string{scaled}, Attrs: map[string]*Attr{}},
	}
	if bias != "" {
		nodes = append(nodes, &Node{Name: base + "_bias", OpType: "Add", Inputs: []string{scaled, bias}, Outputs: []string{out}, Attrs: map[string]*Attr{}})
	}
	return nodes
}

// quantizeColumns quantizes w [k, n] per column: q = round(w / s) with
// s = max|w[:, j]| / qmax, as int8 bytes, and the scales [n].
func quantizeColumns(w []float32, k, n int, qmax float32) ([]byte, []float32) {
	scales := make([]float32, n)
	for i := 0; i < k; i++ {
		for j := 0; j < n; j++ {
			scales[j] = max(scales[j], float32(math.Abs(float64(w[i*n+j]))))
		}
	}
	for j := range scales {
		scales[j] /= qmax
		if scales[j] == 0 {
			scales[j] = 1
		}
	}
	q := make([]byte, k*n)
	for i := 0; i < k; i++ {
		for j := 0; j < n; j++ {
			v := math.RoundToEven(float64(w[i*n+j] / scales[j]))
			v = math.Max(-float64(qmax), math.Min(float64(qmax), v))
			q[i*n+j] = byte(int8(v))
		}
	}
	return q, scales
}
