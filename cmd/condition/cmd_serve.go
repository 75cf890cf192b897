package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/serve"
)

// tokenEnv holds the bearer token when --token is not given.
const tokenEnv = "CONDITION_TOKEN"

type serveOptions struct {
	eng         engineFlags
	addr        string
	token       string
	allowPublic bool
	maxBatch    int
	maxWait     time.Duration
	streams     int
	maxQueue    int
	cache       int
	maxBody     int64
	maxPrompts  int
	maxItems    int
	maxFrames   int
	maxChars    int
	index       string
	partial     bool
	grace       time.Duration
	logFormat   string
}

func (o *serveOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&o.token, "token", "", "require 'Authorization: Bearer TOKEN' on the /v1/ routes; the probes, /metrics and the page need none (default: $"+tokenEnv+")")
	fs.BoolVar(&o.allowPublic, "allow-public", false, "allow listening on a non-loopback address without a token")
	fs.IntVar(&o.maxBatch, "max-batch", 8, "most images (and prompts) per encoder call; 1 turns batching off")
	fs.DurationVar(&o.maxWait, "max-wait", 5*time.Millisecond, "longest a request waits for others to fill a batch (0: no wait)")
	fs.IntVar(&o.streams, "streams", 0, "vision encoder batches run at once, as for run (0: min(cores, 4), the cores shared among them)")
	fs.IntVar(&o.streams, "workers", 0, "the old name of --streams")
	fs.MarkDeprecated("workers", "use --streams (the same setting; --workers of run is its file readers)")
	fs.IntVar(&o.maxQueue, "max-queue", 64, "images (and prompts) waiting for the encoders; past it requests get 429")
	fs.IntVar(&o.cache, "prompt-cache", 1024, "prepared prompts kept (least recently used dropped; 0: none)")
	fs.Int64Var(&o.maxBody, "max-body", 32<<20, "largest request body in bytes")
	fs.IntVar(&o.maxPrompts, "max-prompts", 32, "prompts (or labels) per request")
	fs.IntVar(&o.maxItems, "max-items", 64, "inputs per embeddings request")
	fs.IntVar(&o.maxFrames, "max-video-frames", 32, "sampled frames of the videos of one request (/v1/attend, /v1/embeddings; decoded by FFmpeg): more is refused with too_many_frames")
	fs.IntVar(&o.maxChars, "max-chars", 4096, "characters per prompt")
	fs.StringVar(&o.index, "index", "", "a job's index (run --index: its output folder or store prefix, or a collection in Weaviate, weaviate://HOST:PORT/Name, API key from $"+weaviateKeyEnv+") for POST /v1/search; the model defaults to the index's")
	fs.BoolVar(&o.partial, "partial", false, "with --index, search the whole parts of an index some of whose parts are incomplete")
	fs.DurationVar(&o.grace, "grace", 30*time.Second, "on SIGTERM or SIGINT, how long requests in flight have to finish")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	o.eng.AddFlags(fs, withImages|withPrecision|withReadout|withStreams)
}

