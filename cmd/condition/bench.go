package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/xattn"
)

func init() {
	register(command{name: "bench", summary: "kernel benchmarks with GFLOP/s against the machine's measured peak", run: runBench})
}

type benchOptions struct {
	tq, tk, dq, dkv, heads, inner int
	impl                          string
	threads                       int
	json                          bool
	minTime                       time.Duration
	count                         int
	ort                           bool
}

func (o *benchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.tq, "tq", 0, "queries T_q (with --tk, --dq, --dkv, --heads: one shape instead of the default suite)")
	fs.IntVar(&o.tk, "tk", 0, "keys T_k")
	fs.IntVar(&o.dq, "dq", 0, "query width d_q")
	fs.IntVar(&o.dkv, "dkv", 0, "source width d_kv")
	fs.IntVar(&o.heads, "heads", 0, "heads")
	fs.IntVar(&o.inner, "inner", 0, "projected width heads × head_dim (default d_q)")
	fs.StringVar(&o.impl, "impl", "auto", "kernels: auto, avx512, avx2 or go")
	fs.IntVar(&o.threads, "threads", 1, "worker goroutines")
	fs.BoolVar(&o.json, "json", false, "print JSON lines instead of a table")
	fs.DurationVar(&o.minTime, "time", 300*time.Millisecond, "minimum time per measurement")
	fs.IntVar(&o.count, "count", 3, "measurements per figure (the best is reported)")
	fs.BoolVar(&o.ort, "ort", false, "also time ONNX Runtime's MultiHeadAttention block (not available yet)")
}

// benchShape is one cross-attention shape of the suite.
type benchShape struct {
	Name  string `json:"name"`
	TQ    int    `json:"tq"`
	TK    int    `json:"tk"`
	DQ    int    `json:"dq"`
	DKV   int    `json:"dkv"`
	Heads int    `json:"heads"`
	Inner int    `json:"inner"`
}

// benchSuite is the default suite. ViT shapes use the encoder's own head
// count (12 for B, 16 for L) and inner = the vision width (768 / 1024);
// SD 1.5 attn2 uses 8 heads and inner = d_q.
var benchSuite = []benchShape{
	{"vit-b32 image→text", 50, 77, 768, 512, 12, 768},
	{"vit-b16 image→text", 197, 77, 768, 512, 12, 768},
	{"vit-l14 image→text", 257, 77, 1024, 768, 16, 1024},
	{"sd15 attn2 64×64", 4096, 77, 320, 768, 8, 320},
	{"sd15 attn2 32×32", 1024, 77, 640, 768, 8, 640},
	{"sd15 attn2 16×16", 256, 77, 1280, 768, 8, 1280},
	{"sd15 attn2 8×8", 64, 77, 1280, 768, 8, 1280},
	{"vit-b32 text→image", 77, 50, 512, 768, 12, 768},
	{"vit-b16 text→image", 77, 197, 512, 768, 12, 768},
	{"vit-l14 text→image", 77, 257, 768, 1024, 16, 1024},
}

// benchResult is one line of output. FLOPs count 2·m·n·k per matrix
// product: projections 2·T_q·d_q·inner + 2·2·T_k·d_kv·inner +
// 2·T_q·inner·d_out, core 2·2·T_q·T_k·inner.
type benchResult struct {
	Shape       benchShape `json:"shape"`
	Impl        string     `json:"impl"`
	Threads     int        `json:"threads"`
	ProjMS      float64    `json:"proj_ms"` // block − core
	CoreMS      float64    `json:"core_ms"`
	BlockMS     float64    `json:"block_ms"`
	ProjGFLOPS  float64    `json:"proj_gflops"`
	CoreGFLOPS  float64    `json:"core_gflops"`
	BlockGFLOPS float64    `json:"block_gflops"`
	PeakGFLOPS  float64    `json:"peak_gflops"` // one core × threads
	BlockRatio  float64    `json:"block_peak_ratio"`
	CoreRatio   float64    `json:"core_peak_ratio"`
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "pipeline" {
		return runBenchPipeline(ctx, e, args[1:])
	}
	var o benchOptions
	fs := newFlagSet(e, "bench", "bench xattn [--tq N --tk N --dq N --dkv N --heads N [--inner N]] [--impl auto|avx512|avx2|go] [--threads N] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) != "xattn" {
		return usagef("bench takes one suite name: xattn")
	}
	if o.threads < 1 || o.count < 1 {
		return usagef("--threads and --count must be at least 1")
	}
	if o.ort {
		return usagef("--ort is not implemented yet (it needs the models/ort package)")
	}
	shapes := benchSuite
	if fs.Changed("tq") || fs.Changed("tk") || fs.Changed("dq") || fs.Changed("dkv") || fs.Changed("heads") || fs.Changed("inner") {
		s := benchShape{Name: "custom", TQ: o.tq, TK: o.tk, DQ: o.dq, DKV: o.dkv, Heads: o.heads, Inner: o.inner}
		if s.Inner == 0 {
			s.Inner = s.DQ
		}
		if s.TQ <= 0 || s.TK <= 0 || s.DQ <= 0 || s.DKV <= 0 || s.Heads <= 0 || s.Inner%s.Heads != 0 {
			return usagef("a custom shape needs positive --tq, --tk, --dq, --dkv, --heads with --inner (default d_q) a multiple of --heads")
		}
		shapes = []benchShape{s}
	}
	restore, err := xattn.SetImpl(o.impl)
	if err != nil {
		return usagef("--impl: %v", err)
	}
	defer restore()
	impl := xattn.CurrentImpl()
	peak := xattn.PeakGFLOPS(impl, 500*time.Millisecond)
	e.Log.Info("bench", "impl", impl, "threads", o.threads, "peak_gflops_one_core", fmt.Sprintf("%.1f", peak))

	var tw *tabwriter.Writer
	if !o.json {
		fmt.Fprintf(e.Stdout, "kernels %s, %d thread(s); measured peak %.1f GFLOP/s per core; FLOPs = 2·m·n·k per matrix product; proj = block − core\n",
			impl, o.threads, peak)
		tw = tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "shape\tT_q×d_q\tT_k×d_kv\theads\tproj ms\tGFLOP/s\tcore ms\tGFLOP/s\tblock ms\tGFLOP/s\tof peak\t")
	}
	for _, s := range shapes {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := benchXattn(s, o)
		if err != nil {
			return err
		}
		r.Impl, r.Threads = impl, o.threads
		r.PeakGFLOPS = peak * float64(o.threads)
		if r.PeakGFLOPS > 0 {
			r.BlockRatio = r.BlockGFLOPS / r.PeakGFLOPS
			r.CoreRatio = r.CoreGFLOPS / r.PeakGFLOPS
		}
		if o.json {
			b, _ := json.Marshal(r)
			fmt.Fprintln(e.Stdout, string(b))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d×%d\t%d×%d\t%d\t%.3f\t%.1f\t%.3f\t%.1f\t%.3f\t%.1f\t%.0f%%\t\n", s.Name, s.TQ, s.DQ, s.TK, s.DKV, s.Heads,
			r.ProjMS, r.ProjGFLOPS, r.CoreMS, r.CoreGFLOPS, r.BlockMS, r.BlockGFLOPS, 100*r.BlockRatio)
	}
	if tw != nil {
		tw.Flush()
	}
	return nil
}

