package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/conditionhq/condition/models/clip"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/vision"
)

// TestOpenCLIP opens testdata/tinyopenclip, a model in OpenCLIP's layout
// alone (open_clip_config.json, open_clip_model.safetensors, no
// config.json): its graphs are built on open from OpenCLIP's tensors, and
// its token ids, image and text embeddings and logits are those of
// scripts/openclip/make_tiny.py's float64 transcription of OpenCLIP's
// forward (cosine ≥ 0.99999, each value within 1e-5). The text is cleaned
// as OpenCLIP's tokenizer cleans it: "&amp;" is "&".
func TestOpenCLIP(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := filepath.Join("..", "testdata", "tinyopenclip")
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.OpenCLIP() || !m.Built() || m.Family() != models.CLIP {
		t.Fatalf("OpenCLIP %v, built %v, family %s; want an OpenCLIP CLIP model with built graphs", m.OpenCLIP(), m.Built(), m.Family())
	}
	golden := func(name string) ([]float32, []int) { return peGolden(t, dir, name) }
	var prompts []string
	b, err := os.ReadFile(filepath.Join(dir, "golden", "prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &prompts); err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, Options{Threads: 1, Truncate: true})
	// The dense readouts read the last layer from OpenCLIP's tensors.
	for _, r := range []clip.Readout{ReadoutClearCLIP, ReadoutNACLIP, ReadoutPEARL} {
		if _, err := New(context.Background(), m, Options{Threads: 1, Readout: r}); err != nil {
			t.Errorf("readout %s: %v", r, err)
		}
	}
	ctx := context.Background()
	texts, err := eng.EncodeTexts(ctx, prompts)
	if err != nil {
		t.Fatal(err)
	}
	ids, shape := golden("input_ids")
	for i, te := range texts {
		row := ids[i*shape[1] : (i+1)*shape[1]]
		for j, id := range te.IDs {
			if float32(id) != row[j] {
				t.Fatalf("prompt %q: ids %v, OpenCLIP's tokenizer %v", prompts[i], te.IDs, row)
			}
		}
		if len(te.IDs) < shape[1] && row[len(te.IDs)] != 0 {
			t.Fatalf("prompt %q: %d ids, OpenCLIP's tokenizer more: %v", prompts[i], len(te.IDs), row)
		}
	}
	var data [][]byte
	for _, f := range []string{"square.png", "wide.png", "odd.png"} {
		b, err := os.ReadFile(filepath.Join(dir, "golden", f))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	// preprocess_cfg as OpenCLIP's transform: Pillow's bicubic resize of the
	// short side, the centre crop, its mean and std.
	pre, err := vision.LoadPreprocessor(m.FS())
	if err != nil {
		t.Fatal(err)
	}
	wp, _ := golden("pixel_values")
	for i, b := range data {
		img, err := vision.Decode(b, vision.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		px, _, _, err := pre.Apply(img)
		if err != nil {
			t.Fatal(err)
		}
		want := wp[i*len(px) : (i+1)*len(px)]
		for k := range px {
			if math.Abs(float64(px[k]-want[k])) > 1e-5 {
				t.Fatalf("image %d: pixel_values[%d] %v, OpenCLIP's transform %v", i, k, px[k], want[k])
			}
		}
	}
	imgs, err := eng.EncodeImageData(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	worst, lowest := 0.0, 1.0
	close := func(what string, got, want []float32) {
		t.Helper()
		var dot, gg, ww float64
		for k := range want {
			worst = max(worst, math.Abs(float64(got[k]-want[k])))
			dot += float64(got[k]) * float64(want[k])
			gg += float64(got[k]) * float64(got[k])
			ww += float64(want[k]) * float64(want[k])
			if d := math.Abs(float64(got[k] - want[k])); d > 1e-5 {
				t.Errorf("%s[%d] %v, the transcription's %v", what, k, got[k], want[k])
				return
			}
		}
		c := dot / math.Sqrt(gg*ww)
		lowest = min(lowest, c)
		if c < 0.99999 || len(got) != len(want) {
			t.Errorf("%s: cosine %v (%d values, want %d)", what, c, len(got), len(want))
		}
	}
	wi, ishape := golden("image_embeds")
	wt, _ := golden("text_embeds")
	d := ishape[1]
	for i := range imgs {
		close(fmt.Sprintf("image_embeds %d", i), imgs[i].Embeds, wi[i*d:(i+1)*d])
	}
	for i := range texts {
		close(fmt.Sprintf("text_embeds %q", prompts[i]), texts[i].Embeds, wt[i*d:(i+1)*d])
	}
	t.Logf("embeddings: largest difference %.3g, lowest cosine %.9f", worst, lowest)
	_, logits, err := eng.Similarity(imgs, texts)
	if err != nil {
		t.Fatal(err)
	}
	wl, _ := golden("logits_per_image")
	for i := range logits {
		for j, v := range logits[i] {
			if math.Abs(float64(v-wl[i*len(prompts)+j])) > 1e-4 {
				t.Errorf("logit [%d][%d] %v, the transcription's %v", i, j, v, wl[i*len(prompts)+j])
			}
		}
	}
}
