package clip_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// builtTiny opens a copy of the tiny CLIP without its exported graphs, so
// that Open builds them from model.safetensors (graphs with readout_input).
func builtTiny(t *testing.T) *models.Model {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		copyFile(t, filepath.Join(tinyclip, f), filepath.Join(dir, f))
	}
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Built() {
		t.Fatal("the tiny model's graphs were not built from model.safetensors")
	}
	return m
}

// goldenF64 reads a float64 golden as float64s.
func goldenF64(t *testing.T, name string) ([]float64, []int) {
	t.Helper()
	g := readGolden(t, name)
	v, ok := g.Data.([]float64)
	if !ok {
		t.Fatalf("%s: %s, want float64", name, g.DType)
	}
	return v, g.Shape
}

// jointPatches is a float64 transcription of the joint space's patch side:
// post_layernorm on the patch rows of hidden [n, S, d], visual_projection,
// L2-normalised: [n, S−1, D].
func jointPatches(t *testing.T, m *models.Model, hidden []float32, n, s, d int) []float64 {
	t.Helper()
	ts, err := m.ReadWeights("vision_model.post_layernorm.weight", "vision_model.post_layernorm.bias", "visual_projection.weight")
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string) []float32 {
		v, err := ts[name].Float32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	g, b, proj := f("vision_model.post_layernorm.weight"), f("vision_model.post_layernorm.bias"), f("visual_projection.weight")
	dp := len(proj) / d
	eps := m.Config().VisionConfig.LayerNormEps
	var out []float64
	ln := make([]float64, d)
	for i := range n {
		for r := 1; r < s; r++ {
			x := hidden[(i*s+r)*d : (i*s+r+1)*d]
			mean, vr := 0.0, 0.0
			for _, v := range x {
				mean += float64(v)
			}
			mean /= float64(d)
			for _, v := range x {
				vr += (float64(v) - mean) * (float64(v) - mean)
			}
			vr /= float64(d)
			for k, v := range x {
				ln[k] = (float64(v)-mean)/math.Sqrt(vr+eps)*float64(g[k]) + float64(b[k])
			}
			row := make([]float64, dp)
			norm := 0.0
			for o := range dp {
				for k := range d {
					row[o] += ln[k] * float64(proj[o*d+k])
				}
				norm += row[o] * row[o]
			}
			for o := range row {
				row[o] /= math.Sqrt(norm)
			}
			out = append(out, row...)
		}
	}
	return out
}

// minCosine returns the least cosine between the rows of width w of a and
// b (rows of unit length).
func minCosine(a, b []float64, w int) float64 {
	least := 1.0
	for i := 0; i+w <= len(a); i += w {
		dot, na, nb := 0.0, 0.0, 0.0
		for k := range w {
			dot += a[i+k] * b[i+k]
			na += a[i+k] * a[i+k]
			nb += b[i+k] * b[i+k]
		}
		least = min(least, dot/math.Sqrt(na*nb))
	}
	return least
}

