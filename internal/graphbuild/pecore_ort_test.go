package graphbuild

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// tinyPEConfig is the config of testdata/tinypecore (size 32, a class
// token, grid offset 1) or tinypecore-nocls (size 48, no class token,
// offset 0: its 6×6 grid scaled to the reference 4×4), as
// scripts/openclip/make_tiny_pecore.py writes them.
func tinyPEConfig(size int, cls bool, offset float64) CLIPConfig {
	return CLIPConfig{ModelType: "clip", ProjectionDim: 24,
		Text: TextConfig{VocabSize: 594, HiddenSize: 32, IntermediateSize: 128, Layers: 2, Heads: 2, MaxPositions: 16,
			HiddenAct: "gelu", LayerNormEps: 1e-5, EosTokenID: 593},
		Vision: VisionConfig{HiddenSize: 32, IntermediateSize: 128, Layers: 2, Heads: 2, Channels: 3, ImageSize: size,
			PatchSize: 8, HiddenAct: "gelu", LayerNormEps: 1e-5,
			PE: &PEVision{ClassToken: cls, RefGrid: 4, GridOffset: offset, PoolHeads: 4, PoolIntermediate: 128}}}
}

// closeTo reports the largest absolute difference of got from want and
// the smallest cosine of their rows of width w.
func closeTo(want, got []float32, w int) (maxAbs, minCos float64) {
	minCos = 1
	if len(want) != len(got) {
		return math.Inf(1), 0
	}
	for r := 0; r+w <= len(want); r += w {
		var ab, aa, bb float64
		for i := r; i < r+w; i++ {
			a, b := float64(want[i]), float64(got[i])
			maxAbs = math.Max(maxAbs, math.Abs(a-b))
			ab, aa, bb = ab+a*b, aa+a*a, bb+b*b
		}
		minCos = math.Min(minCos, ab/math.Sqrt(aa*bb))
	}
	return maxAbs, minCos
}

// TestBuildPECoreMatchesReference builds the tiny PE-Core models' graphs
// from their open_clip_model.safetensors (OpenCLIP's names: the timm tower
// under visual.trunk., the text tower under text.) and runs them on the
// golden inputs, in one batch of three and one image at a time, with q,
// k, v as three MatMuls (QKVSeparate) and as one MatMul and a Split
// (QKVSplit): the vision tower's last_hidden_state and image_embeds, the
// text tower's token states and text_embeds within 1e-5 of the float64
// transcription of OpenCLIP and timm (make_tiny_pecore.py), every row's
// cosine at least 0.99999. QKVPacked is refused, naming RoPE.
func TestBuildPECoreMatchesReference(t *testing.T) {
	orttest.Load(t)
	for _, tc := range []struct {
		dir    string
		size   int
		cls    bool
		offset float64
		qkv    string
	}{
		{"tinypecore", 32, true, 1, QKVSeparate},
		{"tinypecore-nocls", 48, false, 0, QKVSeparate},
		{"tinypecore", 32, true, 1, QKVSplit},
		{"tinypecore-nocls", 48, false, 0, QKVSplit},
	} {
		t.Run(tc.dir+"/"+tc.qkv, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", tc.dir)
			cfg := tinyPEConfig(tc.size, tc.cls, tc.offset)
			ck, err := OpenOpenCLIPCheckpoint(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			out := t.TempDir()
			if _, err := BuildCLIP(ck, cfg, out, Options{QKV: QKVPacked}); err == nil || !strings.Contains(err.Error(), "RoPE") {
				t.Errorf("QKVPacked: %v; want it refused, naming RoPE", err)
			}
			if _, err := BuildCLIP(ck, cfg, out, Options{QKV: tc.qkv}); err != nil {
				t.Fatal(err)
			}
			if n := countOps(t, filepath.Join(out, filepath.FromSlash(VisionModelFile)), "Split"); n != map[string]int{QKVSeparate: 0, QKVSplit: 2}[tc.qkv] {
				t.Errorf("%s: the vision graph has %d Split nodes, want one a block", tc.qkv, n)
			}
			check := func(what string, want, got []float32, w int) {
				t.Helper()
				d, c := closeTo(want, got, w)
				if !(d <= 1e-5 && c >= 0.99999) {
					t.Errorf("%s: max |diff| %.3g, min cosine %.9f; want within 1e-5, cosine ≥ 0.99999", what, d, c)
				} else {
					t.Logf("%s: max |diff| %.2g, min cosine %.9f", what, d, c)
				}
			}
			vg := filepath.Join(out, filepath.FromSlash(VisionModelFile))
			px := readNPYIn(t, dir, "pixel_values")
			hidden, embeds := floats(t, readNPYIn(t, dir, "last_hidden_state")), floats(t, readNPYIn(t, dir, "image_embeds"))
			got := run(t, vg, []string{"pixel_values"}, []tensorio.Tensor{px}, []string{"last_hidden_state", "image_embeds"})
			check("vision last_hidden_state, batch 3", hidden, got[0], 32)
			check("image_embeds, batch 3", embeds, got[1], 24)
			all := floats(t, px)
			per, hper := len(all)/3, len(hidden)/3
			for i := range 3 {
				one := tensorio.F32([]int{1, 3, tc.size, tc.size}, all[i*per:(i+1)*per])
				got := run(t, vg, []string{"pixel_values"}, []tensorio.Tensor{one}, []string{"last_hidden_state", "image_embeds"})
				check("vision last_hidden_state, batch 1", hidden[i*hper:(i+1)*hper], got[0], 32)
				check("image_embeds, batch 1", embeds[i*24:(i+1)*24], got[1], 24)
			}

			ids := readNPYIn(t, dir, "input_ids")
			ones := make([]int64, ids.NumElements())
			for i := range ones {
				ones[i] = 1
			}
			// OpenCLIP's text tower masks causally only: a mask of ones.
			got = run(t, filepath.Join(out, filepath.FromSlash(TextModelFile)), []string{"input_ids", "attention_mask"},
				[]tensorio.Tensor{ids, tensorio.I64(ids.Shape, ones)}, []string{"last_hidden_state", "text_embeds"})
			check("token states", floats(t, readNPYIn(t, dir, "token_states")), got[0], 32)
			check("text_embeds", floats(t, readNPYIn(t, dir, "text_embeds")), got[1], 24)
		})
	}
}

