package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/conditionhq/condition/tensorio"
)

// OpenCLIPConfigFile is the config of a model in OpenCLIP's layout: its
// model_cfg (embed_dim, vision_cfg, text_cfg, quick_gelu) and
// preprocess_cfg. Its weights are OpenCLIPWeightsFile.
const OpenCLIPConfigFile = "open_clip_config.json"

// OpenCLIPWeightsFile is the safetensors checkpoint of a model in
// OpenCLIP's layout, in OpenCLIP's tensor names.
const OpenCLIPWeightsFile = "open_clip_model.safetensors"

// openCLIPPickles are the pickled checkpoints OpenCLIP's layout may ship
// instead of safetensors.
var openCLIPPickles = []string{"open_clip_pytorch_model.bin", "open_clip_pytorch_model.pt", "open_clip_model.bin", "open_clip_model.pt"}

// OpenCLIP's defaults (open_clip's CLIPVisionCfg, CLIPTextCfg and
// OPENAI_DATASET_MEAN/STD), for fields a config leaves out.
var (
	openCLIPMean = []float64{0.48145466, 0.4578275, 0.40821073}
	openCLIPStd  = []float64{0.26862954, 0.26130258, 0.27577711}
)

// openCLIPVision is OpenCLIP's CLIPVisionCfg, as far as it is read.
type openCLIPVision struct {
	ImageSize json.RawMessage `json:"image_size"`
	Layers    int             `json:"layers"`
	Width     int             `json:"width"`
	HeadWidth int             `json:"head_width"`
	MLPRatio  float64         `json:"mlp_ratio"`
	PatchSize int             `json:"patch_size"`
}

// openCLIPText is OpenCLIP's CLIPTextCfg, as far as it is read.
type openCLIPText struct {
	ContextLength int     `json:"context_length"`
	VocabSize     int     `json:"vocab_size"`
	Width         int     `json:"width"`
	Heads         int     `json:"heads"`
	Layers        int     `json:"layers"`
	MLPRatio      float64 `json:"mlp_ratio"`
}

// openCLIPAllowed are the vision_cfg and text_cfg keys the CLIP towers
// built here honour (or that do not change inference), with the values
// they may have ("" any); any other key, or another value, is refused,
// naming it: it asks for a tower this program does not build.
var openCLIPAllowed = map[string]map[string]string{
	"vision_cfg": {"image_size": "", "layers": "", "width": "", "head_width": "", "mlp_ratio": "", "patch_size": "",
		"patch_dropout": "", "output_tokens": "", "ls_init_value": "null", "attentional_pool": "false", "pool_type": `"tok"`,
		"no_ln_pre": "false", "final_ln_after_pool": "false", "global_average_pool": "false", "input_patchnorm": "false",
		"output_dim": "", "embed_cls": "false", "proj_type": `"linear"`, "proj_bias": "false", "act_kwargs": "null",
		"norm_kwargs": "null", "timm_model_name": "null", "hf_model_name": "null"},
	"text_cfg": {"context_length": "", "vocab_size": "", "width": "", "heads": "", "layers": "", "mlp_ratio": "",
		"output_tokens": "", "ls_init_value": "null", "pool_type": `"argmax"`, "proj_bias": "false", "proj_type": `"linear"`,
		"embed_cls": "false", "no_causal_mask": "false", "pad_id": "0", "final_ln_after_pool": "false", "act_kwargs": "null",
		"norm_kwargs": "null", "hf_model_name": "null", "hf_tokenizer_name": "", "tokenizer_kwargs": "", "timm_model_name": "null",
		"attn_mask": "true"},
}

