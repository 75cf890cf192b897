package pipeline

import (
	"context"
	"image"
	"math"
	"testing"
)

// TestClassify: Classify's logits are Similarity's for the templated
// prompts, best first, with probabilities that sum to one and the index of
// each label as given; a second call (the labels' encodings cached) gives
// the same.
func TestClassify(t *testing.T) {
	eng := tinyEngine(t, openTiny(t), Options{})
	ctx := context.Background()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	imgs, err := eng.EncodeImages(ctx, []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	labels := []string{"red", "green", "blue", "cross"}
	texts, err := eng.EncodeTexts(ctx, []string{"a photo of red", "a photo of green", "a photo of blue", "a photo of cross"})
	if err != nil {
		t.Fatal(err)
	}
	_, logits, err := eng.Similarity(imgs, texts)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		got, err := eng.Classify(ctx, &imgs[0], labels, ClassifyOptions{Template: "a photo of {}"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(labels) {
			t.Fatalf("%d labels back, want %d", len(got), len(labels))
		}
		sum := 0.0
		for k, l := range got {
			if l.Text != labels[l.Index] || l.Prompt != "a photo of "+labels[l.Index] || l.Logit != logits[0][l.Index] {
				t.Errorf("round %d: %+v; want the label, prompt and logit (%v) of index %d", round, l, logits[0][l.Index], l.Index)
			}
			if k > 0 && l.Logit > got[k-1].Logit {
				t.Errorf("round %d: %q (%v) after %q (%v): not best first", round, l.Text, l.Logit, got[k-1].Text, got[k-1].Logit)
			}
			sum += float64(l.Prob)
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Errorf("round %d: probabilities sum to %v", round, sum)
		}
	}
	if _, err := eng.Classify(ctx, &imgs[0], nil, ClassifyOptions{}); err == nil {
		t.Error("no labels: no error")
	}
}

// TestPeakCell: the row and column of a map's largest value, the first of
// equal ones.
func TestPeakCell(t *testing.T) {
	for _, tc := range []struct {
		m        []float32
		w        int
		row, col int
	}{
		{[]float32{0, 1, 0, 0, 0, 0}, 3, 0, 1},
		{[]float32{0, 0, 0, 0, 0, 2}, 3, 1, 2},
		{[]float32{5, 0, 0, 5}, 2, 0, 0},
		{nil, 3, 0, 0},
	} {
		o := Overlay{Map: tc.m, GridW: tc.w, GridH: len(tc.m) / tc.w}
		if r, c := o.PeakCell(); r != tc.row || c != tc.col {
			t.Errorf("%v (width %d): cell %d,%d; want %d,%d", tc.m, tc.w, r, c, tc.row, tc.col)
		}
	}
}
