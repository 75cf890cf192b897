package clip_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// siglipReadoutTol bounds |ort − torch| for the SigLIP readouts' rows. They
// are after post_layernorm (values of a few units, as last_hidden_state's),
// computed in float32 by ONNX Runtime against torch's float64: the float32
// rounding of the attention and of two layer norms.
const siglipReadoutTol = 1e-5

// builtTinySiglip opens a copy of the tiny SigLIP without its exported
// graphs, so that Open builds them from model.safetensors (graphs with
// readout_input).
func builtTinySiglip(t *testing.T) *models.Model {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "special_tokens_map.json", "spiece.model", "tokenizer_config.json", "model.safetensors"} {
		copyFile(t, filepath.Join(siglipGraphDir, f), filepath.Join(dir, f))
	}
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Built() || m.Family() != models.SigLIP {
		t.Fatalf("the tiny SigLIP: built %v, family %s; want graphs built from model.safetensors, SigLIP", m.Built(), m.Family())
	}
	return m
}

// TestSiglipReadoutsMatchTorch: every readout of the tiny SigLIP equals
// the torch float64 reference (testdata/tinysiglip/make_readout_golden.py:
// the last layer's attention without residual and MLP, then
// post_layernorm), on the graphs built from its safetensors (which give
// readout_input) and on its torch.onnx export (rewritten in memory to give
// the input of the layer before post_layernorm): every value within
// siglipReadoutTol, every patch's row to a cosine of 0.99999. The raw
// readout leaves Readout nil, and no readout changes last_hidden_state.
func TestSiglipReadoutsMatchTorch(t *testing.T) {
	orttest.Load(t)
	exported, err := models.Open(siglipGraphDir, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if exported.Built() || exported.Family() != models.SigLIP {
		t.Fatalf("the tiny SigLIP's export: built %v, family %s", exported.Built(), exported.Family())
	}
	for name, m := range map[string]*models.Model{"built": builtTinySiglip(t), "exported": exported} {
		t.Run(name, func(t *testing.T) { checkSiglipReadouts(t, m) })
	}
}

func checkSiglipReadouts(t *testing.T, m *models.Model) {
	px := readSiglipGraphGolden(t, "readout_pixel_values")
	pixels, err := px.Float32()
	if err != nil {
		t.Fatal(err)
	}
	n, h, w := px.Shape[0], px.Shape[2], px.Shape[3]
	base, cls := encodeRaw(t, m, pixels, n, h, w)
	if base[0].Tokens != 16 || base[0].Width != 24 || cls != 0 {
		t.Fatalf("last_hidden_state rows [%d %d], %d class rows; want [16 24] and none", base[0].Tokens, base[0].Width, cls)
	}
	for _, kind := range []clip.Readout{clip.ReadoutClearCLIP, clip.ReadoutNACLIP, clip.ReadoutMaskCLIP} {
		t.Run(string(kind), func(t *testing.T) {
			hidden := readoutRows(t, m, kind, pixels, h, w, base)
			if len(hidden) != n*16*24 {
				t.Fatalf("%d readout values; want %d images of 16 rows of 24", len(hidden), n)
			}
			g := readSiglipGraphGolden(t, "readout_"+string(kind)+"_hidden")
			want, ok := g.Data.([]float64)
			if !ok || fmt.Sprint(g.Shape) != "[3 16 24]" {
				t.Fatalf("golden readout_%s_hidden: %s%v, want float64 [3 16 24]", kind, g.DType, g.Shape)
			}
			if len(hidden) != len(want) {
				t.Fatalf("%d values, torch has %d", len(hidden), len(want))
			}
			worst, at, largest := 0.0, 0, 0.0
			gotF := make([]float64, len(hidden))
			for i, v := range hidden {
				gotF[i] = float64(v)
				largest = max(largest, math.Abs(want[i]))
				if d := math.Abs(gotF[i] - want[i]); d > worst || math.IsNaN(d) {
					worst, at = d, i
				}
			}
			c := minCosine(gotF, want, 24)
			t.Logf("%s: max |ort − torch| %.2g (values up to %.2f); min cosine per patch with torch float64 %.12f (1 − cos %.1e)", kind, worst, largest, c, 1-c)
			if worst > siglipReadoutTol || math.IsNaN(worst) {
				t.Errorf("%s: |ort − torch| = %g at %d (ort %g, torch %g), tolerance %g", kind, worst, at, gotF[at], want[at], siglipReadoutTol)
			}
			if c < 0.99999 || math.IsNaN(c) {
				t.Errorf("%s: min cosine per patch with torch %.7f, want ≥ 0.99999", kind, c)
			}
		})
	}
}

// TestSiglipReadoutErrors: a SigLIP vision export with pooler_output alone
// has no encoder output to find the last layer's input from; the error
// says so and names the graph.
func TestSiglipReadoutErrors(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "special_tokens_map.json", "spiece.model", "tokenizer_config.json"} {
		copyFile(t, filepath.Join(siglipGraphDir, f), filepath.Join(dir, f))
	}
	copyFile(t, filepath.Join(siglipGraphDir, "onnx", "text_model.onnx"), filepath.Join(dir, "onnx", "text_model.onnx"))
	copyFile(t, filepath.Join(siglipGraphDir, "onnx", "bad", "vision_no_lhs.onnx"), filepath.Join(dir, "onnx", "vision_model.onnx"))
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = clip.OpenVision(m, clip.VisionOptions{Readout: clip.ReadoutNACLIP})
	if err == nil || !strings.Contains(err.Error(), "vision_model.onnx has no readout_input output") || !strings.Contains(err.Error(), "no last_hidden_state output") {
		t.Errorf("a SigLIP graph without last_hidden_state, readout naclip: %v", err)
	}
}
