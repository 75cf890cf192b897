package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
	"github.com/conditionhq/condition/cmd/condition-bench/internal/servebench"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/serve"
	"github.com/conditionhq/condition/vision"
)

func init() {
	addSubcommand(subcommand{name: "serve", summary: "the HTTP service in-process under concurrent clients: images/s against the encoder alone, latency percentiles, errors, batch sizes, RSS", run: runBenchServe})
}

// serveBenchOptions are the flags of `condition-bench serve`.
type serveBenchOptions struct {
	ort         ortFlags
	model       string
	variant     string
	image       string
	size        int
	prompts     []string
	clients     []int
	duration    time.Duration
	warmup      time.Duration
	requests    int
	maxBatch    int
	maxWait     time.Duration
	workers     int
	maxQueue    int
	encTime     time.Duration
	rssRequests int
	settle      time.Duration
	json        bool
	markdown    bool
	cpuProf     string
	decode      string
	decodeMode  pipeline.DecodeMode
}

func (o *serveBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", "default", "model to serve")
	fs.StringVar(&o.variant, "variant", "", "graph variant by suffix: fp16, quantized, ...")
	fs.StringVar(&o.image, "image", "", "image every request sends (default: a synthetic JPEG made for the run, see --size)")
	fs.IntVar(&o.size, "size", 256, "side of the synthetic image in pixels")
	fs.StringArrayVarP(&o.prompts, "prompt", "p", []string{"a red circle", "a blue square"}, "prompt of every request; repeatable (prepared once, then found in the server's cache)")
	fs.IntSliceVar(&o.clients, "clients", []int{1, 8, 32}, "concurrent clients, one row each (each client sends its next request when the last is answered)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each row (after --warmup)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "time each row's clients run before the measured --duration")
	fs.IntVar(&o.requests, "requests", 0, "requests of each row instead of --warmup and --duration (all measured)")
	fs.IntVar(&o.maxBatch, "max-batch", 8, "the server's --max-batch with batching on (the rows with batching off use 1), and the encoder-alone batch")
	fs.DurationVar(&o.maxWait, "max-wait", 5*time.Millisecond, "the server's --max-wait with batching on")
	fs.IntVar(&o.workers, "workers", 0, "the server's --streams: image batches encoded at once (0: min(cores, 4), the cores shared among them)")
	fs.IntVar(&o.maxQueue, "max-queue", 64, "the server's --max-queue")
	fs.DurationVar(&o.encTime, "encoder-time", 2*time.Second, "about how long each encoder-alone measurement runs")
	fs.IntVar(&o.rssRequests, "rss-requests", 20000, "requests of the memory phase (batching on, the most clients): resident memory before and after (0: skip)")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "longest wait after the load for the goroutines of connections and requests to end")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.markdown, "markdown", false, "print the table as Markdown")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the measured window of the batched row with the most clients to this file")
	fs.StringVar(&o.decode, "decode", "exact", decodeHelp)
	o.ort.AddFlags(fs)
}

// serveBenchResult is the report of `condition-bench serve`.
type serveBenchResult struct {
	Model       string   `json:"model"`
	Cores       int      `json:"cores"`
	Streams     int      `json:"encoder_streams"`
	Threads     int      `json:"encoder_threads"`
	Image       string   `json:"image"`
	ImageBytes  int      `json:"image_bytes"`
	Prompts     []string `json:"prompts"`
	MaxBatch    int      `json:"max_batch"`
	MaxWaitMS   float64  `json:"max_wait_ms"`
	Decode      string   `json:"decode"` // JPEG decoding: exact, fast or fastest
	JPEGDecoder string   `json:"jpeg_decoder"`
	// Requests is each row's request count, or 0 when rows ran for
	// WarmupS then DurationS.
	Requests  int     `json:"requests,omitempty"`
	WarmupS   float64 `json:"warmup_s,omitempty"`
	DurationS float64 `json:"duration_s,omitempty"`
	// EncoderBatch1PerSec is the encoder alone on batches of one image.
	EncoderBatch1PerSec float64           `json:"encoder_batch1_images_per_sec"`
	EncoderBatch1CPUms  float64           `json:"encoder_batch1_cpu_ms_per_image,omitempty"`
	Rows                []serveBenchRow   `json:"rows"`
	RSS                 *serveBenchRSS    `json:"rss,omitempty"`
	GoroutinesBefore    int               `json:"goroutines_before"`
	GoroutinesAfter     int               `json:"goroutines_after"`
	Targets             []serveBenchCheck `json:"targets"`
}