func benchVec(r *rand.Rand, n int, sd float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * sd
	}
	return v
}

// benchXattn times the whole block (random diffusers-style weights, W_O
// back to d_q) and the attention core alone (identity layer of width inner
// with both sides prepared).
func benchXattn(s benchShape, o benchOptions) (benchResult, error) {
	r := rand.New(rand.NewPCG(1, 2))
	w := xattn.Weights{DQ: s.DQ, DKV: s.DKV, Inner: s.Inner, DOut: s.DQ, Heads: s.Heads,
		Q: benchVec(r, s.Inner*s.DQ, 0.03), K: benchVec(r, s.Inner*s.DKV, 0.03), V: benchVec(r, s.Inner*s.DKV, 0.03),
		O: benchVec(r, s.DQ*s.Inner, 0.03), BO: benchVec(r, s.DQ, 0.1)}
	l, err := xattn.New(w)
	if err != nil {
		return benchResult{}, err
	}
	q, kv := benchVec(r, s.TQ*s.DQ, 1), benchVec(r, s.TK*s.DKV, 1)
	ws := l.NewWorkspace(o.threads)
	defer ws.Close()
	res := new(xattn.Result)
	block, err := timeIt(o, func() error { return ws.Forward(res, q, s.TQ, kv, s.TK, nil, xattn.NoAttention) })
	if err != nil {
		return benchResult{}, err
	}
	id, err := xattn.Identity(s.Inner, s.Heads, 0)
	if err != nil {
		return benchResult{}, err
	}
	pq, err := id.PrepareQuery(benchVec(r, s.TQ*s.Inner, 1), s.TQ)
	if err != nil {
		return benchResult{}, err
	}
	src, err := id.PrepareSource(benchVec(r, s.TK*s.Inner, 1), s.TK, nil)
	if err != nil {
		return benchResult{}, err
	}
	wi := id.NewWorkspace(o.threads)
	defer wi.Close()
	core, err := timeIt(o, func() error { return wi.ForwardPrepared(res, pq, src, xattn.NoAttention) })
	if err != nil {
		return benchResult{}, err
	}
	projF, coreF := l.FLOPs(s.TQ, s.TK)
	proj := max(block-core, 0)
	out := benchResult{Shape: s, ProjMS: proj * 1e3, CoreMS: core * 1e3, BlockMS: block * 1e3,
		CoreGFLOPS: coreF / core / 1e9, BlockGFLOPS: (projF + coreF) / block / 1e9}
	if proj > 0 {
		out.ProjGFLOPS = projF / proj / 1e9
	}
	return out, nil
}

// timeIt returns the best of o.count measurements of f's seconds per call,
// each running f for at least o.minTime.
func timeIt(o benchOptions, f func() error) (float64, error) {
	if err := f(); err != nil { // warm-up: buffers, workers
		return 0, err
	}
	var runs []float64
	for c := 0; c < o.count; c++ {
		n := 0
		start := time.Now()
		for time.Since(start) < o.minTime || n == 0 {
			if err := f(); err != nil {
				return 0, err
			}
			n++
		}
		runs = append(runs, time.Since(start).Seconds()/float64(n))
	}
	sort.Float64s(runs)
	return runs[0], nil
}
