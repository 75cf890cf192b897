package models

import (
	"encoding/json"
	"fmt"
	"math"
)

// Config is a Hugging Face CLIPConfig, SiglipConfig or Tipsv2Config
// (config.json). Fields missing from the file take Hugging Face's defaults
// for its family (those of openai/clip-vit-base-patch32, of
// google/siglip-base-patch16-224, or transformers' Tipsv2Config's).
type Config struct {
	ModelType string `json:"model_type"`
	// Family is what model_type says the model is (SigLIP 2 at a fixed
	// resolution reads as SigLIP here: its tokenizer tells them apart; see
	// Model.Family).
	Family Family `json:"-"`
	// ProjectionDim is the width of the joint space; a SigLIP config has
	// none, and it is the vision tower's width there (the pooling head's).
	ProjectionDim       int          `json:"projection_dim"`
	LogitScaleInitValue float64      `json:"logit_scale_init_value"`
	TextConfig          TextConfig   `json:"text_config"`
	VisionConfig        VisionConfig `json:"vision_config"`
	// Temperature is TIPSv2's (0 for other families): logits are cosine
	// similarities divided by it. config.json's temperature (the versions
	// of transformers that keep it in the config) or temperature_init_value
	// (those that make it a tensor, temperature, initialised from it and
	// absent from the published checkpoints; Model.LogitScale prefers the
	// tensor when model.safetensors has one); when it has neither,
	// 0.005065968260169029, the default of transformers' Tipsv2Config
	// (google/tipsv2-b14's), which a config.json written by it leaves out.
	Temperature float64 `json:"-"`
	// noVision says config.json gave no vision_config (nor
	// vision_config_dict, nor a flat TIPSv2 image or patch size).
	noVision bool
}

// VisionDefaulted reports whether config.json gave no vision_config (nor
// vision_config_dict, nor a flat TIPSv2 config's img_size or patch_size),
// so that every vision field is its family's default: an empty {} is
// Hugging Face's CLIPConfig(), 224-pixel images in 32-pixel patches, which
// most graphs do not match. It is false for a Config not parsed from a file.
func (c Config) VisionDefaulted() bool { return c.noVision }

// TextConfig is a CLIPTextConfig.
type TextConfig struct {
	VocabSize             int     `json:"vocab_size"`
	HiddenSize            int     `json:"hidden_size"` // d_t, the width of token states
	IntermediateSize      int     `json:"intermediate_size"`
	ProjectionDim         int     `json:"projection_dim"`
	ProjectionSize        int     `json:"projection_size"` // SigLIP's text head width (0: hidden_size)
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"` // the longest prompt in tokens, the special tokens included
	HiddenAct             string  `json:"hidden_act"`
	LayerNormEps          float64 `json:"layer_norm_eps"`
	PadTokenID            int     `json:"pad_token_id"`
	BosTokenID            int     `json:"bos_token_id"`
	EosTokenID            int     `json:"eos_token_id"`
	// ScaleSqrtDepth and PoolingEpsilon are TIPSv2's (scale_sqrt_depth:
	// token vectors times √hidden_size; pooling_epsilon: added to the
	// mask's sum of the masked mean).
	ScaleSqrtDepth bool    `json:"scale_sqrt_depth"`
	PoolingEpsilon float64 `json:"pooling_epsilon"`
}