// serveBenchRow is one load: a client count, batching on or off.
type serveBenchRow struct {
	Clients  int  `json:"clients"`
	Batching bool `json:"batching"`
	MaxBatch int  `json:"max_batch"`
	// Sent counts every request of the row (warm-up included); OK the
	// 200s among them, Status429 the 429s and Errors the other failures
	// by status code ("transport": no answer).
	Sent      int            `json:"requests"`
	OK        int            `json:"ok"`
	Status429 int            `json:"status_429"`
	Errors    map[string]int `json:"errors"`
	// Measured is the 200s answered in the measured window; the rate and
	// the latencies are theirs.
	Measured     int     `json:"measured"`
	WindowS      float64 `json:"window_s"`
	ImagesPerSec float64 `json:"images_per_sec"`
	P50ms        float64 `json:"p50_ms"`
	P90ms        float64 `json:"p90_ms"`
	P99ms        float64 `json:"p99_ms"`
	// MeanBatch is the server's condition_batch_size{queue="image"}
	// sum over count across the window; Batches that count, Batched that
	// sum (the images encoded).
	MeanBatch float64 `json:"mean_batch"`
	Batches   uint64  `json:"batches"`
	Batched   float64 `json:"images_encoded"`
	// The encoder alone (batches of MaxBatch of the batched server, on the
	// same image), measured just before the row's pair of loads, and the
	// row's rate over it.
	EncoderPerSec float64 `json:"encoder_images_per_sec"`
	Ratio         float64 `json:"served_to_encoder_ratio"`
	CPUms         float64 `json:"cpu_ms_per_image,omitempty"`
	EncoderCPUms  float64 `json:"encoder_cpu_ms_per_image,omitempty"`
	// ProcessCores is this process's CPU time over the window (server and
	// clients), MachineCores that of every process on the machine, both
	// per second: their difference is other programs' load.
	ProcessCores float64 `json:"process_cores,omitempty"`
	MachineCores float64 `json:"machine_busy_cores,omitempty"`
	// CPURatio is EncoderCPUms over CPUms: the row's rate relative to the
	// encoder's when each keeps every core busy. Other programs' load
	// moves it far less than Ratio, a quotient of two rates measured one
	// after the other.
	CPURatio float64 `json:"encoder_to_served_cpu_ratio,omitempty"`
}

// serveBenchRSS is the memory phase.
type serveBenchRSS struct {
	Requests  int       `json:"requests"`
	Clients   int       `json:"clients"`
	OK        int       `json:"ok"`
	Status429 int       `json:"status_429"`
	Errors    int       `json:"errors"`
	BeforeMB  float64   `json:"before_mb"`
	AfterMB   float64   `json:"after_mb"`
	GrowthMB  float64   `json:"growth_mb"`
	QuarterMB []float64 `json:"after_each_quarter_mb"`
	// The Go heap in use (runtime.MemStats.HeapInuse: what Go's allocations
	// hold; the rest of RSS is ONNX Runtime's, the runtime's and the
	// binary's).
	HeapBeforeMB float64 `json:"go_heap_before_mb"`
	HeapAfterMB  float64 `json:"go_heap_after_mb"`
}

