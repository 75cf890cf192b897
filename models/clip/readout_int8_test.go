package clip

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// TestReadoutInt8: the readout graph quantized for int8 towers
// (quantizeReadout) has its MatMuls in int8, activations per row, and
// stays close to the float32
// one on torch's last-layer input of the tiny CLIP: every row's cosine ≥
// 0.99 for each readout.
func TestReadoutInt8(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "..", "testdata", "tinyclip")
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	x, err := tensorio.ReadNPY(filepath.Join(dir, "golden", "readout_layer_input.npy"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := x.Float32()
	n, s, d := x.Shape[0], x.Shape[1], x.Shape[2]
	v := m.Config().VisionConfig
	for _, kind := range []string{graphbuild.ReadoutClearCLIP, graphbuild.ReadoutNACLIP, graphbuild.ReadoutMaskCLIP, graphbuild.ReadoutPEARL} {
		c := graphbuild.ReadoutConfig{Kind: kind, Width: d, Heads: v.NumAttentionHeads, Eps: v.LayerNormEps, Class: 1, GridH: 4, GridW: 4,
			Prefix: "vision_model.encoder.layers.1."}
		var names []string
		for name := range c.ReadoutTensors() {
			names = append(names, name)
		}
		ts, err := m.ReadWeights(names...)
		if err != nil {
			t.Fatal(err)
		}
		g, err := graphbuild.ReadoutGraph(c, func(name string) ([]float32, error) { return ts[name].Float32() })
		if err != nil {
			t.Fatal(err)
		}
		q, err := quantizeReadout(g, false)
		if err != nil {
			t.Fatal(err)
		}
		run := func(graph []byte) []float32 {
			sess, err := ort.GraphBytes(graph, kind).NewSession([]string{graphbuild.ReadoutInput}, []string{graphbuild.ReadoutOutput}, ort.SessionOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			out, err := sess.Run(context.Background(), []tensorio.Tensor{tensorio.F32([]int{n, s, d}, in)})
			if err != nil {
				t.Fatal(err)
			}
			y, err := out[0].Float32()
			if err != nil {
				t.Fatal(err)
			}
			return y
		}
		f32, i8 := run(g), run(q)
		qm, err := onnxgraph.Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		ops := map[string]int{}
		for _, nd := range qm.Graph.Nodes {
			if nd.OpType == "MatMul" && qm.Graph.Initializers[nd.Inputs[1]] != nil {
				t.Errorf("%s: a MatMul by weights %s left in float32", kind, nd.Inputs[1])
			}
			ops[nd.OpType]++
		}
		if ops["MatMulIntegerToFloat"] == 0 || ops["DynamicQuantizeMatMul"] != 0 {
			t.Errorf("%s: the int8 graph's ops: %v", kind, ops)
		}
		least := 1.0
		for r := 0; r+d <= len(f32); r += d {
			dot, na, nb := 0.0, 0.0, 0.0
			for k := range d {
				a, b := float64(f32[r+k]), float64(i8[r+k])
				dot, na, nb = dot+a*b, na+a*a, nb+b*b
			}
			least = min(least, dot/math.Sqrt(na*nb))
		}
		t.Logf("%s: int8 against float32, min cosine per row %.5f", kind, least)
		if least < 0.99 {
			t.Errorf("%s: int8 readout's min cosine per row with float32's %.5f, want ≥ 0.99", kind, least)
		}
	}
}
