package pipeline

import (
	"context"
	"image"
	"math"
	"slices"
	"testing"

	"github.com/conditionhq/condition/models"
)

// TestEngineScores: the engine hands out its scores' probabilities, so
// that no caller computes them again. SigLIP (sigmoid): Probs is
// 1/(1+e^-logit) of each of Similarity's logits, and each attention's Prob
// that of its Score, whole or over windows. CLIP (softmax): each image's
// Probs sum to 1 and are Classify's, and Prob is 0.
func TestEngineScores(t *testing.T) {
	ctx := context.Background()
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	prompts := []string{"a red car", "two blue dots", "a green square"}
	sm, err := models.Open(siglipDir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *models.Model
	}{{"tiny SigLIP", sm}, {"tiny CLIP", openTiny(t)}} {
		eng := tinyEngine(t, tc.m, Options{Truncate: true})
		sigmoidScores := eng.Scores() == SigmoidScores
		if sigmoidScores != (tc.m.Family() == models.SigLIP) {
			t.Fatalf("%s: scores %s", tc.name, eng.Scores())
		}
		texts, err := eng.EncodeTexts(ctx, prompts)
		if err != nil {
			t.Fatal(err)
		}
		imgs, err := eng.EncodeImages(ctx, []image.Image{img})
		if err != nil {
			t.Fatal(err)
		}
		_, logits, err := eng.Similarity(imgs, texts)
		if err != nil {
			t.Fatal(err)
		}
		probs := eng.Probs(logits)
		if len(probs) != 1 || len(probs[0]) != len(prompts) {
			t.Fatalf("%s: probs %v", tc.name, probs)
		}
		sum := 0.0
		for j, l := range logits[0] {
			sum += float64(probs[0][j])
			if want := float32(1 / (1 + math.Exp(-float64(l)))); sigmoidScores && probs[0][j] != want {
				t.Errorf("%s: prob %v of logit %v, want its sigmoid %v", tc.name, probs[0][j], l, want)
			}
		}
		if !sigmoidScores {
			if math.Abs(sum-1) > 1e-6 {
				t.Errorf("%s: softmax probs %v sum to %v", tc.name, probs[0], sum)
			}
			labels, err := eng.Classify(ctx, &imgs[0], prompts, ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range labels {
				if l.Prob != probs[0][l.Index] {
					t.Errorf("%s: Classify's prob of %q %v, Probs %v", tc.name, l.Text, l.Prob, probs[0][l.Index])
				}
			}
		}
		ps, err := eng.Prepare(ctx, prompts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, windows := range []bool{false, true} {
			atts, err := eng.AttendImages(ctx, []image.Image{img}, ps, AttendOptions{Windows: windows})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range atts[0] {
				want := 0.0
				if sigmoidScores {
					want = 1 / (1 + math.Exp(-a.Score))
				}
				if !a.HasScore || math.Abs(a.Prob-want) > 1e-15 {
					t.Errorf("%s, windows %v: prompt %q: score %v (%v), prob %v, want %v", tc.name, windows, a.Prompt.Text, a.Score, a.HasScore, a.Prob, want)
				}
			}
		}
	}
}

// TestContentWords: the words of a prompt that carry content, in order:
// not the special tokens, not the stop words (the built-in model: its
// context holds a sentence).
func TestContentWords(t *testing.T) {
	openTiny(t) // loads ONNX Runtime, or skips
	m, err := models.Open(models.DefaultRef, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := tinyEngine(t, m, Options{})
	for prompt, want := range map[string][]string{
		"a red circle on the left of the blue square": {"red", "circle", "left", "blue", "square"},
		"The cat and a dog":                           {"cat", "dog"},
		"a the of":                                    nil,
	} {
		ps, err := eng.Prepare(context.Background(), prompt)
		if err != nil {
			t.Fatal(err)
		}
		if got := ps[0].Content; !slices.Equal(got, want) {
			t.Errorf("%q: content words %q, want %q", prompt, got, want)
		}
	}
}