// checkOpenCLIPTower refuses a vision_cfg or text_cfg (raw) that names a
// tower or an option the CLIP towers built here do not have.
func checkOpenCLIPTower(name string, raw json.RawMessage) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("model_cfg.%s: want an object: %w", name, err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, ok := openCLIPAllowed[name][k]
		v := strings.TrimSpace(string(fields[k]))
		switch {
		case !ok:
			return fmt.Errorf("model_cfg.%s.%s is not an option of OpenCLIP's CLIP towers that this program builds (they are the ViT and text transformer of OpenAI's CLIP)", name, k)
		case want == "" || v == want || want == "false" && v == "null" || want == "null" && v == "false":
		case k == "timm_model_name" || k == "hf_model_name":
			return fmt.Errorf("model_cfg.%s.%s is %s: a %s tower, which this program does not build (only OpenCLIP's own CLIP towers)", name, k, v, strings.TrimSuffix(k, "_model_name"))
		default:
			return fmt.Errorf("model_cfg.%s.%s is %s; the CLIP towers built here need %s", name, k, v, want)
		}
	}
	return nil
}

// openCLIPLayout gives a folder with open_clip_config.json and no
// config.json the files the rest of the program reads, made from it:
// config.json (a CLIPConfig), preprocessor_config.json (OpenCLIP's
// default transform); its open_clip_model.safetensors is the checkpoint
// the graphs are built from. It does nothing for any other folder.
func (m *Model) openCLIPLayout() error {
	if m.dir == "" || fsHas(m.base, ConfigFile) || !fsHas(m.base, OpenCLIPConfigFile) {
		return nil
	}
	where := filepath.Join(m.dir, OpenCLIPConfigFile)
	// (A hub model's files were checked against its listing, and its
	// checkpoint is fetched once the config is read.)
	has := map[string]bool{OpenCLIPWeightsFile: fsHas(m.base, OpenCLIPWeightsFile)}
	for _, p := range openCLIPPickles {
		has[p] = fsHas(m.base, p)
	}
	if err := openCLIPPickleOnly(has, m.where()); err != nil {
		return err
	}
	b, err := fs.ReadFile(m.base, OpenCLIPConfigFile)
	if err != nil {
		return fmt.Errorf("models: %w", err)
	}
	config, pre, err := convertOpenCLIP(b)
	if err != nil {
		return fmt.Errorf("models: %s: %w", where, err)
	}
	m.virtual = map[string][]byte{ConfigFile: config}
	if !fsHas(m.base, PreprocessorFile) {
		m.virtual[PreprocessorFile] = pre
	}
	m.openCLIP = true
	return m.openCLIPTokenizer(b)
}

// openCLIPPickleOnly refuses a model in OpenCLIP's layout (where: its
// name) whose files (has) hold a pickled checkpoint and not
// open_clip_model.safetensors.
func openCLIPPickleOnly(has map[string]bool, where string) error {
	if has[OpenCLIPWeightsFile] {
		return nil
	}
	for _, p := range openCLIPPickles {
		if has[p] {
			return fmt.Errorf("models: %s: %s is a pickled PyTorch checkpoint (loading one runs code from the file), which this program does not read; it reads %s (OpenCLIP's safetensors): %w",
				where, p, OpenCLIPWeightsFile, ErrUnsupportedFamily)
		}
	}
	return nil
}

// OpenCLIP reports whether the model is in OpenCLIP's layout
// (open_clip_config.json and open_clip_model.safetensors, no config.json):
// its config.json and preprocessor_config.json are made from
// open_clip_config.json, and its graphs are built from
// open_clip_model.safetensors.
func (m *Model) OpenCLIP() bool { return m.openCLIP }

