package graphbuild

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

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
// golden inputs, in one batch of three and one image at a time: the
// vision tower's last_hidden_state and image_embeds, the text tower's
// token states and text_embeds within 1e-5 of the float64 transcription
// of OpenCLIP and timm (make_tiny_pecore.py), every row's cosine at least
// 0.99999.
func TestBuildPECoreMatchesReference(t *testing.T) {
	orttest.Load(t)
	for _, tc := range []struct {
		dir    string
		size   int
		cls    bool
		offset float64
	}{
		{"tinypecore", 32, true, 1},
		{"tinypecore-nocls", 48, false, 0},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", tc.dir)
			cfg := tinyPEConfig(tc.size, tc.cls, tc.offset)
			ck, err := OpenOpenCLIPCheckpoint(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			out := t.TempDir()
			if _, err := BuildCLIP(ck, cfg, out, Options{}); err != nil {
				t.Fatal(err)
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

// TestRopeTablesPairs: in the pairs-split order, a head's columns j and
// j + hd/2 (the checkpoint's pair 2j, 2j+1) turn by one angle (the same
// cos, opposite sins, cos² + sin² = 1), the class rows not at all, and the
// pairs j < hd/4 with the column, the others with the row. pairsSplit
// takes the even dimensions of each head first.
func TestRopeTablesPairs(t *testing.T) {
	const hd, heads, g = 8, 2, 3
	cos, sin := RopeTables(g, g, 1, hd, heads, g, 1)
	d, n := hd*heads, hd/2
	for c := 0; c < d; c++ {
		if cos[c] != 1 || sin[c] != 0 {
			t.Fatalf("class row column %d: cos %v sin %v, want 1, 0", c, cos[c], sin[c])
		}
	}
	for r := 1; r <= g*g; r++ {
		for h := 0; h < heads; h++ {
			for j := 0; j < n; j++ {
				a, b := r*d+h*hd+j, r*d+h*hd+j+n
				if cos[a] != cos[b] || sin[a] != -sin[b] || math.Abs(float64(cos[a]*cos[a]+sin[a]*sin[a])-1) > 1e-6 {
					t.Fatalf("row %d head %d pair %d: cos %v %v, sin %v %v", r, h, j, cos[a], cos[b], sin[a], sin[b])
				}
			}
		}
	}
	// Row 1 is the patch (0, 0), row 2 the patch (0, 1): the same row y,
	// so pairs j ≥ hd/4 (y) are unchanged and the others (x) are not;
	// pair 0's angle is (x + 1)·1 (band 0 is 1).
	for c := 0; c < d; c++ {
		same := cos[1*d+c] == cos[2*d+c]
		if y := c%hd%n >= hd/4; same != y {
			t.Errorf("column %d: patches (0,0) and (0,1) have cos %v and %v", c, cos[1*d+c], cos[2*d+c])
		}
	}
	if want := float32(math.Cos(2)); math.Abs(float64(cos[2*d]-want)) > 1e-7 {
		t.Errorf("patch (0, 1) column 0: cos %v, want cos 2 = %v", cos[2*d], want)
	}
	if got, want := fmt.Sprint(pairsSplit(8, 4)), "[0 2 1 3 4 6 5 7]"; got != want {
		t.Errorf("pairsSplit(8, 4) = %s, want %s", got, want)
	}
}
