package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// apiErr turns an error of the engine into the request's answer.
func (s *Server) apiErr(err error) error {
	var ae *apiError
	var pe *pipeline.PromptError
	var tl *vision.TooLargeError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client left (or timed out): nobody reads the answer.
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "cancelled", Message: "the request was cancelled"}
	case errors.As(err, &tl):
		return badRequest("image_too_large", "the image is %dx%d, over the limit of %d pixels", tl.Width, tl.Height, tl.Limit)
	case errors.As(err, &pe):
		return badRequest("invalid_prompt", "%v", err)
	}
	return err
}

// checkPrompts refuses prompts a request cannot have: none, too many, or
// one that checkPrompt refuses.
func (s *Server) checkPrompts(what string, prompts []string, truncate bool) error {
	if len(prompts) == 0 {
		return badRequest("missing_"+what, "no %s given", what)
	}
	if len(prompts) > s.opts.MaxPrompts {
		return badRequest("too_many_"+what, "%d %s, at most %d per request", len(prompts), what, s.opts.MaxPrompts)
	}
	for i, p := range prompts {
		if err := s.checkPrompt(strings.TrimSuffix(what, "s"), i, p, truncate); err != nil {
			return err
		}
	}
	return nil
}

// checkPrompt refuses a prompt that is empty, too long in characters, or
// (unless truncate) in tokens, naming it (what and its index i) and the
// numbers.
func (s *Server) checkPrompt(what string, i int, p string, truncate bool) error {
	if strings.TrimSpace(p) == "" {
		return badRequest("invalid_prompt", "%s %d is empty", what, i)
	}
	if c := len([]rune(p)); c > s.opts.MaxChars {
		return badRequest("prompt_too_long", "%s %d has %d characters, at most %d", what, i, c, s.opts.MaxChars)
	}
	if truncate {
		return nil
	}
	ids, err := s.eng.Tokenizer().Encode(p)
	if err != nil {
		return badRequest("invalid_prompt", "%s %d: %v", what, i, err)
	}
	if n := s.eng.ContextLength(); len(ids) > n {
		return badRequest("prompt_too_long", "%s %d is %d tokens with the special tokens around it; the model takes at most %d (send \"truncate\": true to cut it)",
			what, i, len(ids), n)
	}
	return nil
}

// prompts returns the prepared prompts of texts: from the cache, or
// encoded in one batch with other requests' misses.
func (s *Server) prompts(ctx context.Context, texts []string, truncate bool) (pipeline.Prompts, error) {
	out := make(pipeline.Prompts, len(texts))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i, t := range texts {
		k := promptKey{text: t, truncate: truncate}
		if p := s.cache.get(k); p != nil {
			s.m.cacheHits.Inc()
			out[i] = p
			continue
		}
		s.m.cacheMisses.Inc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.texts.submit(ctx, k)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			out[i] = p
			s.cache.add(k, p)
		}()
	}
	wg.Wait()
	return out, firstErr
}

// prepare is the text batcher's work: a batch of prompts prepared at once
// (those to truncate apart from the others).
func (s *Server) prepare(keys []promptKey) ([]*pipeline.Prompt, error) {
	out := make([]*pipeline.Prompt, len(keys))
	for _, trunc := range []bool{false, true} {
		var idx []int
		var texts []string
		for i, k := range keys {
			if k.truncate == trunc {
				idx, texts = append(idx, i), append(texts, k.text)
			}
		}
		if len(texts) == 0 {
			continue
		}
		ps, err := s.eng.PrepareWith(context.Background(), pipeline.TextOptions{Truncate: trunc}, texts...)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = ps[j]
		}
	}
	return out, nil
}

// onTheWay counts images a request will give the image batcher, from the
// moment the request comes in until each is queued (or the request fails),
// so that a batch waits for them and not for images that never come.
type onTheWay struct {
	s    *Server
	left atomic.Int64
}

// expect counts n images on their way.
func (s *Server) expect(n int) *onTheWay {
	s.decoding.Add(int64(n))
	o := &onTheWay{s: s}
	o.left.Store(int64(n))
	return o
}

// arrived takes one image off the count; after the last, it does nothing.
func (o *onTheWay) arrived() {
	if o.left.Add(-1) >= 0 {
		o.s.decoding.Add(-1)
	}
}

// done takes what is left off the count.
func (o *onTheWay) done() {
	if n := o.left.Swap(0); n > 0 {
		o.s.decoding.Add(-n)
	}
}

