package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// peTower is one of timm's PE-Core towers as vit_pe_core_* builds it (its
// model arguments), and what timm_model_kwargs may change of it.
type peTower struct {
	ImgSize          int             `json:"img_size"`
	PatchSize        int             `json:"patch_size"`
	EmbedDim         int             `json:"embed_dim"`
	Depth            int             `json:"depth"`
	NumHeads         int             `json:"num_heads"`
	MLPRatio         float64         `json:"mlp_ratio"`
	RefFeatShape     json.RawMessage `json:"ref_feat_shape"`
	ClassToken       bool            `json:"class_token"`
	RopeGridOffset   float64         `json:"rope_grid_offset"`
	AttnPoolNumHeads int             `json:"attn_pool_num_heads"`
	AttnPoolMLPRatio float64         `json:"attn_pool_mlp_ratio"`
}

// peCoreTowers are timm's PE-Core towers (timm/models/eva.py), which
// OpenCLIP's PE-Core-* configs name in vision_cfg.timm_model_name; the
// image size is the one their pretrained config gives.
var peCoreTowers = map[string]peTower{
	"vit_pe_core_tiny_patch16_384":     {384, 16, 192, 12, 3, 4, json.RawMessage("24"), true, 1, 8, 4},
	"vit_pe_core_small_patch16_384":    {384, 16, 384, 12, 6, 4, json.RawMessage("24"), true, 1, 8, 4},
	"vit_pe_core_base_patch16_224":     {224, 16, 768, 12, 12, 4, json.RawMessage("14"), true, 1, 8, 4},
	"vit_pe_core_large_patch14_336":    {336, 14, 1024, 24, 16, 4, json.RawMessage("24"), true, 1, 8, 4},
	"vit_pe_core_gigantic_patch14_448": {448, 14, 1536, 50, 16, 8960.0 / 1536, json.RawMessage("32"), false, 0, 8, 4},
}

// peVisionKeys are the vision_cfg keys of a PE-Core config this program
// reads or that do not change inference ("" any value), with the value
// they must have otherwise.
var peVisionKeys = map[string]string{
	"image_size": "", "timm_model_name": "", "timm_model_pretrained": "", "timm_model_kwargs": "",
	"timm_pool": `"map"`, "timm_proj": "null", "timm_proj_bias": "", "timm_drop": "", "timm_drop_path": "",
	"patch_dropout": "", "output_tokens": "", "layers": "", "width": "", "patch_size": "", "head_width": "", "mlp_ratio": "",
}

// isPECoreVision reports whether vision_cfg (raw) names a timm PE-Core
// tower.
func isPECoreVision(raw json.RawMessage) bool {
	var f struct {
		Name string `json:"timm_model_name"`
	}
	return json.Unmarshal(raw, &f) == nil && strings.HasPrefix(f.Name, "vit_pe_core_")
}

// peCoreVision returns the config.json vision_config of a PE-Core
// vision_cfg (raw), for the joint space width embed, and the image size.
func peCoreVision(raw json.RawMessage, embed int) (map[string]any, int, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, 0, fmt.Errorf("model_cfg.vision_cfg: want an object: %w", err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, ok := peVisionKeys[k]
		v := strings.TrimSpace(string(fields[k]))
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("model_cfg.vision_cfg.%s is not an option of OpenCLIP's PE-Core tower that this program builds", k)
		case want != "" && v != want:
			return nil, 0, fmt.Errorf("model_cfg.vision_cfg.%s is %s; the PE-Core tower built here needs %s (timm's attention-pooling head and its own head Linear, as OpenCLIP's PE-Core configs have)", k, v, want)
		}
	}
	if _, ok := fields["timm_pool"]; !ok {
		return nil, 0, fmt.Errorf("model_cfg.vision_cfg.timm_pool is absent (OpenCLIP's default \"avg\"); the PE-Core tower built here needs \"map\"")
	}
	if _, ok := fields["timm_proj"]; !ok {
		return nil, 0, fmt.Errorf("model_cfg.vision_cfg.timm_proj is absent (OpenCLIP's default \"linear\", a projection after the tower's own head); the PE-Core tower built here needs null")
	}
	var name string
	json.Unmarshal(fields["timm_model_name"], &name)
	t, ok := peCoreTowers[name]
	if !ok {
		known := make([]string, 0, len(peCoreTowers))
		for n := range peCoreTowers {
			known = append(known, n)
		}
		sort.Strings(known)
		return nil, 0, fmt.Errorf("model_cfg.vision_cfg.timm_model_name %q is not a PE-Core tower this program knows (%s)", name, strings.Join(known, ", "))
	}
	if kw, ok := fields["timm_model_kwargs"]; ok && string(kw) != "null" {
		if err := t.override(kw); err != nil {
			return nil, 0, err
		}
	}
	if is, ok := fields["image_size"]; ok {
		n, err := openCLIPImageSize(is)
		if err != nil {
			return nil, 0, err
		}
		if n != t.ImgSize {
			return nil, 0, fmt.Errorf("model_cfg.vision_cfg.image_size %d: the timm tower %s takes %d-pixel images (OpenCLIP would resize to %d for a tower of %d)", n, name, t.ImgSize, n, t.ImgSize)
		}
	}
	return t.config(name, embed)
}

