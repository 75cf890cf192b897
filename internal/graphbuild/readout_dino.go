package graphbuild

import (
	"bytes"
	"errors"
	"fmt"
)

// dinoTensors returns the tensors of a DINOv2 block's maskclip readout
// (ReadoutConfig.Dino) with their shapes: norm1, the value projection,
// attention.output.dense, the layer scales, norm2, the MLP and the tower's
// final layer norm.
func (c ReadoutConfig) dinoTensors() map[string][]int {
	d, p, b := c.Width, c.Prefix, c.Dino
	ts := map[string][]int{
		p + "norm1.weight": {d}, p + "norm1.bias": {d},
		p + "attention.attention.value.weight": {d, d}, p + "attention.attention.value.bias": {d},
		p + "attention.output.dense.weight": {d, d}, p + "attention.output.dense.bias": {d},
		p + "layer_scale1.lambda1": {d},
		p + "norm2.weight":         {d}, p + "norm2.bias": {d},
		p + "layer_scale2.lambda1": {d},
		b.Norm + ".weight":         {d}, b.Norm + ".bias": {d},
	}
	if b.SwiGLU {
		f := swigluWidth(b.Inter)
		ts[p+"mlp.weights_in.weight"], ts[p+"mlp.weights_in.bias"] = []int{2 * f, d}, []int{2 * f}
		ts[p+"mlp.weights_out.weight"], ts[p+"mlp.weights_out.bias"] = []int{d, f}, []int{d}
	} else {
		ts[p+"mlp.fc1.weight"], ts[p+"mlp.fc1.bias"] = []int{b.Inter, d}, []int{b.Inter}
		ts[p+"mlp.fc2.weight"], ts[p+"mlp.fc2.bias"] = []int{d, b.Inter}, []int{d}
	}
	return ts
}

func (c ReadoutConfig) checkDino() error {
	b := c.Dino
	var errs []error
	if c.Kind != ReadoutMaskCLIP {
		errs = append(errs, fmt.Errorf("graphbuild: readout %s: a DINOv2 block (TIPSv2) takes readout %s only", c.Kind, ReadoutMaskCLIP))
	}
	if b.Inter <= 0 || b.SwiGLU && swigluWidth(b.Inter) <= 0 {
		errs = append(errs, fmt.Errorf("graphbuild: readout: a DINOv2 block's MLP of width %d", b.Inter))
	}
	if !b.SwiGLU {
		if err := checkAct("vision_config", b.Act); err != nil {
			errs = append(errs, fmt.Errorf("graphbuild: readout: %w", err))
		}
	}
	if b.Norm == "" || !(b.NormEps > 0) || !(c.Eps > 0) {
		errs = append(errs, fmt.Errorf("graphbuild: readout: a DINOv2 block needs its layer norms' epsilons (%g) and the final norm %q (epsilon %g)", c.Eps, b.Norm, b.NormEps))
	}
	return errors.Join(errs...)
}

// dinoGraph adds ReadoutConfig.Dino's computation to g (whose input and
// output are declared) over the tensors vals and writes the graph.
func (c ReadoutConfig) dinoGraph(g *graph, vals map[string][]float32) ([]byte, error) {
	d, p, blk := int64(c.Width), c.Prefix, c.Dino
	w := func(name string, dims ...int64) string {
		v := vals[name]
		return g.weight(name, dims, func() ([]float32, error) { return v, nil })
	}
	linear := func(x, name string, out, in int64) string {
		v := vals[name+".weight"]
		wt := g.weight(name+".weight.T", []int64{in, out}, func() ([]float32, error) { return transpose(v, int(out), int(in)), nil })
		return g.op("Add", "", g.op("MatMul", "", x, wt), w(name+".bias", out))
	}
	norm := func(x, name string, eps float64, out string) string {
		y := g.op("LayerNormalization", out, x, w(name+".weight", d), w(name+".bias", d))
		g.last().with(intAttr("axis", -1), floatAttr("epsilon", float32(eps)))
		return y
	}
	h := norm(ReadoutInput, p+"norm1", c.Eps, "")
	a := linear(linear(h, p+"attention.attention.value", d, d), p+"attention.output.dense", d, d)
	x := g.op("Add", "", g.op("Mul", "", a, w(p+"layer_scale1.lambda1", d)), ReadoutInput)
	h = norm(x, p+"norm2", c.Eps, "")
	var f string
	if blk.SwiGLU {
		hf := int64(swigluWidth(blk.Inter))
		y := linear(h, p+"mlp.weights_in", 2*hf, d)
		x1, x2 := g.tmp("swiglu_gate"), g.tmp("swiglu_value")
		g.nodes = append(g.nodes, &node{op: "Split", name: x1, in: []string{y, g.constInts("swiglu_sizes", []int64{2}, hf, hf)},
			out: []string{x1, x2}, attrs: []attr{intAttr("axis", -1)}})
		s := g.op("Mul", "", x1, g.op("Sigmoid", "", x1))
		f = linear(g.op("Mul", "", s, x2), p+"mlp.weights_out", d, hf)
	} else {
		inter := int64(blk.Inter)
		f = linear(h, p+"mlp.fc1", inter, d)
		f = (&builder{g: g}).activation(f, blk.Act)
		f = linear(f, p+"mlp.fc2", d, inter)
	}
	x = g.op("Add", "", g.op("Mul", "", f, w(p+"layer_scale2.lambda1", d)), x)
	norm(x, blk.Norm, blk.NormEps, ReadoutOutput)
	var buf bytes.Buffer
	if err := writeModel(&buf, g, opsets, producer, ""); err != nil {
		return nil, fmt.Errorf("graphbuild: readout: %w", err)
	}
	return buf.Bytes(), nil
}