// serveBenchCheck is one target set beside a figure (never enforced).
type serveBenchCheck struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Shown  string  `json:"shown"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
}

// benchServer is one in-process server on a loopback port.
type benchServer struct {
	batching bool
	maxBatch int
	srv      *serve.Server
	reg      *prometheus.Registry
	hs       *http.Server
	url      string
	client   *http.Client
}

func (b *benchServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.client.CloseIdleConnections()
	b.hs.Shutdown(ctx)
	b.srv.Close()
}

func runBenchServe(ctx context.Context, e *env, args []string) error {
	var o serveBenchOptions
	fs := newFlagSet(e, "serve", "serve [--model REF] [--clients 1,8,32] [--duration 10s | --requests N] [--max-batch 8] [--rss-requests 20000] [--json | --markdown]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("serve takes no arguments, got %q", fs.Args())
	}
	if len(o.clients) == 0 || slices.Min(o.clients) < 1 {
		return usagef("--clients must list counts of at least 1")
	}
	if o.maxBatch < 1 || o.maxQueue < 1 || o.size < 8 || len(o.prompts) == 0 {
		return usagef("--max-batch and --max-queue must be at least 1, --size at least 8, and there must be a --prompt")
	}
	if o.requests < 0 || o.rssRequests < 0 || o.workers < 0 || o.maxWait < 0 || o.warmup < 0 || o.settle < 0 {
		return usagef("--requests, --rss-requests, --workers, --max-wait, --warmup and --settle must be 0 or more")
	}
	if o.requests == 0 && o.duration <= 0 {
		return usagef("--duration must be positive (or give --requests)")
	}
	if o.encTime <= 0 {
		return usagef("--encoder-time must be positive")
	}
	if o.json && o.markdown {
		return usagef("--json and --markdown exclude each other")
	}
	var err error
	if o.decodeMode, err = decodeMode(o.decode); err != nil {
		return err
	}
	if err := o.ort.check(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "condition-bench-serve-")
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer os.RemoveAll(tmp)

	// The image: the file given, or one synthetic JPEG as pipeline makes.
	res := serveBenchResult{Prompts: o.prompts, MaxBatch: o.maxBatch, MaxWaitMS: ms(o.maxWait), Cores: runtime.GOMAXPROCS(0)}
	imgPath, ext := o.image, strings.ToLower(filepath.Ext(o.image))
	if imgPath == "" {
		dir := filepath.Join(tmp, "image")
		if err := pipebench.WriteSyntheticImages(dir, 1, o.size, 1); err != nil {
			return err
		}
		imgPath, ext = filepath.Join(dir, "000", "000000.jpg"), ".jpg"
		res.Image = fmt.Sprintf("synthetic %d×%d JPEG", o.size, o.size)
	} else {
		res.Image = o.image
	}
	img, err := os.ReadFile(imgPath)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	res.ImageBytes = len(img)
	mime := http.DetectContentType(img)
	if !strings.HasPrefix(mime, "image/") {
		mime = ""
	}
	// The encoder alone walks a folder of copies, which takes images by
	// their extension.
	if known := map[string]string{"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/bmp": ".bmp",
		"image/webp": ".webp", "image/tiff": ".tif"}[mime]; known != "" {
		ext = known
	}

	if err := o.ort.load(e); err != nil {
		return err
	}
	m, err := openModel(ctx, e, o.model, o.variant)
	if err != nil {
		return err
	}
	res.Model = m.Name()
	res.Decode, res.JPEGDecoder = string(o.decodeMode), vision.JPEGDecoder()
	eng, err := openEngine(ctx, e, m, pipeline.Options{Threads: o.ort.Threads, Streams: streamsFlag(o.workers), NoSpinning: true, Decode: o.decodeMode})
	if err != nil {
		return err
	}
	defer eng.Close()
	res.Threads, res.Streams = eng.Threads(), eng.Streams()

	// The encoder alone runs on copies of the same image, enough for every
	// stream to have batches in turn.
	encDir := filepath.Join(tmp, "encoder")
	if err := os.MkdirAll(encDir, 0o755); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	copies := max(16, 2*o.maxBatch*res.Streams)
	for i := range copies {
		if err := os.WriteFile(filepath.Join(encDir, fmt.Sprintf("%04d%s", i, ext)), img, 0o644); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	encCfg := batch.Config{Engine: eng, Inputs: []string{encDir}, Batch: o.maxBatch, Streams: res.Streams}
	// Calibrate the rounds to about --encoder-time.
	cal, n, err := pipebench.EncoderRate(ctx, eng, encCfg, 1)
	if err != nil {
		return err
	}
	if n != copies {
		return fmt.Errorf("serve: the encoder took %d of the %d copies of %s", n, copies, imgPath)
	}
	rounds := max(1, int(math.Ceil(o.encTime.Seconds()*cal.PerSec()/float64(copies))))
	encoder := func(batch, rounds int) (pipebench.Rate, error) {
		cfg := encCfg
		cfg.Batch = batch
		r, _, err := pipebench.EncoderRate(ctx, eng, cfg, rounds)
		return r, err
	}
	// Batches of one run slower: fewer rounds for the same time, at least one.
	enc1, err := encoder(1, max(1, rounds/2))
	if err != nil {
		return err
	}
	res.EncoderBatch1PerSec, res.EncoderBatch1CPUms = enc1.PerSec(), ms(enc1.CPUPerImage())

	// Two servers on the one engine: batching on and off.
	body, err := json.Marshal(map[string]any{"image": "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img), "prompts": o.prompts})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	maxClients := slices.Max(o.clients)
	var servers []*benchServer
	defer func() {
		for _, s := range servers {
			s.close()
		}
	}()
	for _, batching := range []bool{true, false} {
		s, err := startBenchServer(e, eng, o, batching, maxClients)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		if err := checkAttend(ctx, s, body, len(o.prompts)); err != nil {
			return err
		}
		// Warm up: the prompts are cached, ONNX Runtime has seen full batches.
		w, err := servebench.Run(ctx, servebench.Load{Client: s.client, URL: s.url, Body: body, ContentType: "application/json",
			Clients: maxClients, Requests: 2 * max(maxClients, o.maxBatch*res.Streams)})
		if err != nil {
			return err
		}
		if w.Errors() > 0 {
			return fmt.Errorf("serve: warm-up of the server with --max-batch %d: %d of %d requests failed (%s)", s.maxBatch, w.Errors(), w.Sent, w.FirstError)
		}
	}
	for _, s := range servers {
		s.client.CloseIdleConnections()
	}
	time.Sleep(min(o.settle, 300*time.Millisecond))
	res.GoroutinesBefore = runtime.NumGoroutine()

	if o.requests > 0 {
		res.Requests = o.requests
	} else {
		res.WarmupS, res.DurationS = o.warmup.Seconds(), o.duration.Seconds()
	}
	var prof *os.File
	if o.cpuProf != "" {
		if prof, err = os.Create(o.cpuProf); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer prof.Close()
	}
	for _, c := range o.clients {
		enc, err := encoder(o.maxBatch, rounds)
		if err != nil {
			return err
		}
		for _, s := range servers {
			profile := prof != nil && s.batching && c == maxClients
			row, err := loadRow(ctx, s, o, body, c, profile, prof)
			if err != nil {
				return err
			}
			row.EncoderPerSec, row.EncoderCPUms = enc.PerSec(), ms(enc.CPUPerImage())
			if row.EncoderPerSec > 0 {
				row.Ratio = row.ImagesPerSec / row.EncoderPerSec
			}
			if row.CPUms > 0 {
				row.CPURatio = row.EncoderCPUms / row.CPUms
			}
			res.Rows = append(res.Rows, row)
		}
	}

	if o.rssRequests > 0 {
		if res.RSS, err = rssPhase(ctx, servers[0], o.rssRequests, maxClients, body); err != nil {
			return err
		}
	}
	for _, s := range servers {
		s.client.CloseIdleConnections()
	}
	res.GoroutinesAfter = servebench.Settle(res.GoroutinesBefore, o.settle)
	res.Targets = serveTargets(res, maxClients)

	if o.json {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		fmt.Fprintln(e.Stdout, string(b))
		return nil
	}
	printServeBench(e.Stdout, res, o.markdown)
	return nil
}

// startBenchServer starts a server of eng on 127.0.0.1 and a port of the
// system's choice, with batching on (--max-batch, --max-wait) or off.
func startBenchServer(e *env, eng *pipeline.Engine, o serveBenchOptions, batching bool, clients int) (*benchServer, error) {
	b := &benchServer{batching: batching, maxBatch: 1, reg: prometheus.NewRegistry()}
	if batching {
		b.maxBatch = o.maxBatch
	}
	srv, err := serve.New(serve.Options{Engine: eng, MaxBatch: b.maxBatch, MaxWait: o.maxWait, Workers: eng.Streams(),
		MaxQueue: o.maxQueue, Registry: b.reg})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("serve: %w", err)
	}
	// As condition serve sets it up.
	b.srv = srv
	b.hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 2 * time.Minute,
		WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(e.Log.Handler(), slog.LevelWarn)}
	go b.hs.Serve(ln)
	b.url = "http://" + ln.Addr().String() + "/v1/attend"
	b.client = servebench.NewClient(clients)
	return b, nil
}

// checkAttend sends one request and checks its answer is an attend
// response with a map per prompt.
func checkAttend(ctx context.Context, s *benchServer, body []byte, prompts int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("serve: POST /v1/attend: status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var a struct {
		Prompts []struct {
			TextToImage [][]float32 `json:"text_to_image"`
		} `json:"prompts"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("serve: the attend answer: %w", err)
	}
	if len(a.Prompts) != prompts || len(a.Prompts[0].TextToImage) == 0 {
		return fmt.Errorf("serve: the attend answer has %d prompts (want %d) or no maps", len(a.Prompts), prompts)
	}
	return nil
}

