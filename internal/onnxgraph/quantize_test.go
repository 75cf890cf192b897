package onnxgraph_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestQuantizeMatchesTheSpec quantizes y = Relu(x W + b) and checks ONNX
// Runtime's output against the arithmetic the ONNX and contrib specs give
// (DynamicQuantizeLinear on x, per-column symmetric int8 W, integer
// products, rescaled), computed here; the projection to a graph output
// stays float32.
func TestQuantizeMatchesTheSpec(t *testing.T) {
	orttest.Load(t)
	const M, K, N = 3, 6, 4
	b := newBuilder()
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "M", "K")}
	w := b.random("w", K, N)
	bias := b.random("b", N)
	b.node("MatMul", []string{"x", w}, []string{"mm"})
	b.node("Add", []string{"mm", bias}, []string{"pre"})
	b.node("Relu", []string{"pre"}, []string{"y"})
	b.node("MatMul", []string{"y", b.random("proj", N, 2)}, []string{"z"})
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y"), floatIO("z")}
	rng := rand.New(rand.NewPCG(9, 9))
	x := make([]float32, M*K)
	for i := range x {
		x[i] = float32(rng.NormFloat64()*2 + 0.3)
	}
	wv, _ := b.g.Initializers[w].Float32Values()
	bv, _ := b.g.Initializers[bias].Float32Values()
	for _, c := range []struct {
		opts onnxgraph.QuantOptions
		qmax float64
		op   string
	}{
		{onnxgraph.QuantOptions{}, 63, "DynamicQuantizeMatMul"},
		// Not FullRange: on CPUs without VNNI, ONNX Runtime 1.30 saturates
		// pairs of uint8×int8 products (an AVX2 machine gave 0.711 where
		// this arithmetic gives 0.522 for one element of this case).
		{onnxgraph.QuantOptions{Integer: true}, 63, "MatMulInteger"},
	} {
		var buf bytes.Buffer
		r, err := onnxgraph.Quantize(b.build(t), c.opts, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if r.MatMuls != 1 || r.Biases != 1 || len(r.Kept) != 1 || r.Ops[c.op] != 1 || r.Ops["MatMul"] != 1 {
			t.Errorf("%+v: %s; %v; kept %v", c.opts, r, onnxgraph.SortedOps(r.Ops), r.Kept)
		}
		got := runGraph(t, buf.Bytes(), "quantized", []string{"x"}, []tensorio.Tensor{tensorio.F32([]int{M, K}, x)}, []string{"y"})[0]
		// The reference.
		lo, hi := 0.0, 0.0
		for _, v := range x {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
		as := float32((hi - lo) / 255)
		zp := math.Max(0, math.Min(255, math.RoundToEven(-lo/float64(as))))
		xq := make([]float64, len(x))
		for i, v := range x {
			xq[i] = math.Max(0, math.Min(255, math.RoundToEven(float64(v/as))+zp)) - zp
		}
		for j := 0; j < N; j++ {
			s := 0.0
			for k := 0; k < K; k++ {
				s = math.Max(s, math.Abs(float64(wv[k*N+j])))
			}
			ws := float32(s / c.qmax)
			for i := 0; i < M; i++ {
				acc := 0.0
				for k := 0; k < K; k++ {
					q := math.Max(-c.qmax, math.Min(c.qmax, math.RoundToEven(float64(wv[k*N+j]/ws))))
					acc += xq[i*K+k] * q
				}
				want := math.Max(0, acc*float64(as)*float64(ws)+float64(bv[j]))
				if d := math.Abs(float64(got[i*N+j]) - want); d > 1e-5*math.Max(1, math.Abs(want)) {
					t.Errorf("%+v: y[%d,%d] = %g, the spec gives %g", c.opts, i, j, got[i*N+j], want)
				}
			}
		}
	}
}
