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

// TestQuantizePerRowMatchesTheArithmetic quantizes y = x W + b, x [B, T,
// K], per row and checks ONNX Runtime's output against the arithmetic
// computed here, with 8-bit weights (each row x_i symmetric: q_i =
// round(x_i / s_i), s_i = max|x_i| / 127) and with 7-bit ones (over the
// row's range [lo_i, hi_i] with 0 in it: u_i = round(x_i / s_i) + z_i,
// s_i = (hi_i − lo_i) / 254, z_i = round(−lo_i / s_i) in [1, 255]): W per
// column to 127 (63) levels, integer products, rescaled by s_i and W's
// column scale, plus b. Then it checks what the scheme is for: one batch
// element's output is the same, bit for bit, beside any other (here a
// batch-mate a thousand times larger, which moves a per-call scale).
func TestQuantizePerRowMatchesTheArithmetic(t *testing.T) {
	orttest.Load(t)
	const B, T, K, N = 2, 3, 40, 5
	b := newBuilder()
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "B", "T", "K")}
	w := b.random("w", K, N)
	bias := b.random("b", N)
	b.node("MatMul", []string{"x", w}, []string{"mm"})
	b.node("Add", []string{"mm", bias}, []string{"y"})
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y")}
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, B*T*K)
	for i := range x {
		x[i] = float32(rng.NormFloat64()*float64(1+i/K) + 0.2)
	}
	for k := range K {
		x[K+k] = 0 // a row of zeros is quantized with a tiny scale, to zeros
		x[3*K+k] = float32(math.Abs(float64(x[3*K+k])))
	}
	wv, _ := b.g.Initializers[w].Float32Values()
	bv, _ := b.g.Initializers[bias].Float32Values()
	for _, full := range []bool{true, false} {
		var buf bytes.Buffer
		r, err := onnxgraph.Quantize(b.build(t), onnxgraph.QuantOptions{FullRange: full, PerRow: true, QuantizeLast: true}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if r.MatMuls != 1 || r.Biases != 1 || r.Ops["MatMulIntegerToFloat"] != 1 || r.Ops["MatMul"] != 0 || r.Ops["DynamicQuantizeMatMul"] != 0 {
			t.Fatalf("%s; %v", r, onnxgraph.SortedOps(r.Ops))
		}
		run := func(x []float32, batch int) []float32 {
			return runGraph(t, buf.Bytes(), "per-row", []string{"x"}, []tensorio.Tensor{tensorio.F32([]int{batch, T, K}, x)}, []string{"y"})[0]
		}
		got := run(x, B)
		wmaxq := 63.0
		if full {
			wmaxq = 127
		}
		for i := range B * T {
			want := perRowReference(x[i*K:(i+1)*K], wv, bv, N, wmaxq, full)
			for j := range N {
				if d := math.Abs(float64(got[i*N+j]) - want[j]); d > 1e-5*math.Max(1, math.Abs(want[j])) {
					t.Errorf("full range %v: y[%d,%d] = %g, the arithmetic gives %g", full, i, j, got[i*N+j], want[j])
				}
			}
		}
		// The first image alone, and beside a much larger batch-mate: the
		// same bits.
		alone := run(x[:T*K], 1)
		big := append([]float32{}, x...)
		for i := T * K; i < len(big); i++ {
			big[i] *= 1000
		}
		beside := run(big, 2)
		for i := range T * N {
			if math.Float32bits(alone[i]) != math.Float32bits(got[i]) || math.Float32bits(beside[i]) != math.Float32bits(got[i]) {
				t.Fatalf("full range %v: y[%d]: %g alone, %g in the batch, %g beside a larger batch-mate: a row's result depends on the others", full, i, alone[i], got[i], beside[i])
			}
		}
	}
}

// perRowReference is row [K] · w [K, n] + b as the per-row scheme computes
// it (see TestQuantizePerRowMatchesTheArithmetic), in float64.
func perRowReference(row, w, b []float32, n int, wmaxq float64, sym bool) []float64 {
	k := len(row)
	lo, hi := 0.0, 0.0
	for _, v := range row {
		lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
	}
	var s, z float64
	if sym {
		s = float64(max(float32(math.Max(hi, -lo))*float32(1.0/127), 1e-30))
		z = 128
	} else {
		s = float64(max(float32(hi-lo)*float32(1.0/254), 1e-30))
		z = math.Max(1, math.Min(255, math.RoundToEven(-lo/s)))
	}
	out := make([]float64, n)
	for j := range n {
		wmax := 0.0
		for i := range k {
			wmax = math.Max(wmax, math.Abs(float64(w[i*n+j])))
		}
		ws := float32(wmax / wmaxq)
		acc := 0.0
		for i := range k {
			xq := math.Max(0, math.Min(255, math.RoundToEven(float64(row[i])/s)+z)) - z
			wq := math.Max(-wmaxq, math.Min(wmaxq, math.RoundToEven(float64(w[i*n+j]/ws))))
			acc += xq * wq
		}
		out[j] = acc*s*float64(ws) + float64(b[j])
	}
	return out
}

