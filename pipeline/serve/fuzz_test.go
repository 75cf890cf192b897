package serve

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func newMetricsForTest(t testing.TB) *metrics {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// FuzzReadImageRequest feeds the attend and classify request decoder: it
// returns a request or an error, never panics.
func FuzzReadImageRequest(f *testing.F) {
	f.Add([]byte(`{"image": "data:image/png;base64,iVBORw0KGgo=", "prompts": ["a red circle"]}`), "application/json")
	f.Add([]byte(`{"image": 3}`), "application/json")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"image\"; filename=\"x.png\"\r\n\r\nPNG\r\n--b\r\nContent-Disposition: form-data; name=\"prompts\"\r\n\r\nred\nblue\r\n--b--\r\n"), "multipart/form-data; boundary=b")
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"heatmaps\"\r\n\r\nmaybe\r\n--b--\r\n"), "multipart/form-data; boundary=b")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		r := httptest.NewRequest("POST", "/v1/attend", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		req, err := readImageRequest(r)
		if err == nil && req.ImageData == nil {
			t.Fatalf("no error and no image for %q", body)
		}
	})
}

// FuzzEmbeddingsInput feeds the embeddings request decoder and its data
// URIs.
func FuzzEmbeddingsInput(f *testing.F) {
	f.Add([]byte(`{"input": "a red circle"}`))
	f.Add([]byte(`{"input": ["a", "data:image/png;base64,AAAA"]}`))
	f.Add([]byte(`{"input": [[1, 2]]}`))
	f.Add([]byte(`{"input": null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/embeddings", bytes.NewReader(body))
		var req embeddingsRequest
		if decodeJSON(r, &req) != nil {
			return
		}
		ins, err := req.inputs()
		if err == nil && len(ins) == 0 {
			t.Fatalf("no error and no inputs for %q", body)
		}
		for _, in := range ins {
			parseDataURI(in)
		}
	})
}