// VisionConfig is a CLIPVisionConfig.
type VisionConfig struct {
	HiddenSize        int     `json:"hidden_size"` // d_v, the width of patch states
	IntermediateSize  int     `json:"intermediate_size"`
	ProjectionDim     int     `json:"projection_dim"`
	NumHiddenLayers   int     `json:"num_hidden_layers"`
	NumAttentionHeads int     `json:"num_attention_heads"`
	NumChannels       int     `json:"num_channels"`
	ImageSize         int     `json:"image_size"`
	PatchSize         int     `json:"patch_size"`
	HiddenAct         string  `json:"hidden_act"`
	LayerNormEps      float64 `json:"layer_norm_eps"`
	// NumPatches is SigLIP 2 NaFlex's num_patches (0 otherwise): the rows
	// of its position table, a square grid that is resized to each image's
	// own; ImageSize is 0 then.
	NumPatches int `json:"num_patches"`
	// TIPSv2's (Tipsv2VisionConfig, DINOv2 with registers): the MLP is
	// int(hidden_size·mlp_ratio) wide (IntermediateSize is set to that),
	// or a SwiGLU with use_swiglu_ffn; NumRegisterTokens rows follow the
	// class token in last_hidden_state, before the patches; qkv_bias,
	// interpolate_antialias and interpolate_offset as transformers reads
	// them.
	MLPRatio             float64 `json:"mlp_ratio"`
	NumRegisterTokens    int     `json:"num_register_tokens"`
	QKVBias              bool    `json:"qkv_bias"`
	UseSwiGLUFFN         bool    `json:"use_swiglu_ffn"`
	InterpolateAntialias bool    `json:"interpolate_antialias"`
	InterpolateOffset    float64 `json:"interpolate_offset"`
	// PECore, when not nil, says the vision tower is Meta's Perception
	// Encoder's (PE-Core, an OpenCLIP config naming a timm vit_pe_core_*
	// tower; see PECoreVision); nil for CLIP's.
	PECore *PECoreVision `json:"pe_core,omitempty"`
}

// PECoreVision is what a PE-Core vision tower (timm's Eva as
// vit_pe_core_* builds it) has beyond VisionConfig's sizes: a class token
// or none (PE-Core bigG), 2-D RoPE on q and k over the patch grid (scaled
// to RopeRefGrid, offset by RopeGridOffset), and an attention-pooling head
// (PoolHeads heads, a PoolIntermediateSize-wide MLP) before the head
// Linear to the joint space. TimmModelName is the tower it came from.
type PECoreVision struct {
	TimmModelName        string  `json:"timm_model_name"`
	ClassToken           bool    `json:"class_token"`
	RopeRefGrid          int     `json:"rope_ref_grid"`
	RopeGridOffset       float64 `json:"rope_grid_offset"`
	PoolHeads            int     `json:"pool_heads"`
	PoolIntermediateSize int     `json:"pool_intermediate_size"`
}

// NaFlex reports whether the config is SigLIP 2 NaFlex's (model_type
// siglip2): images are cut into patches on their own grids, within the
// preprocessor's max_num_patches, rather than resized to a square.
func (c Config) NaFlex() bool { return c.ModelType == "siglip2" }

// DefaultConfig returns Hugging Face's CLIPConfig defaults.
func DefaultConfig() Config {
	return Config{
		ModelType:           "clip",
		ProjectionDim:       512,
		LogitScaleInitValue: 2.6592,
		TextConfig: TextConfig{
			VocabSize: 49408, HiddenSize: 512, IntermediateSize: 2048, ProjectionDim: 512,
			NumHiddenLayers: 12, NumAttentionHeads: 8, MaxPositionEmbeddings: 77,
			HiddenAct: "quick_gelu", LayerNormEps: 1e-5, PadTokenID: 1, BosTokenID: 49406, EosTokenID: 49407,
		},
		VisionConfig: VisionConfig{
			HiddenSize: 768, IntermediateSize: 3072, ProjectionDim: 512, NumHiddenLayers: 12,
			NumAttentionHeads: 12, NumChannels: 3, ImageSize: 224, PatchSize: 32,
			HiddenAct: "quick_gelu", LayerNormEps: 1e-5,
		},
	}
}

// DefaultSiglipConfig returns Hugging Face's SiglipConfig defaults (those of
// google/siglip-base-patch16-224).
func DefaultSiglipConfig() Config {
	return Config{
		ModelType:           "siglip",
		Family:              SigLIP,
		LogitScaleInitValue: 2.302585092994046, // log 10, SiglipModel's initial logit_scale
		TextConfig: TextConfig{
			VocabSize: 32000, HiddenSize: 768, IntermediateSize: 3072, NumHiddenLayers: 12,
			NumAttentionHeads: 12, MaxPositionEmbeddings: 64, HiddenAct: "gelu_pytorch_tanh",
			LayerNormEps: 1e-6, PadTokenID: 1, BosTokenID: 49406, EosTokenID: 49407,
		},
		VisionConfig: VisionConfig{
			HiddenSize: 768, IntermediateSize: 3072, NumHiddenLayers: 12, NumAttentionHeads: 12,
			NumChannels: 3, ImageSize: 224, PatchSize: 16, HiddenAct: "gelu_pytorch_tanh", LayerNormEps: 1e-6,
		},
	}
}