// peKwargs are the timm_model_kwargs of a PE-Core tower read here.
var peKwargs = []string{"img_size", "patch_size", "embed_dim", "depth", "num_heads", "mlp_ratio", "ref_feat_shape",
	"class_token", "rope_grid_offset", "attn_pool_num_heads", "attn_pool_mlp_ratio"}

// override applies timm_model_kwargs (kw), which OpenCLIP passes to
// timm.create_model over the tower's own arguments.
func (t *peTower) override(kw json.RawMessage) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(kw, &fields); err != nil {
		return fmt.Errorf("model_cfg.vision_cfg.timm_model_kwargs: want an object: %w", err)
	}
	for k := range fields {
		ok := false
		for _, p := range peKwargs {
			ok = ok || k == p
		}
		if !ok {
			return fmt.Errorf("model_cfg.vision_cfg.timm_model_kwargs.%s is not one this program builds a PE-Core tower with (%s)", k, strings.Join(peKwargs, ", "))
		}
	}
	d := json.NewDecoder(bytes.NewReader(kw))
	if err := d.Decode(t); err != nil {
		return fmt.Errorf("model_cfg.vision_cfg.timm_model_kwargs: %w", err)
	}
	return nil
}

// config returns the vision_config and image size of the tower.
func (t peTower) config(name string, embed int) (map[string]any, int, error) {
	ref, err := peRefGrid(t.RefFeatShape)
	if err != nil {
		return nil, 0, err
	}
	pos := func(k string, v int) error {
		if v <= 0 {
			return fmt.Errorf("model_cfg.vision_cfg: the PE-Core tower's %s is %d, expected a positive number", k, v)
		}
		return nil
	}
	for _, c := range []struct {
		k string
		v int
	}{{"img_size", t.ImgSize}, {"patch_size", t.PatchSize}, {"embed_dim", t.EmbedDim}, {"depth", t.Depth},
		{"num_heads", t.NumHeads}, {"attn_pool_num_heads", t.AttnPoolNumHeads}} {
		if err := pos(c.k, c.v); err != nil {
			return nil, 0, err
		}
	}
	// timm's int(dim * mlp_ratio).
	inter, poolInter := int(float64(t.EmbedDim)*t.MLPRatio), int(float64(t.EmbedDim)*t.AttnPoolMLPRatio)
	v := map[string]any{"hidden_size": t.EmbedDim, "intermediate_size": inter, "projection_dim": embed,
		"num_hidden_layers": t.Depth, "num_attention_heads": t.NumHeads, "num_channels": 3, "image_size": t.ImgSize,
		"patch_size": t.PatchSize, "hidden_act": "gelu", "layer_norm_eps": 1e-5,
		"pe_core": PECoreVision{TimmModelName: name, ClassToken: t.ClassToken, RopeRefGrid: ref, RopeGridOffset: t.RopeGridOffset,
			PoolHeads: t.AttnPoolNumHeads, PoolIntermediateSize: poolInter}}
	return v, t.ImgSize, nil
}

// peRefGrid reads ref_feat_shape: a number or a [height, width] list of two
// equal ones (only square grids are built here).
func peRefGrid(raw json.RawMessage) (int, error) {
	var n int
	if json.Unmarshal(raw, &n) == nil && n > 0 {
		return n, nil
	}
	var hw []int
	if json.Unmarshal(raw, &hw) == nil && len(hw) == 2 && hw[0] == hw[1] && hw[0] > 0 {
		return hw[0], nil
	}
	return 0, fmt.Errorf("model_cfg.vision_cfg.timm_model_kwargs.ref_feat_shape %s: want a number or a [height, width] list of two equal ones", raw)
}