// TestQuantizeOutlierRule builds two pre-norm blocks, LayerNormalization
// → MatMul → Relu → MatMul, and gives the second norm's gains three channels
// at 40× the rest: the MatMul that norm feeds multiplies those channels in
// float32 beside its int8 product, every MatMul downstream of a norm is
// kept in float32 and named, and the int8 graph stays closer to float32 than without the
// rule. Without outlier channels the rule changes nothing.
func TestQuantizeOutlierRule(t *testing.T) {
	orttest.Load(t)
	const T, K = 6, 64
	build := outlierBlocks
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, 2*T*K)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	run := func(g []byte) []float32 {
		return runGraph(t, g, "blocks", []string{"x"}, []tensorio.Tensor{tensorio.F32([]int{2, T, K}, x)}, []string{"y"})[0]
	}
	cosine := func(a, b []float32) float64 {
		var d, na, nb float64
		for i := range a {
			d += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		return d / math.Sqrt(na*nb)
	}
	for _, outliers := range []bool{false, true} {
		ref := run(onnxgraph.Build(&build(outliers).g, map[string]int64{"": 17}))
		var ruled, plain bytes.Buffer
		r, err := onnxgraph.Quantize(build(outliers).build(t), onnxgraph.QuantOptions{FullRange: true, PerRow: true, QuantizeLast: true, OutlierRatio: 8}, &ruled)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := onnxgraph.Quantize(build(outliers).build(t), onnxgraph.QuantOptions{FullRange: true, PerRow: true, QuantizeLast: true}, &plain); err != nil {
			t.Fatal(err)
		}
		cosRuled, cosPlain := cosine(ref, run(ruled.Bytes())), cosine(ref, run(plain.Bytes()))
		t.Logf("outliers %v: %s; cosine to float32 %.6f with the rule, %.6f without", outliers, r, cosRuled, cosPlain)
		if !outliers {
			if r.Split != 0 || r.Outliers != 0 || r.MatMuls != 4 || !bytes.Equal(ruled.Bytes(), plain.Bytes()) {
				t.Errorf("no outlier channels, yet the rule changed the graph: %s", r)
			}
			continue
		}
		if r.Split != 1 || r.Outliers != 2 || r.MatMuls != 2 || len(r.Kept) != 2 || !strings.Contains(r.Kept[0], "outlier channels") {
			t.Errorf("with outlier channels: %s; kept %v", r, r.Kept)
		}
		if !(cosRuled > cosPlain) || cosRuled < 0.9999 {
			t.Errorf("cosine to float32 %.6f with the rule, %.6f without", cosRuled, cosPlain)
		}
	}
}

// TestQuantizeKeepsWhatItCannotTake: a MatMul by weights that are not a
// 2-D float32 matrix stays float32, named in Kept and counted in
// Unsupported (the engine logs those), per row as per call.
func TestQuantizeKeepsWhatItCannotTake(t *testing.T) {
	for _, perRow := range []bool{true, false} {
		b := newBuilder()
		b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "B", "T", "K")}
		b.node("MatMul", []string{"x", b.random("w3", 2, 4, 3)}, []string{"y"})
		b.node("MatMul", []string{"y", b.random("w", 3, 5)}, []string{"z"})
		b.g.Outputs = []onnxgraph.ValueInfo{floatIO("z")}
		var buf bytes.Buffer
		r, err := onnxgraph.Quantize(b.build(t), onnxgraph.QuantOptions{FullRange: true, PerRow: perRow, QuantizeLast: true}, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if r.MatMuls != 1 || r.Unsupported != 1 || len(r.Kept) != 1 || !strings.Contains(r.Kept[0], "weights of shape [2 4 3]") || r.Ops["MatMul"] != 1 {
			t.Errorf("per row %v: %s; unsupported %d, kept %v", perRow, r, r.Unsupported, r.Kept)
		}
	}
}

// outlierBlocks builds two pre-norm blocks x [B, T, 64] → y, LayerNormalization
// → MatMul → Relu → MatMul with a residual Add, the second norm's gains with
// three channels at 40× the rest when outliers.
func outlierBlocks(outliers bool) *graphBuilder {
	const K, H = 64, 96
	b := newBuilder()
	b.g.Inputs = []onnxgraph.ValueInfo{floatIO("x", "B", "T", "K")}
	in := "x"
	for l := range 2 {
		p := string(rune('a' + l))
		g := make([]float32, K)
		for c := range g {
			g[c] = 1 + 0.1*float32(b.rng.NormFloat64())
			if outliers && l == 1 && c%23 == 5 {
				g[c] *= 40
			}
		}
		b.g.Initializers[p+"g"] = onnxgraph.FloatTensor(p+"g", []int64{K}, g)
		b.node("LayerNormalization", []string{in, p + "g", b.random(p+"beta", K)}, []string{p + "ln"}, onnxgraph.IntAttr("axis", -1))
		b.node("MatMul", []string{p + "ln", b.random(p+"w1", K, H)}, []string{p + "h"})
		b.node("Relu", []string{p + "h"}, []string{p + "r"})
		b.node("MatMul", []string{p + "r", b.random(p+"w2", H, K)}, []string{p + "o"})
		b.node("Add", []string{in, p + "o"}, []string{p + "res"})
		in = p + "res"
	}
	b.node("Identity", []string{in}, []string{"y"})
	b.g.Outputs = []onnxgraph.ValueInfo{floatIO("y")}
	return b
}