// TipsDefaultTemperature is transformers' Tipsv2Config temperature_init_value
// default (1/197.4), the temperature of a TIPSv2 config.json that names none.
const TipsDefaultTemperature = 0.005065968260169029

// DefaultTipsConfig returns transformers' Tipsv2Config defaults (text and
// vision 768 wide, 12 layers, 12 heads; 64 text positions, 32000 ids;
// 448-pixel images in 14-pixel patches, one register token; temperature
// TipsDefaultTemperature), those of google/tipsv2-b14, which a config.json
// that transformers writes leaves out. ProjectionDim is the towers' width:
// TIPSv2 has no projection heads.
func DefaultTipsConfig() Config {
	return Config{
		ModelType:     "tipsv2",
		Family:        Tipsv2,
		ProjectionDim: 768,
		Temperature:   TipsDefaultTemperature,
		TextConfig: TextConfig{
			VocabSize: 32000, HiddenSize: 768, IntermediateSize: 3072, NumHiddenLayers: 12,
			NumAttentionHeads: 12, MaxPositionEmbeddings: 64, HiddenAct: "relu", LayerNormEps: 1e-5,
			PadTokenID: 0, BosTokenID: -1, EosTokenID: -1, ScaleSqrtDepth: true, PoolingEpsilon: 1e-8,
		},
		VisionConfig: VisionConfig{
			HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12, NumChannels: 3, ImageSize: 448,
			PatchSize: 14, HiddenAct: "gelu", LayerNormEps: 1e-6, MLPRatio: 4, NumRegisterTokens: 1,
			QKVBias: true, InterpolateAntialias: true,
		},
	}
}

// GridSize returns the patch grid (rows, columns) of the vision tower for a
// square input of ImageSize: ImageSize/PatchSize each way, rounded down.
func (v VisionConfig) GridSize() (h, w int) {
	if v.PatchSize <= 0 {
		return 0, 0
	}
	return v.ImageSize / v.PatchSize, v.ImageSize / v.PatchSize
}