// loadRow runs one row's load on s and reads the server's batch sizes over
// its window; profile writes a CPU profile of the window to prof.
func loadRow(ctx context.Context, s *benchServer, o serveBenchOptions, body []byte, clients int, profile bool, prof *os.File) (serveBenchRow, error) {
	row := serveBenchRow{Clients: clients, Batching: s.batching, MaxBatch: s.maxBatch, Errors: map[string]int{}}
	var sum [2]float64
	var count [2]uint64
	var merr, perr error
	if profile {
		defer pprof.StopCPUProfile() // when the run stopped early; a no-op otherwise
	}
	l := servebench.Load{Client: s.client, URL: s.url, Body: body, ContentType: "application/json", Clients: clients,
		Requests: o.requests, Warmup: o.warmup, Duration: o.duration,
		Window: func(end bool) {
			i := 0
			if end {
				i = 1
				if profile && perr == nil {
					pprof.StopCPUProfile()
				}
			}
			var err error
			sum[i], count[i], err = servebench.Histogram(s.reg, "condition_batch_size", "queue", "image")
			if merr == nil {
				merr = err
			}
			if !end && profile {
				perr = pprof.StartCPUProfile(prof)
			}
		}}
	r, err := servebench.Run(ctx, l)
	if err != nil {
		return row, err
	}
	if err := errors.Join(merr, perr); err != nil {
		return row, fmt.Errorf("serve: %w", err)
	}
	row.Sent, row.OK, row.Measured, row.WindowS = r.Sent, r.OK, r.Counted, r.Window.Seconds()
	for code, n := range r.Status {
		if code == http.StatusTooManyRequests {
			row.Status429 += n
			continue
		}
		row.Errors[strconv.Itoa(code)] += n
	}
	if r.Transport > 0 {
		row.Errors["transport"] = r.Transport
	}
	row.ImagesPerSec = r.PerSec()
	row.P50ms, row.P90ms, row.P99ms = ms(r.Quantile(0.5)), ms(r.Quantile(0.9)), ms(r.Quantile(0.99))
	row.Batches, row.Batched = count[1]-count[0], sum[1]-sum[0]
	if row.Batches > 0 {
		row.MeanBatch = row.Batched / float64(row.Batches)
	}
	if r.CPU > 0 && r.Counted > 0 {
		row.CPUms = ms(r.CPU / time.Duration(r.Counted))
	}
	if r.Window > 0 {
		row.ProcessCores = r.CPU.Seconds() / r.Window.Seconds()
		row.MachineCores = r.MachineBusy.Seconds() / r.Window.Seconds()
	}
	return row, nil
}