// image decodes and preprocesses an image's bytes, then encodes it in a
// batch with other requests' images. info gives the image's full size (img
// is smaller when the engine decodes JPEGs scaled).
func (s *Server) image(ctx context.Context, data []byte, on *onTheWay) (img image.Image, info vision.Info, enc pipeline.ImageEncoding, err error) {
	queued := false
	defer func() {
		if !queued {
			on.arrived() // failed before the queue
		}
	}()
	if img, info, err = s.decodeImage(data); err != nil {
		return nil, info, enc, err
	}
	px := make([]float32, s.eng.Preprocessor().BufferLen(s.eng.InputSize()))
	if err := s.eng.Preprocess(px, img); err != nil {
		return nil, info, enc, badRequest("invalid_image", "%v", err)
	}
	on.arrived() // queued from here on
	queued = true
	enc, err = s.images.submit(ctx, px)
	return img, info, enc, err
}

// decodeImage decodes an image of a request, a bad one a bad request.
func (s *Server) decodeImage(data []byte) (image.Image, vision.Info, error) {
	img, info, err := s.eng.DecodeImageInfo(data)
	if err != nil {
		var tl *vision.TooLargeError
		if errors.As(err, &tl) {
			return nil, info, err
		}
		return nil, info, badRequest("invalid_image", "the image cannot be decoded: %v", err)
	}
	return img, info, nil
}

// decode decodes an image that is not queued for the encoder (attend's
// windows): on hears of it once it is decoded, or failed.
func (s *Server) decode(data []byte, on *onTheWay) (image.Image, vision.Info, error) {
	defer on.arrived()
	return s.decodeImage(data)
}

// attendPrompt is one prompt's part of an attend answer.
type attendPrompt struct {
	Text              string        `json:"text"`
	Tokens            []string      `json:"tokens"`
	Truncated         bool          `json:"truncated,omitempty"`
	Words             []text.Word   `json:"words"`
	Score             *float64      `json:"score,omitempty"`  // CLIP logit: exp(logit_scale)·cosine
	Cosine            *float64      `json:"cosine,omitempty"` // of image_embeds and text_embeds
	TextToImage       [][]float32   `json:"text_to_image,omitempty"`
	ImageToText       [][]float32   `json:"image_to_text,omitempty"`
	TextToImageHeads  [][][]float32 `json:"text_to_image_heads,omitempty"`
	ImageToTextHeads  [][][]float32 `json:"image_to_text_heads,omitempty"`
	ConditionedTokens [][]float32   `json:"conditioned_tokens,omitempty"`
	ConditionedPatch  [][]float32   `json:"conditioned_patches,omitempty"`
	Overlays          []overlay     `json:"overlays"`
	Heatmap           string        `json:"heatmap,omitempty"` // PNG data URI
	// With "top": N, per content word its N top patches ("row,col") and
	// per region of a 3×3 split of the grid the N words its patches attend
	// to most.
	TopPatches  []pipeline.WordPatches `json:"top_patches,omitempty"`
	RegionWords []pipeline.Region      `json:"region_words,omitempty"`
}

// overlay is one content word's map over the patch grid [P], row by row:
// the word's cosine with each patch, on the fixed scale [lo, hi], in CLIP's
// joint space; otherwise its attention map (lo = hi = 0: no fixed scale).
type overlay struct {
	Word  string    `json:"word"`
	Start int       `json:"start"`
	End   int       `json:"end"`
	Map   []float32 `json:"map"`
	Lo    float32   `json:"lo"`
	Hi    float32   `json:"hi"`
	Peak  float32   `json:"peak"`
}

type attendResponse struct {
	Model   string         `json:"model"`
	Readout string         `json:"readout,omitempty"` // the engine's readout of the patches; absent for raw
	Windows bool           `json:"windows,omitempty"` // the maps cover the whole image
	Grid    [2]int         `json:"grid"`              // patch rows, columns
	Size    [2]int         `json:"image_size"`        // width, height after orientation
	Crop    [4]int         `json:"crop"`              // x0, y0, x1, y1: the part of the image the model sees
	Prompts []attendPrompt `json:"prompts"`
}

