package clip_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// The tiny random SigLIP made by testdata/tinysiglip/generate.py. Its golden
// outputs come from torch (scripts/pysiglip, a transcription of transformers'
// SiglipTextModel and SiglipVisionModel). These tests run its two graphs with
// ONNX Runtime directly, below the encoders, to show that the committed graphs
// and the goldens agree: the encoders' own tests can then trust both.
var siglipGraphDir = filepath.Join("..", "..", "testdata", "tinysiglip")

// siglipGraphTol bounds |ort - torch| / max(1, |torch|) for every value.
const siglipGraphTol = 1e-4

func readSiglipGraphGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(siglipGraphDir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// siglipGraphClose fails t when got and torch's want differ by more than
// siglipGraphTol relative to max(1, |want|) anywhere, naming the worst place.
func siglipGraphClose(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, torch has %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range want {
		d := math.Abs(float64(got[i])-float64(want[i])) / math.Max(1, math.Abs(float64(want[i])))
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	t.Logf("%s: max relative error %.2g", what, worst)
	if worst > siglipGraphTol || math.IsNaN(worst) {
		t.Fatalf("%s: |ort - torch| / max(1, |torch|) = %g at %d (ort %g, torch %g), tolerance %g",
			what, worst, at, got[at], want[at], siglipGraphTol)
	}
}

// siglipGraphSession opens onnx/<file> of tinysiglip after checking that its
// inputs and outputs are the ones the encoders expect: names, element types
// and shapes (-1 for the dynamic batch).
func siglipGraphSession(t *testing.T, file string, inputs, outputs []ort.IOInfo) *ort.Session {
	t.Helper()
	g := ort.GraphFile(filepath.Join(siglipGraphDir, "onnx", file))
	in, out, err := g.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want []ort.IOInfo
	}{{"inputs", in, inputs}, {"outputs", out, outputs}} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Fatalf("%s: %s %s, want %s", file, c.what, ort.ListIO(c.got), ort.ListIO(c.want))
		}
	}
	s, err := g.NewSession(siglipGraphNames(inputs), siglipGraphNames(outputs), ort.SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func siglipGraphNames(infos []ort.IOInfo) []string {
	s := make([]string, len(infos))
	for i, x := range infos {
		s[i] = x.Name
	}
	return s
}

func siglipGraphF32(name string, shape ...int64) ort.IOInfo {
	return ort.IOInfo{Name: name, Tensor: true, Type: ort.ElementFloat32, Shape: shape}
}

// siglipGraphRows returns rows [from, to) of a tensor whose first dimension is the batch.
func siglipGraphRows[T any](x tensorio.Tensor, from, to int) tensorio.Tensor {
	d := x.Data.([]T)
	n := len(d) / x.Shape[0]
	shape := append([]int{to - from}, x.Shape[1:]...)
	return tensorio.Tensor{DType: x.DType, Shape: shape, Data: d[from*n : to*n]}
}

func siglipGraphShape(t *testing.T, what string, got tensorio.Tensor, want []int) {
	t.Helper()
	if !reflect.DeepEqual(got.Shape, want) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, want)
	}
}

func TestSiglipTextGraphMatchesTorch(t *testing.T) {
	orttest.Load(t)
	s := siglipGraphSession(t, "text_model.onnx",
		[]ort.IOInfo{{Name: "input_ids", Tensor: true, Type: ort.ElementInt64, Shape: []int64{-1, 64}}},
		[]ort.IOInfo{siglipGraphF32("last_hidden_state", -1, 64, 32), siglipGraphF32("pooler_output", -1, 24)})
	ids := readSiglipGraphGolden(t, "text_input_ids")
	hs := readSiglipGraphGolden(t, "text_last_hidden_state")
	po := readSiglipGraphGolden(t, "text_pooler_output")
	n := ids.Shape[0]
	for _, c := range []struct {
		name     string
		from, to int
	}{{"batch", 0, n}, {"one prompt", 2, 3}, {"empty prompt", n - 2, n - 1}} {
		t.Run(c.name, func(t *testing.T) {
			out, err := s.Run(context.Background(), []tensorio.Tensor{siglipGraphRows[int64](ids, c.from, c.to)})
			if err != nil {
				t.Fatal(err)
			}
			m := c.to - c.from
			siglipGraphShape(t, "last_hidden_state", out[0], []int{m, 64, 32})
			siglipGraphShape(t, "pooler_output", out[1], []int{m, 24})
			siglipGraphClose(t, "text last_hidden_state", out[0].Data.([]float32), siglipGraphRows[float32](hs, c.from, c.to).Data.([]float32))
			siglipGraphClose(t, "text pooler_output", out[1].Data.([]float32), siglipGraphRows[float32](po, c.from, c.to).Data.([]float32))
		})
	}
}

