package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// imageRequest is what /v1/attend and /v1/classify take, from JSON or from
// a multipart/form-data upload.
type imageRequest struct {
	// Image is the image as a data URI (data:image/png;base64,...) in
	// JSON; an upload's "image" part fills ImageData instead.
	Image     string `json:"image"`
	ImageData []byte `json:"-"`
	// Video (attend), in place of Image, is a video as a data URI
	// (data:video/mp4;base64,...) in JSON; an upload's "video" part fills
	// VideoData instead. FPS and Frames sample it (see sampling).
	Video     string  `json:"video"`
	VideoData []byte  `json:"-"`
	FPS       float64 `json:"fps"`
	Frames    string  `json:"frames"`
	// Prompts (attend), or Prompt for one.
	Prompts []string `json:"prompts"`
	Prompt  string   `json:"prompt"`
	// Labels and Template (classify): prompt i is Template with {}
	// replaced by label i (Template "" or without {}: the label alone).
	Labels   []string `json:"labels"`
	Template string   `json:"template"`

	Direction   string `json:"direction"`   // image-to-text, text-to-image or both (default)
	PerHead     bool   `json:"per_head"`    // per-head maps too
	Conditioned bool   `json:"conditioned"` // the attention outputs too
	Heatmaps    bool   `json:"heatmaps"`    // a heatmap sheet PNG per prompt, as a data URI
	Windows     bool   `json:"windows"`     // maps over the whole image (attend; see pipeline.AttendOptions.Windows)
	Truncate    bool   `json:"truncate"`    // cut prompts longer than the context instead of refusing them
	// Top, when above 0, adds per content word its Top patches and per
	// region of a 3×3 split of the grid its Top words (as attend prints).
	Top int `json:"top"`
}

// embeddingsRequest is OpenAI's embeddings request; an input that is a
// data:image/... URI is an image.
type embeddingsRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat string          `json:"encoding_format"`
	// Normalize (default true) returns unit-length embeddings, as OpenAI's
	// are; false returns text_embeds and image_embeds as the model gives
	// them.
	Normalize *bool `json:"normalize"`
	Truncate  bool  `json:"truncate"`
	// User is OpenAI's end-user id: taken, and not used. Dimensions, when
	// given, must be the width of the model's embeddings (they are never
	// cut).
	User       string `json:"user"`
	Dimensions *int   `json:"dimensions"`
	// FPS and Frames sample the videos among the inputs
	// (data:video/...;base64 URIs), as /v1/attend's.
	FPS    float64 `json:"fps"`
	Frames string  `json:"frames"`
}

// inputs returns the request's input as a list (a string is a list of one).
func (r *embeddingsRequest) inputs() ([]string, error) {
	in := bytes.TrimSpace(r.Input)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return nil, badRequest("missing_input", `"input" is required: a string or a list of strings (texts, or images as data:image/...;base64 URIs)`)
	}
	if in[0] == '"' {
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return nil, badRequest("invalid_input", `"input": %v`, err)
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(in, &list); err != nil {
		return nil, badRequest("invalid_input", `"input" must be a string or a list of strings (token-id arrays are not taken): %v`, err)
	}
	if len(list) == 0 {
		return nil, badRequest("missing_input", `"input" is an empty list`)
	}
	return list, nil
}

// decodeJSON reads r's body as one JSON value into v; a field v does not
// have is refused (invalid_field, naming it), as a multipart request's
// unknown part is: a misspelt option never passes unseen.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return bodyError(err)
		}
		return badRequest("invalid_json", "the body holds more than one JSON value")
	}
	return nil
}

// bodyError turns an error reading or decoding a body into its answer.
func bodyError(err error) error {
	var mb *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mb):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalid, Code: "body_too_large",
			Message: fmt.Sprintf("the body is over the limit of %d bytes", mb.Limit)}
	case errors.As(err, &se):
		return badRequest("invalid_json", "the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		return badRequest("invalid_json", "field %q is %s, expected %s", te.Field, te.Value, te.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", "the body is empty or cut short")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("invalid_field", "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("invalid_body", "reading the body: %v", err)
}

// readImageRequest reads an attend or classify request: JSON, or a
// multipart/form-data upload with an "image" file part and text parts
// named as the JSON fields (prompts and labels may repeat, or hold one per
// line).
func readImageRequest(r *http.Request) (*imageRequest, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil && r.Header.Get("Content-Type") != "" {
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Type: typeInvalid, Code: "bad_content_type",
			Message: fmt.Sprintf("Content-Type %q: %v", r.Header.Get("Content-Type"), err)}
	}
	req := &imageRequest{}
	switch ct {
	case "", "application/json":
		if err := decodeJSON(r, req); err != nil {
			return nil, err
		}
		if err := req.media(); err != nil {
			return nil, err
		}
	case "multipart/form-data":
		if params["boundary"] == "" {
			return nil, badRequest("bad_multipart", "multipart/form-data without a boundary")
		}
		if err := readMultipart(r, req); err != nil {
			return nil, err
		}
	default:
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Type: typeInvalid, Code: "bad_content_type",
			Message: fmt.Sprintf("Content-Type %q: send application/json or multipart/form-data", ct)}
	}
	if req.Prompt != "" {
		req.Prompts = append([]string{req.Prompt}, req.Prompts...)
	}
	return req, nil
}

