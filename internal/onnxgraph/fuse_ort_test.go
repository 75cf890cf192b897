package onnxgraph_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// probeInputs returns inputs for a CLIP graph: pixel values drawn from a
// fixed seed in CLIP's normalised range, or token ids of prompts of
// different lengths (padded, so that the mask matters) with their mask.
func probeInputs(t testing.TB, m *onnxgraph.Model, batch int) ([]string, []tensorio.Tensor) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var names []string
	var ts []tensorio.Tensor
	for _, in := range m.Graph.Inputs {
		names = append(names, in.Name)
		switch in.Name {
		case "pixel_values":
			size := int(in.Shape[2].Value)
			if size == 0 {
				size = 224
			}
			v := make([]float32, batch*3*size*size)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			ts = append(ts, tensorio.F32([]int{batch, 3, size, size}, v))
		case "input_ids", "attention_mask":
			const T = 16
			ids := make([]int64, batch*T)
			mask := make([]int64, batch*T)
			for b := 0; b < batch; b++ {
				n := 3 + (b*5)%(T-3) // tokens before padding, EOS included
				for i := 0; i < T; i++ {
					switch {
					case i == 0:
						ids[b*T+i] = 1
					case i < n-1:
						ids[b*T+i] = int64(2 + rng.IntN(20))
					case i == n-1:
						ids[b*T+i] = 3
					}
					if i < n {
						mask[b*T+i] = 1
					}
				}
			}
			if in.Name == "input_ids" {
				ts = append(ts, tensorio.I64([]int{batch, T}, ids))
			} else {
				ts = append(ts, tensorio.I64([]int{batch, T}, mask))
			}
		default:
			t.Fatalf("unexpected input %s", in.Name)
		}
	}
	return names, ts
}

func runGraph(t testing.TB, graph []byte, name string, inNames []string, in []tensorio.Tensor, outNames []string) [][]float32 {
	t.Helper()
	s, err := ort.NewSession(graph, name, inNames, outNames, ort.SessionOptions{Threads: 2})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer s.Close()
	outs, err := s.Run(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	res := make([][]float32, len(outs))
	for i, o := range outs {
		if res[i], err = o.Float32(); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// relDiff returns max |a-b| / max |a|.
func relDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = math.Max(m, math.Abs(float64(a[i])))
	}
	return d / m
}

// TestFuseInONNXRuntime fuses the built-in model's graphs (and a real-size
// one when CONDITION_BENCH_MODEL names a scripts/bench_models folder), runs
// the original and the fused graph in ONNX Runtime on the same inputs, and
// checks that every output agrees within 1e-4 of its largest magnitude and
// that the fused operators appear where the graphs have them.
func TestFuseInONNXRuntime(t *testing.T) {
	orttest.Load(t)
	dirs := []string{filepath.Join("..", "..", "models", "embedded", "model")}
	if d := os.Getenv("CONDITION_BENCH_MODEL"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		for _, file := range []string{"vision_model.onnx", "text_model.onnx"} {
			path := filepath.Join(dir, "onnx", file)
			m, raw := load(t, path)
			layers := m.Graph.OpCounts()["Softmax"]
			inNames, in := probeInputs(t, m, 3)
			var outNames []string
			for _, o := range m.Graph.Outputs {
				outNames = append(outNames, o.Name)
			}
			want := runGraph(t, raw, path, inNames, in, outNames)
			for _, packed := range []bool{false, true} {
				var buf bytes.Buffer
				r, err := onnxgraph.Fuse(m, onnxgraph.FuseOptions{PackedQKV: packed}, &buf)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				t.Logf("%s packed=%v: %s; %v", path, packed, r, onnxgraph.SortedOps(r.Ops))
				for _, s := range r.Skipped {
					t.Logf("  left: %s", s)
				}
				if r.Attention != layers || r.Ops["Softmax"] != 0 {
					t.Errorf("%s: %d attention blocks fused of %d", path, r.Attention, layers)
				}
				attn := "MultiHeadAttention"
				if packed {
					attn = "Attention"
				}
				if r.Ops[attn] != layers {
					t.Errorf("%s: %d %s nodes, want %d", path, r.Ops[attn], attn, layers)
				}
				// Each block has two residual sums; all but the last
				// (followed by a gather, vision, or the final norm's sum,
				// which is fused too for text) reach a layer norm.
				if r.SkipLayerNorm < 2*layers-1 || r.QuickGelu != layers {
					t.Errorf("%s: %d skip layer norms, %d QuickGelu for %d layers", path, r.SkipLayerNorm, r.QuickGelu, layers)
				}
				got := runGraph(t, buf.Bytes(), path+" (fused)", inNames, in, outNames)
				for i := range want {
					if d := relDiff(want[i], got[i]); d > 1e-4 || math.IsNaN(d) {
						t.Errorf("%s packed=%v: %s differs by %.3g of its largest magnitude", path, packed, outNames[i], d)
					} else {
						t.Logf("%s packed=%v: %s within %.2g", path, packed, outNames[i], d)
					}
				}
			}
		}
	}
}
