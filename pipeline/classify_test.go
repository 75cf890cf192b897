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

// TestAttendJoint: attending to an image's stored joint-space patches gives
// what Attend gives from its encoding: the same Similarity and text →
// image maps.
func TestAttendJoint(t *testing.T) {
	eng := tinyEngine(t, openTiny(t), Options{})
	ctx := context.Background()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 13)
	}
	imgs, err := eng.EncodeImages(ctx, []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := eng.Prepare(ctx, "a red circle", "blue")
	if err != nil {
		t.Fatal(err)
	}
	want, err := eng.Attend(ctx, &imgs[0], ps, AttendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jp, err := eng.JointPatches(&imgs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(jp) != imgs[0].P()*eng.JointDim() {
		t.Fatalf("%d joint values for %d patches of width %d", len(jp), imgs[0].P(), eng.JointDim())
	}
	got, err := eng.AttendJoint(ctx, jp, imgs[0].Grid, ps)
	if err != nil {
		t.Fatal(err)
	}
	for k := range ps {
		if d := maxAbsDiff(got[k].Similarity, want[k].Similarity); d != 0 {
			t.Errorf("prompt %d: similarity differs by %g", k, d)
		}
		if d := maxAbsDiff(got[k].TextToImage, want[k].TextToImage); d > 1e-6 {
			t.Errorf("prompt %d: text_to_image differs by %g", k, d)
		}
		if got[k].ImageToText != nil || got[k].HasScore {
			t.Errorf("prompt %d: image → text or a score without the image encoding", k)
		}
	}
	if _, err := eng.AttendJoint(ctx, jp[:len(jp)-1], imgs[0].Grid, ps); err == nil {
		t.Error("a short patch array: no error")
	}
}
