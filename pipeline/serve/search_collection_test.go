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
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
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

// TestSearchCollectionVideoSegments: over a collection in a real Weaviate
// node, /v1/search answers the segments it answers over the file index of
// the same job over a video (video, start, end, frames, best frame), each
// with its best frame's sheet.
func TestSearchCollectionVideoSegments(t *testing.T) {
	videotest.Need(t)
	node := weaviatetest.Start(t)
	_, _, eng := newTestServer(t, false, Options{})
	ctx := context.Background()
	in := t.TempDir()
	videotest.Make(t, in, "v.mp4", videotest.Frames(12, 64, 64), 4, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart")
	url := "weaviate://" + node.Host() + "/Clip"
	out := filepath.Join(t.TempDir(), "out")
	for _, cfg := range []batch.Config{
		{Out: out, Index: true, IndexDType: "float32"},
		{Out: filepath.Join(t.TempDir(), "wout"), Collection: &batch.CollectionConfig{URL: url}},
	} {
		cfg.Engine, cfg.Inputs, cfg.Prompts, cfg.Video = eng, []string{in}, []string{"x"}, video.Options{FPS: 2}
		if _, err := batch.Run(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	search := func(where string) searchResponse {
		t.Helper()
		x, err := index.Open(ctx, where, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Close() })
		_, ts, _ := newTestServer(t, false, Options{Index: x})
		var got searchResponse
		code, _, raw := post(t, ts.URL, "/v1/search", map[string]any{"query": "a yellow square", "top_k": 2, "heatmaps": true}, &got)
		if code != 200 || len(got.Segments) == 0 {
			t.Fatalf("%s: status %d, %d segments: %.300s", where, code, len(got.Segments), raw)
		}
		return got
	}
	want, got := search(out), search(url)
	if len(got.Segments) != len(want.Segments) {
		t.Fatalf("%d segments over the collection, %d over the file index", len(got.Segments), len(want.Segments))
	}
	for i, sg := range got.Segments {
		w := want.Segments[i]
		if sg.Video != w.Video || sg.Start != w.Start || sg.End != w.End || sg.Frames != w.Frames || sg.Best.Path != w.Best.Path ||
			len(sg.Best.Words) != len(w.Best.Words) || !strings.HasPrefix(sg.Heatmap, "data:image/png;base64,") {
			t.Errorf("segment %d over the collection: %+v; over the file index: %+v", i, sg.Segment, w.Segment)
		}
	}
}
