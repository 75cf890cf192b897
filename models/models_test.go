package models_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
)

var tiny = filepath.Join("..", "testdata", "tinyclip")

func TestOpenDirectory(t *testing.T) {
	m, err := models.Open(tiny, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	// Values written by testdata/tinyclip/generate.py.
	if c.ProjectionDim != 16 || c.TextConfig.HiddenSize != 32 || c.VisionConfig.HiddenSize != 24 ||
		c.VisionConfig.PatchSize != 8 || c.VisionConfig.ImageSize != 32 || c.TextConfig.MaxPositionEmbeddings != 16 ||
		c.TextConfig.EosTokenID != c.TextConfig.VocabSize-1 {
		t.Fatalf("config %+v", c)
	}
	if h, w := c.VisionConfig.GridSize(); h != 4 || w != 4 {
		t.Errorf("grid %dx%d, want 4x4", h, w)
	}
	if !m.Has(models.TextModelFile) || !m.Has(models.VisionModelFile) || m.Has("onnx") {
		t.Error("Has is wrong")
	}
	if _, err := fs.Stat(m.FS(), "tokenizer.json"); err != nil {
		t.Error(err)
	}
	abs, _ := filepath.Abs(tiny)
	if m.Dir() != abs || m.Path(models.TextModelFile) != filepath.Join(abs, "onnx", "text_model.onnx") {
		t.Errorf("Dir %s Path %s", m.Dir(), m.Path(models.TextModelFile))
	}
	_, err = m.ReadFile("onnx/missing.onnx")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "onnx/missing.onnx") || !strings.Contains(err.Error(), tiny) {
		t.Errorf("missing file: %v; want an error naming the file and the model", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "model.onnx")
	os.WriteFile(file, []byte("x"), 0o644)
	noConfig := filepath.Join(dir, "empty")
	os.Mkdir(noConfig, 0o755)
	badConfig := filepath.Join(dir, "bad")
	os.Mkdir(badConfig, 0o755)
	os.WriteFile(filepath.Join(badConfig, "config.json"), []byte(`{"vision_config": {"image_size": 30, "patch_size": 8}}`), 0o644)
	for _, c := range []struct {
		ref  string
		want []string
	}{
		{"", []string{"empty model reference"}},
		{"default", []string{"default model"}},
		{file, []string{"is a file"}},
		{filepath.Join(dir, "nope"), []string{"no such directory"}},
		{noConfig, []string{"has no config.json", noConfig}},
		{badConfig, []string{"config.json", "not a multiple of patch_size"}},
		{"openai/clip-vit-base-patch32", []string{"not in the local Hugging Face cache", "not supported yet"}},
	} {
		_, err := models.Open(c.ref, models.Options{HubCache: filepath.Join(dir, "hub")})
		if err == nil {
			t.Errorf("Open(%q): no error", c.ref)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%q): error %q lacks %q", c.ref, err, w)
			}
		}
	}
}

func TestOpenHubCache(t *testing.T) {
	hub := t.TempDir()
	repo := filepath.Join(hub, "models--org--tiny")
	commit := strings.Repeat("ab", 20)
	snap := filepath.Join(repo, "snapshots", commit)
	os.MkdirAll(filepath.Join(repo, "refs"), 0o755)
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(repo, "refs", "main"), []byte(commit+"\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "refs", "v1"), []byte(commit), 0o644)
	b, err := os.ReadFile(filepath.Join(tiny, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The hub cache keeps files as symlinks into blobs/.
	os.MkdirAll(filepath.Join(repo, "blobs"), 0o755)
	os.WriteFile(filepath.Join(repo, "blobs", "cfg"), b, 0o644)
	if err := os.Symlink(filepath.Join("..", "..", "blobs", "cfg"), filepath.Join(snap, "config.json")); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"org/tiny", "org/tiny@main", "org/tiny@v1", "org/tiny@" + commit} {
		m, err := models.Open(ref, models.Options{HubCache: hub})
		if err != nil {
			t.Fatalf("Open(%s): %v", ref, err)
		}
		if m.Revision() != commit || m.Dir() != snap || m.Config().ProjectionDim != 16 {
			t.Errorf("Open(%s): revision %s dir %s", ref, m.Revision(), m.Dir())
		}
	}
	t.Setenv("HF_HUB_CACHE", hub)
	if _, err := models.Open("org/tiny", models.Options{}); err != nil {
		t.Errorf("with HF_HUB_CACHE: %v", err)
	}
	if _, err := models.Open("org/tiny@dev", models.Options{}); err == nil || !strings.Contains(err.Error(), "refs/dev") {
		t.Errorf("unknown revision: %v", err)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := models.ParseConfig([]byte(`{"projection_dim": 768, "text_config": {"hidden_size": 768}, "vision_config": {"patch_size": 14, "image_size": 336}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := models.DefaultConfig()
	if c.ProjectionDim != 768 || c.TextConfig.HiddenSize != 768 || c.TextConfig.VocabSize != d.TextConfig.VocabSize ||
		c.TextConfig.MaxPositionEmbeddings != 77 || c.VisionConfig.HiddenSize != 768 || c.VisionConfig.PatchSize != 14 ||
		c.LogitScaleInitValue != 2.6592 || c.TextConfig.EosTokenID != 49407 {
		t.Fatalf("config %+v", c)
	}
	// Older files: text_config_dict / vision_config_dict.
	c, err = models.ParseConfig([]byte(`{"text_config_dict": {"hidden_size": 64}, "vision_config_dict": {"hidden_size": 48, "patch_size": 16}}`))
	if err != nil || c.TextConfig.HiddenSize != 64 || c.VisionConfig.HiddenSize != 48 || c.VisionConfig.PatchSize != 16 {
		t.Fatalf("config_dict: %+v, %v", c, err)
	}
	for _, bad := range []string{`[1]`, `{"projection_dim": 0}`, `{"text_config": {"hidden_size": "wide"}}`} {
		if _, err := models.ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s): no error", bad)
		}
	}
}

func TestWeights(t *testing.T) {
	m, err := models.Open(tiny, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.ReadWeights("text_projection.weight", "visual_projection.weight", "vision_model.post_layernorm.weight")
	if err != nil {
		t.Fatal(err)
	}
	// HF layout [out, in]: projection_dim × width.
	if s := w["text_projection.weight"].Shape; len(s) != 2 || s[0] != 16 || s[1] != 32 {
		t.Errorf("text_projection.weight %v, want [16 32]", s)
	}
	if s := w["visual_projection.weight"].Shape; len(s) != 2 || s[0] != 16 || s[1] != 24 {
		t.Errorf("visual_projection.weight %v, want [16 24]", s)
	}
	if _, err := m.ReadWeights("nope"); err == nil || !strings.Contains(err.Error(), "no tensor nope") {
		t.Errorf("missing tensor: %v", err)
	}
	// generate.py leaves logit_scale at its initial value, ln(1/0.07).
	s, fromWeights, err := m.LogitScale()
	if err != nil || !fromWeights || s < 2.659 || s > 2.6593 {
		t.Errorf("LogitScale = %v, %v, %v", s, fromWeights, err)
	}
}
