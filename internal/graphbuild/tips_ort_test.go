package graphbuild

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

var tinyTipsDir = filepath.Join("..", "..", "testdata", "tinytips")

// readTipsConfig reads a TipsConfig from a config.json, filling in what
// the file leaves out with transformers' Tipsv2TextConfig and
// Tipsv2VisionConfig defaults (the tests' own reading, as readConfig).
func readTipsConfig(t testing.TB, path string) TipsConfig {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type text struct {
		VocabSize      int     `json:"vocab_size"`
		Hidden         int     `json:"hidden_size"`
		Inter          int     `json:"intermediate_size"`
		Layers         int     `json:"num_hidden_layers"`
		Heads          int     `json:"num_attention_heads"`
		MaxPos         int     `json:"max_position_embeddings"`
		Act            string  `json:"hidden_act"`
		Eps            float64 `json:"layer_norm_eps"`
		ScaleSqrtDepth bool    `json:"scale_sqrt_depth"`
		PoolingEps     float64 `json:"pooling_epsilon"`
	}
	type vision struct {
		Hidden      int     `json:"hidden_size"`
		Layers      int     `json:"num_hidden_layers"`
		Heads       int     `json:"num_attention_heads"`
		MLPRatio    float64 `json:"mlp_ratio"`
		Act         string  `json:"hidden_act"`
		Eps         float64 `json:"layer_norm_eps"`
		Image       int     `json:"image_size"`
		Patch       int     `json:"patch_size"`
		Channels    int     `json:"num_channels"`
		QKVBias     bool    `json:"qkv_bias"`
		SwiGLU      bool    `json:"use_swiglu_ffn"`
		Registers   int     `json:"num_register_tokens"`
		Antialias   bool    `json:"interpolate_antialias"`
		InterpOffet float64 `json:"interpolate_offset"`
	}
	raw := struct {
		ModelType   string   `json:"model_type"`
		Temperature *float64 `json:"temperature"`
		TempInit    *float64 `json:"temperature_init_value"`
		Text        text     `json:"text_config"`
		Vision      vision   `json:"vision_config"`
	}{
		Text: text{VocabSize: 32000, Hidden: 768, Inter: 3072, Layers: 12, Heads: 12, MaxPos: 64, Act: "relu", Eps: 1e-5,
			ScaleSqrtDepth: true, PoolingEps: 1e-8},
		Vision: vision{Hidden: 768, Layers: 12, Heads: 12, MLPRatio: 4, Act: "gelu", Eps: 1e-6, Image: 448, Patch: 14,
			Channels: 3, QKVBias: true, Registers: 1, Antialias: true},
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	temp := 0.01
	if raw.Temperature != nil {
		temp = *raw.Temperature
	} else if raw.TempInit != nil {
		temp = *raw.TempInit
	}
	tc, vc := raw.Text, raw.Vision
	return TipsConfig{ModelType: raw.ModelType, Temperature: temp, ScaleSqrtDepth: tc.ScaleSqrtDepth, PoolingEpsilon: tc.PoolingEps,
		Text: TextConfig{VocabSize: tc.VocabSize, HiddenSize: tc.Hidden, IntermediateSize: tc.Inter, Layers: tc.Layers,
			Heads: tc.Heads, MaxPositions: tc.MaxPos, HiddenAct: tc.Act, LayerNormEps: tc.Eps},
		Vision: TipsVisionConfig{HiddenSize: vc.Hidden, Layers: vc.Layers, Heads: vc.Heads, MLPRatio: vc.MLPRatio,
			HiddenAct: vc.Act, LayerNormEps: vc.Eps, ImageSize: vc.Image, PatchSize: vc.Patch, Channels: vc.Channels,
			QKVBias: vc.QKVBias, UseSwiGLU: vc.SwiGLU, Registers: vc.Registers, InterpolateAntialias: vc.Antialias,
			InterpolateOffset: vc.InterpOffet}}
}

// tipsImages are testdata/tinytips' image sets: the golden prefix and the
// pixel height and width (the position grid is 4x4 patches of 4 pixels).
var tipsImages = []struct {
	name   string
	h, w   int
	resize bool
}{
	{"vision", 16, 16, false}, // the grid's own size: the table as it is
	{"wide", 24, 20, true},    // 6x5 patches: upscaled, not square
	{"small", 14, 9, true},    // 3x2 patches (remainder pixels dropped): downscaled, antialiased
}

// TestBuildTinyTipsMatchesTorch builds testdata/tinytips' graphs (TIPSv2:
// two register tokens, layer scale, a 4x4 position grid) from its
// model.safetensors in every q, k, v form, the vision graph at three pixel
// sizes, runs them in ONNX Runtime on the golden inputs and compares each
// output with torch's (golden/*.npy, from generate.py over
// scripts/pytips/tips.py): within 1e-5 of its largest magnitude. The
// positions resized for the other grids equal torch's bit for bit. The
// text graph runs at the table's 16 positions and at 7, with padded
// prompts; the pooled output depends on the mask.
//
// testdata/tinytips/swiglu is the same test on a model with the SwiGLU
// MLP (use_swiglu_ffn, the g14 size's).
func TestBuildTinyTipsMatchesTorch(t *testing.T) {
	orttest.Load(t)
	t.Run("mlp", func(t *testing.T) { testTinyTips(t, tinyTipsDir, false) })
	t.Run("swiglu", func(t *testing.T) { testTinyTips(t, filepath.Join(tinyTipsDir, "swiglu"), true) })
}

func testTinyTips(t *testing.T, dir string, swiglu bool) {
	cfg := readTipsConfig(t, filepath.Join(dir, "config.json"))
	if cfg.ModelType != "tipsv2" || cfg.Vision.Registers != 2 || cfg.Vision.intermediate() != 56 || cfg.Temperature != 0.01 ||
		cfg.Vision.UseSwiGLU != swiglu || swiglu && cfg.Vision.swigluWidth() != 40 {
		t.Fatalf("config %+v", cfg)
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	npy := func(name string) tensorio.Tensor { return readNPYIn(t, dir, name) }

	for _, im := range tipsImages {
		c := cfg
		c.Height, c.Width = im.h, im.w
		if c.resized() != im.resize {
			t.Errorf("%s: resized() = %v", im.name, c.resized())
		}
		pos, err := tipsPositions(ck, c)
		if err != nil {
			t.Fatal(err)
		}
		want := floats(t, npy(im.name+"_positions"))[cfg.Vision.HiddenSize:] // without the class row
		if len(pos) != len(want) {
			t.Fatalf("%s: %d position values, torch %d", im.name, len(pos), len(want))
		}
		for i := range want {
			if mathFloat32bits(pos[i]) != mathFloat32bits(want[i]) {
				t.Fatalf("%s: position value %d is %g, torch %g", im.name, i, pos[i], want[i])
			}
		}
	}

	textIns := []string{"input_ids", "attention_mask"}
	textOuts := []string{"last_hidden_state", "text_embeds"}
	visionOuts := []string{"last_hidden_state", "image_embeds", "patch_embeds"}
	worst := map[string]float64{}
	for _, qkv := range []string{QKVSeparate, QKVSplit, QKVPacked} {
		for _, im := range tipsImages {
			c := cfg
			c.Height, c.Width = im.h, im.w
			dir := t.TempDir()
			ws, err := BuildTips(ck, c, dir, Options{QKV: qkv})
			if err != nil {
				t.Fatalf("%s %s: %v", qkv, im.name, err)
			}
			for _, w := range ws {
				t.Logf("%s %s: %s: %d nodes, %d bytes", qkv, im.name, w.Graph, w.Nodes, w.Bytes)
			}
			vp := filepath.Join(dir, filepath.FromSlash(VisionModelFile))
			seq := 1 + 2 + (im.h/4)*(im.w/4)
			for _, s := range []string{
				fmt.Sprintf("input pixel_values type 1 [batch 3 %d %d]", im.h, im.w),
				fmt.Sprintf("output last_hidden_state type 1 [batch %d 32]", seq),
				"output image_embeds type 1 [batch 32]",
				fmt.Sprintf("output patch_embeds type 1 [batch %d 32]", seq-3),
			} {
				if io := ioOf(t, vp); !strings.Contains(io, s) {
					t.Errorf("%s %s: vision graph interface lacks %q\n%s", qkv, im.name, s, io)
				}
			}
			type check struct {
				path      string
				ins, outs []string
				in        []tensorio.Tensor
				golden    []string
			}
			checks := []check{{vp, []string{"pixel_values"}, visionOuts, []tensorio.Tensor{npy(im.name + "_pixel_values")},
				[]string{im.name + "_last_hidden_state", im.name + "_pooled", im.name + "_patch_embeds"}}}
			if im.name == "vision" { // one text graph per q, k, v form
				tp := filepath.Join(dir, filepath.FromSlash(TextModelFile))
				if io := ioOf(t, tp); !strings.Contains(io, "input input_ids type 7 [batch sequence]") ||
					!strings.Contains(io, "input attention_mask type 7 [batch sequence]") ||
					!strings.Contains(io, "output text_embeds type 1 [batch 32]") {
					t.Errorf("%s: text graph interface\n%s", qkv, io)
				}
				for _, s := range []string{"text", "short"} {
					checks = append(checks, check{tp, textIns, textOuts,
						[]tensorio.Tensor{npy(s + "_input_ids"), npy(s + "_attention_mask")},
						[]string{s + "_last_hidden_state", s + "_pooled"}})
				}
			}
			for _, k := range checks {
				got := run(t, k.path, k.ins, k.in, k.outs)
				for i, g := range k.golden {
					d := relDiff(floats(t, npy(g)), got[i])
					if !(d <= 1e-5) {
						t.Errorf("%s: %s differs from torch's %s by %.3g of its largest magnitude", qkv, k.outs[i], g, d)
					} else {
						t.Logf("%s: %s within %.2g of torch's %s", qkv, k.outs[i], d, g)
					}
					if !(d <= worst[g]) {
						worst[g] = d
					}
				}
			}
			if qkv == QKVSeparate {
				testTipsValues(t, ck, cfg, vp, im.name, npy(im.name+"_pixel_values"), im.h/4, im.w/4, npy)
			}
			if im.name == "vision" {
				// Unmasked, the pooled text differs: the mask is used.
				ids := npy("text_input_ids")
				ones := make([]int64, 3*16)
				for i := range ones {
					ones[i] = 1
				}
				got := run(t, filepath.Join(dir, filepath.FromSlash(TextModelFile)), textIns,
					[]tensorio.Tensor{ids, tensorio.I64([]int{3, 16}, ones)}, []string{"text_embeds"})
				if d := relDiff(floats(t, npy("text_pooled")), got[0]); d < 1e-3 {
					t.Errorf("%s: without the mask text_embeds is within %.3g of the masked one", qkv, d)
				}
			}
		}
	}
	names := make([]string, 0, len(worst))
	for g := range worst {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		t.Logf("largest difference from torch over the q, k, v forms: %s %.2g", g, worst[g])
	}
}

// TestTipsBadInputs: TIPSv2 configs that cannot be built and checkpoints
// that disagree with the config are errors that say what is wrong, and
// nothing is written.
func TestTipsBadInputs(t *testing.T) {
	good := readTipsConfig(t, filepath.Join(tinyTipsDir, "config.json"))
	tensors := func(t *testing.T) map[string]tensorio.Tensor {
		ts, _, err := tensorio.ReadSafetensors(filepath.Join(tinyTipsDir, SafetensorsFile))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	cases := []struct {
		name string
		cfg  func(*TipsConfig)
		dir  func(t *testing.T, dir string)
		want []string
	}{
		{name: "widths differ", cfg: func(c *TipsConfig) { c.Text.HiddenSize = 24; c.Text.Heads = 4 },
			want: []string{"text_config.hidden_size 24 and vision_config.hidden_size 32 differ"}},
		{name: "model type", cfg: func(c *TipsConfig) { c.ModelType = "clip" }, want: []string{`model_type "clip"`}},
		{name: "swiglu", cfg: func(c *TipsConfig) { c.Vision.UseSwiGLU = true },
			want: []string{"tensor vision_model.encoder.layer.0.mlp.weights_in.weight is missing (expected shape [80 32])"}},
		{name: "mlp ratio zero", cfg: func(c *TipsConfig) { c.Vision.MLPRatio = 0 }, want: []string{"vision_config.mlp_ratio is 0"}},
		{name: "no qkv bias", cfg: func(c *TipsConfig) { c.Vision.QKVBias = false }, want: []string{"qkv_bias is false"}},
		{name: "text activation", cfg: func(c *TipsConfig) { c.Text.HiddenAct = "silu" }, want: []string{`text_config.hidden_act "silu"`}},
		{name: "resize without antialias", cfg: func(c *TipsConfig) { c.Vision.InterpolateAntialias = false; c.Height = 24 },
			want: []string{"interpolate_antialias is false", "24x16 image"}},
		{name: "resize with an offset off the grid", cfg: func(c *TipsConfig) { c.Vision.InterpolateOffset = -0.5; c.Width = 8 },
			want: []string{"interpolate_offset is -0.5", "becomes 3x1, not the 4x2 patches of a 16x8 image"}},
		{name: "too small", cfg: func(c *TipsConfig) { c.Height = 3 }, want: []string{"pixel size 3x16 is smaller than patch_size 4"}},
		{name: "registers", cfg: func(c *TipsConfig) { c.Vision.Registers = 1 },
			want: []string{"tensor vision_model.embeddings.register_tokens has shape [1 2 32], the config gives [1 1 32]"}},
		{name: "mlp ratio", cfg: func(c *TipsConfig) { c.Vision.MLPRatio = 2 },
			want: []string{"tensor vision_model.encoder.layer.0.mlp.fc1.weight has shape [56 32], the config gives [64 32]"}},
		{name: "missing layer scale", dir: func(t *testing.T, dir string) {
			ts := tensors(t)
			delete(ts, "vision_model.encoder.layer.1.layer_scale2.lambda1")
			writeCheckpoint(t, dir, ts)
		}, want: []string{"tensor vision_model.encoder.layer.1.layer_scale2.lambda1 is missing (expected shape [32])"}},
		{name: "narrower text tower", dir: func(t *testing.T, dir string) {
			ts := tensors(t)
			ts["text_model.final_layer_norm.weight"] = tensorio.F32([]int{24}, make([]float32, 24))
			writeCheckpoint(t, dir, ts)
		}, want: []string{"tensor text_model.final_layer_norm.weight has shape [24], the config gives [32]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			dir := tinyTipsDir
			if c.dir != nil {
				dir = t.TempDir()
				c.dir(t, dir)
			}
			ck, err := OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			out := t.TempDir()
			_, err = BuildTips(ck, cfg, out, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			t.Log(err)
			if !strings.HasPrefix(err.Error(), "graphbuild: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if c.dir == nil {
				if cerr := CheckTipsConfig(cfg); (cerr == nil) != strings.Contains(err.Error(), "does not match the config") {
					t.Errorf("CheckTipsConfig: %v, BuildTips: %v", cerr, err)
				}
			}
			if cerr := CheckTips(ck, cfg, Options{}); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckTips: %v, BuildTips: %v", cerr, err)
			}
			ents, _ := os.ReadDir(filepath.Join(out, "onnx"))
			if len(ents) != 0 {
				t.Errorf("files written despite the error: %v", ents)
			}
		})
	}
}

// realSizeTips is TestBuildRealSize for a TIPSv2 folder (made by
// scripts/bench_models/make_tips.py): it builds the graphs at image_size
// and the vision graph again at the size of CONDITION_BENCH_GOLDEN's
// resized_pixel_values, and compares every output with torch's
// (scripts/graphbuild/torch_golden.py) within 1e-5 of its largest
// magnitude, and the resized positions bit for bit.
func realSizeTips(t *testing.T, dir string, ck *Checkpoint, out string, opts Options) {
	golden := os.Getenv("CONDITION_BENCH_GOLDEN")
	if golden == "" {
		t.Fatalf("%s is a TIPSv2 folder: CONDITION_BENCH_GOLDEN must name torch's outputs (scripts/graphbuild/torch_golden.py)", dir)
	}
	npy := func(name string) tensorio.Tensor {
		x, err := tensorio.ReadNPY(filepath.Join(golden, name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	cfg := readTipsConfig(t, filepath.Join(dir, "config.json"))
	rpx := npy("resized_pixel_values")
	rc := cfg
	rc.Height, rc.Width = rpx.Shape[2], rpx.Shape[3]
	pos, err := tipsPositions(ck, rc)
	if err != nil {
		t.Fatal(err)
	}
	want := floats(t, npy("resized_positions"))[cfg.Vision.HiddenSize:]
	same := len(pos) == len(want)
	for i := 0; same && i < len(want); i++ {
		same = mathFloat32bits(pos[i]) == mathFloat32bits(want[i])
	}
	if !same {
		t.Errorf("positions resized to %dx%d pixels differ from torch's (largest difference %.3g of its largest magnitude)", rc.Height, rc.Width, relDiff(want, pos))
	} else {
		t.Logf("positions resized to %dx%d pixels: torch's, bit for bit", rc.Height, rc.Width)
	}
	vouts := []string{"last_hidden_state", "image_embeds", "patch_embeds"}
	for _, b := range []struct {
		cfg     TipsConfig
		out     string
		graphs  []string
		ins     [][]string
		in      [][]tensorio.Tensor
		outs    [][]string
		goldens [][]string
	}{
		{cfg, out, []string{TextModelFile, VisionModelFile},
			[][]string{{"input_ids", "attention_mask"}, {"pixel_values"}},
			[][]tensorio.Tensor{{npy("input_ids"), npy("attention_mask")}, {npy("pixel_values")}},
			[][]string{{"last_hidden_state", "text_embeds"}, vouts},
			[][]string{{"text_last_hidden_state", "text_embeds"}, {"vision_last_hidden_state", "image_embeds", "patch_embeds"}}},
		{rc, filepath.Join(out, "resized"), []string{VisionModelFile}, [][]string{{"pixel_values"}}, [][]tensorio.Tensor{{rpx}},
			[][]string{vouts}, [][]string{{"resized_vision_last_hidden_state", "resized_image_embeds", "resized_patch_embeds"}}},
	} {
		start := time.Now()
		ws, err := BuildTips(ck, b.cfg, b.out, opts)
		if err != nil {
			t.Fatal(err)
		}
		h, w := b.cfg.size()
		t.Logf("built %d graphs (vision %dx%d) from %.1f MB in %.2f s", len(ws), h, w, float64(ck.Size())/1e6, time.Since(start).Seconds())
		for i, graph := range b.graphs {
			got := run(t, filepath.Join(b.out, filepath.FromSlash(graph)), b.ins[i], b.in[i], b.outs[i])
			for j, g := range b.goldens[i] {
				if d := relDiff(floats(t, npy(g)), got[j]); !(d <= 1e-5) {
					t.Errorf("%s: %s differs from torch's %s by %.3g of its largest magnitude", graph, b.outs[i][j], g, d)
				} else {
					t.Logf("%s: %s within %.2g of torch's %s", graph, b.outs[i][j], d, g)
				}
			}
		}
	}
}

// testTipsValues runs the maskclip readout of a DINOv2 block
// (ReadoutConfig.Dino) on the vision graph vp's readout_input for the
// pixels px (a gh×gw grid) and compares its patch rows with torch's
// value-attention readout (S_values_patch_embeds); the raw patch rows
// are far from them, so the comparison tells the readout from the tower.
func testTipsValues(t *testing.T, ck *Checkpoint, cfg TipsConfig, vp, name string, px tensorio.Tensor, gh, gw int, npy func(string) tensorio.Tensor) {
	t.Helper()
	v := cfg.Vision
	c := ReadoutConfig{Kind: ReadoutMaskCLIP, Width: v.HiddenSize, Heads: v.Heads, Eps: v.LayerNormEps,
		Class: 1 + v.Registers, GridH: gh, GridW: gw, Prefix: fmt.Sprintf("vision_model.encoder.layer.%d.", v.Layers-1),
		Dino: &DinoBlock{Inter: v.intermediate(), SwiGLU: v.UseSwiGLU, Act: v.HiddenAct, Norm: "vision_model.layernorm", NormEps: v.LayerNormEps}}
	for n, dims := range c.ReadoutTensors() {
		info, ok := ck.Info(n)
		if !ok || fmt.Sprint(info.Shape) != fmt.Sprint(dims) {
			t.Errorf("%s: readout tensor %s %v: checkpoint has %v (%v)", name, n, dims, info.Shape, ok)
		}
	}
	g, err := ReadoutGraph(c, ck.Float32)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rp := filepath.Join(t.TempDir(), "readout.onnx")
	if err := os.WriteFile(rp, g, 0o644); err != nil {
		t.Fatal(err)
	}
	in := run(t, vp, []string{"pixel_values"}, []tensorio.Tensor{px}, []string{ReadoutInput})[0]
	seq := 1 + v.Registers + gh*gw
	b := len(in) / (seq * v.HiddenSize)
	out := run(t, rp, []string{ReadoutInput}, []tensorio.Tensor{tensorio.F32([]int{b, seq, v.HiddenSize}, in)}, []string{ReadoutOutput})[0]
	var patches []float32
	for i := range b {
		patches = append(patches, out[(i*seq+1+v.Registers)*v.HiddenSize:(i+1)*seq*v.HiddenSize]...)
	}
	want := floats(t, npy(name+"_values_patch_embeds"))
	if d := relDiff(want, patches); !(d <= 1e-5) {
		t.Errorf("%s: the maskclip readout's patch rows differ from torch's value attention by %.3g of its largest magnitude", name, d)
	} else {
		t.Logf("%s: maskclip readout within %.2g of torch's value attention", name, d)
	}
	if d := relDiff(floats(t, npy(name+"_patch_embeds")), patches); !(d > 1e-2) {
		t.Errorf("%s: the maskclip readout is within %.3g of the raw patch rows", name, d)
	}
}
