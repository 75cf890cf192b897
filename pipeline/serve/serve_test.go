package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	_ "github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
)

// newTestServer serves the built-in model (or the tiny random one of
// testdata/tinyclip when tiny) with opts, on an httptest server.
func newTestServer(t testing.TB, tiny bool, opts Options) (*Server, *httptest.Server, *pipeline.Engine) {
	t.Helper()
	return newDecodingServer(t, tiny, opts, pipeline.DecodeExact)
}

// newDecodingServer is newTestServer with the engine decoding JPEGs as
// decode says.
func newDecodingServer(t testing.TB, tiny bool, opts Options, decode pipeline.DecodeMode) (*Server, *httptest.Server, *pipeline.Engine) {
	t.Helper()
	orttest.Load(t)
	ref := "default"
	if tiny {
		ref = filepath.Join("..", "..", "testdata", "tinyclip")
	}
	m, err := models.Open(ref, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{Threads: 1, Decode: decode})
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine = eng
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
		eng.Close()
	})
	return s, ts, eng
}

// scenePNG is a grey picture with a blue square in its top left quarter,
// as PNG bytes.
func scenePNG(t testing.TB) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 128, 128))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{128, 128, 128, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(12, 12, 52, 52), &image.Uniform{color.RGBA{30, 60, 220, 255}}, image.Point{}, draw.Src)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURI(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

// post sends body as JSON (a string is sent as it is) and decodes the
// answer into out when it is not nil.
func post(t testing.TB, url, path string, body any, out any, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(http.MethodPost, url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, raw)
		}
	}
	return resp.StatusCode, resp.Header, raw
}

// TestEmbeddingsOpenAI: the OpenAI request and answer, texts and images,
// float and base64; the vectors are the engine's, scaled to unit length.
func TestEmbeddingsOpenAI(t *testing.T) {
	_, ts, eng := newTestServer(t, false, Options{})
	img := scenePNG(t)
	var res embeddingsResponse
	code, _, raw := post(t, ts.URL, "/v1/embeddings", map[string]any{"input": []string{"a blue square", dataURI(img)}, "model": "clip"}, &res)
	if code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	if res.Object != "list" || len(res.Data) != 2 || res.Data[1].Index != 1 || res.Data[0].Object != "embedding" {
		t.Fatalf("answer: %s", raw)
	}
	texts, err := eng.EncodeTexts(context.Background(), []string{"a blue square"})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := eng.EncodeImageData(context.Background(), [][]byte{img})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]float32{unit(texts[0].Embeds), unit(imgs[0].Embeds)} {
		got := floats(t, res.Data[i].Embedding)
		if len(got) != len(want) {
			t.Fatalf("input %d: %d values, want %d", i, len(got), len(want))
		}
		for k := range got {
			if math.Abs(float64(got[k]-want[k])) > 1e-6 {
				t.Fatalf("input %d[%d]: %v, the engine gives %v", i, k, got[k], want[k])
			}
		}
	}
	if want := texts[0].T() + 1 + imgs[0].P(); res.Usage.PromptTokens != want || res.Usage.TotalTokens != want {
		t.Errorf("usage %+v, want %d tokens (the text's and the image's 1+P)", res.Usage, want)
	}
	// base64: little-endian float32, the same numbers; a string input.
	var b64 embeddingsResponse
	if code, _, raw := post(t, ts.URL, "/v1/embeddings", map[string]any{"input": "a blue square", "encoding_format": "base64"}, &b64); code != 200 {
		t.Fatalf("base64: status %d: %s", code, raw)
	}
	s, ok := b64.Data[0].Embedding.(string)
	if !ok {
		t.Fatalf("base64 embedding is %T", b64.Data[0].Embedding)
	}
	bs, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	want := floats(t, res.Data[0].Embedding)
	for k := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(bs[4*k:])); got != want[k] {
			t.Fatalf("base64[%d] = %v, float gives %v", k, got, want[k])
		}
	}
}

func floats(t testing.TB, v any) []float32 {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("embedding is %T", v)
	}
	out := make([]float32, len(list))
	for i, x := range list {
		out[i] = float32(x.(float64))
	}
	return out
}

