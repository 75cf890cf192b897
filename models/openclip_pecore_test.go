package models_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
)

const tinyPECore = "../testdata/tinypecore"

// TestOpenCLIPPECoreConfig: a PE-Core open_clip_config.json (a timm
// vit_pe_core_* tower, sized by timm_model_kwargs over the named tower's
// own arguments) becomes a clip config with vision_config.pe_core, GELU
// whatever quick_gelu says, and OpenCLIP's PE transform (squash,
// bilinear, mean and std 0.5); a named tower without kwargs takes timm's
// sizes (PE-Core bigG: 1536 wide, 50 blocks, an MLP of 8960, no class
// token, grid offset 0).
func TestOpenCLIPPECoreConfig(t *testing.T) {
	m, err := models.Open(openCLIPCopy(t, tinyPECore, nil), models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	v, pe := c.VisionConfig, c.VisionConfig.PECore
	if pe == nil || m.Family() != models.CLIP || v.HiddenSize != 32 || v.NumAttentionHeads != 2 || v.NumHiddenLayers != 2 ||
		v.IntermediateSize != 128 || v.ImageSize != 32 || v.PatchSize != 8 || v.HiddenAct != "gelu" || c.ProjectionDim != 24 ||
		!pe.ClassToken || pe.RopeRefGrid != 4 || pe.RopeGridOffset != 1 || pe.PoolHeads != 4 || pe.PoolIntermediateSize != 128 ||
		pe.TimmModelName != "vit_pe_core_tiny_patch16_384" {
		t.Errorf("vision config %+v, pe_core %+v", v, pe)
	}
	if tc := c.TextConfig; tc.MaxPositionEmbeddings != 16 || tc.HiddenSize != 32 || tc.EosTokenID != 593 {
		t.Errorf("text config %+v", tc)
	}
	b, err := m.ReadFile(models.PreprocessorFile)
	if err != nil {
		t.Fatal(err)
	}
	var p preprocessor
	if err := json.Unmarshal(b, &p); err != nil || p.Resample != 2 || p.DoCenterCrop || p.Size["height"] != 32 || p.Size["width"] != 32 ||
		p.Mean[0] != 0.5 || p.Std[2] != 0.5 {
		t.Errorf("preprocessor %+v, %v; want OpenCLIP's PE transform (squash 32×32, bilinear, mean and std 0.5)", p, err)
	}

	bigG := func(cfg map[string]any) {
		v := towerCfg(cfg, "vision_cfg")
		v["timm_model_name"], v["image_size"] = "vit_pe_core_gigantic_patch14_448", 448
		delete(v, "timm_model_kwargs")
		cfg["model_cfg"].(map[string]any)["quick_gelu"] = true
	}
	m, err = models.Open(openCLIPCopy(t, tinyPECore, bigG), models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	v, pe = m.Config().VisionConfig, m.Config().VisionConfig.PECore
	if v.HiddenSize != 1536 || v.NumHiddenLayers != 50 || v.NumAttentionHeads != 16 || v.IntermediateSize != 8960 || v.PatchSize != 14 ||
		v.ImageSize != 448 || v.HiddenAct != "gelu" || pe.ClassToken || pe.RopeRefGrid != 32 || pe.RopeGridOffset != 0 || pe.PoolHeads != 8 ||
		pe.PoolIntermediateSize != 6144 {
		t.Errorf("bigG: vision config %+v, pe_core %+v", v, pe)
	}
}

// TestOpenCLIPPECoreRefused: PE-Core configs this program does not build
// exactly are refused, naming the field.
func TestOpenCLIPPECoreRefused(t *testing.T) {
	vc := func(k string, v any) func(map[string]any) {
		return func(c map[string]any) { towerCfg(c, "vision_cfg")[k] = v }
	}
	kw := func(k string, v any) func(map[string]any) {
		return func(c map[string]any) { towerCfg(c, "vision_cfg")["timm_model_kwargs"].(map[string]any)[k] = v }
	}
	for _, tt := range []struct {
		name string
		edit func(cfg map[string]any)
		want string
	}{
		{"avg pool", vc("timm_pool", "avg"), `vision_cfg.timm_pool is "avg"`},
		{"no pool", func(c map[string]any) { delete(towerCfg(c, "vision_cfg"), "timm_pool") }, "vision_cfg.timm_pool is absent"},
		{"extra proj", vc("timm_proj", "linear"), `vision_cfg.timm_proj is "linear"`},
		{"unknown tower", vc("timm_model_name", "vit_pe_core_huge_patch14_448"), `timm_model_name "vit_pe_core_huge_patch14_448" is not a PE-Core tower`},
		{"unknown kwarg", kw("init_values", 0.1), "timm_model_kwargs.init_values is not one"},
		{"size", vc("image_size", 64), "vision_cfg.image_size 64"},
		{"option", vc("ls_init_value", 0.1), "vision_cfg.ls_init_value is not an option of OpenCLIP's PE-Core tower"},
		{"ref grid", kw("ref_feat_shape", []int{4, 6}), "ref_feat_shape [4,6]"},
	} {
		_, err := models.Open(openCLIPCopy(t, tinyPECore, tt.edit), models.Options{NoBuild: true})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), models.OpenCLIPConfigFile) {
			t.Errorf("%s: %v, want an error naming %s and containing %q", tt.name, err, models.OpenCLIPConfigFile, tt.want)
		}
	}
}
