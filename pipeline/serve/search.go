package serve

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
)

// maxSearchTop bounds a search request's top_k.
const maxSearchTop = 100

// searchRequest is what /v1/search takes.
type searchRequest struct {
	Query    string  `json:"query"`
	TopK     int     `json:"top_k"`    // default 10, at most maxSearchTop
	Words    *bool   `json:"words"`    // where each word is in each hit (default true)
	Heatmaps bool    `json:"heatmaps"` // each hit's sheet as a PNG data URI
	Box      float32 `json:"box"`      // the fraction of a word's peak its box takes in (default 0.5)
}

type searchHit struct {
	index.Hit
	Rank    int    `json:"rank"`
	Heatmap string `json:"heatmap,omitempty"`
}

// searchSegment is a run of frames of one video (index.Segment), its
// best frame's sheet with "heatmaps".
type searchSegment struct {
	index.Segment
	Rank    int    `json:"rank"`
	Heatmap string `json:"heatmap,omitempty"`
}

type searchResponse struct {
	Model string      `json:"model"`
	Query string      `json:"query"`
	Rows  int         `json:"rows"` // the images scored
	Hits  []searchHit `json:"hits"`
	// Segments are the hits that are frames of videos, grouped into runs
	// of consecutive frames (absent when no hit is a video's frame).
	Segments []searchSegment `json:"segments,omitempty"`
}

// search answers POST /v1/search: the index's images ranked by the query,
// and per word where it is in each hit.
func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Index == nil {
		return &apiError{Status: http.StatusNotFound, Type: typeInvalid, Code: "no_index", Message: "this server has no index to search (start it with one)"}
	}
	var req searchRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Query) == "" {
		return badRequest("missing_query", `"query" is required: the text to search the images for`)
	}
	if err := s.checkPrompts("query", []string{req.Query}, false); err != nil {
		return err
	}
	switch {
	case req.TopK == 0:
		req.TopK = 10
	case req.TopK < 0 || req.TopK > maxSearchTop:
		return badRequest("invalid_top_k", `"top_k" is %d: want 1 to %d`, req.TopK, maxSearchTop)
	}
	if req.Box < 0 || req.Box > 1 {
		return badRequest("invalid_box", `"box" is %v: want a fraction of the peak, above 0 and at most 1`, req.Box)
	}
	words := req.Words == nil || *req.Words
	if req.Heatmaps && !words {
		return badRequest("invalid_field", `"heatmaps" needs "words"`)
	}
	ctx := r.Context()
	res, err := s.opts.Index.Search(ctx, s.eng, req.Query, index.SearchOptions{Top: req.TopK, Words: words, Box: req.Box})
	if err != nil {
		var pe *pipeline.PromptError
		if errors.As(err, &pe) {
			return badRequest("invalid_query", "%v", err)
		}
		return s.apiErr(err)
	}
	out := searchResponse{Model: s.eng.Model().Name(), Query: req.Query, Rows: res.Rows, Hits: make([]searchHit, len(res.Hits))}
	for i := range res.Hits {
		out.Hits[i] = searchHit{Hit: res.Hits[i], Rank: i + 1}
	}
	for i, sg := range res.Segments {
		out.Segments = append(out.Segments, searchSegment{Segment: sg, Rank: i + 1})
	}
	if req.Heatmaps {
		if err := s.searchSheets(r, &out, res); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// searchSheets puts each hit's and each segment's best frame's sheet into
// out as a PNG data URI.
func (s *Server) searchSheets(r *http.Request, out *searchResponse, res *index.SearchResult) error {
	hits := slices.Clone(res.Hits)
	for _, sg := range res.Segments {
		hits = append(hits, sg.Best)
	}
	pngs, unread, err := s.opts.Index.Sheets(r.Context(), s.eng, hits)
	if err != nil {
		return s.apiErr(err)
	}
	for i, png := range pngs {
		if unread[i] != nil {
			s.log.Warn("search: heatmap over a plain panel: the original cannot be read", "path", hits[i].Path, "err", unread[i])
		}
		if png == nil {
			continue
		}
		uri := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
		if i < len(out.Hits) {
			out.Hits[i].Heatmap = uri
		} else {
			out.Segments[i-len(out.Hits)].Heatmap = uri
		}
	}
	return nil
}
