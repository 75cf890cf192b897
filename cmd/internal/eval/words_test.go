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
var siglipDir = filepath.Join("..", "..", "..", "testdata", "tinysiglip")

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
	// The independent renderer's coverage is the whole-image one SigLIP's
	// square resize needs (vecscenes.Scene.Coverage), not the crop's.
	vs := vecscenes.Generator{Seed: VectorPairSeed, Objects: 2}
	for i, s := range vectorScenes(VectorPairSeed, 2, eng.Preprocessor())(0, n) {
		got, err := s.coverage(4)
		if err != nil {
			t.Fatal(err)
		}
		if want := vs.Scene(i).StretchCoverage(4); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("independent scene %d: coverage %v, want StretchCoverage %v", i, got, want)
		}
	}
	for _, c := range []struct {
		fig  Figures
		name string
		pair evalSource
	}{
		{res.Training, RendererTraining, trainingScenes(PairSeed, 2)},
		{res.Independent, RendererIndependent, vectorScenes(VectorPairSeed, 2, eng.Preprocessor())},
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

// TestRunRefusesPreprocessing: a preprocessing the scenes' coverage cannot
// follow stops Run before any scene is encoded, with vecscenes' error.
func TestRunRefusesPreprocessing(t *testing.T) {
	eng := siglipEngine(t)
	pre := eng.Preprocessor()
	saved := *pre
	t.Cleanup(func() { *pre = saved })
	pre.Size = vision.Size{Height: 32, Width: 48}
	progressed := false
	_, err := Run(context.Background(), eng, Options{Scenes: 2, Progress: func(int, int) { progressed = true }})
	if err == nil || !strings.Contains(err.Error(), "preprocessor_config.json") || !strings.Contains(err.Error(), "32x48") {
		t.Errorf("a 32x48 resize: error %v, want one naming preprocessor_config.json and the size", err)
	}
	if progressed {
		t.Error("scenes were encoded before the preprocessing was refused")
	}
}
