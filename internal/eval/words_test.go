package eval

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/internal/vecscenes"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
)

// siglipDir is the tiny SigLIP test model: random weights, 32×32 pixels,
// patch 8 (a 4×4 grid), SiglipTokenizer over a small sentencepiece model.
var siglipDir = filepath.Join("..", "..", "testdata", "tinysiglip")

func openEngine(t *testing.T, m *models.Model) *pipeline.Engine {
	t.Helper()
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func clipEngine(t *testing.T) *pipeline.Engine {
	t.Helper()
	orttest.Load(t)
	m, err := models.FromFS(embedded.FS(), models.DefaultRef)
	if err != nil {
		t.Fatal(err)
	}
	return openEngine(t, m)
}

func siglipEngine(t *testing.T) *pipeline.Engine {
	t.Helper()
	orttest.Load(t)
	m, err := models.Open(siglipDir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Family() != models.SigLIP {
		t.Fatalf("%s: family %s, want SigLIP", siglipDir, m.Family())
	}
	return openEngine(t, m)
}

// tokenWord is the word a single token spells: without SentencePiece's
// leading "▁" or CLIP's "</w>".
func tokenWord(tok string) string {
	return strings.TrimSuffix(strings.TrimPrefix(tok, "▁"), "</w>")
}

// TestWordTokens maps a three-object caption's colour and shape words (with
// its "," word) onto the tokens of the built-in CLIP's BPE and of
// SiglipTokenizer. The expected positions are the tokenizers' own layouts:
// CLIP's start token, then one token per word, the comma its own; and what
// the official sentencepiece gives for tinysiglip's spiece.model on the
// caption as SiglipTokenizer canonicalises it ("a purple star a white cross
// and a blue triangle": ▁a ▁purple ▁star ▁a ▁white ▁cross ▁an d ▁a ▁blue
// ▁triangle </s>; no start token, the comma dropped, "and" two pieces).
func TestWordTokens(t *testing.T) {
	// Refs 1 2 5 6 9 10: purple star, white cross, blue triangle.
	words := []string{"a", "purple", "star", ",", "a", "white", "cross", "and", "a", "blue", "triangle"}
	caption := "a purple star, a white cross and a blue triangle"
	var refs []evalRef
	for k, w := range []int{1, 5, 9} {
		refs = append(refs, evalRef{w, k}, evalRef{w + 1, k})
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		eng  *pipeline.Engine
		want []int
	}{
		{"CLIP", clipEngine(t), []int{2, 3, 6, 7, 10, 11}},
		{"SigLIP", siglipEngine(t), []int{1, 2, 4, 5, 9, 10}},
	} {
		ps, err := c.eng.Prepare(ctx, caption, "an orange star above a white cross")
		if err != nil {
			t.Fatal(err)
		}
		p := &ps[0].TextEncoding
		got, err := wordTokens(caption, words, refs, p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: tokens %v of %q, want %v", c.name, got, p.Tokens, c.want)
		}
		for r, at := range got {
			if at < len(p.Tokens) && tokenWord(p.Tokens[at]) != words[refs[r].word] {
				t.Errorf("%s: word %q mapped to token %d %q", c.name, words[refs[r].word], at, p.Tokens[at])
			}
		}

		// A scene generated with three objects has the same layout.
		s := scenes.Generator{Seed: 5, MinObjects: 3, MaxObjects: 3, Distinct: true}.Scene(0)
		if !slices.Contains(s.Words, ",") {
			t.Fatalf("scene %q has no comma word: %q", s.Caption, s.Words)
		}
		sp, err := c.eng.Prepare(ctx, s.Caption)
		if err != nil {
			t.Fatal(err)
		}
		var srefs []evalRef
		for _, r := range s.Refs {
			srefs = append(srefs, evalRef{r.Word, r.Object})
		}
		got, err = wordTokens(s.Caption, s.Words, srefs, &sp[0].TextEncoding)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for r, at := range got {
			if w := s.Words[srefs[r].word]; tokenWord(sp[0].Tokens[at]) != w {
				t.Errorf("%s: %q: word %q mapped to token %d %q", c.name, s.Caption, w, at, sp[0].Tokens[at])
			}
			if c.name == "CLIP" && at != srefs[r].word+1 {
				t.Errorf("CLIP: %q: word %d at token %d, want %d (after the start token)", s.Caption, srefs[r].word, at, srefs[r].word+1)
			}
		}

		// "above" is five pieces for tinysiglip: a ref to it must fail
		// with the caption named, not index a wrong token.
		q := &ps[1].TextEncoding
		above := []string{"an", "orange", "star", "above", "a", "white", "cross"}
		_, err = wordTokens(q.Text, above, []evalRef{{1, 0}, {3, 0}}, q)
		if c.name == "SigLIP" {
			if err == nil || !strings.Contains(err.Error(), q.Text) || !strings.Contains(err.Error(), "one token") {
				t.Errorf("SigLIP: a five-token word: error %v, want one naming the caption and asking for one token", err)
			}
		} else if err != nil {
			t.Errorf("CLIP: %v", err)
		}
		// Words that are not the prompt's.
		if _, err := wordTokens(caption, []string{"a", "pink", "star"}, []evalRef{{1, 0}}, p); err == nil || !strings.Contains(err.Error(), caption) {
			t.Errorf("%s: words that are not the prompt's: error %v, want one naming the caption", c.name, err)
		}
	}
}

// TestRunSiglip runs the evaluation on tinysiglip. Its weights are random,
// so only what does not depend on them is checked: the counts, and that the
// token of each colour and shape word is that word's token in the prompt.
func TestRunSiglip(t *testing.T) {
	eng := siglipEngine(t)
	const n = 12
	var hooked int
	hook := func(s *evalScene, p *pipeline.Prompt, toks []int) {
		hooked++
		if len(toks) != len(s.refs) {
			t.Errorf("%q: %d tokens for %d words", s.caption, len(toks), len(s.refs))
			return
		}
		for r, at := range toks {
			w := s.words[s.refs[r].word]
			if at < 0 || at >= p.T() || p.Tokens[at] != "▁"+w {
				t.Errorf("%q: word %q read at token %d of %q", s.caption, w, at, p.Tokens)
			}
		}
	}
	var done, total int
	res, err := run(context.Background(), eng, Options{Scenes: n, Batch: 5, Progress: func(d, tt int) { done, total = d, tt }}, hook)
	if err != nil {
		t.Fatal(err)
	}
	if hooked != 2*n {
		t.Errorf("%d captions seen, want %d", hooked, 2*n)
	}
	if done != 4*n || total != 4*n {
		t.Errorf("progress ended at %d/%d, want %d/%d", done, total, 4*n, 4*n)
	}
	im, err := eng.EncodeImages(context.Background(), images(trainingScenes(PairSeed, 2)(0, 1)))
	if err != nil {
		t.Fatal(err)
	}
	p := im[0].P()
	if g := im[0].Grid; g.H != 4 || g.W != 4 {
		t.Fatalf("grid %s, want 4x4", g)
	}
	for _, c := range []struct {
		fig  Figures
		name string
		pair evalSource
	}{
		{res.Training, RendererTraining, trainingScenes(PairSeed, 2)},
		{res.Independent, RendererIndependent, vectorScenes(VectorPairSeed, 2, stretched)},
	} {
		f := c.fig
		if f.Renderer != c.name {
			t.Errorf("renderer %q, want %q", f.Renderer, c.name)
		}
		refs := 0
		for _, s := range c.pair(0, n) {
			refs += len(s.refs)
		}
		if refs != 4*n {
			t.Fatalf("%s: %d refs in %d two-object scenes", c.name, refs, n)
		}
		if f.ZeroShotN != n {
			t.Errorf("%s: zero-shot over %d scenes, want %d", c.name, f.ZeroShotN, n)
		}
		sum := 0
		for _, row := range f.ShapeConfusion {
			for _, v := range row {
				sum += v
			}
		}
		if len(f.ShapeConfusion) != len(scenes.Shapes) || sum != n {
			t.Errorf("%s: confusion %v: want %d rows summing to %d", c.name, f.ShapeConfusion, len(scenes.Shapes), n)
		}
		if f.PeakWords+f.PeakSkipped != refs {
			t.Errorf("%s: %d peak words + %d skipped, want the %d colour and shape words", c.name, f.PeakWords, f.PeakSkipped, refs)
		}
		if f.PeakWords == 0 || f.OwnPatches == 0 || f.OwnPatches > n*p {
			t.Errorf("%s: %d peak words, %d own patches (of %d)", c.name, f.PeakWords, f.OwnPatches, n*p)
		}
		for _, v := range []float64{f.ZeroShotTop1, f.PeakInside, f.OwnWord} {
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Errorf("%s: figure %v out of [0, 1]", c.name, v)
			}
		}
	}
}

// TestStretchCoverage checks the coverage of a preprocessor that resizes the
// whole image: by hand on an 8×4 mask, and against vecscenes' CropCoverage
// on square scenes, where the crop is the whole image too.
func TestStretchCoverage(t *testing.T) {
	// Object 1 fills the left half; object 2 two pixels of the top right
	// cell (4×2 pixels at grid 2).
	lab := make([]uint8, 8*4)
	for y := range 4 {
		for x := range 8 {
			if x < 4 {
				lab[y*8+x] = 1
			}
		}
	}
	lab[0*8+6], lab[0*8+7] = 2, 2
	got := stretchCoverage(lab, 8, 4, 2, 2)
	want := [][]float64{{1, 0, 1, 0}, {0, 0.25, 0, 0}}
	for k := range want {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("object %d: %v, want %v", k, got[k], want[k])
		}
	}

	g := vecscenes.Generator{Seed: VectorPairSeed, Objects: 2}
	square := 0
	for i := 0; square < 3 && i < 200; i++ {
		s := g.Scene(i)
		if s.W != s.H {
			continue
		}
		square++
		for _, grid := range []int{4, 8} {
			crop, st := s.CropCoverage(ImageSize, grid), stretchCoverage(s.Labels(), s.W, s.H, len(s.Objects), grid)
			for k := range crop {
				for j := range crop[k] {
					// A pixel whose centre is on a cell edge may fall
					// either side in floating point.
					if d := math.Abs(crop[k][j] - st[k][j]); d > 2*float64(grid)/float64(s.W) {
						t.Errorf("scene %d (%dx%d), grid %d, object %d, cell %d: %.4f, CropCoverage %.4f", i, s.W, s.H, grid, k, j, st[k][j], crop[k][j])
					}
				}
			}
		}
	}
	if square == 0 {
		t.Fatal("no square scene among the first 200")
	}
}

// TestCoverageOf: CLIP's and SigLIP's preprocessing are taken; others,
// whose crop the scenes' coverage would not follow, are refused.
func TestCoverageOf(t *testing.T) {
	clip, siglip := vision.DefaultPreprocessor(), vision.SiglipPreprocessor()
	larger := *clip
	larger.Size.ShortestEdge = 256
	plain := *siglip
	plain.DoResize = false
	edge := *siglip
	edge.Size = vision.Size{ShortestEdge: 224}
	wide := *siglip
	wide.Size = vision.Size{Height: 224, Width: 320}
	for _, c := range []struct {
		name string
		pre  *vision.Preprocessor
		want coverageKind
		ok   bool
	}{
		{"CLIP", clip, cropped, true},
		{"SigLIP", siglip, stretched, true},
		{"shortest edge 256, crop 224", &larger, 0, false},
		{"no resize", &plain, 0, false},
		{"shortest edge, no crop", &edge, 0, false},
		{"224x320", &wide, 0, false},
	} {
		got, err := coverageOf(c.pre)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "preprocessor_config.json")) {
			t.Errorf("%s: error %v, want one naming preprocessor_config.json", c.name, err)
		}
	}
}
