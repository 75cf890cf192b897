package serve

import (
	"errors"
	"net/http"

	"github.com/conditionhq/condition/pipeline/index"
)

// defaultNeighboursThreshold is a neighbours request's threshold when it
// gives none: dedup's default.
const defaultNeighboursThreshold = 0.96

// neighboursRequest is what /v1/neighbours takes: an image of the index
// by its part and row (as a search hit names it).
type neighboursRequest struct {
	Part      string   `json:"part"`
	Row       *int     `json:"row"`
	Threshold *float32 `json:"threshold"` // the least cosine (default 0.96)
	TopK      int      `json:"top_k"`     // default 10, at most maxSearchTop
}

// neighbour is one image near the one asked about: Score is the cosine of
// the two images' embeddings.
type neighbour struct {
	index.Hit
	Rank int `json:"rank"`
}

type neighboursResponse struct {
	Model     string      `json:"model"`
	Part      string      `json:"part"`
	Row       int         `json:"row"`
	Threshold float32     `json:"threshold"`
	Count     int         `json:"count"` // the images within the threshold, hits or not
	Rows      int         `json:"rows"`  // the images compared
	Hits      []neighbour `json:"hits"`
}

// neighbours answers POST /v1/neighbours: the images of the index whose
// embedding has a cosine of at least the threshold with the image's, by
// an exact scan of the index, most alike first.
func (s *Server) neighbours(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Index == nil {
		return &apiError{Status: http.StatusNotFound, Type: typeInvalid, Code: "no_index", Message: "this server has no index to search (start it with one)"}
	}
	var req neighboursRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	switch {
	case req.Part == "":
		return badRequest("missing_part", `"part" is required: the index part of the image, as a search hit gives it`)
	case req.Row == nil:
		return badRequest("missing_row", `"row" is required: the image's row in its part, as a search hit gives it`)
	}
	t := float32(defaultNeighboursThreshold)
	if req.Threshold != nil {
		t = *req.Threshold
	}
	if !(t > 0 && t <= 1) {
		return badRequest("invalid_threshold", `"threshold" is %v: want a cosine above 0 and at most 1`, t)
	}
	switch {
	case req.TopK == 0:
		req.TopK = 10
	case req.TopK < 0 || req.TopK > maxSearchTop:
		return badRequest("invalid_top_k", `"top_k" is %d: want 1 to %d`, req.TopK, maxSearchTop)
	}
	hits, count, err := s.opts.Index.Neighbours(r.Context(), req.Part, *req.Row, t, req.TopK)
	switch {
	case errors.Is(err, index.ErrNoImage):
		return &apiError{Status: http.StatusNotFound, Type: typeInvalid, Code: "no_such_image", Message: err.Error()}
	case err != nil && s.opts.Index.EmbedsDType() == "":
		return badRequest("unsupported_index", "%v", err)
	case err != nil:
		return s.apiErr(err)
	}
	out := neighboursResponse{Model: s.eng.Model().Name(), Part: req.Part, Row: *req.Row, Threshold: t, Count: count,
		Rows: s.opts.Index.Rows(), Hits: make([]neighbour, len(hits))}
	for i, h := range hits {
		out.Hits[i] = neighbour{Hit: h, Rank: i + 1}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
