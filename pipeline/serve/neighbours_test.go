package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
)

// twinsIndex runs a job with eng over the scenes and a byte copy of each
// (copies/) and opens its index.
func twinsIndex(t *testing.T, eng *pipeline.Engine) *index.Index {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "scenes", "images")
	copies := filepath.Join(t.TempDir(), "copies")
	if err := os.CopyFS(copies, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{src, copies},
		Prompts: []string{"a red circle"}, Out: out, Index: true}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(context.Background(), out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// apiErrorOf decodes an error answer.
func apiErrorOf(t *testing.T, raw []byte) (e struct {
	Error apiError `json:"error"`
}) {
	t.Helper()
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Errorf("%v: %s", err, raw)
	}
	return e
}

// TestNeighbours: POST /v1/neighbours answers, for every image of a job's
// index of the scenes and their byte copies, what Index.Neighbours
// answers (the same images, cosines and count), the image's copy first
// at cosine 1; bad requests get JSON errors naming the field, an image
// not in the index a 404, a server without an index a 404.
func TestNeighbours(t *testing.T) {
	_, plain, eng := newTestServer(t, false, Options{})
	x := twinsIndex(t, eng)
	_, ts, _ := newTestServer(t, false, Options{Index: x})
	if x.Rows() != 24 {
		t.Fatalf("%d rows, want the 12 scenes and 12 copies", x.Rows())
	}
	for r := range x.Rows() {
		part, it, ok := x.RowItem(r)
		if !ok {
			t.Fatalf("row %d: no image", r)
		}
		want, count, err := x.Neighbours(context.Background(), part, it.Row, 0.5, 5)
		if err != nil {
			t.Fatal(err)
		}
		var got neighboursResponse
		code, _, raw := post(t, ts.URL, "/v1/neighbours", map[string]any{"part": part, "row": it.Row, "threshold": 0.5, "top_k": 5}, &got)
		if code != 200 || got.Count != count || len(got.Hits) != len(want) || got.Part != part || got.Row != it.Row || got.Threshold != 0.5 || got.Rows != 24 {
			t.Fatalf("%s: status %d, %d hits of %d; Index.Neighbours %d of %d: %.300s", it.Path, code, len(got.Hits), got.Count, len(want), count, raw)
		}
		for i, h := range got.Hits {
			if h.Rank != i+1 || h.Path != want[i].Path || h.Score != want[i].Score || h.Part != want[i].Part || h.Row != want[i].Row {
				t.Errorf("%s neighbour %d: %+v; Index.Neighbours %+v", it.Path, i, h, want[i])
			}
		}
		if twin := filepath.Base(it.Path); len(got.Hits) == 0 || filepath.Base(got.Hits[0].Path) != twin || got.Hits[0].Path == it.Path || got.Hits[0].Score < 0.999 {
			t.Errorf("%s: first neighbour %+v, want its byte copy at cosine 1", it.Path, got.Hits)
		}
	}
	part, it, _ := x.RowItem(0)
	var def neighboursResponse
	if code, _, raw := post(t, ts.URL, "/v1/neighbours", map[string]any{"part": part, "row": it.Row}, &def); code != 200 || def.Threshold != 0.96 || len(def.Hits) == 0 {
		t.Errorf("no threshold: status %d, threshold %v: %.200s; want dedup's 0.96", code, def.Threshold, raw)
	}
	for _, c := range []struct {
		body   any
		status int
		code   string
		say    string
	}{
		{map[string]any{"row": 0}, 400, "missing_part", `"part"`},
		{map[string]any{"part": part}, 400, "missing_row", `"row"`},
		{map[string]any{"part": part, "row": 0, "threshold": 0}, 400, "invalid_threshold", `"threshold" is 0`},
		{map[string]any{"part": part, "row": 0, "threshold": 1.5}, 400, "invalid_threshold", `"threshold" is 1.5`},
		{map[string]any{"part": part, "row": 0, "top_k": 101}, 400, "invalid_top_k", `"top_k" is 101`},
		{map[string]any{"part": "nope", "row": 0}, 404, "no_such_image", `"nope"`},
		{map[string]any{"part": part, "row": 99}, 404, "no_such_image", "row 99"},
		{map[string]any{"part": part, "row": 0, "item": 3}, 400, "", "item"},
		{"{", 400, "", ""},
	} {
		code, _, raw := post(t, ts.URL, "/v1/neighbours", c.body, nil)
		e := apiErrorOf(t, raw)
		if code != c.status || (c.code != "" && e.Error.Code != c.code) || !strings.Contains(e.Error.Message, c.say) || e.Error.Type != typeInvalid {
			t.Errorf("%v: status %d %s; want %d %s saying %q", c.body, code, raw, c.status, c.code, c.say)
		}
	}
	if code, _, raw := post(t, plain.URL, "/v1/neighbours", map[string]any{"part": part, "row": 0}, nil); code != http.StatusNotFound || apiErrorOf(t, raw).Error.Code != "no_index" {
		t.Errorf("a server without an index: status %d %s, want 404 no_index", code, raw)
	}
	resp, err := http.Get(ts.URL + "/v1/neighbours")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
		t.Errorf("GET /v1/neighbours: status %d, Allow %q; want 405, POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, _, _ := post(t, ts.URL, "/v1/search", map[string]any{"query": "a red circle"}, nil); code != 200 {
		t.Errorf("a search after the bad requests: status %d", code)
	}
}
