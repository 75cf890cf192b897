package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
)

// Options controls New. Zero values take the defaults named.
type Options struct {
	// Engine is the model served (required). The server does not close it.
	Engine *pipeline.Engine

	// MaxBatch is the most images (and, separately, prompts) encoded in
	// one call (default 8; 1 turns batching off); MaxWait the longest the
	// first request of a batch waits for others (0: 5 ms; negative: no
	// wait).
	MaxBatch int
	MaxWait  time.Duration
	// Workers is the number of image batches encoded at once (default 1).
	Workers int
	// MaxQueue bounds the images (and prompts) waiting for the encoders
	// (default 64): past it requests get 429 with Retry-After.
	MaxQueue int
	// PromptCache is the number of prepared prompts kept (0: 1024;
	// negative: none).
	PromptCache int

	// MaxBodyBytes bounds a request body, checked while reading (default
	// 32 MiB).
	MaxBodyBytes int64
	// MaxPrompts bounds the prompts (or labels) of one request (default 32);
	// MaxItems the inputs of one embeddings request (default 64); MaxChars
	// the characters of one prompt (default 4096).
	MaxPrompts, MaxItems, MaxChars int
	// MaxVideoFrames bounds the sampled frames of one request's videos
	// (default 32): a request whose videos give more is refused
	// (too_many_frames). A video's bytes are bounded by MaxBodyBytes.
	MaxVideoFrames int

	// Index, when set, is searched by POST /v1/search (the server does not
	// close it).
	Index *index.Index

	// Token, when set, is required as "Authorization: Bearer <Token>" on
	// the /v1/ routes; the probes, /metrics and the page need none.
	Token string
	// Registry receives the server's metrics (nil: a new one, with the Go
	// and process collectors); /metrics serves it.
	Registry *prometheus.Registry
	// Log receives one line per request and what the server has to say;
	// nil discards.
	Log *slog.Logger
}

// Server answers the HTTP API over one engine: /v1/embeddings (OpenAI's
// shape), /v1/attend, /v1/classify, the probes /healthz and /readyz,
// /metrics and the page at /.
type Server struct {
	opts    Options
	eng     *pipeline.Engine
	log     *slog.Logger
	mux     *http.ServeMux
	images  *batcher[[]float32, pipeline.ImageEncoding]
	texts   *batcher[promptKey, *pipeline.Prompt]
	cache   *promptCache
	m       *metrics
	ready   atomic.Bool
	closing atomic.Bool
	// decoding counts the images requests are decoding and preprocessing,
	// on their way to the image batcher.
	decoding atomic.Int64
}