// rssPhase sends requests to s from clients clients in four parts, reading
// the resident memory before and after each.
func rssPhase(ctx context.Context, s *benchServer, requests, clients int, body []byte) (*serveBenchRSS, error) {
	out := &serveBenchRSS{Requests: requests, Clients: clients}
	rss := func() float64 {
		b, ok := servebench.RSS()
		if !ok {
			return 0
		}
		return float64(b) / (1 << 20)
	}
	heap := func() float64 {
		var st runtime.MemStats
		runtime.ReadMemStats(&st)
		return float64(st.HeapInuse) / (1 << 20)
	}
	out.BeforeMB, out.HeapBeforeMB = rss(), heap()
	done := 0
	for q := range 4 {
		n := requests*(q+1)/4 - done
		if n > 0 {
			r, err := servebench.Run(ctx, servebench.Load{Client: s.client, URL: s.url, Body: body, ContentType: "application/json", Clients: clients, Requests: n})
			if err != nil {
				return nil, err
			}
			out.OK += r.OK
			out.Status429 += r.Status[http.StatusTooManyRequests]
			out.Errors += r.Errors() - r.Status[http.StatusTooManyRequests]
			done += n
		}
		out.QuarterMB = append(out.QuarterMB, rss())
	}
	out.AfterMB, out.HeapAfterMB = rss(), heap()
	out.GrowthMB = out.AfterMB - out.BeforeMB
	return out, nil
}