func runServe(ctx context.Context, e *env, args []string) error {
	var o serveOptions
	fs := newFlagSet(e, "serve", "serve [--model REF] [--addr 127.0.0.1:8080] [--token T] [flags]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	base := pipeline.Options{Streams: autoStreams(o.streams), NoSpinning: true}
	if err := o.check(e, base); err != nil {
		return err
	}
	idx, closeIndex, err := o.openIndex(ctx, e, fs)
	if err != nil {
		return err
	}
	defer closeIndex()
	eng, err := o.eng.open(ctx, e, base)
	if err != nil {
		return err
	}
	m := eng.Model()
	defer eng.Close()
	// The flags' 0 means none; the library's 0 means its default.
	maxWait, cache := o.maxWait, o.cache
	if maxWait == 0 {
		maxWait = -1
	}
	if cache == 0 {
		cache = -1
	}
	if idx != nil {
		if mt := idx.Meta(); mt.Model != m.Name() || mt.Revision != m.Revision() {
			return usagef("--index %s was made with model %s@%s; --model %s@%s is another (leave --model out to serve the index's)", o.index, mt.Model, mt.Revision, m.Name(), m.Revision())
		}
	}
	srv, err := serve.New(serve.Options{Engine: eng, Index: idx, MaxBatch: o.maxBatch, MaxWait: maxWait, Workers: eng.Streams(), MaxQueue: o.maxQueue,
		PromptCache: cache, MaxBodyBytes: o.maxBody, MaxPrompts: o.maxPrompts, MaxItems: o.maxItems, MaxChars: o.maxChars, MaxVideoFrames: o.maxFrames,
		Token: o.token, Log: e.Log})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(e.Log.Handler(), slog.LevelWarn),
	}
	e.Log.Info("serving", "addr", "http://"+ln.Addr().String(), "model", m.Name(), "streams", eng.Streams(), "threads", eng.Threads(),
		"max_batch", o.maxBatch, "token", o.token != "")
	fmt.Fprintf(e.Stderr, "condition serve: model %s on http://%s/\n", m.Name(), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// SIGTERM or SIGINT: stop accepting, let requests in flight finish
	// within the grace period, then stop the encoders.
	e.Log.Info("shutting down", "grace", o.grace)
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	err = hs.Shutdown(sctx)
	srv.Close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err != nil {
		e.Log.Warn("requests still in flight after the grace period were cut off", "grace", o.grace)
	}
	return nil
}

// openIndex opens --index (nil without it), the model and readout then
// the index's unless the flags name them; closeIndex releases it.
func (o *serveOptions) openIndex(ctx context.Context, e *env, fs *pflag.FlagSet) (idx *index.Index, closeIndex func(), err error) {
	if o.index == "" {
		return nil, func() {}, nil
	}
	stores := objstore.NewURLReader()
	x, err := index.Open(ctx, o.index, index.Options{Partial: o.partial, Store: stores, APIKey: os.Getenv(weaviateKeyEnv)})
	var inc *index.IncompletePartError
	switch {
	case errors.As(err, &inc):
		stores.Close()
		return nil, nil, fmt.Errorf("--index: %w\n(add --partial to search the other parts)", err)
	case err != nil:
		stores.Close()
		return nil, nil, fmt.Errorf("--index: %w", collectionAdvice(err, o.index))
	}
	closeIndex = func() {
		x.Close()
		stores.Close()
	}
	for _, s := range x.Skipped() {
		e.Log.Warn("index part left out", "part", s.Name, "why", s.Err)
	}
	if !fs.Changed("model") {
		o.eng.model = x.Meta().Model
	}
	if err := o.eng.indexReadout("--index", o.index, x.Meta()); err != nil {
		closeIndex()
		return nil, nil, err
	}
	return x, closeIndex, nil
}

// check checks the flags' values before anything is opened, takes the
// token from the environment when --token is not given, and sets the log
// format; base is the engine's options as the flags give them.
func (o *serveOptions) check(e *env, base pipeline.Options) error {
	if o.maxBatch < 1 || o.maxQueue < 1 || o.maxBody < 1 || o.maxPrompts < 1 || o.maxItems < 1 || o.maxChars < 1 || o.maxFrames < 1 {
		return usagef("--max-batch, --max-queue, --max-body, --max-prompts, --max-items, --max-chars and --max-video-frames must be at least 1")
	}
	if o.streams < 0 || o.cache < 0 || o.maxWait < 0 || o.grace < 0 {
		return usagef("--streams, --prompt-cache, --max-wait and --grace must be 0 or more")
	}
	if _, err := o.eng.options(base); err != nil {
		return err
	}
	switch o.logFormat {
	case "text":
	case "json":
		e.Log = slog.New(slog.NewJSONHandler(e.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	default:
		return usagef("--log-format %q: want text or json", o.logFormat)
	}
	if o.token == "" {
		o.token = os.Getenv(tokenEnv)
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return usagef("--addr %q: %v", o.addr, err)
	}
	if !isLoopback(host) {
		if o.token == "" && !o.allowPublic {
			return usagef("--addr %s is not a loopback address: set --token (or $%s), or pass --allow-public to serve without one", o.addr, tokenEnv)
		}
		if o.token == "" {
			e.Log.Warn("serving on a non-loopback address without a token: anyone who reaches it can use it", "addr", o.addr)
		}
	}
	return nil
}

// isLoopback reports whether host (a --addr host part) names only the
// loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