// TestReadoutsMatchTorch: every readout of the tiny CLIP equals the torch
// float64 transcription of the methods' published code
// (testdata/tinyclip/make_readout_golden.py), on the graphs built from its
// safetensors (which give readout_input) and on its torch.onnx export
// (rewritten in memory to give it): the recomputed hidden states within
// 1e-5, the joint-space patch vectors to a cosine of 0.99999; the raw
// readout leaves Readout nil and States as they were.
func TestReadoutsMatchTorch(t *testing.T) {
	orttest.Load(t)
	exported, err := models.Open(tinyclip, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if exported.Built() {
		t.Fatal("the tiny model's exported graphs were not used")
	}
	// The export mapped (its weights in a file beside it, as the engine runs
	// real-size graphs): the rewrite is written beside the mapped copy,
	// once.
	mapped, err := models.Open(tinyclip, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if mg, err := mapped.MapGraphs(0); err != nil || len(mg) != 2 {
		t.Fatalf("MapGraphs: %v, %v", mg, err)
	}
	for name, m := range map[string]*models.Model{"built": builtTiny(t), "exported": exported, "mapped": mapped} {
		t.Run(name, func(t *testing.T) { checkReadouts(t, m) })
	}
	beside := strings.TrimSuffix(mapped.Path(models.VisionModelFile), ".onnx") + ".readout.onnx"
	st, err := os.Stat(beside)
	if err != nil {
		t.Fatalf("no rewrite beside the mapped graph: %v", err)
	}
	again, err := clip.OpenVision(mapped, clip.VisionOptions{Readout: clip.ReadoutMaskCLIP})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if st2, err := os.Stat(beside); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("the rewrite beside the mapped graph was written again: %v", err)
	}
}

func checkReadouts(t *testing.T, m *models.Model) {
	px := readGolden(t, "vision_pixel_values")
	pixels, err := px.Float32()
	if err != nil {
		t.Fatal(err)
	}
	n, h, w := px.Shape[0], px.Shape[2], px.Shape[3]
	base, _ := encodeRaw(t, m, pixels, n, h, w)
	s, d := base[0].Tokens, base[0].Width
	var states []float32
	for _, e := range base {
		states = append(states, e.States...)
	}
	want, _ := goldenF64(t, "readout_raw_patch_embeds")
	if c := minCosine(jointPatches(t, m, states, n, s, d), want, 16); c < 0.99999 {
		t.Errorf("raw: min cosine with torch %.7f, want ≥ 0.99999", c)
	}
	for _, kind := range []clip.Readout{clip.ReadoutClearCLIP, clip.ReadoutNACLIP, clip.ReadoutMaskCLIP} {
		t.Run(string(kind), func(t *testing.T) {
			hidden := readoutRows(t, m, kind, pixels, h, w, base)
			wantH, _ := goldenF64(t, "readout_"+string(kind)+"_hidden")
			wh := make([]float32, len(wantH))
			for i, v := range wantH {
				wh[i] = float32(v)
			}
			closeWithin(t, string(kind)+" hidden", hidden, wh, 1e-5)
			want, _ := goldenF64(t, "readout_"+string(kind)+"_patch_embeds")
			c := minCosine(jointPatches(t, m, hidden, n, s, d), want, 16)
			t.Logf("%s: min cosine per patch with torch float64 %.9f", kind, c)
			if c < 0.99999 {
				t.Errorf("%s: min cosine with torch %.7f, want ≥ 0.99999", kind, c)
			}
		})
	}
}

// encodeRaw encodes pixels [n, 3, h, w] with m's vision encoder under the
// raw readout, which gives no Readout rows; it returns the encodings and
// the encoder's class-token rows.
func encodeRaw(t *testing.T, m *models.Model, pixels []float32, n, h, w int) ([]clip.VisionEncoding, int) {
	t.Helper()
	raw, err := clip.OpenVision(m, clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	base, err := raw.Encode(context.Background(), pixels, n, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if base[0].Readout != nil {
		t.Error("the raw readout gives Readout rows")
	}
	return base, raw.ClassTokens()
}

// readoutRows encodes the same pixels as base (encodeRaw's) under readout
// kind and returns every image's Readout rows, one after the other; a
// readout that changes last_hidden_state fails t.
func readoutRows(t *testing.T, m *models.Model, kind clip.Readout, pixels []float32, h, w int, base []clip.VisionEncoding) []float32 {
	t.Helper()
	enc, err := clip.OpenVision(m, clip.VisionOptions{Threads: 1, Readout: kind})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	got, err := enc.Encode(context.Background(), pixels, len(base), h, w)
	if err != nil {
		t.Fatal(err)
	}
	var rows []float32
	for i, e := range got {
		if !slices.Equal(e.States, base[i].States) {
			t.Fatalf("image %d: readout %s changed last_hidden_state", i, kind)
		}
		rows = append(rows, e.Readout...)
	}
	return rows
}

// TestReadoutErrors: an unknown readout names the readouts; a graph
// whose last layer cannot be found says so, naming the graph and
// model.safetensors; a graph held in memory has no weights for one.
func TestReadoutErrors(t *testing.T) {
	orttest.Load(t)
	if _, err := clip.ParseReadout("dense"); err == nil || !strings.Contains(err.Error(), "clearclip, naclip, maskclip, raw") {
		t.Errorf("ParseReadout(dense) = %v", err)
	}
	m := builtTiny(t)
	if _, err := clip.OpenVision(m, clip.VisionOptions{Readout: "dense"}); err == nil || !strings.Contains(err.Error(), `readout "dense"`) {
		t.Errorf("OpenVision with readout dense: %v", err)
	}
	// The export with its attention's Softmax made a Hardmax: no last layer.
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"} {
		copyFile(t, filepath.Join(tinyclip, f), filepath.Join(dir, f))
	}
	g, err := os.ReadFile(filepath.Join(tinyclip, "onnx", "vision_model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.ReplaceAll(g, []byte("Softmax"), []byte("Hardmax"))
	if bytes.Equal(bad, g) {
		t.Fatal("no Softmax in the export")
	}
	copyFile(t, filepath.Join(tinyclip, "onnx", "text_model.onnx"), filepath.Join(dir, "onnx", "text_model.onnx"))
	if err := os.WriteFile(filepath.Join(dir, "onnx", "vision_model.onnx"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	nosafe, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = clip.OpenVision(nosafe, clip.VisionOptions{Readout: clip.ReadoutClearCLIP})
	if err == nil || !strings.Contains(err.Error(), "vision_model.onnx has no readout_input output") || !strings.Contains(err.Error(), "nor has the model a model.safetensors") {
		t.Errorf("a graph without a recognisable last layer, no model.safetensors: %v", err)
	}
	// The export as it is, without model.safetensors: the last layer is
	// found, its weights are not; the error says so in the library's terms.
	copyFile(t, filepath.Join(tinyclip, "onnx", "vision_model.onnx"), filepath.Join(dir, "onnx", "vision_model.onnx"))
	noweights, err := models.Open(dir, models.Options{DerivedCache: t.TempDir(), NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = clip.OpenVision(noweights, clip.VisionOptions{Readout: clip.ReadoutNACLIP})
	if !errors.Is(err, clip.ErrReadoutWeights) || !strings.Contains(err.Error(), "readout raw") || strings.Contains(err.Error(), "--") {
		t.Errorf("readout naclip without model.safetensors: %v, want ErrReadoutWeights naming readout raw and no flag", err)
	}
	if _, err := clip.NewVision(g, "vision_model.onnx", clip.VisionOptions{Readout: clip.ReadoutNACLIP}); err == nil || !strings.Contains(err.Error(), "OpenVision") {
		t.Errorf("NewVision with a readout: %v", err)
	}
}
