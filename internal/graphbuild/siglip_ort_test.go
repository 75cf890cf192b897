package graphbuild

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestBuildTinySiglipMatchesTorch builds testdata/tinysiglip's graphs from
// its model.safetensors in every q, k, v form, runs them in ONNX Runtime on
// the golden inputs and compares each output with torch's (golden/*.npy,
// from generate.py over scripts/pysiglip): within 1e-5 of its largest
// magnitude. The committed torch.onnx.export graphs run beside them on the
// same inputs, for scale, and the built graphs must have the exports'
// inputs and outputs (the vision graph one more: readout_input, the last
// layer's input, compared with make_readout_golden.py's).
func TestBuildTinySiglipMatchesTorch(t *testing.T) {
	orttest.Load(t)
	cfg := readSiglipConfig(t, filepath.Join(tinySiglipDir, "config.json"))
	ck, err := OpenCheckpoint(tinySiglipDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	npy := func(name string) tensorio.Tensor { return readNPYIn(t, tinySiglipDir, name) }
	cases := []struct {
		graph   string
		ins     []string
		in      []tensorio.Tensor
		outs    []string
		golden  []string
		comment string
	}{
		{TextModelFile, []string{"input_ids"}, []tensorio.Tensor{npy("text_input_ids")},
			[]string{"last_hidden_state", "pooler_output"}, []string{"text_last_hidden_state", "text_pooler_output"}, "12 prompts padded with </s> to 64"},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{npy("vision_pixel_values")},
			[]string{"last_hidden_state", "pooler_output"}, []string{"vision_last_hidden_state", "vision_pooler_output"}, "noise and a ramp"},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{npy("embed_pixel_values")},
			[]string{"last_hidden_state", "pooler_output"}, []string{"embed_last_hidden_state", "embed_pooler_output"}, "preprocessed images"},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{npy("readout_pixel_values")},
			[]string{ReadoutInput}, []string{"readout_layer_input"}, "the last layer's input"},
	}
	for _, qkv := range []string{QKVSeparate, QKVSplit, QKVPacked} {
		dir := t.TempDir()
		ws, err := BuildSiglip(ck, cfg, dir, Options{QKV: qkv})
		if err != nil {
			t.Fatalf("%s: %v", qkv, err)
		}
		for _, w := range ws {
			t.Logf("%s: %s: %d nodes, %d bytes", qkv, w.Graph, w.Nodes, w.Bytes)
			built := ioOf(t, w.Path)
			exported := ioOf(t, filepath.Join(tinySiglipDir, filepath.FromSlash(w.Graph)))
			if w.Graph == VisionModelFile {
				exported += "output " + ReadoutInput + " type 1 [batch_size 16 24]\n"
			}
			if built != exported {
				t.Errorf("%s %s: inputs and outputs\n%s\nthe export's:\n%s", qkv, w.Graph, built, exported)
			}
		}
		for _, c := range cases {
			got := run(t, filepath.Join(dir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
			var exported [][]float32 // the export has no readout_input
			if c.outs[0] != ReadoutInput {
				exported = run(t, filepath.Join(tinySiglipDir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
			}
			for i, g := range c.golden {
				want := floats(t, npy(g))
				d, de := relDiff(want, got[i]), "none"
				if exported != nil {
					de = fmt.Sprintf("%.3g", relDiff(want, exported[i]))
				}
				if !(d <= 1e-5) {
					t.Errorf("%s %s (%s): %s differs from torch by %.3g of its largest magnitude (the export: %s)", qkv, c.graph, c.comment, c.outs[i], d, de)
				} else {
					t.Logf("%s %s (%s): %s within %.2g of torch (the export: %s)", qkv, c.graph, c.comment, c.outs[i], d, de)
				}
			}
		}
	}
}

// ioOf describes the inputs and outputs of the graph file path: names,
// element types and dimensions (sizes or symbolic names), one per line.
func ioOf(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	in, out, err := onnxgraph.GraphIO(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b strings.Builder
	for k, vs := range [][]onnxgraph.ValueInfo{in, out} {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s %s type %d %v\n", []string{"input", "output"}[k], v.Name, v.ElemType, v.Shape)
		}
	}
	return b.String()
}

// TestSiglipBadInputs: SigLIP configs that disagree with tinysiglip's
// checkpoint, NaFlex configs without a square position grid and other
// model types are errors that say what is wrong, and nothing is written.
func TestSiglipBadInputs(t *testing.T) {
	good := readSiglipConfig(t, filepath.Join(tinySiglipDir, "config.json"))
	cases := []struct {
		name string
		cfg  func(*SiglipConfig)
		want []string
	}{
		{"projection size", func(c *SiglipConfig) { c.ProjectionSize = 0 },
			[]string{"tensor text_model.head.weight has shape [24 32], the config gives [32 32]"}},
		{"positions", func(c *SiglipConfig) { c.Text.MaxPositions = 16 },
			[]string{"tensor text_model.embeddings.position_embedding.weight has shape [64 32], the config gives [16 32]"}},
		{"image size", func(c *SiglipConfig) { c.Vision.ImageSize = 48 },
			[]string{"tensor vision_model.embeddings.position_embedding.weight has shape [16 24], the config gives [36 24]"}},
		{"vision MLP", func(c *SiglipConfig) { c.Vision.IntermediateSize = 48 },
			[]string{"tensor vision_model.encoder.layers.0.mlp.fc1.weight has shape [64 24], the config gives [48 24]",
				"tensor vision_model.head.mlp.fc1.weight has shape [64 24], the config gives [48 24]"}},
		{"NaFlex without num_patches", func(c *SiglipConfig) { c.ModelType = "siglip2" }, []string{`vision_config.num_patches is 0, expected a square number`}},
		{"NaFlex, not square", func(c *SiglipConfig) { c.ModelType, c.Vision.NumPatches = "siglip2", 15 }, []string{`vision_config.num_patches is 15, expected a square number`}},
		{"num_patches in a siglip config", func(c *SiglipConfig) { c.Vision.NumPatches = 16 }, []string{`vision_config.num_patches 16 in a siglip config`}},
		{"CLIP", func(c *SiglipConfig) { c.ModelType = "clip" }, []string{`model_type "clip": only siglip and siglip2 graphs`}},
		{"activation", func(c *SiglipConfig) { c.Text.HiddenAct = "silu" }, []string{`text_config.hidden_act "silu"`}},
	}
	ck, err := OpenCheckpoint(tinySiglipDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.cfg(&cfg)
			out := t.TempDir()
			_, err := BuildSiglip(ck, cfg, out, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "graphbuild: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if ents, _ := os.ReadDir(filepath.Join(out, "onnx")); len(ents) != 0 {
				t.Errorf("files written despite the error: %v", ents)
			}
		})
	}
	// The CLIP builder refuses a SigLIP checkpoint by its model type.
	if _, err := BuildCLIP(ck, readConfig(t, filepath.Join(tinySiglipDir, "config.json")), t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), `model_type "siglip"`) {
		t.Errorf("BuildCLIP of a SigLIP config: %v", err)
	}
}

