package serve

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestSearchCollection: POST /v1/search over a collection in a real
// Weaviate node answers what the file index of the same images answers
// (hits, word cells and boxes, sheets); with the node stopped it answers
// a JSON error and the server goes on serving.
func TestSearchCollection(t *testing.T) {
	node := weaviatetest.Start(t)
	_, _, eng := newTestServer(t, false, Options{})
	ctx := context.Background()
	images := filepath.Join("..", "..", "testdata", "scenes", "images")
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(ctx, batch.Config{Engine: eng, Inputs: []string{images}, Prompts: []string{"a red circle"}, Out: out, Index: true, IndexDType: "float32"}); err != nil {
		t.Fatal(err)
	}
	url := "weaviate://" + node.Host() + "/Scenes"
	if _, err := batch.Run(ctx, batch.Config{Engine: eng, Inputs: []string{images}, Prompts: []string{"a red circle"}, Out: filepath.Join(t.TempDir(), "wout"),
		Collection: &batch.CollectionConfig{URL: url}}); err != nil {
		t.Fatal(err)
	}
	fx, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.Close() })
	wx, err := index.Open(ctx, url, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wx.Close() })
	_, ts, _ := newTestServer(t, false, Options{Index: wx})
	want, err := fx.Search(ctx, eng, "a yellow star", index.SearchOptions{Top: 4, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	var got searchResponse
	code, _, raw := post(t, ts.URL, "/v1/search", map[string]any{"query": "a yellow star", "top_k": 4, "heatmaps": true}, &got)
	if code != 200 || len(got.Hits) != 4 || got.Rows != 12 {
		t.Fatalf("status %d: %.300s", code, raw)
	}
	for i, h := range got.Hits {
		w := want.Hits[i]
		if h.Path != w.Path || h.ID == "" || len(h.Words) != len(w.Words) || h.Heatmap == "" {
			t.Fatalf("hit %d: %s (id %q, %d words, heatmap %d bytes); the file index: %s", i, h.Path, h.ID, len(h.Words), len(h.Heatmap), w.Path)
		}
		for k := range w.Words {
			if h.Words[k].Cell != w.Words[k].Cell || h.Words[k].Box != w.Words[k].Box {
				t.Errorf("hit %d word %s: cell %v box %v; the file index %v %v", i, w.Words[k].Word, h.Words[k].Cell, h.Words[k].Box, w.Words[k].Cell, w.Words[k].Box)
			}
		}
	}
	node.Stop()
	code, _, raw = post(t, ts.URL, "/v1/search", map[string]any{"query": "a yellow star"}, nil)
	if code < 500 || !strings.Contains(string(raw), `"error"`) || !strings.Contains(string(raw), node.Host()) {
		t.Errorf("search with the node stopped: status %d: %.400s", code, raw)
	}
	if resp, err := http.Get(ts.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("the server after a failed search: %v", err)
	} else {
		resp.Body.Close()
	}
}