// New makes the server of opts.Engine and starts its encoder workers; Close
// stops them.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("serve: no engine")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opts.MaxBatch, 8)
	def(&opts.Workers, 1)
	def(&opts.MaxQueue, 64)
	if opts.PromptCache == 0 {
		opts.PromptCache = 1024
	}
	def(&opts.MaxPrompts, 32)
	def(&opts.MaxItems, 64)
	def(&opts.MaxChars, 4096)
	def(&opts.MaxVideoFrames, defaultMaxVideoFrames)
	if opts.MaxWait == 0 {
		opts.MaxWait = 5 * time.Millisecond
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{opts: opts, eng: opts.Engine, log: opts.Log, cache: newPromptCache(opts.PromptCache)}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var err error
	if s.m, err = newMetrics(opts.Registry); err != nil {
		return nil, err
	}
	s.m.cacheSize = s.cache.len
	per := s.eng.Preprocessor().BufferLen(s.eng.InputSize())
	s.images = newBatcher(opts.Workers, opts.MaxQueue, opts.MaxBatch, opts.MaxWait, func(px [][]float32) ([]pipeline.ImageEncoding, error) {
		buf := make([]float32, 0, len(px)*per)
		for _, p := range px {
			buf = append(buf, p...)
		}
		return s.eng.EncodePixels(context.Background(), buf, len(px))
	}, s.m.batchSize.WithLabelValues("image"), s.m.queueDepth.WithLabelValues("image"))
	s.images.coming = func() bool { return s.decoding.Load() > 0 }
	s.texts = newBatcher(1, opts.MaxQueue, opts.MaxBatch, opts.MaxWait, s.prepare,
		s.m.batchSize.WithLabelValues("text"), s.m.queueDepth.WithLabelValues("text"))
	s.routes()
	s.ready.Store(true)
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Drain marks the server not ready: /readyz answers 503 so that a load
// balancer stops sending requests, while the server still answers those it
// gets. Call it on a termination signal, before http.Server.Shutdown.
func (s *Server) Drain() { s.ready.Store(false) }

// Close marks the server not ready (readyz answers 503), answers the
// queued requests with 503 and stops the encoder workers. Call it after
// http.Server.Shutdown has drained the requests in flight.
func (s *Server) Close() {
	if s.closing.Swap(true) {
		return
	}
	s.ready.Store(false)
	s.images.close()
	s.texts.close()
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.Handle("POST /v1/embeddings", s.api("embeddings", s.embeddings))
	s.mux.Handle("POST /v1/attend", s.api("attend", s.attend))
	s.mux.Handle("POST /v1/classify", s.api("classify", s.classify))
	s.mux.Handle("POST /v1/search", s.api("search", s.search))
	s.mux.Handle("POST /v1/neighbours", s.api("neighbours", s.neighbours))
	s.mux.Handle("GET /v1/models", s.api("models", s.models))
	s.mux.Handle("GET /healthz", s.probe("healthz", func() bool { return true }))
	s.mux.Handle("GET /readyz", s.probe("readyz", func() bool { return s.ready.Load() && !s.closing.Load() }))
	s.mux.Handle("GET /metrics", s.wrap("metrics", true, promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{})))
	s.mux.Handle("GET /{$}", s.wrap("page", true, http.HandlerFunc(servePage)))
	s.mux.Handle("/", s.wrap("other", true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, ok := routeMethods[r.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalid, Code: "method_not_allowed",
				Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, m, r.Method)})
			return
		}
		writeError(w, &apiError{Status: http.StatusNotFound, Type: typeInvalid, Code: "not_found",
			Message: fmt.Sprintf("no route %s %s (routes: POST /v1/embeddings, /v1/attend, /v1/classify, /v1/search, /v1/neighbours; GET /v1/models, /healthz, /readyz, /metrics, /)", r.Method, r.URL.Path)})
	})))
}

// routeMethods is the method each route takes, for the answer to another
// (405 with Allow).
var routeMethods = map[string]string{
	"/v1/embeddings": http.MethodPost, "/v1/attend": http.MethodPost, "/v1/classify": http.MethodPost,
	"/v1/search": http.MethodPost, "/v1/neighbours": http.MethodPost, "/v1/models": http.MethodGet, "/healthz": http.MethodGet,
	"/readyz": http.MethodGet, "/metrics": http.MethodGet, "/": http.MethodGet,
}

// api wraps a JSON endpoint: authentication, the body limit, errors as
// JSON, metrics and the access log.
func (s *Server) api(route string, fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return s.wrap(route, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.closing.Load() {
			writeError(w, errClosing)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
		if err := fn(w, r); err != nil {
			writeError(w, s.apiErr(err))
		}
	}))
}

func (s *Server) probe(route string, ok func() bool) http.Handler {
	return s.wrap(route, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok() {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
	}))
}

// wrap adds what every route has: a request id, a recovered panic as a
// 500, authentication unless open, metrics by route and code, and one log
// line.
func (s *Server) wrap(route string, open bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		s.m.inFlight.Inc()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic serving a request", "id", id, "route", route, "panic", p)
				if !rec.wrote {
					writeError(rec, fmt.Errorf("internal error: %v", p))
				}
			}
			s.m.inFlight.Dec()
			d := time.Since(start)
			code := fmt.Sprint(rec.status)
			s.m.requests.WithLabelValues(route, code).Inc()
			s.m.latency.WithLabelValues(route).Observe(d.Seconds())
			if route != "metrics" && !strings.HasSuffix(route, "z") {
				s.log.Info("request", "id", id, "method", r.Method, "path", r.URL.Path, "route", route,
					"status", rec.status, "bytes", rec.bytes, "ms", float64(d.Microseconds())/1000, "remote", r.RemoteAddr)
			}
		}()
		if !open && !s.authorized(r) {
			writeError(rec, &apiError{Status: http.StatusUnauthorized, Type: typeAuth, Code: "invalid_token",
				Message: "missing or wrong token: send Authorization: Bearer <token>"})
			return
		}
		h.ServeHTTP(rec, r)
	})
}

// authorized reports whether r carries the token (any request when the
// server has none), compared in constant time.
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	// The scheme is case-insensitive (RFC 9110, section 11.1).
	scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	got = strings.TrimSpace(got)
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recorder keeps the status and size of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

// Flush lets the metrics handler stream.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