// TestRopeTables: the caches hold one angle per pair and row (cos² +
// sin² = 1), none for the class rows (cos 1, sin 0), the pairs j < hd/4
// turning with the column and the others with the row, at (c + offset)
// times band 1/10000^(j/(hd/4)).
func TestRopeTables(t *testing.T) {
	const hd, g = 8, 3
	n := hd / 2
	cos, sin := RopeTables(g, g, 1, hd, g, 1)
	if len(cos) != (1+g*g)*n || len(sin) != len(cos) {
		t.Fatalf("%d and %d values, want %d", len(cos), len(sin), (1+g*g)*n)
	}
	for j := range n {
		if cos[j] != 1 || sin[j] != 0 {
			t.Fatalf("class row pair %d: cos %v sin %v, want 1, 0", j, cos[j], sin[j])
		}
	}
	for i := n; i < len(cos); i++ {
		if math.Abs(float64(cos[i]*cos[i]+sin[i]*sin[i])-1) > 1e-6 {
			t.Fatalf("entry %d: cos %v sin %v", i, cos[i], sin[i])
		}
	}
	// Row 1 is the patch (0, 0), row 2 the patch (0, 1), row 4 the patch
	// (1, 0): pair 0 (band 1, the column) has angle 1, 2, 1; pair 2 (band
	// 1, the row) 1, 1, 2; pair 1 (band 1/100, the column) 0.02 at (0, 1).
	for _, c := range []struct {
		row, pair int
		angle     float64
	}{{1, 0, 1}, {2, 0, 2}, {4, 0, 1}, {1, 2, 1}, {2, 2, 1}, {4, 2, 2}, {2, 1, 0.02}, {4, 3, 0.02}} {
		i := c.row*n + c.pair
		if math.Abs(float64(cos[i])-math.Cos(c.angle)) > 1e-7 || math.Abs(float64(sin[i])-math.Sin(c.angle)) > 1e-7 {
			t.Errorf("row %d pair %d: cos %v sin %v, want the angle %v", c.row, c.pair, cos[i], sin[i], c.angle)
		}
	}
}

// countOps returns the number of nodes of type op in the graph file path.
func countOps(t *testing.T, path, op string) int {
	t.Helper()
	m, err := onnxgraph.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	n := 0
	for _, node := range m.Graph.Nodes {
		if node.OpType == op {
			n++
		}
	}
	return n
}
