package pipeline

import (
	"context"
	"encoding/json"
	"image"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/vision"
)

// siglipScenesDir is the tiny SigLIP trained on the generated scenes
// (scripts/pysiglip/train_tiny.py): a model that has learned something,
// where testdata/tinysiglip has random weights.
var siglipScenesDir = filepath.Join("..", "testdata", "siglip-scenes")

// TestSiglipScenesClassify checks Classify's sigmoid probabilities on the
// trained tiny SigLIP against torch's (golden/classify.json: each picture of
// testdata/scenes, preprocessed by Pillow, against the 40 colour × shape
// prompts and against the folder's captions), the caption ids against
// SiglipTokenizer's, and that the model has learned the scenes: every
// picture's own caption scores highest among the captions (or one naming the
// same objects, such as the same two the other way round), and on single-object
// pictures its own prompt is the one label above one half.
func TestSiglipScenesClassify(t *testing.T) {
	orttest.Load(t)
	var golden struct {
		Scale  float64 `json:"logit_scale"`
		Bias   float64 `json:"logit_bias"`
		Images []struct {
			Image        string             `json:"image"`
			Caption      string             `json:"caption"`
			CaptionIDs   []int64            `json:"caption_ids"`
			Probs        map[string]float64 `json:"probs"`
			CaptionProbs []float64          `json:"caption_probs"`
		} `json:"images"`
	}
	b, err := os.ReadFile(filepath.Join(siglipScenesDir, "golden", "classify.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	m, err := models.Open(siglipScenesDir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, Options{Threads: 1})
	if eng.Scores() != SigmoidScores {
		t.Fatalf("scores %s, want sigmoid", eng.Scores())
	}
	ctx := context.Background()
	var labels []string
	for l := range golden.Images[0].Probs {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	var captions []string
	for _, g := range golden.Images {
		captions = append(captions, g.Caption)
	}
	single := 0
	for i, g := range golden.Images {
		img, err := vision.DecodeFile(filepath.Join("..", g.Image), vision.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ims, err := eng.EncodeImages(ctx, []image.Image{img})
		if err != nil {
			t.Fatal(err)
		}
		got, err := eng.Classify(ctx, &ims[0], labels, ClassifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for _, l := range got {
			worst = max(worst, math.Abs(float64(l.Prob)-g.Probs[l.Text]))
		}
		if worst > 1e-4 {
			t.Errorf("%s: probabilities differ from torch's by up to %.2g", g.Image, worst)
		}
		byCaption, err := eng.Classify(ctx, &ims[0], captions, ClassifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		worst = 0
		for _, l := range byCaption {
			worst = max(worst, math.Abs(float64(l.Prob)-g.CaptionProbs[l.Index]))
		}
		if worst > 1e-4 {
			t.Errorf("%s: caption probabilities differ from torch's by up to %.2g", g.Image, worst)
		}
		if top := byCaption[0]; top.Index != i && !slices.Equal(objectsOf(top.Text), objectsOf(g.Caption)) {
			t.Errorf("%s: best caption %q at %.3f, its own %q at %.3f", g.Image, top.Text, top.Prob, g.Caption, own(byCaption, i))
		}
		ps, err := eng.Prepare(ctx, g.Caption)
		if err != nil {
			t.Fatal(err)
		}
		// SiglipTokenizer's ids are padded with </s>, the pad token: the
		// prompt's own ids end at the first one.
		eos := g.CaptionIDs[len(g.CaptionIDs)-1]
		want := g.CaptionIDs[:slices.Index(g.CaptionIDs, eos)+1]
		if !slices.Equal(ps[0].IDs, want) {
			t.Errorf("%q: ids %v, SiglipTokenizer %v", g.Caption, ps[0].IDs, want)
		}
		if _, ok := g.Probs[g.Caption]; !ok {
			continue // several objects: no prompt is the caption
		}
		single++
		above := 0
		for _, l := range got {
			if l.Prob > 0.5 {
				above++
			}
		}
		if got[0].Text != g.Caption || above != 1 {
			t.Errorf("%s (%q): best %q at %.3f, %d labels above 0.5; want the caption alone", g.Image, g.Caption, got[0].Text, got[0].Prob, above)
		}
	}
	if single == 0 {
		t.Fatal("no single-object picture among the golden ones")
	}
	t.Logf("%d pictures within 1e-4 of torch; %d single-object ones named alone", len(golden.Images), single)
}

// own returns the probability of the label given at index i.
func own(labels []Label, i int) float32 {
	for _, l := range labels {
		if l.Index == i {
			return l.Prob
		}
	}
	return 0
}

// objectsOf returns the colour-and-shape pairs a scene caption names, sorted.
func objectsOf(caption string) []string {
	var out []string
	words := strings.Fields(strings.ReplaceAll(caption, ",", ""))
	for i := 1; i < len(words); i++ {
		if slices.Contains(scenes.Colours, words[i-1]) && slices.Contains(scenes.Shapes, words[i]) {
			out = append(out, words[i-1]+" "+words[i])
		}
	}
	slices.Sort(out)
	return out
}
