package serve

import (
	"context"
	"encoding/base64"
	"image/png"
	"net/http"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestSearch: POST /v1/search over a job's index answers what
// Index.Search answers (the same hits, scores and word boxes), draws each
// hit's sheet over its original when asked, refuses bad requests with JSON
// errors and keeps serving; a server without an index says so.
func TestSearch(t *testing.T) {
	_, plain, eng := newTestServer(t, false, Options{})
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{filepath.Join("..", "..", "testdata", "scenes", "images")},
		Prompts: []string{"a red circle"}, Out: out, Index: true}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	_, ts, _ := newTestServer(t, false, Options{Index: x})

	post(t, ts.URL, "/v1/search", map[string]any{"query": "a red circle"}, nil) // warm: the server's own goroutines start
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	want, err := x.Search(context.Background(), eng, "a yellow star", index.SearchOptions{Top: 3, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	var got searchResponse
	code, _, raw := post(t, ts.URL, "/v1/search", map[string]any{"query": "a yellow star", "top_k": 3, "heatmaps": true}, &got)
	if code != 200 || len(got.Hits) != 3 || got.Rows != 12 || strings.Contains(string(raw), `"segments"`) || strings.Contains(string(raw), `"video"`) {
		t.Fatalf("status %d (want no segments nor videos for images): %.300s", code, raw)
	}
	for i, h := range got.Hits {
		w := want.Hits[i]
		if h.Rank != i+1 || h.Path != w.Path || h.Score != w.Score || len(h.Words) != 2 || !reflect.DeepEqual(h.Words[0].Box, w.Words[0].Box) || h.Words[1].Cell != w.Words[1].Cell {
			t.Errorf("hit %d: %+v; Index.Search gives %+v", i, h.Hit, w)
		}
		b64, ok := strings.CutPrefix(h.Heatmap, "data:image/png;base64,")
		data, err := base64.StdEncoding.DecodeString(b64)
		if !ok || err != nil {
			t.Fatalf("hit %d: heatmap %.40q: %v", i, h.Heatmap, err)
		}
		if cfg, err := png.DecodeConfig(strings.NewReader(string(data))); err != nil || cfg.Width != 3*pipeline.HeatmapPanel {
			t.Errorf("hit %d: sheet %dx%d, %v; want the image and a panel for each of 2 words", i, cfg.Width, cfg.Height, err)
		}
	}
	for _, bad := range []map[string]any{{}, {"query": "a red circle", "top_k": 0.5}, {"query": "a red circle", "top_k": 1000}, {"query": "x", "box": 2},
		{"query": strings.Repeat("red ", 100)}, {"query": "x", "words": false, "heatmaps": true}, {"prompt": "x"}} {
		if code, _, raw := post(t, ts.URL, "/v1/search", bad, nil); code != 400 || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%.60v: status %d: %.300s", bad, code, raw)
		}
	}
	if code, _, raw := post(t, plain.URL, "/v1/search", map[string]any{"query": "x"}, nil); code != 404 || !strings.Contains(string(raw), "no_index") {
		t.Errorf("a server without an index: status %d: %s", code, raw)
	}
	var plainHits searchResponse
	if code, _, _ := post(t, ts.URL, "/v1/search", map[string]any{"query": "a blue square", "words": false}, &plainHits); code != 200 || len(plainHits.Hits) != 10 || plainHits.Hits[0].Words != nil {
		t.Errorf("words false: status %d, %d hits", code, len(plainHits.Hits))
	}
	// Nothing a search started is left running.
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the searches, %d before", n, before)
	}
}

// TestSearchVideoSegments: over the index of a video, /v1/search answers
// Index.Search's segments, each with its best frame's sheet.
func TestSearchVideoSegments(t *testing.T) {
	videotest.Need(t)
	_, _, eng := newTestServer(t, false, Options{})
	in := t.TempDir()
	videotest.Make(t, in, "v.mp4", videotest.Frames(12, 64, 64), 4, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart")
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"x"}, Out: out, Index: true,
		Video: video.Options{FPS: 2}}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	_, ts, _ := newTestServer(t, false, Options{Index: x})
	want, err := x.Search(context.Background(), eng, "a yellow square", index.SearchOptions{Top: 2, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	var got searchResponse
	code, _, raw := post(t, ts.URL, "/v1/search", map[string]any{"query": "a yellow square", "top_k": 2, "heatmaps": true}, &got)
	if code != 200 || len(got.Segments) == 0 || len(got.Segments) != len(want.Segments) {
		t.Fatalf("status %d, %d segments (Index.Search: %d): %.300s", code, len(got.Segments), len(want.Segments), raw)
	}
	for i, sg := range got.Segments {
		w := want.Segments[i]
		if sg.Rank != i+1 || sg.Video != "v.mp4" || sg.Start != w.Start || sg.End != w.End || sg.Frames != w.Frames || sg.Best.Path != w.Best.Path ||
			len(sg.Best.Words) != 2 || !strings.HasPrefix(sg.Heatmap, "data:image/png;base64,") {
			t.Errorf("segment %d: %+v; Index.Search gives %+v", i, sg.Segment, w)
		}
	}
}
