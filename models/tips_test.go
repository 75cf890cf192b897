package models_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

const tinyTips = "../testdata/tinytips"

// tipsFolder copies testdata/tinytips's files into a temporary folder,
// config.json replaced by config when it is not empty.
func tipsFolder(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.model", "tokenizer_config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(tinyTips, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" && config != "" {
			b = []byte(config)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTipsFamily: model_type tipsv2 (and its towers' types) is TIPSv2, a
// class token (then registers) before the patches, softmax scores, graphs
// built from safetensors; its config's TIPS fields are read and another
// family's parsing is unchanged.
func TestTipsFamily(t *testing.T) {
	m, err := models.Open(tinyTips, models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Family(); f != models.Tipsv2 || f.String() != "TIPSv2" || f.Sigmoid() || !f.ClassToken() {
		t.Errorf("family %q (%s), sigmoid %v, class token %v", f, f, f.Sigmoid(), f.ClassToken())
	}
	if err := m.CanBuild(); err != nil {
		t.Errorf("CanBuild: %v", err)
	}
	if !models.BuildsFamily(models.Tipsv2) {
		t.Error("BuildsFamily(Tipsv2) is false")
	}
	c := m.Config()
	v := c.VisionConfig
	if c.ProjectionDim != 32 || c.Temperature != 0.01 || v.NumRegisterTokens != 2 || v.MLPRatio != 1.75 || v.IntermediateSize != 56 ||
		!v.QKVBias || !v.InterpolateAntialias || v.UseSwiGLUFFN || !c.TextConfig.ScaleSqrtDepth || c.TextConfig.PoolingEpsilon != 1e-8 ||
		c.TextConfig.MaxPositionEmbeddings != 16 || v.ImageSize != 16 || v.PatchSize != 4 {
		t.Errorf("config %+v", c)
	}
	for _, mt := range []string{"tipsv2_text_model", "tipsv2_vision_model"} {
		if c, err := models.ParseConfig([]byte(`{"model_type": "` + mt + `"}`)); err != nil || c.Family != models.Tipsv2 {
			t.Errorf("%s: family %q, %v", mt, c.Family, err)
		}
	}
	// Defaults: transformers' Tipsv2Config (v5.15.1's: google/tipsv2-b14's).
	d, err := models.ParseConfig([]byte(`{"model_type": "tipsv2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Temperature != 0.005065968260169029 || d.VisionConfig.PatchSize != 14 || d.ProjectionDim != 768 || d.VisionConfig.IntermediateSize != 3072 || d.VisionConfig.NumRegisterTokens != 1 ||
		d.TextConfig.MaxPositionEmbeddings != 64 || d.TextConfig.HiddenAct != "relu" || d.VisionConfig.ImageSize != 448 {
		t.Errorf("defaults %+v", d)
	}
	// A CLIP config reads as it did.
	cl, err := models.ParseConfig([]byte(`{"model_type": "clip"}`))
	if err != nil || cl.Temperature != 0 || cl.VisionConfig.NumRegisterTokens != 0 || cl.VisionConfig.IntermediateSize != 3072 {
		t.Errorf("clip config %+v, %v", cl, err)
	}
}

// TestTipsFlatConfig: the older flat config.json (the original code's
// names at the top level) reads as Tipsv2Config converts it.
func TestTipsFlatConfig(t *testing.T) {
	c, err := models.ParseConfig([]byte(`{"model_type": "tipsv2", "embed_dim": 1152, "img_size": 448, "patch_size": 14,
		"num_register_tokens": 1, "text_hidden_size": 1152, "text_mlp_dim": 4304, "max_len": 64, "text_num_heads": 16,
		"text_num_layers": 27, "vocab_size": 32000, "ffn_layer": "mlp", "vision_fn": "vit_so400m", "temperature": 0.007}`))
	if err != nil {
		t.Fatal(err)
	}
	v, tc := c.VisionConfig, c.TextConfig
	if v.HiddenSize != 1152 || v.ImageSize != 448 || v.PatchSize != 14 || v.NumRegisterTokens != 1 || v.NumHiddenLayers != 27 ||
		v.NumAttentionHeads != 16 || v.UseSwiGLUFFN || v.MLPRatio != 4304.0/1152 || v.IntermediateSize != 4304 ||
		tc.HiddenSize != 1152 || tc.IntermediateSize != 4304 || tc.MaxPositionEmbeddings != 64 || tc.NumAttentionHeads != 16 ||
		tc.NumHiddenLayers != 27 || tc.VocabSize != 32000 || c.Temperature != 0.007 || c.ProjectionDim != 1152 {
		t.Errorf("flat so400m config read as %+v", c)
	}
	g, err := models.ParseConfig([]byte(`{"model_type": "tipsv2", "embed_dim": 1536, "text_hidden_size": 1536, "text_mlp_dim": 6144,
		"ffn_layer": "swiglu", "vision_fn": "vit_giant2"}`))
	if err != nil || !g.VisionConfig.UseSwiGLUFFN || g.VisionConfig.NumHiddenLayers != 40 || g.VisionConfig.NumAttentionHeads != 24 || g.VisionConfig.MLPRatio != 4 {
		t.Errorf("flat g14 config read as %+v (%v)", g.VisionConfig, err)
	}
}

// TestTipsConfigErrors: a TIPSv2 config.json that cannot run is refused,
// naming the field.
func TestTipsConfigErrors(t *testing.T) {
	for _, tt := range []struct{ json, want string }{
		{`{"model_type": "tipsv2", "text_config": {"hidden_size": 512}}`, "text_config.hidden_size 512 and vision_config.hidden_size 768 differ"},
		{`{"model_type": "tipsv2", "temperature": 0}`, "temperature is 0"},
		{`{"model_type": "tipsv2", "temperature_init_value": -1}`, "temperature is -1"},
		{`{"model_type": "tipsv2", "vision_config": {"mlp_ratio": 0}}`, "vision_config.mlp_ratio is 0"},
		{`{"model_type": "tipsv2", "vision_config": {"num_register_tokens": -1}}`, "vision_config.num_register_tokens is -1"},
		{`{"model_type": "tipsv3"}`, `TIPSv2 ("tipsv2")`},
	} {
		if _, err := models.ParseConfig([]byte(tt.json)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", tt.json, err, tt.want)
		}
	}
}

// TestTipsLogitScale: the engine's factor exp(LogitScale) is 1/temperature,
// the temperature read from a temperature tensor in model.safetensors when
// it has one (the transformers versions that learn it), else from
// config.json's temperature or temperature_init_value.
func TestTipsLogitScale(t *testing.T) {
	check := func(t *testing.T, dir string, want float64, wantWeights bool) {
		t.Helper()
		m, err := models.Open(dir, models.Options{NoBuild: true})
		if err != nil {
			t.Fatal(err)
		}
		s, fromWeights, err := m.LogitScale()
		if err != nil || fromWeights != wantWeights || math.Abs(math.Exp(float64(s))-want)/want > 1e-6 {
			t.Errorf("exp(logit_scale) %v (from weights %v, err %v), want %v (%v)", math.Exp(float64(s)), fromWeights, err, want, wantWeights)
		}
	}
	check(t, tinyTips, 100, false)
	b, err := os.ReadFile(filepath.Join(tinyTips, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), `"temperature": 0.01`, `"temperature_init_value": 0.002`, 1)
	check(t, tipsFolder(t, cfg), 500, false)
	// Neither: transformers' default, which its config.json leaves out.
	cfg = strings.Replace(string(b), `"temperature": 0.01,`, ``, 1)
	if cfg == string(b) {
		t.Fatal("config.json has no \"temperature\": 0.01,")
	}
	check(t, tipsFolder(t, cfg), 1/0.005065968260169029, false)

	// A temperature tensor wins.
	dir := tipsFolder(t, "")
	ts, meta, err := tensorio.ReadSafetensors(filepath.Join(tinyTips, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ts["temperature"] = tensorio.F32([]int{}, []float32{0.02})
	enc, err := tensorio.EncodeSafetensors(ts, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, dir, 50, true)
	if names := models.HeadNamesFor(models.Tipsv2); len(names) != 1 || names[0] != "temperature" {
		t.Errorf("HeadNamesFor(Tipsv2) = %v", names)
	}
}

// TestTipsTokenizerFiles: a TIPSv2 folder needs Tipsv2Tokenizer's
// tokenizer.json (text.TestTipsJSONFiles reads one) or tokenizer.model;
// another family's tokenizer is refused naming both files.
func TestTipsTokenizerFiles(t *testing.T) {
	js := tipsFolder(t, "")
	os.Remove(filepath.Join(js, "tokenizer.model"))
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join("..", "text", "testdata", "tipsv2", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(js, f), b, 0o644)
	}
	if _, err := models.Open(js, models.Options{NoBuild: true}); err != nil {
		t.Fatalf("a TIPSv2 folder with tokenizer.json: %v", err)
	}

	other := tipsFolder(t, "")
	os.WriteFile(filepath.Join(other, "tokenizer_config.json"), []byte(`{"tokenizer_class": "SiglipTokenizer"}`), 0o644)
	_, err := models.Open(other, models.Options{NoBuild: true})
	if err == nil || !strings.Contains(err.Error(), "config.json says TIPSv2") || !strings.Contains(err.Error(), `tokenizer_config.json's tokenizer_class is "SiglipTokenizer"`) {
		t.Errorf("SigLIP's tokenizer: %v", err)
	}
	none := tipsFolder(t, "")
	os.Remove(filepath.Join(none, "tokenizer.model"))
	if _, err := models.Open(none, models.Options{NoBuild: true}); err == nil || !strings.Contains(err.Error(), "tokenizer.model") || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("no tokenizer.model nor tokenizer.json: %v", err)
	}
}

// TestTipsSizeLists: Tipsv2VisionConfig's image_size and patch_size may be
// [height, width] lists; square ones read as their number, others are
// refused naming the field.
func TestTipsSizeLists(t *testing.T) {
	c, err := models.ParseConfig([]byte(`{"model_type": "tipsv2", "vision_config": {"image_size": [224, 224], "patch_size": [14, 14]}}`))
	if err != nil || c.VisionConfig.ImageSize != 224 || c.VisionConfig.PatchSize != 14 {
		t.Errorf("square lists: image %d patch %d, %v; want 224 and 14", c.VisionConfig.ImageSize, c.VisionConfig.PatchSize, err)
	}
	for _, bad := range []string{`{"image_size": [448, 672]}`, `{"patch_size": [14, 16]}`, `{"image_size": [448]}`} {
		_, err := models.ParseConfig([]byte(`{"model_type": "tipsv2", "vision_config": ` + bad + `}`))
		if err == nil || !strings.Contains(err.Error(), "vision_config.") || !strings.Contains(err.Error(), "square") {
			t.Errorf("%s: %v, want an error naming the field and square sizes", bad, err)
		}
	}
}