// ParseConfig parses a config.json. Older files that spell the sub-configs
// text_config_dict / vision_config_dict are accepted too.
func ParseConfig(b []byte) (Config, error) {
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Config{}, fmt.Errorf("not a JSON object: %w", err)
	}
	family, err := familyOf(head.ModelType)
	if err != nil {
		return Config{}, err
	}
	if b, err = squareSizes(b); err != nil {
		return Config{}, err
	}
	c := DefaultConfig()
	switch {
	case head.ModelType == "siglip2":
		// Siglip2VisionConfig: num_patches (256) instead of image_size.
		c = DefaultSiglipConfig()
		c.VisionConfig.ImageSize, c.VisionConfig.NumPatches = 0, 256
	case family == SigLIP:
		c = DefaultSiglipConfig()
	case family == Tipsv2:
		c = DefaultTipsConfig()
	}
	var raw struct {
		TextDict   json.RawMessage `json:"text_config_dict"`
		VisionDict json.RawMessage `json:"vision_config_dict"`
		Text       json.RawMessage `json:"text_config"`
		Vision     json.RawMessage `json:"vision_config"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, err
	}
	if raw.Text == nil && raw.TextDict != nil {
		if err := json.Unmarshal(raw.TextDict, &c.TextConfig); err != nil {
			return Config{}, fmt.Errorf("text_config_dict: %w", err)
		}
	}
	if raw.Vision == nil && raw.VisionDict != nil {
		if err := json.Unmarshal(raw.VisionDict, &c.VisionConfig); err != nil {
			return Config{}, fmt.Errorf("vision_config_dict: %w", err)
		}
	}
	c.Family = family
	c.noVision = raw.Vision == nil && raw.VisionDict == nil && !hasFlatVision(b)
	if family == Tipsv2 {
		if err := c.readTips(b); err != nil {
			return Config{}, err
		}
	}
	if family == SigLIP || family == SigLIP2 {
		// The joint space is the pooling head's output, of the vision
		// tower's width; the text head must give the same.
		c.ProjectionDim = c.VisionConfig.HiddenSize
		if c.TextConfig.ProjectionSize == 0 {
			c.TextConfig.ProjectionSize = c.TextConfig.HiddenSize
		}
		c.TextConfig.ProjectionDim = c.TextConfig.ProjectionSize
		c.VisionConfig.ProjectionDim = c.VisionConfig.HiddenSize
		if c.TextConfig.ProjectionSize != c.VisionConfig.HiddenSize {
			return Config{}, fmt.Errorf("text_config.projection_size %d differs from vision_config.hidden_size %d: SigLIP's text head must give the vision head's width",
				c.TextConfig.ProjectionSize, c.VisionConfig.HiddenSize)
		}
	}
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// hasFlatVision reports whether config.json b gives a flat TIPSv2
// config's img_size or patch_size at its top level.
func hasFlatVision(b []byte) bool {
	var f struct {
		ImgSize   json.RawMessage `json:"img_size"`
		PatchSize json.RawMessage `json:"patch_size"`
	}
	return json.Unmarshal(b, &f) == nil && (f.ImgSize != nil || f.PatchSize != nil)
}

// squareSizes returns the config.json b with a vision_config (or
// vision_config_dict) image_size or patch_size given as a [height, width]
// list, as transformers' Tipsv2VisionConfig and Dinov2Config allow, made
// the one number of a square; a list of two different sizes is refused,
// naming the field: the graphs are built for square sizes.
func squareSizes(b []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	changed := false
	for _, sub := range []string{"vision_config", "vision_config_dict"} {
		var v map[string]json.RawMessage
		if json.Unmarshal(top[sub], &v) != nil || v == nil {
			continue
		}
		lists := false
		for _, field := range []string{"image_size", "patch_size"} {
			var hw []float64
			if json.Unmarshal(v[field], &hw) != nil || hw == nil {
				continue
			}
			if len(hw) != 2 || hw[0] != hw[1] {
				return nil, fmt.Errorf("%s.%s %v: want one number or a [height, width] list of two equal ones (only square sizes are built here)", sub, field, hw)
			}
			v[field], _ = json.Marshal(hw[0])
			lists = true
		}
		if lists {
			top[sub], _ = json.Marshal(v)
			changed = true
		}
	}
	if !changed {
		return b, nil
	}
	return json.Marshal(top)
}

// readTips completes a TIPSv2 config: its temperature, the vision MLP's
// width, and the joint space's width (both towers'; refused when they
// differ: TIPSv2 has no projection heads).
func (c *Config) readTips(b []byte) error {
	var t struct {
		Temperature          *float64 `json:"temperature"`
		TemperatureInitValue *float64 `json:"temperature_init_value"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if err := c.readTipsFlat(b); err != nil {
		return err
	}
	switch {
	case t.Temperature != nil:
		c.Temperature = *t.Temperature
	case t.TemperatureInitValue != nil:
		c.Temperature = *t.TemperatureInitValue
	}
	if !(c.Temperature > 0) || math.IsInf(c.Temperature, 0) {
		return fmt.Errorf("temperature is %g, expected a positive number (TIPSv2's logits are cosine / temperature)", c.Temperature)
	}
	v := &c.VisionConfig
	if !(v.MLPRatio > 0) {
		return fmt.Errorf("vision_config.mlp_ratio is %g, expected a positive number", v.MLPRatio)
	}
	v.IntermediateSize = int(float64(v.HiddenSize) * v.MLPRatio)
	if c.TextConfig.HiddenSize != v.HiddenSize {
		return fmt.Errorf("text_config.hidden_size %d and vision_config.hidden_size %d differ: TIPSv2 has no projection heads, both towers embed into one space",
			c.TextConfig.HiddenSize, v.HiddenSize)
	}
	c.ProjectionDim = v.HiddenSize
	c.TextConfig.ProjectionDim, v.ProjectionDim = v.HiddenSize, v.HiddenSize
	if v.NumRegisterTokens < 0 {
		return fmt.Errorf("vision_config.num_register_tokens is %d, expected 0 or more", v.NumRegisterTokens)
	}
	return nil
}

// tipsVisionFns are the vision_fn values of a flat TIPSv2 config and the
// layers and heads Tipsv2Config reads from them.
var tipsVisionFns = map[string][2]int{
	"vit_base": {12, 12}, "vit_large": {24, 16}, "vit_so400m": {27, 16}, "vit_giant2": {40, 24},
}