// TestSiglipImageRemainder: an image_size that is not a multiple of
// patch_size (So400m: 384 in 14-pixel patches) gives (image_size //
// patch_size)² patches, the pixels left over at the right and bottom
// dropped, as transformers' convolution drops them: tinysiglip built for
// 36 pixels (still a 4×4 grid) gives torch's outputs of the 32-pixel
// golden images whatever the 4 extra rows and columns hold.
func TestSiglipImageRemainder(t *testing.T) {
	orttest.Load(t)
	cfg := readSiglipConfig(t, filepath.Join(tinySiglipDir, "config.json"))
	cfg.Vision.ImageSize = 36
	ck, err := OpenCheckpoint(tinySiglipDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	dir := t.TempDir()
	if _, err := BuildSiglip(ck, cfg, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	px := floats(t, readNPYIn(t, tinySiglipDir, "vision_pixel_values"))
	const n, s, big = 3, 32, 36
	wide := make([]float32, n*3*big*big)
	for i := range wide {
		wide[i] = float32(i%7) - 3 // the extra pixels: anything
	}
	for i := 0; i < n*3; i++ {
		for y := 0; y < s; y++ {
			copy(wide[(i*big+y)*big:(i*big+y)*big+s], px[(i*s+y)*s:(i*s+y+1)*s])
		}
	}
	got := run(t, filepath.Join(dir, filepath.FromSlash(VisionModelFile)), []string{"pixel_values"},
		[]tensorio.Tensor{tensorio.F32([]int{n, 3, big, big}, wide)}, []string{"last_hidden_state", "pooler_output"})
	for i, g := range []string{"vision_last_hidden_state", "vision_pooler_output"} {
		if d := relDiff(floats(t, readNPYIn(t, tinySiglipDir, g)), got[i]); !(d <= 1e-5) {
			t.Errorf("%s differs from torch's by %.3g of its largest magnitude", g, d)
		}
	}
}