func TestSiglipVisionGraphMatchesTorch(t *testing.T) {
	orttest.Load(t)
	s := siglipGraphSession(t, "vision_model.onnx",
		[]ort.IOInfo{siglipGraphF32("pixel_values", -1, 3, 32, 32)},
		[]ort.IOInfo{siglipGraphF32("last_hidden_state", -1, 16, 24), siglipGraphF32("pooler_output", -1, 24)})
	// vision_*: random pixel values and a ramp; embed_*: the two PNGs of
	// golden/images after SiglipImageProcessor-style preprocessing.
	for _, prefix := range []string{"vision_", "embed_"} {
		t.Run(prefix, func(t *testing.T) {
			px := readSiglipGraphGolden(t, prefix+"pixel_values")
			hs := readSiglipGraphGolden(t, prefix+"last_hidden_state")
			po := readSiglipGraphGolden(t, prefix+"pooler_output")
			n := px.Shape[0]
			for _, c := range []struct {
				name     string
				from, to int
			}{{"batch", 0, n}, {"last image alone", n - 1, n}} {
				out, err := s.Run(context.Background(), []tensorio.Tensor{siglipGraphRows[float32](px, c.from, c.to)})
				if err != nil {
					t.Fatal(err)
				}
				m := c.to - c.from
				siglipGraphShape(t, "last_hidden_state", out[0], []int{m, 16, 24})
				siglipGraphShape(t, "pooler_output", out[1], []int{m, 24})
				siglipGraphClose(t, c.name+": vision last_hidden_state", out[0].Data.([]float32), siglipGraphRows[float32](hs, c.from, c.to).Data.([]float32))
				siglipGraphClose(t, c.name+": vision pooler_output", out[1].Data.([]float32), siglipGraphRows[float32](po, c.from, c.to).Data.([]float32))
			}
		})
	}
}

// TestSiglipGraphLogits scores ONNX Runtime's pooled outputs the way
// SiglipModel does, exp(logit_scale) * cos + logit_bias with the two scalars of
// model.safetensors, and compares the logits and sigmoid probabilities with
// torch's for the two images against every prompt.
func TestSiglipGraphLogits(t *testing.T) {
	orttest.Load(t)
	text := siglipGraphSession(t, "text_model.onnx",
		[]ort.IOInfo{{Name: "input_ids", Tensor: true, Type: ort.ElementInt64, Shape: []int64{-1, 64}}},
		[]ort.IOInfo{siglipGraphF32("last_hidden_state", -1, 64, 32), siglipGraphF32("pooler_output", -1, 24)})
	vision := siglipGraphSession(t, "vision_model.onnx",
		[]ort.IOInfo{siglipGraphF32("pixel_values", -1, 3, 32, 32)},
		[]ort.IOInfo{siglipGraphF32("last_hidden_state", -1, 16, 24), siglipGraphF32("pooler_output", -1, 24)})
	w, _, err := tensorio.ReadSafetensors(filepath.Join(siglipGraphDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	scale := float64(w["logit_scale"].Data.([]float32)[0])
	bias := float64(w["logit_bias"].Data.([]float32)[0])
	ctx := context.Background()
	to, err := text.Run(ctx, []tensorio.Tensor{readSiglipGraphGolden(t, "text_input_ids")})
	if err != nil {
		t.Fatal(err)
	}
	vo, err := vision.Run(ctx, []tensorio.Tensor{readSiglipGraphGolden(t, "embed_pixel_values")})
	if err != nil {
		t.Fatal(err)
	}
	te, ie := to[1].Data.([]float32), vo[1].Data.([]float32)
	d := to[1].Shape[1]
	nt, ni := len(te)/d, len(ie)/d
	logits := make([]float32, 0, ni*nt)
	probs := make([]float32, 0, ni*nt)
	for i := 0; i < ni; i++ {
		for j := 0; j < nt; j++ {
			l := math.Exp(scale)*siglipGraphCosine(ie[i*d:(i+1)*d], te[j*d:(j+1)*d]) + bias
			logits = append(logits, float32(l))
			probs = append(probs, float32(1/(1+math.Exp(-l))))
		}
	}
	siglipGraphClose(t, "logits_per_image", logits, readSiglipGraphGolden(t, "embed_logits_per_image").Data.([]float32))
	siglipGraphClose(t, "sigmoid(logits_per_image)", probs, readSiglipGraphGolden(t, "embed_probs_per_image").Data.([]float32))
}

func siglipGraphCosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// TestSiglipPooledOnlyGraph pins the interface of onnx/bad/vision_no_lhs.onnx,
// the fixture for the error a pooled-only export must give: the vision input,
// pooler_output, and no last_hidden_state.
func TestSiglipPooledOnlyGraph(t *testing.T) {
	orttest.Load(t)
	in, out, err := ort.GraphFile(filepath.Join(siglipGraphDir, "onnx", "bad", "vision_no_lhs.onnx")).Inspect()
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s -> %s", ort.ListIO(in), ort.ListIO(out))
	if want := "pixel_values float32[-1 3 32 32] -> pooler_output float32[-1 24]"; got != want {
		t.Fatalf("vision_no_lhs.onnx: %s, want %s", got, want)
	}
}