// readTipsFlat reads the older, flat form of a TIPSv2 config.json (every
// field at the top level under the original code's names), as
// Tipsv2Config converts it: embed_dim, img_size, patch_size and
// num_register_tokens to vision_config; text_hidden_size, text_mlp_dim,
// max_len, text_num_heads, text_num_layers and vocab_size to text_config;
// ffn_layer "swiglu" to use_swiglu_ffn; vision_fn to the vision layers and
// heads; mlp_ratio = text_mlp_dim / embed_dim. A flat key wins over the
// nested one, as there.
func (c *Config) readTipsFlat(b []byte) error {
	var f struct {
		EmbedDim   *int    `json:"embed_dim"`
		ImgSize    *int    `json:"img_size"`
		PatchSize  *int    `json:"patch_size"`
		Registers  *int    `json:"num_register_tokens"`
		TextHidden *int    `json:"text_hidden_size"`
		TextMLP    *int    `json:"text_mlp_dim"`
		MaxLen     *int    `json:"max_len"`
		TextHeads  *int    `json:"text_num_heads"`
		TextLayers *int    `json:"text_num_layers"`
		VocabSize  *int    `json:"vocab_size"`
		FFNLayer   *string `json:"ffn_layer"`
		VisionFn   *string `json:"vision_fn"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("a flat TIPSv2 config: %w", err)
	}
	v, t := &c.VisionConfig, &c.TextConfig
	for _, k := range []struct {
		src *int
		dst *int
	}{{f.EmbedDim, &v.HiddenSize}, {f.ImgSize, &v.ImageSize}, {f.PatchSize, &v.PatchSize}, {f.Registers, &v.NumRegisterTokens},
		{f.TextHidden, &t.HiddenSize}, {f.TextMLP, &t.IntermediateSize}, {f.MaxLen, &t.MaxPositionEmbeddings},
		{f.TextHeads, &t.NumAttentionHeads}, {f.TextLayers, &t.NumHiddenLayers}, {f.VocabSize, &t.VocabSize}} {
		if k.src != nil {
			*k.dst = *k.src
		}
	}
	if f.FFNLayer != nil {
		v.UseSwiGLUFFN = *f.FFNLayer == "swiglu"
	}
	if f.VisionFn != nil {
		if lh, ok := tipsVisionFns[*f.VisionFn]; ok {
			v.NumHiddenLayers, v.NumAttentionHeads = lh[0], lh[1]
		}
	}
	if f.TextMLP != nil && f.EmbedDim != nil && *f.EmbedDim > 0 {
		v.MLPRatio = float64(*f.TextMLP) / float64(*f.EmbedDim)
	}
	return nil
}

func (c Config) validate() error {
	pos := []struct {
		name string
		v    int
	}{
		{"projection_dim", c.ProjectionDim},
		{"text_config.hidden_size", c.TextConfig.HiddenSize},
		{"text_config.vocab_size", c.TextConfig.VocabSize},
		{"text_config.max_position_embeddings", c.TextConfig.MaxPositionEmbeddings},
		{"vision_config.hidden_size", c.VisionConfig.HiddenSize},
		{"vision_config.patch_size", c.VisionConfig.PatchSize},
		{"vision_config.num_channels", c.VisionConfig.NumChannels},
	}
	if c.NaFlex() {
		pos = append(pos, struct {
			name string
			v    int
		}{"vision_config.num_patches", c.VisionConfig.NumPatches})
	} else {
		pos = append(pos, struct {
			name string
			v    int
		}{"vision_config.image_size", c.VisionConfig.ImageSize})
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("%s is %d, expected a positive number", p.name, p.v)
		}
	}
	if c.NaFlex() {
		n := c.VisionConfig.NumPatches
		if side := int(math.Sqrt(float64(n))); side*side != n {
			return fmt.Errorf("vision_config.num_patches %d is not a square number (SigLIP 2 NaFlex's position table is a square grid)", n)
		}
		return nil
	}
	// A remainder smaller than a patch is dropped, as the patch convolution
	// (stride patch_size, no padding) does: SigLIP So400m has 384 pixels in
	// 14-pixel patches, a 27×27 grid.
	if c.VisionConfig.ImageSize < c.VisionConfig.PatchSize {
		return fmt.Errorf("vision_config.image_size %d is smaller than patch_size %d", c.VisionConfig.ImageSize, c.VisionConfig.PatchSize)
	}
	return nil
}
