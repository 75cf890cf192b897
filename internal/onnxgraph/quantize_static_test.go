package onnxgraph_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// calibrate runs the calibration graph of g on x [B, T, K] and returns
// each point's ranges, keyed by the activation's name.
func calibrate(t *testing.T, g *onnxgraph.Model, x []float32, dims []int) map[string]onnxgraph.ChannelRange {
	t.Helper()
	var buf bytes.Buffer
	pts, err := onnxgraph.Calibration(g, &buf)
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, p := range pts {
		outs = append(outs, p.Lo, p.Hi)
	}
	got := runGraph(t, buf.Bytes(), "calibration", []string{"x"}, []tensorio.Tensor{tensorio.F32(dims, x)}, outs)
	ranges := map[string]onnxgraph.ChannelRange{}
	for i, p := range pts {
		var r onnxgraph.ChannelRange
		if err := r.Merge(got[2*i], got[2*i+1]); err != nil {
			t.Fatal(err)
		}
		ranges[p.Value] = r
	}
	return ranges
}

// TestQuantizeStaticMatchesTheArithmetic calibrates y = x W + b, x [B, T,
// K], on a first batch (the calibration graph's ranges checked against
// each channel's min and max computed here), quantizes it with static
// scales and checks ONNX Runtime's output on another batch, whose values
// pass the calibrated range, against the arithmetic computed here: s =
// (hi − lo) / 255 and z = round(−lo / s) from the range over every
// channel (0 in it), u = clip(round(x / s) + z, 0, 255), W per column to
// 127 levels, Σ (u − z)·q, times s and W's column scale, plus b. Then it
// checks that one batch element's output is the same, bit for bit, alone
// and beside a batch-mate a thousand times larger.
func TestQuantizeStaticMatchesTheArithmetic(t *testing.T) {
	orttest.Load(t)
	const B, T, K, N = 2, 3, 40, 5
	b := newBuilder()
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "B", "T", "K")}
	w := b.random("w", K, N)
	bias := b.random("b", N)
	b.node("MatMul", []string{"x", w}, []string{"mm"})
	b.node("Add", []string{"mm", bias}, []string{"y"})
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y")}
	rng := rand.New(rand.NewPCG(9, 10))
	cal := make([]float32, B*T*K)
	for i := range cal {
		cal[i] = float32(rng.NormFloat64() + 0.3)
	}
	ranges := calibrate(t, b.build(t), cal, []int{B, T, K})
	r, ok := ranges["x"]
	if len(ranges) != 1 || !ok || len(r.Lo) != K {
		t.Fatalf("calibration ranges %v, want x's [%d]", ranges, K)
	}
	lo, hi := 0.0, 0.0
	for c := range K {
		cl, ch := math.Inf(1), math.Inf(-1)
		for i := range B * T {
			cl, ch = math.Min(cl, float64(cal[i*K+c])), math.Max(ch, float64(cal[i*K+c]))
		}
		if float64(r.Lo[c]) != cl || float64(r.Hi[c]) != ch {
			t.Fatalf("channel %d: calibrated [%g, %g], its values span [%g, %g]", c, r.Lo[c], r.Hi[c], cl, ch)
		}
		lo, hi = math.Min(lo, cl), math.Max(hi, ch)
	}
	var buf bytes.Buffer
	rep, err := onnxgraph.Quantize(b.build(t), onnxgraph.QuantOptions{FullRange: true, Static: ranges, QuantizeLast: true}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep.MatMuls != 1 || rep.Biases != 1 || rep.Ops["MatMulIntegerToFloat"] != 1 || rep.Ops["QuantizeLinear"] != 1 ||
		rep.Ops["MatMul"] != 0 || rep.Ops["ReduceMax"] != 0 || rep.Ops["Add"] != 0 {
		t.Fatalf("%s; %v", rep, onnxgraph.SortedOps(rep.Ops))
	}
	x := make([]float32, B*T*K)
	for i := range x {
		x[i] = float32(rng.NormFloat64()*1.5 + 0.3) // some past the calibrated range: clipped
	}
	run := func(x []float32, batch int) []float32 {
		return runGraph(t, buf.Bytes(), "static", []string{"x"}, []tensorio.Tensor{tensorio.F32([]int{batch, T, K}, x)}, []string{"y"})[0]
	}
	got := run(x, B)
	wv, _ := b.g.Initializers[w].Float32Values()
	bv, _ := b.g.Initializers[bias].Float32Values()
	s := float32((hi - lo) / 255)
	z := math.Max(0, math.Min(255, math.RoundToEven(-lo/float64(s))))
	for i := range B * T {
		want := staticReference(x[i*K:(i+1)*K], wv, bv, N, s, z)
		for j := range N {
			if d := math.Abs(float64(got[i*N+j]) - want[j]); d > 1e-5*math.Max(1, math.Abs(want[j])) {
				t.Errorf("y[%d,%d] = %g, the arithmetic gives %g", i, j, got[i*N+j], want[j])
			}
		}
	}
	alone := run(x[:T*K], 1)
	big := append([]float32{}, x...)
	for i := T * K; i < len(big); i++ {
		big[i] *= 1000
	}
	beside := run(big, 2)
	for i := range T * N {
		if math.Float32bits(alone[i]) != math.Float32bits(got[i]) || math.Float32bits(beside[i]) != math.Float32bits(got[i]) {
			t.Fatalf("y[%d]: %g alone, %g in the batch, %g beside a larger batch-mate: a row's result depends on the others", i, alone[i], got[i], beside[i])
		}
	}
}

