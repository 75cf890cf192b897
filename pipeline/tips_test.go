package pipeline

import (
	"context"
	"encoding/json"
	"github.com/conditionhq/condition/models/clip"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// TestTips opens an engine on testdata/tinytips (TIPSv2: graphs built on
// open, no heads) and checks what is TIPSv2's own: the class token and 2
// registers before the 16 patches; the joint-space patches, the patch rows
// of last_hidden_state L2-normalised (torch's patch_embeds); the factor
// 1/temperature (100) from cosine to logit, so that Similarity gives
// torch's logits_per_image and Classify a softmax over them; readout
// maskclip as torch's value attention, clearclip and naclip refused.
func TestTips(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := filepath.Join("..", "testdata", "tinytips")
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, Options{Threads: 1, Truncate: true})
	if eng.LogitScale() < 99.999 || eng.LogitScale() > 100.001 || eng.Scores() != "softmax" || eng.JointDim() != 32 {
		t.Fatalf("logit scale %v, scores %q, joint dim %d; want 100, softmax, 32", eng.LogitScale(), eng.Scores(), eng.JointDim())
	}
	golden := func(name string) []float32 {
		x, err := tensorio.ReadNPY(filepath.Join(dir, "golden", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		return x.Data.([]float32)
	}
	var prompts []string
	b, err := os.ReadFile(filepath.Join(dir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &prompts); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var data [][]byte
	for _, f := range []string{"wide.png", "tall.png"} {
		b, err := os.ReadFile(filepath.Join(dir, "golden", "images", f))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	imgs, err := eng.EncodeImageData(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	texts, err := eng.EncodeTexts(ctx, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs[0].States) != 19*32 || imgs[0].P() != 16 {
		t.Fatalf("image states %d values, %d patches; want 19 rows of 32 and 16 patches", len(imgs[0].States), imgs[0].P())
	}
	// Joint-space patches: torch's patch_embeds, normalised; with readout
	// maskclip, torch's value attention, normalised, and image_embeds as
	// without it.
	jointPatches := func(eng *Engine, imgs []ImageEncoding, want []float32, what string) {
		t.Helper()
		for i := range imgs {
			rows, err := eng.JointPatches(&imgs[i])
			if err != nil {
				t.Fatal(err)
			}
			for p := range 16 {
				w := want[(i*16+p)*32 : (i*16+p+1)*32]
				var n float64
				for _, v := range w {
					n += float64(v) * float64(v)
				}
				n = math.Sqrt(n)
				for k, v := range rows[p*32 : (p+1)*32] {
					if math.Abs(float64(v)-float64(w[k])/n) > 1e-5 {
						t.Fatalf("image %d patch %d: joint-space row differs from torch's normalised %s at %d: %v, %v", i, p, what, k, v, float64(w[k])/n)
					}
				}
			}
		}
	}
	jointPatches(eng, imgs, golden("embed_patch_embeds"), "patch_embeds")
	values := tinyEngine(t, m, Options{Threads: 1, Truncate: true, Readout: ReadoutMaskCLIP})
	vimgs, err := values.EncodeImageData(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	jointPatches(values, vimgs, golden("embed_values_patch_embeds"), "value attention")
	for i := range imgs {
		if !slices.Equal(imgs[i].Embeds, vimgs[i].Embeds) {
			t.Errorf("image %d: image_embeds changed with readout maskclip", i)
		}
	}
	_, logits, err := eng.Similarity(imgs, texts)
	if err != nil {
		t.Fatal(err)
	}
	wl := golden("embed_logits_per_image")
	for i := range logits {
		for j, v := range logits[i] {
			if math.Abs(float64(v-wl[i*len(prompts)+j])) > 1e-4 {
				t.Errorf("logit [%d][%d] %v, torch's %v", i, j, v, wl[i*len(prompts)+j])
			}
		}
	}
	labels, err := eng.Classify(ctx, &imgs[0], prompts, ClassifyOptions{Truncate: true})
	if err != nil {
		t.Fatal(err)
	}
	var z float64
	for _, v := range logits[0] {
		z += math.Exp(float64(v - logits[0][1]))
	}
	for _, l := range labels {
		if p := math.Exp(float64(l.Logit-logits[0][1])) / z; math.Abs(p-float64(l.Prob)) > 1e-5 {
			t.Errorf("label %q: probability %v, softmax of the logits %v", l.Text, l.Prob, p)
		}
	}
	for _, r := range []clip.Readout{ReadoutClearCLIP, ReadoutNACLIP} {
		if _, err := New(ctx, m, Options{Readout: r}); err == nil || !strings.Contains(err.Error(), "TIPSv2") || !strings.Contains(err.Error(), string(ReadoutMaskCLIP)) {
			t.Errorf("readout %s: %v, want an error naming TIPSv2 and maskclip", r, err)
		}
	}
}
