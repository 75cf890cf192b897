package index_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestCollectionQualityScenes: the built-in model's job over 2,000 unseen
// scenes into a collection on a real Weaviate node finds them at least as
// well as the file index of the same job: precision@10 and word peaks
// inside the named object, searched by the image embeddings in Weaviate's
// HNSW graph (the default) and, measured beside it, by MaxSim over the
// patches. CONDITION_QUERY_SCENES sets how many scenes (300 under the race
// detector).
func TestCollectionQualityScenes(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes thousands of scenes")
	}
	n := 2000
	if raceEnabled {
		n = 300 // the race detector's run checks the code, the plain run the target
	}
	if v, err := strconv.Atoi(os.Getenv("CONDITION_QUERY_SCENES")); err == nil && v > 0 {
		n = v
	}
	node := weaviatetest.Start(t)
	ctx := context.Background()
	ss := newSceneSet(t, n)
	url := "weaviate://" + node.Host() + "/Scenes"
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(ctx, batch.Config{Engine: ss.eng, Inputs: []string{ss.in}, Prompts: []string{"x"}, Out: out, Index: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Run(ctx, batch.Config{Engine: ss.eng, Inputs: []string{ss.in}, Prompts: []string{"x"}, Out: filepath.Join(t.TempDir(), "wout"),
		Collection: &batch.CollectionConfig{URL: url}, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	fx, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	wx, err := index.Open(ctx, url, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Close()
	if wx.Rows() != n {
		t.Fatalf("the collection holds %d images, want %d", wx.Rows(), n)
	}
	files := ss.quality(t, fx, index.SearchOptions{Top: 10, Words: true})
	pooled := ss.quality(t, wx, index.SearchOptions{Top: 10, Words: true})
	patches := ss.quality(t, wx, index.SearchOptions{Top: 10, Words: true, ByPatches: true})
	for _, r := range []struct {
		name string
		q    searchQuality
	}{{"file index", files}, {"Weaviate, by embedding", pooled}, {"Weaviate, by MaxSim over patches", patches}} {
		t.Logf("%s: %d scenes, %d prompts: precision@10 %.3f (at most %.3f), word peaks inside the named object %.3f",
			r.name, r.q.Scenes, r.q.Prompts, r.q.PrecisionAt10, r.q.Ceiling, r.q.PeakInMask)
	}
	if pooled.PrecisionAt10 < files.PrecisionAt10 {
		t.Errorf("precision@10 from Weaviate %.3f, below the file index's %.3f", pooled.PrecisionAt10, files.PrecisionAt10)
	}
}
