package models_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

const tinyOpenCLIP = "../testdata/tinyopenclip"

// openCLIPFolder copies testdata/tinyopenclip's files into a temporary
// folder, open_clip_config.json changed by edit when it is not nil.
func openCLIPFolder(t *testing.T, edit func(cfg map[string]any)) string {
	t.Helper()
	return openCLIPCopy(t, tinyOpenCLIP, edit)
}

// openCLIPCopy copies the OpenCLIP folder src as openCLIPFolder does.
func openCLIPCopy(t *testing.T, src string, edit func(cfg map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"open_clip_config.json", "open_clip_model.safetensors", "vocab.json", "merges.txt", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "open_clip_config.json" && edit != nil {
			var cfg map[string]any
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			edit(cfg)
			if b, err = json.Marshal(cfg); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func towerCfg(cfg map[string]any, tower string) map[string]any {
	return cfg["model_cfg"].(map[string]any)[tower].(map[string]any)
}

// preprocessor is what TestOpenCLIPConfig reads of a preprocessor_config.json.
type preprocessor struct {
	Resample     int            `json:"resample"`
	DoCenterCrop bool           `json:"do_center_crop"`
	Size         map[string]int `json:"size"`
	Crop         map[string]int `json:"crop_size"`
	Mean         []float64      `json:"image_mean"`
	Std          []float64      `json:"image_std"`
}

// TestOpenCLIPConfig: open_clip_config.json becomes a CLIPConfig (widths,
// heads from head_width, MLP widths from mlp_ratio, context_length, GELU
// without quick_gelu, the end of text the vocabulary's last id) and
// OpenCLIP's default transform with its preprocess_cfg's mean and std.
func TestOpenCLIPConfig(t *testing.T) {
	m, err := models.Open(openCLIPFolder(t, nil), models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	v, tc := c.VisionConfig, c.TextConfig
	if !m.OpenCLIP() || m.Family() != models.CLIP || c.ProjectionDim != 24 || v.HiddenSize != 32 || v.NumAttentionHeads != 2 ||
		v.IntermediateSize != 128 || v.NumHiddenLayers != 2 || v.ImageSize != 32 || v.PatchSize != 8 || v.HiddenAct != "gelu" ||
		tc.HiddenSize != 32 || tc.NumAttentionHeads != 2 || tc.MaxPositionEmbeddings != 16 || tc.VocabSize != 594 ||
		tc.EosTokenID != 593 || tc.HiddenAct != "gelu" || tc.IntermediateSize != 128 {
		t.Errorf("config %+v", c)
	}
	b, err := m.ReadFile(models.PreprocessorFile)
	if err != nil {
		t.Fatal(err)
	}
	var p preprocessor
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.Resample != 3 || !p.DoCenterCrop || p.Size["shortest_edge"] != 32 || p.Crop["height"] != 32 || p.Mean[1] != 0.4 || p.Std[2] != 0.3 {
		t.Errorf("preprocessor %+v", p)
	}
	q, err := models.Open(openCLIPFolder(t, func(cfg map[string]any) {
		cfg["model_cfg"].(map[string]any)["quick_gelu"] = true
		cfg["preprocess_cfg"] = map[string]any{"resize_mode": "squash", "interpolation": "bilinear"}
	}), models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if q.Config().VisionConfig.HiddenAct != "quick_gelu" || q.Config().TextConfig.HiddenAct != "quick_gelu" {
		t.Errorf("quick_gelu: %+v", q.Config())
	}
	b, _ = q.ReadFile(models.PreprocessorFile)
	p = preprocessor{}
	if err := json.Unmarshal(b, &p); err != nil || p.Resample != 2 || p.DoCenterCrop || p.Size["height"] != 32 || p.Mean[0] != 0.48145466 {
		t.Errorf("squash, bilinear: %+v, %v", p, err)
	}
}

// TestOpenCLIPRefused: a pickled checkpoint, towers this program does not
// build and an unknown transform are refused, naming the file or field.
func TestOpenCLIPRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(cfg map[string]any)
		want string
	}{
		{"timm", func(c map[string]any) { towerCfg(c, "vision_cfg")["timm_model_name"] = "vit_base_patch16_224" }, `vision_cfg.timm_model_name is "vit_base_patch16_224": a timm tower`},
		{"hf text", func(c map[string]any) { towerCfg(c, "text_cfg")["hf_model_name"] = "xlm-roberta-base" }, `text_cfg.hf_model_name is "xlm-roberta-base": a hf tower`},
		{"layer scale", func(c map[string]any) { towerCfg(c, "vision_cfg")["ls_init_value"] = 0.1 }, "vision_cfg.ls_init_value is 0.1"},
		{"attention pooling", func(c map[string]any) { towerCfg(c, "vision_cfg")["attentional_pool"] = true }, "vision_cfg.attentional_pool is true"},
		{"rope", func(c map[string]any) { towerCfg(c, "vision_cfg")["use_rope2d"] = true }, "vision_cfg.use_rope2d is not an option"},
		{"pool", func(c map[string]any) { towerCfg(c, "text_cfg")["pool_type"] = "last" }, `text_cfg.pool_type is "last"`},
		{"resize", func(c map[string]any) { c["preprocess_cfg"].(map[string]any)["resize_mode"] = "longest" }, `resize_mode "longest"`},
		{"no embed_dim", func(c map[string]any) { delete(c["model_cfg"].(map[string]any), "embed_dim") }, "model_cfg: want embed_dim"},
	} {
		_, err := models.Open(openCLIPFolder(t, tt.edit), models.Options{NoBuild: true})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), models.OpenCLIPConfigFile) {
			t.Errorf("%s: %v, want an error naming %s and containing %q", tt.name, err, models.OpenCLIPConfigFile, tt.want)
		}
	}
	dir := openCLIPFolder(t, nil)
	if err := os.Rename(filepath.Join(dir, "open_clip_model.safetensors"), filepath.Join(dir, "open_clip_pytorch_model.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := models.Open(dir, models.Options{}); err == nil || !strings.Contains(err.Error(), "open_clip_pytorch_model.bin is a pickled PyTorch checkpoint") {
		t.Errorf("pickle only: %v", err)
	}
}

// TestOpenCLIPTensorMismatch: a tensor of open_clip_model.safetensors
// missing or of another shape than open_clip_config.json gives is named,
// with the shape expected and found, before any graph is written.
func TestOpenCLIPTensorMismatch(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := openCLIPFolder(t, nil)
	p := filepath.Join(dir, "open_clip_model.safetensors")
	ts, _, err := tensorio.ReadSafetensors(p)
	if err != nil {
		t.Fatal(err)
	}
	delete(ts, "ln_final.bias")
	ts["visual.proj"] = tensorio.F32([]int{24, 32}, make([]float32, 24*32))
	b, err := tensorio.EncodeSafetensors(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = models.Open(dir, models.Options{})
	for _, want := range []string{"tensor visual.proj has shape [24 32], expected [32 24]", "tensor ln_final.bias is missing (expected shape [32])"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
}

// TestOpenCLIPReadWeights: a model in OpenCLIP's layout serves its weights
// under CLIPModel's names (for the heads and the readouts): q, k, v the
// rows of in_proj_weight, visual_projection.weight the transpose of
// visual.proj, as open_clip_model.safetensors holds them.
func TestOpenCLIPReadWeights(t *testing.T) {
	m, err := models.Open(tinyOpenCLIP, models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := tensorio.ReadSafetensors(filepath.Join(tinyOpenCLIP, models.OpenCLIPWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	const l = "vision_model.encoder.layers.1.self_attn."
	got, err := m.ReadWeights(l+"q_proj.weight", l+"k_proj.weight", l+"v_proj.bias", "visual_projection.weight", "logit_scale")
	if err != nil {
		t.Fatal(err)
	}
	f := func(t2 tensorio.Tensor) []float32 {
		v, err := t2.Float32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	in, bias := f(raw["visual.transformer.resblocks.1.attn.in_proj_weight"]), f(raw["visual.transformer.resblocks.1.attn.in_proj_bias"])
	proj, p := f(raw["visual.proj"]), f(got["visual_projection.weight"])
	const d, e = 32, 24
	for i, v := range f(got[l+"q_proj.weight"]) {
		if v != in[i] {
			t.Fatalf("q_proj.weight[%d] %v, in_proj_weight's %v", i, v, in[i])
		}
	}
	for i, v := range f(got[l+"k_proj.weight"]) {
		if v != in[d*d+i] {
			t.Fatalf("k_proj.weight[%d] %v, in_proj_weight's %v", i, v, in[d*d+i])
		}
	}
	for i, v := range f(got[l+"v_proj.bias"]) {
		if v != bias[2*d+i] {
			t.Fatalf("v_proj.bias[%d] %v, in_proj_bias's %v", i, v, bias[2*d+i])
		}
	}
	if s := got["visual_projection.weight"].Shape; len(s) != 2 || s[0] != e || s[1] != d {
		t.Fatalf("visual_projection.weight shape %v, want [%d %d]", s, e, d)
	}
	for o := range e {
		for i := range d {
			if p[o*d+i] != proj[i*e+o] {
				t.Fatalf("visual_projection.weight[%d][%d] %v, visual.proj[%d][%d] %v", o, i, p[o*d+i], i, o, proj[i*e+o])
			}
		}
	}
	if s, fromWeights, err := m.LogitScale(); err != nil || !fromWeights || s != f(raw["logit_scale"])[0] {
		t.Errorf("logit scale %v (from weights %v, %v), the file's %v", s, fromWeights, err, f(raw["logit_scale"])[0])
	}
}