// serveTargets sets the figures beside their targets.
func serveTargets(res serveBenchResult, maxClients int) []serveBenchCheck {
	find := func(c int, batching bool) *serveBenchRow {
		for i := range res.Rows {
			if r := &res.Rows[i]; r.Clients == c && r.Batching == batching {
				return r
			}
		}
		return nil
	}
	var out []serveBenchCheck
	on, off := find(maxClients, true), find(maxClients, false)
	if on != nil && off != nil && off.ImagesPerSec > 0 {
		v := on.ImagesPerSec / off.ImagesPerSec
		cpu := ""
		if on.CPUms > 0 && off.CPUms > 0 {
			cpu = fmt.Sprintf("; by CPU per image %.2f×", off.CPUms/on.CPUms)
		}
		out = append(out, serveBenchCheck{Name: fmt.Sprintf("batching ÷ no batching, images/s at %d clients", maxClients),
			Value: v, Shown: fmt.Sprintf("%.2f×%s", v, cpu), Target: "≥ 1.5×", Met: v >= 1.5})
	}
	if on != nil {
		cpu := ""
		if on.CPURatio > 0 {
			cpu = fmt.Sprintf("; by CPU per image %.0f%%", 100*on.CPURatio)
		}
		out = append(out, serveBenchCheck{Name: fmt.Sprintf("served ÷ encoder alone at %d clients (batching on)", maxClients),
			Value: on.Ratio, Shown: fmt.Sprintf("%.0f%%%s", 100*on.Ratio, cpu), Target: "≥ 85%", Met: on.Ratio >= 0.85})
	}
	if r := find(8, true); r != nil && r.P50ms > 0 {
		v := r.P99ms / r.P50ms
		out = append(out, serveBenchCheck{Name: "p99 ÷ p50 at 8 clients (batching on)",
			Value: v, Shown: fmt.Sprintf("%.2f× (%.1f ÷ %.1f ms)", v, r.P99ms, r.P50ms), Target: "≤ 3×", Met: v <= 3})
	}
	errs, n429 := 0, 0
	for _, r := range res.Rows {
		n429 += r.Status429
		for _, n := range r.Errors {
			errs += n
		}
	}
	if res.RSS != nil {
		errs += res.RSS.Errors
		n429 += res.RSS.Status429
	}
	out = append(out, serveBenchCheck{Name: "errors other than 429", Value: float64(errs),
		Shown: fmt.Sprintf("%d (429s: %d)", errs, n429), Target: "0", Met: errs == 0})
	if res.RSS != nil && res.RSS.BeforeMB > 0 {
		out = append(out, serveBenchCheck{Name: fmt.Sprintf("RSS growth over %d requests", res.RSS.Requests), Value: res.RSS.GrowthMB,
			Shown: fmt.Sprintf("%.1f MB (%.1f → %.1f)", res.RSS.GrowthMB, res.RSS.BeforeMB, res.RSS.AfterMB), Target: "< 50 MB", Met: res.RSS.GrowthMB < 50})
	}
	g := float64(res.GoroutinesAfter - res.GoroutinesBefore)
	out = append(out, serveBenchCheck{Name: "goroutines before → after the load", Value: g,
		Shown: fmt.Sprintf("%d → %d", res.GoroutinesBefore, res.GoroutinesAfter), Target: "no growth", Met: g <= 0})
	return out
}

