package pipeline

import (
	"context"
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/models/hub/hubtest"
	"github.com/conditionhq/condition/vision"
)

// TestSiglipGraphsPlusWeights opens SigLIP the way its Transformers.js
// exports are used, "<graphs>+<weights>": the graphs, configs and
// spiece.model from one repository (no model.safetensors, as
// Xenova/siglip-base-patch16-224 ships), logit_scale, logit_bias and the
// pooling heads read by ranges from the original repository's
// model.safetensors. Classify's sigmoid probabilities are torch's, and the
// weights file is never downloaded whole.
func TestSiglipGraphsPlusWeights(t *testing.T) {
	orttest.Load(t)
	const commit = "cccccccccccccccccccccccccccccccccccccccc"
	file := func(name string, lfs bool) hubtest.File {
		b, err := os.ReadFile(filepath.Join(siglipDir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		return hubtest.File{Data: b, LFS: lfs}
	}
	graphs := map[string]hubtest.File{}
	for _, n := range []string{"config.json", "preprocessor_config.json", "special_tokens_map.json", "tokenizer_config.json"} {
		graphs[n] = file(n, false)
	}
	for _, n := range []string{"spiece.model", "onnx/text_model.onnx", "onnx/vision_model.onnx"} {
		graphs[n] = file(n, true)
	}
	weights := map[string]hubtest.File{"config.json": file("config.json", false), "model.safetensors": file("model.safetensors", true)}
	srv := hubtest.New(t, map[string]*hubtest.Repo{
		"org/siglip-onnx": {Commits: map[string]map[string]hubtest.File{commit: graphs}, Branches: map[string]string{"main": commit}},
		"org/siglip":      {Commits: map[string]map[string]hubtest.File{commit: weights}, Branches: map[string]string{"main": commit}},
	})
	mo := models.Options{Hub: &hub.Client{Endpoint: srv.URL(), CacheDir: t.TempDir(), RetryWait: 1}, DerivedCache: t.TempDir(), MaxWeightsDownload: 1000}
	ctx := context.Background()
	eng, err := Open(ctx, "org/siglip-onnx+org/siglip", Options{Model: mo, Truncate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if eng.Model().Family() != models.SigLIP || eng.Scores() != SigmoidScores {
		t.Fatalf("family %s, scores %s", eng.Model().Family(), eng.Scores())
	}
	var ranged int64
	whole := int64(len(weights["model.safetensors"].Data))
	for _, r := range srv.Requests() {
		if r.Method == "GET" && r.Range != "" {
			ranged += r.Bytes
		}
		if r.Method == "GET" && r.Range == "" && r.Bytes == whole {
			t.Errorf("model.safetensors downloaded whole: %+v", r)
		}
	}
	if ranged == 0 {
		t.Error("no range request: the heads were not read from org/siglip's model.safetensors")
	}
	var golden struct {
		Prompts []string `json:"prompts"`
	}
	b, err := os.ReadFile(filepath.Join(siglipDir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	var prompts []string
	var rows []int
	for i, p := range golden.Prompts {
		if p != "" {
			prompts, rows = append(prompts, p), append(rows, i)
		}
	}
	probs := goldenF32(t, "embed_probs_per_image")
	for i, name := range []string{"square.png", "wide.png"} {
		img, err := vision.DecodeFile(filepath.Join(siglipDir, "golden", "images", name), vision.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		enc, err := eng.EncodeImages(ctx, []image.Image{img})
		if err != nil {
			t.Fatal(err)
		}
		labels, err := eng.Classify(ctx, &enc[0], prompts, ClassifyOptions{Truncate: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range labels {
			if want := probs[i*len(golden.Prompts)+rows[l.Index]]; math.Abs(float64(l.Prob-want)) > 1e-5 {
				t.Errorf("%s, label %q: probability %v, torch's sigmoid %v", name, l.Text, l.Prob, want)
			}
		}
		jp, err := eng.JointPatches(&enc[0])
		if err != nil || len(jp) == 0 {
			t.Errorf("%s: joint-space patches from the heads read by ranges: %d values, %v", name, len(jp), err)
		}
	}
}