// TestAttendJSONAndUploadEqualEngine: an image sent as a data URI and as an
// upload gets the same answer, and it is the engine's.
func TestAttendJSONAndUploadEqualEngine(t *testing.T) {
	_, ts, eng := newTestServer(t, false, Options{})
	img := scenePNG(t)
	var a attendResponse
	code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{"a blue square", "a red circle"}, "heatmaps": true, "per_head": true}, &a)
	if code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("image", "scene.png")
	fw.Write(img)
	mw.WriteField("prompts", "a blue square\na red circle")
	mw.WriteField("heatmaps", "true")
	mw.WriteField("per_head", "true")
	mw.Close()
	resp, err := http.Post(ts.URL+"/v1/attend", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	raw2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("upload: status %d: %s", resp.StatusCode, raw2)
	}
	if !bytes.Equal(raw, raw2) {
		t.Errorf("the upload's answer differs from the data URI's")
	}
	ps, err := eng.Prepare(context.Background(), "a blue square", "a red circle")
	if err != nil {
		t.Fatal(err)
	}
	encs, err := eng.EncodeImageData(context.Background(), [][]byte{img})
	if err != nil {
		t.Fatal(err)
	}
	atts, err := eng.Attend(context.Background(), &encs[0], ps, pipeline.AttendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Grid != [2]int{8, 8} || a.Size != [2]int{128, 128} || len(a.Prompts) != 2 {
		t.Fatalf("grid %v size %v, %d prompts", a.Grid, a.Size, len(a.Prompts))
	}
	for k, ap := range a.Prompts {
		want := atts[k]
		p, tk := want.Grid.Patches(), want.Prompt.T()
		if len(ap.TextToImage) != tk || len(ap.ImageToText) != p || len(ap.TextToImageHeads) != 1 {
			t.Fatalf("prompt %d: maps %d×? and %d×?, %d heads", k, len(ap.TextToImage), len(ap.ImageToText), len(ap.TextToImageHeads))
		}
		for r := range tk {
			for j := range p {
				if ap.TextToImage[r][j] != want.TextToImage[r*p+j] {
					t.Fatalf("prompt %d text_to_image[%d][%d] = %v, engine %v", k, r, j, ap.TextToImage[r][j], want.TextToImage[r*p+j])
				}
			}
		}
		if ap.Score == nil || *ap.Score != want.Score {
			t.Errorf("prompt %d: score %v, engine %v", k, ap.Score, want.Score)
		}
		if len(ap.Overlays) != 2 || ap.Overlays[0].Word != []string{"blue", "red"}[k] || !strings.HasPrefix(ap.Heatmap, "data:image/png;base64,") {
			t.Errorf("prompt %d: overlays %v, heatmap %.30q", k, ap.Overlays, ap.Heatmap)
		}
	}
	if *a.Prompts[0].Score <= *a.Prompts[1].Score {
		t.Errorf("a blue square scores %v, a red circle %v", *a.Prompts[0].Score, *a.Prompts[1].Score)
	}
}

// TestClassify: zero-shot labels with a template on the built-in model, in
// the order given; the probabilities (float32) sum to one.
func TestClassify(t *testing.T) {
	_, ts, _ := newTestServer(t, false, Options{})
	var c classifyResponse
	code, _, raw := post(t, ts.URL, "/v1/classify", map[string]any{"image": dataURI(scenePNG(t)),
		"labels": []string{"red circle", "blue square", "yellow star", "green cross"}, "template": "a {}"}, &c)
	if code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
	sum := 0.0
	for _, l := range c.Labels {
		sum += l.Probability
	}
	if c.Best != "blue square" || math.Abs(sum-1) > 1e-6 || c.Labels[1].Prompt != "a blue square" {
		t.Errorf("classify: %s", raw)
	}
}