func (s *Server) attend(w http.ResponseWriter, r *http.Request) error {
	on := s.expect(1)
	defer on.done()
	req, err := readImageRequest(r)
	if err != nil {
		return err
	}
	if err := s.checkPrompts("prompts", req.Prompts, req.Truncate); err != nil {
		return err
	}
	if req.Top < 0 {
		return badRequest("invalid_field", `"top" is %d: want 0 (none) or more`, req.Top)
	}
	dir := xattn.Both
	if req.Direction != "" {
		if dir, err = xattn.ParseDirection(req.Direction); err != nil {
			return badRequest("invalid_direction", `"direction" %q: want image-to-text, text-to-image or both`, req.Direction)
		}
	}
	ctx := r.Context()
	opts := pipeline.AttendOptions{Direction: dir, PerHead: req.PerHead, Conditioned: req.Conditioned}
	if req.VideoData != nil {
		on.done() // no image: the video's frames are counted as they are queued
		return s.attendVideo(w, r, req, opts)
	}
	var img image.Image
	var info vision.Info
	var atts []pipeline.Attention
	var grid vision.Grid
	crop := image.Rectangle{}
	if req.Windows {
		// The windows are encoded together, outside the batching queue.
		if img, info, err = s.decode(req.ImageData, on); err != nil {
			return s.apiErr(err)
		}
		ps, err := s.prompts(ctx, req.Prompts, req.Truncate)
		if err != nil {
			return s.apiErr(err)
		}
		opts.Windows = true
		got, err := s.eng.AttendImages(ctx, []image.Image{img}, ps, opts)
		if err != nil {
			return s.apiErr(err)
		}
		atts, grid, crop = got[0], got[0][0].Grid, img.Bounds()
	} else {
		var enc pipeline.ImageEncoding
		if img, info, enc, err = s.image(ctx, req.ImageData, on); err != nil {
			return s.apiErr(err)
		}
		ps, err := s.prompts(ctx, req.Prompts, req.Truncate)
		if err != nil {
			return s.apiErr(err)
		}
		if atts, err = s.eng.Attend(ctx, &enc, ps, opts); err != nil {
			return s.apiErr(err)
		}
		grid, crop = enc.Grid, s.eng.CropRegion(img.Bounds())
	}
	b := img.Bounds()
	full := fullRegion(crop.Sub(b.Min), info) // in the full image's pixels, also when decoded scaled
	res := attendResponse{Model: s.eng.Model().Name(), Readout: readoutName(s.eng), Windows: req.Windows, Grid: [2]int{grid.H, grid.W}, Size: [2]int{info.Width, info.Height},
		Crop: [4]int{full.Min.X, full.Min.Y, full.Max.X, full.Max.Y}}
	var base image.Image
	if req.Heatmaps {
		base = s.eng.HeatmapBase(img)
		if req.Windows {
			base = img // the maps cover the whole image
		}
	}
	if res.Prompts, err = s.attendPrompts(atts, grid, base, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// attendPrompts is an attend answer's part per prompt: atts, on grid,
// with a heatmap sheet over base when it is set.
func (s *Server) attendPrompts(atts []pipeline.Attention, grid vision.Grid, base image.Image, req *imageRequest) ([]attendPrompt, error) {
	var out []attendPrompt
	p := grid.Patches()
	for _, a := range atts {
		t := a.Prompt.T()
		ap := attendPrompt{Text: a.Prompt.Text, Tokens: a.Prompt.Tokens, Truncated: a.Prompt.Truncated, Words: a.Prompt.Words,
			TextToImage: rows(a.TextToImage, p), ImageToText: rows(a.ImageToText, t),
			TextToImageHeads: heads(a.TextToImageHeads, a.Heads, p), ImageToTextHeads: heads(a.ImageToTextHeads, a.Heads, t),
			ConditionedTokens: rows(a.ConditionedTokens, a.DOut), ConditionedPatch: rows(a.ConditionedPatches, a.DOut),
			Overlays: []overlay{}}
		if a.HasScore {
			ap.Score, ap.Cosine = &a.Score, &a.Cosine
		}
		if req.Top > 0 {
			ap.TopPatches, ap.RegionWords = a.TopPatches(req.Top), a.RegionWords(req.Top)
		}
		ovs := a.Overlays()
		for _, o := range ovs {
			ap.Overlays = append(ap.Overlays, overlay{Word: o.Label, Start: o.Start, End: o.End, Map: o.Map, Lo: o.Lo, Hi: o.Hi, Peak: o.Peak})
		}
		if base != nil && len(ovs) > 0 {
			sheet, err := a.Heatmap(base)
			if err == nil {
				var png []byte
				if png, err = pipeline.EncodePNG(sheet); err == nil {
					ap.Heatmap = "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
				}
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, ap)
	}
	return out, nil
}

// rows splits a row-major matrix into rows of n (nil for nil).
func rows(m []float32, n int) [][]float32 {
	if m == nil || n <= 0 {
		return nil
	}
	out := make([][]float32, 0, len(m)/n)
	for i := 0; i+n <= len(m); i += n {
		out = append(out, m[i:i+n])
	}
	return out
}

// heads splits [H, R, n] into H matrices of rows of n.
func heads(m []float32, h, n int) [][][]float32 {
	if m == nil || h <= 0 {
		return nil
	}
	per := len(m) / h
	out := make([][][]float32, h)
	for k := range out {
		out[k] = rows(m[k*per:(k+1)*per], n)
	}
	return out
}

type classifyLabel struct {
	Label       string  `json:"label"`
	Prompt      string  `json:"prompt"`
	Probability float64 `json:"probability"` // softmax over the labels, or the label's own sigmoid (see "scores")
	Score       float64 `json:"score"`       // the logit: exp(logit_scale)·cosine (+ logit_bias)
}

type classifyResponse struct {
	Model string `json:"model"`
	// Scores is how probabilities are made: "softmax" over the labels
	// (CLIP: they sum to 1) or "sigmoid" of each label's own logit (SigLIP).
	Scores pipeline.ScoreKind `json:"scores"`
	Best   string             `json:"best"`
	Labels []classifyLabel    `json:"labels"` // in the order given
}

func (s *Server) classify(w http.ResponseWriter, r *http.Request) error {
	on := s.expect(1)
	defer on.done()
	req, err := readImageRequest(r)
	if err != nil {
		return err
	}
	if len(req.Prompts) > 0 {
		return badRequest("invalid_field", `classify takes "labels" (and an optional "template"), not "prompts"`)
	}
	if req.VideoData != nil {
		return badRequest("invalid_field", `classify takes an image, not a video (/v1/attend and /v1/embeddings take videos)`)
	}
	if err := s.checkPrompts("labels", req.Labels, req.Truncate); err != nil {
		return err
	}
	texts := make([]string, len(req.Labels))
	for i, l := range req.Labels {
		texts[i] = l
		if strings.Contains(req.Template, "{}") {
			texts[i] = strings.ReplaceAll(req.Template, "{}", l)
		}
	}
	if err := s.checkPrompts("labels", texts, req.Truncate); err != nil {
		return err
	}
	ctx := r.Context()
	_, _, enc, err := s.image(ctx, req.ImageData, on)
	if err != nil {
		return s.apiErr(err)
	}
	labels, err := s.eng.Classify(ctx, &enc, req.Labels, pipeline.ClassifyOptions{Template: req.Template, Truncate: req.Truncate})
	if err != nil {
		return s.apiErr(err)
	}
	res := classifyResponse{Model: s.eng.Model().Name(), Scores: s.eng.Scores(), Best: labels[0].Text, Labels: make([]classifyLabel, len(labels))}
	for _, l := range labels {
		res.Labels[l.Index] = classifyLabel{Label: l.Text, Prompt: l.Prompt, Score: float64(l.Logit), Probability: float64(l.Prob)}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`     // the input's
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32
	// Time, for a sampled frame of a video input (one entry per frame,
	// each with the input's index), is its presentation time in seconds.
	Time *float64 `json:"time,omitempty"`
}

type embeddingsResponse struct {
	Object string      `json:"object"`
	Data   []embedding `json:"data"`
	Model  string      `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); ct != "" && strings.TrimSpace(ct) != "application/json" {
		return &apiError{Status: http.StatusUnsupportedMediaType, Type: typeInvalid, Code: "bad_content_type",
			Message: fmt.Sprintf("Content-Type %q: send application/json", ct)}
	}
	var req embeddingsRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	inputs, err := req.inputs()
	if err != nil {
		return err
	}
	if len(inputs) > s.opts.MaxItems {
		return badRequest("too_many_inputs", "%d inputs, at most %d per request", len(inputs), s.opts.MaxItems)
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return badRequest("invalid_encoding_format", `"encoding_format" %q: want float or base64`, req.EncodingFormat)
	}
	var texts []string
	var textAt, imageAt []int
	var images, videos [][]byte
	var videoAt []int
	for i, in := range inputs {
		if strings.HasPrefix(in, "data:video/") {
			b, err := parseData(in, "video")
			if err != nil {
				return badRequest("invalid_video", "input %d: %v", i, err)
			}
			videos, videoAt = append(videos, b), append(videoAt, i)
			continue
		}
		if strings.HasPrefix(in, "data:") {
			b, err := parseDataURI(in)
			if err != nil {
				return badRequest("invalid_image", "input %d: %v", i, err)
			}
			images, imageAt = append(images, b), append(imageAt, i)
			continue
		}
		if isURL(in) {
			return badRequest("url_not_allowed", "input %d is a URL: image URLs are never fetched (send the image as a data:image/...;base64 URI), and a URL alone is not embedded as text", i)
		}
		texts, textAt = append(texts, in), append(textAt, i)
	}
	for j, t := range texts {
		if err := s.checkPrompt("input", textAt[j], t, req.Truncate); err != nil {
			return err
		}
	}
	ctx := r.Context()
	vecs := make([][]float32, len(inputs))
	res := embeddingsResponse{Object: "list", Model: s.eng.Model().Name()}
	if len(texts) > 0 {
		ps, err := s.prompts(ctx, texts, req.Truncate)
		if err != nil {
			return s.apiErr(err)
		}
		for j, p := range ps {
			if p.Embeds == nil {
				return &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "no_embeddings", Message: "the model's text graph gives no text_embeds"}
			}
			vecs[textAt[j]] = p.Embeds
			res.Usage.PromptTokens += p.T()
		}
	}
	// The images of one request go to the batcher together.
	type out struct {
		enc pipeline.ImageEncoding
		err error
	}
	outs := make([]out, len(images))
	on := s.expect(len(images))
	defer on.done()
	var wg sync.WaitGroup
	for j, b := range images {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, outs[j].enc, outs[j].err = s.image(ctx, b, on)
		}()
	}
	wg.Wait()
	for j, o := range outs {
		if o.err != nil {
			var ae *apiError
			if errors.As(o.err, &ae) && ae.Status == http.StatusBadRequest {
				return badRequest(ae.Code, "input %d: %s", imageAt[j], ae.Message)
			}
			return s.apiErr(o.err)
		}
		if o.enc.Embeds == nil {
			return &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "no_embeddings", Message: "the model's vision graph gives no image_embeds"}
		}
		vecs[imageAt[j]] = o.enc.Embeds
		res.Usage.PromptTokens += 1 + o.enc.P()
	}
	frames, tokens, err := s.embedVideos(ctx, &req, videos, videoAt)
	if err != nil {
		return err
	}
	res.Usage.PromptTokens += tokens
	res.Usage.TotalTokens = res.Usage.PromptTokens
	if res.Data, err = embeddingRows(&req, vecs, frames); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// embeddingRows is an embeddings answer's data: one entry per input in
// order, a video's frames one each (frames by input), checked against
// "dimensions", normalised unless asked not to, as floats or base64.
func embeddingRows(req *embeddingsRequest, vecs [][]float32, frames map[int][]frameVec) ([]embedding, error) {
	var out []embedding
	row := func(i int, v []float32, t *float64) error {
		if d := req.Dimensions; d != nil && *d != len(v) {
			return badRequest("invalid_field", `"dimensions" is %d: this model's embeddings have %d, and are not cut`, *d, len(v))
		}
		if req.Normalize == nil || *req.Normalize {
			v = unit(v)
		}
		e := embedding{Object: "embedding", Index: i, Embedding: v, Time: t}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
			}
			e.Embedding = base64.StdEncoding.EncodeToString(b)
		}
		out = append(out, e)
		return nil
	}
	for i, v := range vecs {
		fs, isVideo := frames[i]
		if !isVideo {
			if err := row(i, v, nil); err != nil {
				return nil, err
			}
			continue
		}
		for _, f := range fs {
			if err := row(i, f.vec, &f.time); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// unit returns v scaled to length 1 (v itself when zero).
func unit(v []float32) []float32 {
	n := 0.0
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return v
	}
	inv := 1 / math.Sqrt(n)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// models answers GET /v1/models: the model served and, when the server
// has one, the index POST /v1/search searches ("index": {"rows": N}).
func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	out := map[string]any{"object": "list", "data": []map[string]string{
		{"id": s.eng.Model().Name(), "object": "model", "owned_by": "condition"},
	}}
	if s.opts.Index != nil {
		out["index"] = map[string]int{"rows": s.opts.Index.Rows()}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// fullRegion maps r, in the pixels of an image decoded with info (origin at
// 0, 0), to the full image's pixels: multiplied by info.Scale and cut to
// info.Width × info.Height. With Scale 1 it is r.
func fullRegion(r image.Rectangle, info vision.Info) image.Rectangle {
	if info.Scale <= 1 {
		return r
	}
	s := info.Scale
	return image.Rect(r.Min.X*s, r.Min.Y*s, r.Max.X*s, r.Max.Y*s).Intersect(image.Rect(0, 0, info.Width, info.Height))
}

// readoutName names eng's readout of the patches for a response: "" for
// the raw readout, whose responses stay as they were.
func readoutName(eng *pipeline.Engine) string {
	if r := eng.Options().Readout; r != pipeline.ReadoutRaw {
		return string(r)
	}
	return ""
}