// readMultipart fills req from a multipart body, part by part (nothing is
// held on disk; the body limit bounds what is read).
func readMultipart(r *http.Request, req *imageRequest) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return badRequest("bad_multipart", "multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return multipartError(err)
		}
		b, err := io.ReadAll(part)
		part.Close()
		if err != nil {
			return multipartError(err)
		}
		name := part.FormName()
		if name == "image" || name == "video" {
			if req.ImageData != nil || req.VideoData != nil {
				return badRequest("bad_multipart", `more than one "image" or "video" part`)
			}
			if name == "image" {
				req.ImageData = b
			} else {
				req.VideoData = b
			}
			continue
		}
		v := string(b)
		lines := func() []string {
			var out []string
			for _, l := range strings.Split(strings.ReplaceAll(v, "\r\n", "\n"), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					out = append(out, l)
				}
			}
			return out
		}
		flag := func() (bool, error) {
			x, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return false, badRequest("invalid_field", "field %q is %q, expected true or false", name, v)
			}
			return x, nil
		}
		switch name {
		case "prompts", "prompt":
			req.Prompts = append(req.Prompts, lines()...)
		case "labels", "label":
			req.Labels = append(req.Labels, lines()...)
		case "template":
			req.Template = v
		case "direction":
			req.Direction = strings.TrimSpace(v)
		case "per_head":
			req.PerHead, err = flag()
		case "conditioned":
			req.Conditioned, err = flag()
		case "heatmaps":
			req.Heatmaps, err = flag()
		case "windows":
			req.Windows, err = flag()
		case "truncate":
			req.Truncate, err = flag()
		case "frames":
			req.Frames = strings.TrimSpace(v)
		case "fps":
			if req.FPS, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				err = badRequest("invalid_field", "field %q is %q, expected a number", name, v)
			}
		case "top":
			if req.Top, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
				err = badRequest("invalid_field", "field %q is %q, expected a number", name, v)
			}
		default:
			return badRequest("invalid_field", "unknown form field %q", name)
		}
		if err != nil {
			return err
		}
	}
	if req.ImageData == nil && req.VideoData == nil {
		return badRequest("missing_image", `no "image" (or "video") file part in the upload`)
	}
	return nil
}

// media decodes a JSON request's "image" or "video" data URI.
func (req *imageRequest) media() (err error) {
	switch {
	case req.Image != "" && req.Video != "":
		return badRequest("invalid_field", `give "image" or "video", not both`)
	case req.Video != "":
		req.VideoData, err = parseData(req.Video, "video")
		req.Video = ""
		return err
	case req.Image == "":
		return badRequest("missing_image", `"image" is required: a data:image/...;base64 URI (image URLs are not fetched), or upload the file as multipart/form-data; or "video": a data:video/...;base64 URI`)
	}
	req.ImageData, err = parseDataURI(req.Image)
	req.Image = ""
	return err
}

func multipartError(err error) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return bodyError(err)
	}
	return badRequest("bad_multipart", "multipart body: %v", err)
}

// isURL reports whether s is an http://, https:// or file: URL and nothing
// else (no space in it): what an image URL looks like.
func isURL(s string) bool {
	s = strings.TrimSpace(s)
	lower := strings.ToLower(s)
	return (strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "file:")) &&
		!strings.ContainsAny(s, " \t\n")
}

// parseDataURI returns the bytes of a data:image/...;base64,... URI.
func parseDataURI(s string) ([]byte, error) { return parseData(s, "image") }

// parseData returns the bytes of a data:KIND/...;base64,... URI, KIND
// "image" or "video".
func parseData(s, kind string) ([]byte, error) {
	code, a, example := "invalid_"+kind, "an image", "data:image/png;base64,..."
	if kind == "video" {
		a, example = "a video", "data:video/mp4;base64,..."
	}
	if isURL(s) {
		return nil, badRequest("url_not_allowed", "%s URLs are never fetched: send the %s as a data:%s/...;base64 URI or upload it as multipart/form-data", kind, kind, kind)
	}
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return nil, badRequest(code, `%s must be a data URI (%q), got %q`, a, example, quoteStart(s))
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, badRequest(code, "%s data URI must be base64 (data:%s/...;base64,...)", a, kind)
	}
	if mt := strings.TrimSuffix(meta, ";base64"); mt != "" && !strings.HasPrefix(mt, kind+"/") {
		return nil, badRequest(code, "a data URI of type %q is not %s", mt, a)
	}
	b, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(payload); err != nil {
			return nil, badRequest(code, "the %s data URI is not valid base64: %v", kind, err)
		}
	}
	if len(b) == 0 {
		return nil, badRequest(code, "the %s data URI is empty", kind)
	}
	return b, nil
}

// quoteStart returns at most the first 40 characters of s.
func quoteStart(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}
