package index_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

// BenchmarkSearchWords measures stage 2 of a search: for the 20 hits of a
// prompt over an index of 40 images (built-in model), each hit's stored
// patches attended with the prompt (per word its peak, box and map), no
// PNGs; beside it, stage 1 alone over the same index, and stages 1 and 2
// with each hit's heatmap sheet drawn over its original (read from its
// file) and encoded as PNG.
func BenchmarkSearchWords(b *testing.B) {
	openTiny(b) // loads ONNX Runtime, or skips
	m, err := models.Open("default", models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng := tinyEngine(b, m, pipeline.Options{Threads: 1})
	in := filepath.Join(b.TempDir(), "in")
	enginetest.MakeImages(b, in, 40)
	out := filepath.Join(b.TempDir(), "out")
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a red circle"}, Out: out, Index: true}); err != nil {
		b.Fatal(err)
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for _, words := range []bool{false, true} {
		name := "stage1"
		if words {
			name = "stage1+2"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				res, err := x.Search(context.Background(), eng, "a red circle and a blue square", index.SearchOptions{Top: 20, Words: words})
				if err != nil || len(res.Hits) != 20 {
					b.Fatalf("%d hits, %v", len(res.Hits), err)
				}
			}
		})
	}
	b.Run("stage1+2+png", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			res, err := x.Search(ctx, eng, "a red circle and a blue square", index.SearchOptions{Top: 20, Words: true})
			if err != nil || len(res.Hits) != 20 {
				b.Fatalf("%d hits, %v", len(res.Hits), err)
			}
			if _, _, err := x.Sheets(ctx, eng, res.Hits); err != nil {
				b.Fatal(err)
			}
		}
	})
}