// TestBadInput: each bad request gets a JSON error in OpenAI's shape with
// the status named, and the server keeps serving.
func TestBadInput(t *testing.T) {
	s, ts, _ := newTestServer(t, true, Options{MaxBodyBytes: 1 << 20, Token: "sesame"})
	auth := []string{"Authorization", "Bearer sesame"}
	img := scenePNG(t)
	// A PNG header that claims 100000×100000 pixels.
	var bomb bytes.Buffer
	png.Encode(&bomb, image.NewGray(image.Rect(0, 0, 1, 1)))
	b := bomb.Bytes()
	binary.BigEndian.PutUint32(b[16:], 100000)
	binary.BigEndian.PutUint32(b[20:], 100000)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29])) // IHDR's CRC
	many := make([]string, 200)
	for i := range many {
		many[i] = "red"
	}
	for _, tc := range []struct {
		name, path string
		body       any
		header     []string
		status     int
		code       string
	}{
		{"not JSON", "/v1/attend", "hello", auth, 400, "invalid_json"},
		{"truncated JSON", "/v1/attend", `{"image": "data:image/png;base64,`, auth, 400, "invalid_json"},
		{"wrong type", "/v1/attend", `{"image": 3, "prompts": ["red"]}`, auth, 400, "invalid_json"},
		{"two values", "/v1/attend", `{} {}`, auth, 400, "invalid_json"},
		{"no image", "/v1/attend", map[string]any{"prompts": []string{"red"}}, auth, 400, "missing_image"},
		{"no prompts", "/v1/attend", map[string]any{"image": dataURI(img)}, auth, 400, "missing_prompts"},
		{"empty prompt", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{" "}}, auth, 400, "invalid_prompt"},
		{"not an image", "/v1/attend", map[string]any{"image": "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("hello")), "prompts": []string{"red"}}, auth, 400, "invalid_image"},
		{"text data URI", "/v1/attend", map[string]any{"image": "data:text/plain;base64,aGk=", "prompts": []string{"red"}}, auth, 400, "invalid_image"},
		{"image URL", "/v1/attend", map[string]any{"image": "http://169.254.169.254/latest", "prompts": []string{"red"}}, auth, 400, "url_not_allowed"},
		{"decompression bomb", "/v1/attend", map[string]any{"image": dataURI(b), "prompts": []string{"red"}}, auth, 400, "image_too_large"},
		{"200 prompts", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": many}, auth, 400, "too_many_prompts"},
		{"10,000 characters", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{strings.Repeat("x", 10000)}}, auth, 400, "prompt_too_long"},
		{"too many tokens", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{strings.Repeat("red ", 40)}}, auth, 400, "prompt_too_long"},
		{"bad direction", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{"red"}, "direction": "up"}, auth, 400, "invalid_direction"},
		{"body over the limit", "/v1/attend", map[string]any{"image": dataURI(bytes.Repeat([]byte{1}, 2<<20)), "prompts": []string{"red"}}, auth, 413, "body_too_large"},
		{"no token", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{"red"}}, nil, 401, "invalid_token"},
		{"wrong token", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{"red"}}, []string{"Authorization", "Bearer sesam"}, 401, "invalid_token"},
		{"empty input", "/v1/embeddings", `{"input": []}`, auth, 400, "missing_input"},
		{"no input", "/v1/embeddings", `{"model": "x"}`, auth, 400, "missing_input"},
		{"token ids", "/v1/embeddings", `{"input": [[1, 2, 3]]}`, auth, 400, "invalid_input"},
		{"bad format", "/v1/embeddings", `{"input": "red", "encoding_format": "int8"}`, auth, 400, "invalid_encoding_format"},
		{"image URL to embed", "/v1/embeddings", `{"input": ["a red circle", "https://example.com/cat.jpg"]}`, auth, 400, "url_not_allowed"},
		{"file URL to embed", "/v1/embeddings", `{"input": "FILE:///etc/passwd"}`, auth, 400, "url_not_allowed"},
		{"misspelt field", "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{"red"}, "heatmap": true}, auth, 400, "invalid_field"},
		{"misspelt embeddings field", "/v1/embeddings", `{"input": "red", "normalise": false}`, auth, 400, "invalid_field"},
		{"other dimensions", "/v1/embeddings", `{"input": "red", "dimensions": 3, "user": "u1"}`, auth, 400, "invalid_field"},
		{"classify with prompts", "/v1/classify", map[string]any{"image": dataURI(img), "prompts": []string{"red"}}, auth, 400, "invalid_field"},
		{"unknown route", "/v2/attend", "{}", auth, 404, "not_found"},
		{"lowercase scheme", "/v1/attend", map[string]any{"prompts": []string{"red"}}, []string{"Authorization", "bearer " + auth[1][len("Bearer "):]}, 400, "missing_image"},
	} {
		code, h, raw := post(t, ts.URL, tc.path, tc.body, nil, tc.header...)
		var e struct {
			Error apiError `json:"error"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || code != tc.status || e.Error.Code != tc.code || e.Error.Message == "" || e.Error.Type == "" ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: status %d, %s; want %d with code %s", tc.name, code, raw, tc.status, tc.code)
		} else {
			t.Logf("%s: %d %s", tc.name, code, e.Error.Message)
		}
	}
	// A route asked with another method: 405, naming the one it takes.
	for path, allow := range map[string]string{"/v1/attend": "POST", "/healthz": "GET"} {
		method := http.MethodGet
		if allow == "GET" {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != allow || !strings.Contains(string(raw), "method_not_allowed") {
			t.Errorf("%s %s: status %d, Allow %q, %s", method, path, resp.StatusCode, resp.Header.Get("Allow"), raw)
		}
	}
	// A 1 GB body is refused without being read.
	counter := &countingReader{n: 1 << 30}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/attend", counter)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sesame")
	req.ContentLength = 1 << 30
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("1 GB body: status %d, want 413", resp.StatusCode)
		}
	}
	if n := counter.read.Load(); n > 64<<20 {
		t.Errorf("1 GB body: the client sent %d MB before the answer", n>>20)
	}
	// Probes need no token; the server still answers good requests.
	if resp, err := http.Get(ts.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz: %v %v", resp, err)
	}
	var a attendResponse
	if code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(img), "prompts": []string{"red"}, "truncate": true}, &a, auth...); code != 200 {
		t.Errorf("a good request after the bad ones: %d %s", code, raw)
	}
	if s.closing.Load() {
		t.Error("the server is closing")
	}
}

// countingReader gives n bytes of a JSON string and counts what was read.
type countingReader struct {
	n    int64
	read atomic.Int64 // the client's transport may read on after the answer
}

func (c *countingReader) Read(p []byte) (int, error) {
	r := c.read.Load()
	if r >= c.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), c.n-r)
	for i := range k {
		p[i] = 'a'
	}
	if r == 0 {
		p[0] = '"'
	}
	c.read.Add(k)
	return int(k), nil
}

// TestConnections: a thousand idle connections and a client that hangs up
// mid-upload leave the server serving.
func TestConnections(t *testing.T) {
	_, ts, _ := newTestServer(t, true, Options{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	var conns []net.Conn
	for range 1000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/attend HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"image\": \"data:image/png;base64,AAAA")
	c.Close()
	var a attendResponse
	if code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(scenePNG(t)), "prompts": []string{"red"}}, &a); code != 200 {
		t.Fatalf("status %d: %s", code, raw)
	}
}

// TestMetrics: requests, batch sizes and cache hits show in /metrics.
func TestMetrics(t *testing.T) {
	_, ts, _ := newTestServer(t, true, Options{})
	for range 2 {
		if code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(scenePNG(t)), "prompts": []string{"red"}}, nil); code != 200 {
			t.Fatalf("status %d: %s", code, raw)
		}
	}
	post(t, ts.URL, "/v1/attend", "nonsense", nil)
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`condition_http_requests_total{code="200",route="attend"} 2`,
		`condition_http_requests_total{code="400",route="attend"} 1`,
		`condition_batch_size_count{queue="image"} 2`,
		`condition_prompt_cache_hits_total 1`,
		`condition_prompt_cache_misses_total 1`,
		`condition_queue_depth{queue="image"} 0`,
		`condition_http_request_duration_seconds_bucket{route="attend",le="+Inf"} 3`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestBatcher: items of concurrent submits share a batch; a full queue is
// errBusy at once; a cancelled request returns at once and its item is not
// run.
func TestBatcher(t *testing.T) {
	reg := newMetricsForTest(t)
	started, release := make(chan []int, 4), make(chan struct{})
	b := newBatcher(1, 2, 4, 50*time.Millisecond, func(ins []int) ([]int, error) {
		started <- ins
		<-release
		out := make([]int, len(ins))
		for i, v := range ins {
			out[i] = v * 10
		}
		return out, nil
	}, reg.batchSize.WithLabelValues("t"), reg.queueDepth.WithLabelValues("t"))
	defer b.close()
	type res struct {
		v   int
		err error
	}
	results := make(chan res, 8)
	submit := func(ctx context.Context, v int) {
		go func() {
			x, err := b.submit(ctx, v)
			results <- res{x, err}
		}()
	}
	submit(context.Background(), 1)
	if got := <-started; len(got) != 1 { // the worker waits up to 50 ms for more, then runs [1]
		t.Fatalf("first batch %v", got)
	}
	// The worker is busy: two items fill the queue, the third is refused.
	cctx, cancel := context.WithCancel(context.Background())
	submit(cctx, 2)
	submit(context.Background(), 3)
	waitFor(t, func() bool { return len(b.queue) == 2 })
	if _, err := b.submit(context.Background(), 4); err != errBusy {
		t.Fatalf("full queue: %v, want errBusy", err)
	}
	cancel()
	if r := <-results; r.err != context.Canceled {
		t.Fatalf("cancelled submit: %+v", r)
	}
	release <- struct{}{} // batch [1] done
	if r := <-results; r.v != 10 || r.err != nil {
		t.Fatalf("first: %+v", r)
	}
	if got := <-started; len(got) != 1 || got[0] != 3 {
		t.Fatalf("second batch %v, want [3] (2 was cancelled)", got)
	}
	release <- struct{}{}
	if r := <-results; r.v != 30 {
		t.Fatalf("third: %+v", r)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatcherLoneItem: with nothing queued and nothing on its way, a batch
// does not wait for others; while items are on their way, it waits for them.
func TestBatcherLoneItem(t *testing.T) {
	reg := newMetricsForTest(t)
	var coming atomic.Bool
	sizes := make(chan int, 4)
	b := newBatcher(1, 4, 4, time.Hour, func(ins []int) ([]int, error) {
		sizes <- len(ins)
		return ins, nil
	}, reg.batchSize.WithLabelValues("t"), reg.queueDepth.WithLabelValues("t"))
	b.coming = coming.Load
	defer b.close()
	done := make(chan error, 1)
	go func() { _, err := b.submit(context.Background(), 1); done <- err }()
	select {
	case err := <-done:
		if err != nil || <-sizes != 1 {
			t.Fatalf("lone item: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a lone item waited for a batch to fill")
	}
	// Another item on its way: the first waits for it and they share a batch.
	coming.Store(true)
	go func() { _, err := b.submit(context.Background(), 2); done <- err }()
	time.Sleep(50 * time.Millisecond)
	go func() { coming.Store(false); _, err := b.submit(context.Background(), 3); done <- err }()
	<-done
	<-done
	if n := <-sizes; n != 2 {
		t.Errorf("two items, one on its way: batches of %d, want one of 2", n)
	}
}

// TestImagesOnTheWay: the count of images on their way to the batcher
// returns to zero after good and bad requests alike.
func TestImagesOnTheWay(t *testing.T) {
	s, ts, _ := newTestServer(t, true, Options{})
	img := dataURI(scenePNG(t))
	post(t, ts.URL, "/v1/attend", map[string]any{"image": img, "prompts": []string{"red"}}, nil)
	post(t, ts.URL, "/v1/attend", map[string]any{"image": "data:image/png;base64,AAAA", "prompts": []string{"red"}}, nil)
	post(t, ts.URL, "/v1/attend", "nonsense", nil)
	post(t, ts.URL, "/v1/embeddings", map[string]any{"input": []string{img, "red", img}}, nil)
	post(t, ts.URL, "/v1/classify", map[string]any{"image": img, "labels": []string{"red", "blue"}}, nil)
	if n := s.decoding.Load(); n != 0 {
		t.Errorf("%d images still counted on their way", n)
	}
}

// TestAttendTop: "top" adds each content word's top patches and each
// region's top words, the engine's TopPatches and RegionWords; a negative
// top is a bad request.
func TestAttendTop(t *testing.T) {
	_, ts, eng := newTestServer(t, false, Options{})
	var a attendResponse
	code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(scenePNG(t)), "prompts": []string{"a blue square"}, "top": 2}, &a)
	if code != 200 || len(a.Prompts) != 1 {
		t.Fatalf("status %d: %s", code, raw)
	}
	img, err := eng.DecodeImage(scenePNG(t))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := eng.Prepare(context.Background(), "a blue square")
	if err != nil {
		t.Fatal(err)
	}
	atts, err := eng.AttendImages(context.Background(), []image.Image{img}, ps, pipeline.AttendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantP, wantR := atts[0][0].TopPatches(2), atts[0][0].RegionWords(2)
	got := a.Prompts[0]
	if len(got.TopPatches) != 2 || len(got.TopPatches[0].Patches) != 2 || !reflect.DeepEqual(got.TopPatches, wantP) {
		t.Errorf("top_patches %+v, engine %+v", got.TopPatches, wantP)
	}
	if len(got.RegionWords) != 9 || !reflect.DeepEqual(got.RegionWords, wantR) {
		t.Errorf("region_words %+v, engine %+v", got.RegionWords, wantR)
	}
	if code, _, raw := post(t, ts.URL, "/v1/attend", map[string]any{"image": dataURI(scenePNG(t)), "prompts": []string{"a blue square"}, "top": -1}, nil); code != 400 || !strings.Contains(string(raw), "top") {
		t.Errorf("top -1: status %d: %s", code, raw)
	}
}
