package models_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
)

// TestMetaCLIP2Family: model_type metaclip_2 is MetaCLIP 2 (CLIP's towers
// with a class token, softmax scores, built from safetensors), and a folder
// whose tokenizer is another family's, or that has no tokenizer.json, is
// refused naming the files and what was expected.
func TestMetaCLIP2Family(t *testing.T) {
	src := filepath.Join("..", "testdata", "tinymetaclip2")
	copyFolder := func(t *testing.T, skip string) string {
		dir := t.TempDir()
		for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"} {
			if f == skip {
				continue
			}
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		return dir
	}
	m, err := models.Open(copyFolder(t, ""), models.Options{NoBuild: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Family(); f != models.MetaCLIP2 || f.String() != "MetaCLIP 2" || f.Sigmoid() || !f.ClassToken() {
		t.Errorf("family %q (%s), sigmoid %v, class token %v", f, f, f.Sigmoid(), f.ClassToken())
	}
	if err := m.CanBuild(); err != nil {
		t.Errorf("CanBuild: %v", err)
	}
	if !models.BuildsFamily(models.MetaCLIP2) {
		t.Error("BuildsFamily(MetaCLIP2) is false")
	}

	clipTok := copyFolder(t, "")
	os.WriteFile(filepath.Join(clipTok, "tokenizer_config.json"), []byte(`{"tokenizer_class": "CLIPTokenizer"}`), 0o644)
	noTok := copyFolder(t, "tokenizer.json")
	os.Remove(filepath.Join(noTok, "tokenizer_config.json"))
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{clipTok, []string{"config.json says MetaCLIP 2", `tokenizer_class is "CLIPTokenizer"`, "XLMRobertaTokenizer(Fast) (XLM-V) or T5Tokenizer(Fast) (mT5)"}},
		{noTok, []string{"config.json says MetaCLIP 2", "needs its tokenizer.json (XLM-V or mT5)"}},
	} {
		_, err := models.Open(c.dir, models.Options{NoBuild: true})
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Open: error %v, want one saying %q", err, w)
			}
		}
	}
}

// TestNaFlexConfig: model_type siglip2 is SigLIP 2 NaFlex: num_patches
// instead of image_size, SigLIP's scores, graphs built from its
// model.safetensors on first use (the vision graph's probe run on patch
// sequences with a mask).
func TestNaFlexConfig(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "testdata", "tinynaflex")
	m, err := models.Open(dir, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config()
	if m.Family() != models.SigLIP2 || !c.NaFlex() || c.VisionConfig.NumPatches != 16 || c.VisionConfig.ImageSize != 0 || !m.Family().Sigmoid() {
		t.Fatalf("family %s, NaFlex %v, vision config %+v", m.Family(), c.NaFlex(), c.VisionConfig)
	}
	if !m.Built() || !m.Has(models.VisionModelFile) {
		t.Errorf("graphs not built on open (built %v)", m.Built())
	}
	for _, bad := range []struct{ edit, want string }{
		{`"num_patches": 15`, "vision_config.num_patches 15 is not a square number"},
		{`"num_patches": 0`, "vision_config.num_patches is 0, expected a positive number"},
	} {
		cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "config.json"), []byte(strings.Replace(string(cfg), `"num_patches": 16`, bad.edit, 1)), 0o644)
		if _, err := models.Open(d, models.Options{NoBuild: true}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one saying %q", bad.edit, err, bad.want)
		}
	}
}