// convertOpenCLIP returns the config.json and preprocessor_config.json of
// the open_clip_config.json b.
func convertOpenCLIP(b []byte) (config, pre []byte, err error) {
	var f struct {
		ModelCfg struct {
			EmbedDim   int             `json:"embed_dim"`
			QuickGelu  bool            `json:"quick_gelu"`
			Vision     json.RawMessage `json:"vision_cfg"`
			Text       json.RawMessage `json:"text_cfg"`
			CustomText bool            `json:"custom_text"`
		} `json:"model_cfg"`
		Pre struct {
			Mean          []float64 `json:"mean"`
			Std           []float64 `json:"std"`
			Interpolation string    `json:"interpolation"`
			ResizeMode    string    `json:"resize_mode"`
		} `json:"preprocess_cfg"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object: %w", err)
	}
	mc := f.ModelCfg
	if mc.Vision == nil || mc.Text == nil || mc.EmbedDim <= 0 {
		return nil, nil, fmt.Errorf("model_cfg: want embed_dim > 0, vision_cfg and text_cfg (found embed_dim %d, vision_cfg %v, text_cfg %v)", mc.EmbedDim, mc.Vision != nil, mc.Text != nil)
	}
	if err := checkOpenCLIPTower("text_cfg", mc.Text); err != nil {
		return nil, nil, err
	}
	t := openCLIPText{ContextLength: 77, VocabSize: 49408, Width: 512, Heads: 8, Layers: 12, MLPRatio: 4}
	if err := json.Unmarshal(mc.Text, &t); err != nil {
		return nil, nil, fmt.Errorf("model_cfg.text_cfg: %w", err)
	}
	act := "gelu" // OpenCLIP's nn.GELU, unless model_cfg.quick_gelu
	if mc.QuickGelu {
		act = "quick_gelu"
	}
	var vision map[string]any
	var size int
	if isPECoreVision(mc.Vision) {
		// timm's towers use nn.GELU whatever quick_gelu says.
		vision, size, err = peCoreVision(mc.Vision, mc.EmbedDim)
	} else {
		vision, size, err = clipVision(mc.Vision, mc.EmbedDim, act)
	}
	if err != nil {
		return nil, nil, err
	}
	hf := map[string]any{
		"model_type": "clip", "architectures": []string{"CLIPModel"}, "projection_dim": mc.EmbedDim,
		"text_config": map[string]any{"vocab_size": t.VocabSize, "hidden_size": t.Width, "intermediate_size": int(float64(t.Width) * t.MLPRatio),
			"projection_dim": mc.EmbedDim, "num_hidden_layers": t.Layers, "num_attention_heads": t.Heads,
			"max_position_embeddings": t.ContextLength, "hidden_act": act, "layer_norm_eps": 1e-5,
			// OpenCLIP pools at the largest id, its end of text (the
			// vocabulary's last), and pads with 0.
			"pad_token_id": 0, "bos_token_id": t.VocabSize - 2, "eos_token_id": t.VocabSize - 1},
		"vision_config": vision,
		"note":          "made by condition from " + OpenCLIPConfigFile,
	}
	if config, err = json.MarshalIndent(hf, "", "  "); err != nil {
		return nil, nil, err
	}
	pre, err = openCLIPPreprocessor(size, f.Pre.Mean, f.Pre.Std, f.Pre.Interpolation, f.Pre.ResizeMode)
	return config, pre, err
}

// clipVision returns the config.json vision_config of OpenCLIP's CLIP
// vision tower (vision_cfg raw), for the joint space width embed and the
// activation act, and its image size.
func clipVision(raw json.RawMessage, embed int, act string) (map[string]any, int, error) {
	if err := checkOpenCLIPTower("vision_cfg", raw); err != nil {
		return nil, 0, err
	}
	v := openCLIPVision{Layers: 12, Width: 768, HeadWidth: 64, MLPRatio: 4, PatchSize: 16}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, 0, fmt.Errorf("model_cfg.vision_cfg: %w", err)
	}
	size, err := openCLIPImageSize(v.ImageSize)
	if err != nil {
		return nil, 0, err
	}
	if v.HeadWidth <= 0 || v.Width%v.HeadWidth != 0 {
		return nil, 0, fmt.Errorf("model_cfg.vision_cfg.head_width %d does not divide width %d", v.HeadWidth, v.Width)
	}
	return map[string]any{"hidden_size": v.Width, "intermediate_size": int(float64(v.Width) * v.MLPRatio),
		"projection_dim": embed, "num_hidden_layers": v.Layers, "num_attention_heads": v.Width / v.HeadWidth,
		"num_channels": 3, "image_size": size, "patch_size": v.PatchSize, "hidden_act": act, "layer_norm_eps": 1e-5}, size, nil
}

// openCLIPImageSize reads vision_cfg.image_size: a number, or a [height,
// width] list of two equal ones (224 when absent).
func openCLIPImageSize(raw json.RawMessage) (int, error) {
	if raw == nil {
		return 224, nil
	}
	var n int
	if json.Unmarshal(raw, &n) == nil && n > 0 {
		return n, nil
	}
	var hw []int
	if json.Unmarshal(raw, &hw) == nil && len(hw) == 2 && hw[0] == hw[1] && hw[0] > 0 {
		return hw[0], nil
	}
	return 0, fmt.Errorf("model_cfg.vision_cfg.image_size %s: want a number or a [height, width] list of two equal ones (only square sizes are built here)", raw)
}

// openCLIPPreprocessor writes the CLIPImageProcessor config of OpenCLIP's
// default inference transform for images of size: resize_mode "shortest"
// (resize the shorter side to size, then a centre crop) or "squash"
// (resize to size × size), with interpolation bicubic or bilinear, and
// the mean and std given (OpenAI's when absent).
func openCLIPPreprocessor(size int, mean, std []float64, interp, mode string) ([]byte, error) {
	if mean == nil {
		mean = openCLIPMean
	}
	if std == nil {
		std = openCLIPStd
	}
	if len(mean) != 3 || len(std) != 3 || slices.Contains(std, 0) {
		return nil, fmt.Errorf("preprocess_cfg: mean %v and std %v: want three numbers each, std not 0", mean, std)
	}
	resample := 3
	switch interp {
	case "", "bicubic":
	case "bilinear":
		resample = 2
	default:
		return nil, fmt.Errorf("preprocess_cfg.interpolation %q: want \"bicubic\" or \"bilinear\"", interp)
	}
	p := map[string]any{"image_processor_type": "CLIPImageProcessor", "do_resize": true, "do_rescale": true,
		"rescale_factor": 1.0 / 255, "do_normalize": true, "do_convert_rgb": true, "image_mean": mean, "image_std": std,
		"resample": resample}
	switch mode {
	case "", "shortest":
		p["size"] = map[string]int{"shortest_edge": size}
		p["do_center_crop"] = true
		p["crop_size"] = map[string]int{"height": size, "width": size}
		p["crop_round"] = true // torchvision's CenterCrop rounds the offset
	case "squash":
		p["size"] = map[string]int{"height": size, "width": size}
		p["do_center_crop"] = false
	default:
		return nil, fmt.Errorf("preprocess_cfg.resize_mode %q: want \"shortest\" (resize, centre crop) or \"squash\"", mode)
	}
	return json.MarshalIndent(p, "", "  ")
}

// memFile is a file held in memory (the config files made for a model in
// OpenCLIP's layout).
type memFile struct {
	name string
	*bytes.Reader
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f, nil }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Name() string               { return f.name }
func (f *memFile) Size() int64                { return f.size }
func (f *memFile) Mode() fs.FileMode          { return 0o444 }
func (f *memFile) ModTime() time.Time         { return time.Time{} }
func (f *memFile) IsDir() bool                { return false }
func (f *memFile) Sys() any                   { return nil }

var _ io.ReaderAt = (*memFile)(nil)

func newMemFile(name string, b []byte) *memFile {
	return &memFile{name: filepath.Base(name), Reader: bytes.NewReader(b), size: int64(len(b))}
}

// readOpenCLIPWeights reads the named tensors, under CLIPModel's names,
// from open_clip_model.safetensors (see graphbuild.OpenOpenCLIPCheckpoint):
// the joint-space heads and the last layer's weights a readout takes.
func (m *Model) readOpenCLIPWeights(names []string) (map[string]tensorio.Tensor, error) {
	ck, err := m.openCheckpoint()
	if err != nil {
		return nil, fmt.Errorf("models: model %s: %w", m.where(), err)
	}
	defer ck.Close()
	out := make(map[string]tensorio.Tensor, len(names))
	for _, n := range names {
		info, ok := ck.Info(n)
		if !ok {
			return nil, fmt.Errorf("models: model %s: %s has no tensor that gives %s", m.where(), OpenCLIPWeightsFile, n)
		}
		v, err := ck.Float32(n)
		if err != nil {
			return nil, fmt.Errorf("models: model %s: %w", m.where(), err)
		}
		out[n] = tensorio.F32(slices.Clone(info.Shape), v)
	}
	return out, nil
}
