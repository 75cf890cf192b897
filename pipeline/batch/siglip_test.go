package batch

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestRunSiglip: a job with an index on the tiny SigLIP writes each
// prompt's logit with its sigmoid, and a query over the index scores the
// images with the same logits (logit_bias included).
func TestRunSiglip(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "..", "testdata", "tinysiglip")
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{filepath.Join(dir, "golden", "images")},
		Prompts: []string{"a red car"}, Out: out, Index: true, IndexDType: indexOutF32})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 2 || sum.Failed != 0 {
		t.Fatalf("summary %+v", sum)
	}
	scores := map[string]float64{}
	for p, e := range latestByPath(t, sum.Manifest) {
		if len(e.Scores) != 1 || e.Scores[0].Sigmoid == nil {
			t.Fatalf("%s: scores %+v, want one with its sigmoid", p, e.Scores)
		}
		s := e.Scores[0]
		if math.Abs(*s.Sigmoid-1/(1+math.Exp(-s.Score))) > 1e-12 {
			t.Errorf("%s: sigmoid %v of logit %v", p, *s.Sigmoid, s.Score)
		}
		scores[p] = s.Score
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Search(context.Background(), eng, "a red car", index.SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 2 {
		t.Fatalf("%d hits, want 2", len(res.Hits))
	}
	for _, h := range res.Hits {
		if want := scores[h.Path]; math.Abs(float64(h.Score)-want) > 1e-4 {
			t.Errorf("%s: query score %v, the job's logit %v", h.Path, h.Score, want)
		}
	}
}
