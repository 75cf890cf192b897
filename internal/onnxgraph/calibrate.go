package onnxgraph

import (
	"fmt"
	"io"
)

// ChannelRange is the range of an activation's values per channel (its
// last axis) over calibration inputs: Lo[c] and Hi[c] are the smallest and
// largest value channel c took.
type ChannelRange struct {
	Lo, Hi []float32
}

// Merge widens r to take in the channel ranges lo and hi [k] of one more
// calibration run.
func (r *ChannelRange) Merge(lo, hi []float32) error {
	if r.Lo == nil {
		r.Lo, r.Hi = append([]float32(nil), lo...), append([]float32(nil), hi...)
		return nil
	}
	if len(lo) != len(r.Lo) || len(hi) != len(r.Hi) {
		return fmt.Errorf("onnxgraph: calibration: %d and %d channels after %d", len(lo), len(hi), len(r.Lo))
	}
	for c := range lo {
		r.Lo[c] = min(r.Lo[c], lo[c])
		r.Hi[c] = max(r.Hi[c], hi[c])
	}
	return nil
}

// CalibrationPoint is one activation that Calibration exposes: the input
// Value [.., Width] of MatMuls by constant weights, and the graph outputs
// Lo and Hi [Width] holding its smallest and largest value per channel
// over the rows of a run.
type CalibrationPoint struct {
	Value  string
	Width  int
	Lo, Hi string
}

// Calibration writes m with two more outputs for the input x [.., k] of
// every MatMul by a constant 2-D float32 weight matrix (what Quantize
// quantizes): its smallest and largest value per channel over every row
// of the run (x viewed as [m, k], ReduceMin and ReduceMax over axis 0),
// so that running the float32 graph over calibration inputs measures the
// ranges the static scheme quantizes with (QuantOptions.Static). It
// returns the points, one per activation (an input several MatMuls read
// is one point).
func Calibration(m *Model, w io.Writer) ([]CalibrationPoint, error) {
	e := newEditor(m)
	var pts []CalibrationPoint
	seen := map[string]bool{}
	var nodes []Node
	var outs []ValueInfo
	for _, n := range e.nodes {
		if n.OpType != "MatMul" || n.Domain != "" || len(n.Inputs) != 2 || seen[n.Inputs[0]] {
			continue
		}
		wt := e.tensor(n.Inputs[1])
		if wt == nil || len(wt.Dims) != 2 || wt.DataType != Float || e.isConst(n.Inputs[0]) {
			continue
		}
		x, k := n.Inputs[0], wt.Dims[0]
		seen[x] = true
		base := fmt.Sprintf("condition_calibrate_%d", len(pts))
		p := CalibrationPoint{Value: x, Width: int(k), Lo: base + "_lo", Hi: base + "_hi"}
		shape := Node{Name: base + "_shape", OpType: "Constant", Outputs: []string{base + "_shape"},
			Attrs: map[string]*Attr{"value": {Name: "value", Type: AttrTensor, T: &Tensor{Dims: []int64{2}, DataType: Int64, Int64s: []int64{-1, k}}}}}
		view := Node{Name: base + "_view", OpType: "Reshape", Inputs: []string{x, base + "_shape"}, Outputs: []string{base + "_x2"}}
		nodes = append(nodes, shape, view)
		for _, r := range []struct{ op, out string }{{"ReduceMin", p.Lo}, {"ReduceMax", p.Hi}} {
			red := Node{Name: r.out, OpType: r.op, Inputs: []string{base + "_x2"}, Outputs: []string{r.out},
				Attrs: map[string]*Attr{"keepdims": IntAttr("keepdims", 0)}}
			if m.Opsets[""] >= 18 { // axes became an input
				axes := Node{Name: r.out + "_axes", OpType: "Constant", Outputs: []string{r.out + "_axes"},
					Attrs: map[string]*Attr{"value": {Name: "value", Type: AttrTensor, T: &Tensor{Dims: []int64{1}, DataType: Int64, Int64s: []int64{0}}}}}
				nodes = append(nodes, axes)
				red.Inputs = append(red.Inputs, r.out+"_axes")
			} else {
				red.Attrs["axes"] = IntsAttr("axes", 0)
			}
			nodes = append(nodes, red)
			outs = append(outs, ValueInfo{Name: r.out, ElemType: Float, HasShape: true, Tensor: true, Shape: []Dim{{Value: k}}})
		}
		pts = append(pts, p)
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("onnxgraph: calibration: the graph has no MatMul by constant float32 weights")
	}
	if err := m.WriteAppended(w, nodes, outs); err != nil {
		return nil, err
	}
	return pts, nil
}