func printServeBench(w io.Writer, res serveBenchResult, markdown bool) {
	run := fmt.Sprintf("%d requests per row", res.Requests)
	if res.Requests == 0 {
		run = fmt.Sprintf("per row %gs of warm-up, then %gs measured", res.WarmupS, res.DurationS)
	}
	fmt.Fprintf(w, "model %s, %s (%d bytes) as a data URI + %d prompts per /v1/attend request, %d cores, encoder %d stream(s) × %d thread(s); JPEGs decoded by %s, --decode %s\n",
		res.Model, res.Image, res.ImageBytes, len(res.Prompts), res.Cores, res.Streams, res.Threads, res.JPEGDecoder, res.Decode)
	fmt.Fprintf(w, "batching on: --max-batch %d --max-wait %gms; off: --max-batch 1; %s; encoder alone at batch %d before each client count (batch 1: %.1f images/s, CPU %.2f ms/image)\n",
		res.MaxBatch, res.MaxWaitMS, run, res.MaxBatch, res.EncoderBatch1PerSec, res.EncoderBatch1CPUms)
	var tw *tabwriter.Writer
	row := func(cells ...string) {
		if markdown {
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
			return
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if markdown {
		fmt.Fprintln(w)
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	}
	row("batching", "clients", "requests", "images/s", "encoder alone", "served ÷ encoder", "p50 ms", "p90 ms", "p99 ms", "p99 ÷ p50",
		"mean batch", "429s", "other errors", "CPU ms/image", "encoder CPU ms/image", "encoder ÷ served CPU", "cores ours/machine")
	if markdown {
		row("---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:")
	}
	for _, r := range res.Rows {
		mode := "off"
		if r.Batching {
			mode = fmt.Sprintf("on (%d)", r.MaxBatch)
		}
		errs := 0
		var kinds []string
		for k, n := range r.Errors {
			errs += n
			kinds = append(kinds, fmt.Sprintf("%s×%d", k, n))
		}
		slices.Sort(kinds)
		e := fmt.Sprint(errs)
		if errs > 0 {
			e += " (" + strings.Join(kinds, ", ") + ")"
		}
		ratio := "-"
		if r.P50ms > 0 {
			ratio = fmt.Sprintf("%.2f", r.P99ms/r.P50ms)
		}
		row(mode, fmt.Sprint(r.Clients), fmt.Sprint(r.Sent), fmt.Sprintf("%.1f", r.ImagesPerSec), fmt.Sprintf("%.1f", r.EncoderPerSec),
			fmt.Sprintf("%.0f%%", 100*r.Ratio), fmt.Sprintf("%.1f", r.P50ms), fmt.Sprintf("%.1f", r.P90ms), fmt.Sprintf("%.1f", r.P99ms), ratio,
			fmt.Sprintf("%.2f", r.MeanBatch), fmt.Sprint(r.Status429), e, fmt.Sprintf("%.2f", r.CPUms), fmt.Sprintf("%.2f", r.EncoderCPUms),
			fmt.Sprintf("%.0f%%", 100*r.CPURatio), fmt.Sprintf("%.2f/%.2f", r.ProcessCores, r.MachineCores))
	}
	if tw != nil {
		tw.Flush()
	}
	if markdown {
		fmt.Fprintln(w)
	}
	if r := res.RSS; r != nil {
		q := make([]string, len(r.QuarterMB))
		for i, v := range r.QuarterMB {
			q[i] = fmt.Sprintf("%.1f", v)
		}
		fmt.Fprintf(w, "memory: %d requests from %d clients (batching on): RSS %.1f → %.1f MB (after each quarter: %s), Go heap in use %.1f → %.1f MB\n",
			r.Requests, r.Clients, r.BeforeMB, r.AfterMB, strings.Join(q, ", "), r.HeapBeforeMB, r.HeapAfterMB)
	}
	fmt.Fprintln(w, "cores ours/machine: this process's CPU (server and clients) and every process's, per second of the window; CPU is the process's per image answered")
	fmt.Fprintln(w, "targets:")
	for _, t := range res.Targets {
		met := "met"
		if !t.Met {
			met = "NOT met"
		}
		fmt.Fprintf(w, "  %-52s %-40s target %-10s %s\n", t.Name, t.Shown, t.Target, met)
	}
}