// staticReference is row [K] · w [K, n] + b as the static scheme computes
// it with the scale s and zero point z, in float64 (weights to 127 levels).
func staticReference(row, w, b []float32, n int, s float32, z float64) []float64 {
	k := len(row)
	out := make([]float64, n)
	for j := range n {
		wmax := 0.0
		for i := range k {
			wmax = math.Max(wmax, math.Abs(float64(w[i*n+j])))
		}
		ws := float32(wmax / 127)
		acc := 0.0
		for i := range k {
			xq := math.Max(0, math.Min(255, math.RoundToEven(float64(row[i]/s))+z)) - z
			wq := math.Max(-127, math.Min(127, math.RoundToEven(float64(w[i*n+j]/ws))))
			acc += xq * wq
		}
		out[j] = acc*float64(s)*float64(ws) + float64(b[j])
	}
	return out
}

// TestQuantizeStaticOutlierRule: with static scales the outlier rule
// works as per row (the split MatMul, the downstream ones kept float32),
// and the range of the split norm's output is taken with its outlier
// channels divided by their ratios: the graph stays close to float32, and
// closer than without the rule.
func TestQuantizeStaticOutlierRule(t *testing.T) {
	orttest.Load(t)
	const T, K = 6, 64
	rng := rand.New(rand.NewPCG(11, 12))
	x := make([]float32, 2*T*K)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	ref := runGraph(t, onnxgraph.Build(&outlierBlocks(true).g, map[string]int64{"": 17}), "blocks", []string{"x"},
		[]tensorio.Tensor{tensorio.F32([]int{2, T, K}, x)}, []string{"y"})[0]
	ranges := calibrate(t, outlierBlocks(true).build(t), x, []int{2, T, K})
	if len(ranges) != 4 {
		t.Fatalf("%d calibrated activations, want the inputs of the 4 MatMuls", len(ranges))
	}
	cos := map[bool]float64{}
	for _, rule := range []bool{true, false} {
		opts := onnxgraph.QuantOptions{FullRange: true, Static: ranges, QuantizeLast: true}
		if rule {
			opts.OutlierRatio = 8
		}
		var buf bytes.Buffer
		r, err := onnxgraph.Quantize(outlierBlocks(true).build(t), opts, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if rule && (r.Split != 1 || r.Outliers != 2 || r.MatMuls != 2 || !strings.Contains(r.Kept[0], "outlier channels")) {
			t.Errorf("with the rule: %s; kept %v", r, r.Kept)
		}
		got := runGraph(t, buf.Bytes(), "static", []string{"x"}, []tensorio.Tensor{tensorio.F32([]int{2, T, K}, x)}, []string{"y"})[0]
		var d, na, nb float64
		for i := range got {
			d += float64(got[i]) * float64(ref[i])
			na += float64(got[i]) * float64(got[i])
			nb += float64(ref[i]) * float64(ref[i])
		}
		cos[rule] = d / math.Sqrt(na*nb)
	}
	t.Logf("cosine to float32: %.6f with the rule, %.6f without", cos[true], cos[false])
	if !(cos[true] > cos[false]) || cos[true] < 0.9999 {
		t.Errorf("cosine to float32 %.6f with the rule, %.6f without", cos[true], cos[false])
	}
}
