package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/xattnhooks"
	"github.com/conditionhq/condition/xattn"
)

func init() {
	addSubcommand(subcommand{name: "xattn", summary: "the cross-attention kernels: GFLOP/s against the measured peak, ONNX Runtime's with --ort", run: runXattn})
}

type benchOptions struct {
	tq, tk, dq, dkv, heads, inner int
	impl                          string
	threads                       int
	json, markdown                bool
	minTime                       time.Duration
	count                         int
	ort                           bool
	ortLib                        string
}

func (o *benchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.tq, "tq", 0, "queries T_q (with --tk, --dq, --dkv, --heads: one shape instead of the default suite)")
	fs.IntVar(&o.tk, "tk", 0, "keys T_k")
	fs.IntVar(&o.dq, "dq", 0, "query width d_q")
	fs.IntVar(&o.dkv, "dkv", 0, "source width d_kv")
	fs.IntVar(&o.heads, "heads", 0, "heads")
	fs.IntVar(&o.inner, "inner", 0, "projected width heads × head_dim (default d_q)")
	fs.StringVar(&o.impl, "impl", "auto", "kernels: auto, avx512, avx2 or go")
	fs.IntVar(&o.threads, "threads", 1, "worker goroutines (and ONNX Runtime intra-op threads with --ort)")
	fs.BoolVar(&o.json, "json", false, "print JSON lines instead of a table")
	fs.BoolVar(&o.markdown, "markdown", false, "print the table as Markdown")
	fs.DurationVar(&o.minTime, "time", 100*time.Millisecond, "minimum time per measurement")
	fs.IntVar(&o.count, "count", 10, "measurements per figure (the best is reported: on a shared machine, the least disturbed)")
	fs.BoolVar(&o.ort, "ort", false, "also time ONNX Runtime's own block (MatMul projections, com.microsoft MultiHeadAttention) and attention core on the same inputs")
	fs.StringVar(&o.ortLib, "ort-lib", "", "ONNX Runtime shared library for --ort (default: the usual search, which 'condition runtime' shows)")
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
// 2·T_q·inner·d_out, core 2·2·T_q·T_k·inner. Times are the best of
// --count measurements, per call.
type benchResult struct {
	Shape   benchShape `json:"shape"`
	Impl    string     `json:"impl"`
	Threads int        `json:"threads"`
	// ProjMS is measured inside the block runs: the query, key/value and
	// output projection phases of the fastest run.
	ProjMS      float64 `json:"proj_ms"`
	CoreMS      float64 `json:"core_ms"` // the core alone, both sides prepared
	BlockMS     float64 `json:"block_ms"`
	ProjGFLOPS  float64 `json:"proj_gflops"`
	CoreGFLOPS  float64 `json:"core_gflops"`
	BlockGFLOPS float64 `json:"block_gflops"`
	PeakGFLOPS  float64 `json:"peak_gflops"` // one core × threads
	BlockRatio  float64 `json:"block_peak_ratio"`
	CoreRatio   float64 `json:"core_peak_ratio"`

	// ONNX Runtime on the same inputs and weights (--ort), with the
	// largest difference of its outputs from ours relative to the largest
	// output magnitude.
	ORTVersion     string  `json:"ort_version,omitempty"`
	ORTCoreMS      float64 `json:"ort_core_ms,omitempty"`
	ORTBlockMS     float64 `json:"ort_block_ms,omitempty"`
	ORTCoreGFLOPS  float64 `json:"ort_core_gflops,omitempty"`
	ORTBlockGFLOPS float64 `json:"ort_block_gflops,omitempty"`
	ORTCoreDiff    float64 `json:"ort_core_rel_diff,omitempty"`
	ORTBlockDiff   float64 `json:"ort_block_rel_diff,omitempty"`
	// ORTProjMS is ONNX Runtime's four projections alone (MatMul, the
	// peer of our GEMM); ORTProjDiff compares the query projection.
	ORTProjMS     float64 `json:"ort_proj_ms,omitempty"`
	ORTProjGFLOPS float64 `json:"ort_proj_gflops,omitempty"`
	ORTProjDiff   float64 `json:"ort_proj_rel_diff,omitempty"`
	// SpeedupBlock is ORT's block time over ours (> 1: ours is faster).
	SpeedupBlock float64 `json:"block_speedup_vs_ort,omitempty"`
	SpeedupCore  float64 `json:"core_speedup_vs_ort,omitempty"`
	SpeedupProj  float64 `json:"proj_speedup_vs_ort,omitempty"`
}

// runXattn is condition-bench xattn.
func runXattn(ctx context.Context, e *env, args []string) error {
	var o benchOptions
	fs := newFlagSet(e, "xattn", "xattn [--tq N --tk N --dq N --dkv N --heads N [--inner N]] [--impl auto|avx512|avx2|go] [--threads N] [--ort [--ort-lib PATH]] [--json | --markdown]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("xattn takes flags only, got %q", strings.Join(fs.Args(), " "))
	}
	if o.threads < 1 || o.count < 1 {
		return usagef("--threads and --count must be at least 1")
	}
	if o.json && o.markdown {
		return usagef("--json and --markdown exclude each other")
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
	restore, err := xattnhooks.SetImpl(o.impl)
	if err != nil {
		return usagef("--impl: %v", err)
	}
	defer restore()
	impl := xattnhooks.CurrentImpl()
	peak := xattnhooks.PeakGFLOPS(impl, 500*time.Millisecond)
	e.Log.Info("bench", "impl", impl, "threads", o.threads, "peak_gflops_one_core", fmt.Sprintf("%.1f", peak))

	var ob *ortBench
	if o.ort {
		if ob, err = newORTBench(e, o); err != nil {
			return err
		}
		defer ob.close()
	}

	// The table: aligned text, or Markdown with --markdown.
	var tw *tabwriter.Writer
	row := func(cells []string) {
		if o.markdown {
			fmt.Fprintf(e.Stdout, "| %s |\n", strings.Join(cells, " | "))
			return
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if !o.json {
		fmt.Fprintf(e.Stdout, "kernels %s, %d thread(s); measured peak %.1f GFLOP/s per core; FLOPs = 2·m·n·k per matrix product; best of %d runs of ≥ %v\n",
			impl, o.threads, peak, o.count, o.minTime)
		if ob != nil {
			fmt.Fprintf(e.Stdout, "ONNX Runtime %s, %d intra-op thread(s), its own kernel choice whatever --impl says: MatMul projections (weights as inputs: as fast here as weights held in the graph) + com.microsoft MultiHeadAttention; ORT proj is its four MatMuls alone, the peer of our GEMM; ORT÷ours > 1 means ours is faster\n",
				ob.version, o.threads)
		}
		if o.markdown {
			fmt.Fprintln(e.Stdout)
		} else {
			tw = tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		}
		head := []string{"shape", "T_q×d_q", "T_k×d_kv", "heads", "proj ms", "GFLOP/s", "core ms", "GFLOP/s", "block ms", "GFLOP/s", "of peak"}
		if ob != nil {
			head = append(head, "ORT proj ms", "GFLOP/s", "ORT core ms", "GFLOP/s", "ORT block ms", "GFLOP/s", "ORT÷ours proj", "ORT÷ours core", "ORT÷ours block")
		}
		row(head)
		if o.markdown {
			sep := make([]string, len(head))
			for i := range sep {
				sep[i] = "---:"
			}
			sep[0] = "---"
			row(sep)
		}
	}
	for _, s := range shapes {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := benchXattn(ctx, s, o, ob)
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
		f := func(format string, v float64) string { return fmt.Sprintf(format, v) }
		cells := []string{s.Name, fmt.Sprintf("%d×%d", s.TQ, s.DQ), fmt.Sprintf("%d×%d", s.TK, s.DKV), fmt.Sprint(s.Heads),
			f("%.3f", r.ProjMS), f("%.1f", r.ProjGFLOPS), f("%.3f", r.CoreMS), f("%.1f", r.CoreGFLOPS),
			f("%.3f", r.BlockMS), f("%.1f", r.BlockGFLOPS), f("%.0f%%", 100*r.BlockRatio)}
		if ob != nil {
			cells = append(cells, f("%.3f", r.ORTProjMS), f("%.1f", r.ORTProjGFLOPS), f("%.3f", r.ORTCoreMS), f("%.1f", r.ORTCoreGFLOPS),
				f("%.3f", r.ORTBlockMS), f("%.1f", r.ORTBlockGFLOPS), f("%.2f×", r.SpeedupProj), f("%.2f×", r.SpeedupCore), f("%.2f×", r.SpeedupBlock))
		}
		row(cells)
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

// benchCase is one shape's inputs: random diffusers-style weights (W_O
// back to d_q, with a bias) and inputs, and projected Q, K, V for the core
// alone.
type benchCase struct {
	w         xattn.Weights
	q, kv     []float32
	cq, ckv   []float32 // [T_q, inner], [T_k, inner]: the core's queries and keys (= values)
	out, core []float32 // our outputs, for the comparison with ONNX Runtime
	projQ     []float32 // our query projection q·W_Qᵀ [T_q, inner], likewise
}

func newBenchCase(s benchShape) benchCase {
	r := rand.New(rand.NewPCG(1, 2))
	c := benchCase{w: xattn.Weights{DQ: s.DQ, DKV: s.DKV, Inner: s.Inner, DOut: s.DQ, Heads: s.Heads,
		Q: benchVec(r, s.Inner*s.DQ, 0.03), K: benchVec(r, s.Inner*s.DKV, 0.03), V: benchVec(r, s.Inner*s.DKV, 0.03),
		O: benchVec(r, s.DQ*s.Inner, 0.03), BO: benchVec(r, s.DQ, 0.1)}}
	c.q, c.kv = benchVec(r, s.TQ*s.DQ, 1), benchVec(r, s.TK*s.DKV, 1)
	c.cq, c.ckv = benchVec(r, s.TQ*s.Inner, 1), benchVec(r, s.TK*s.Inner, 1)
	return c
}

// benchXattn times the whole block (with the projection phases measured
// inside it) and the attention core alone (an identity layer of width
// inner with both sides prepared), then, with ob, ONNX Runtime on the same
// inputs.
func benchXattn(ctx context.Context, s benchShape, o benchOptions, ob *ortBench) (benchResult, error) {
	c := newBenchCase(s)
	l, err := xattn.New(c.w)
	if err != nil {
		return benchResult{}, err
	}
	ws := l.NewWorkspace(o.threads)
	defer ws.Close()
	res := new(xattn.Result)
	block, phases, err := timeIt(o, ws, func() error { return ws.Forward(res, c.q, s.TQ, c.kv, s.TK, nil, xattn.NoAttention) })
	if err != nil {
		return benchResult{}, err
	}
	c.out = append([]float32(nil), res.Out...)
	if ob != nil {
		pq, err := l.PrepareQuery(c.q, s.TQ)
		if err != nil {
			return benchResult{}, err
		}
		c.projQ = pq.Rows()
	}
	id, err := xattn.Identity(s.Inner, s.Heads, 0)
	if err != nil {
		return benchResult{}, err
	}
	pq, err := id.PrepareQuery(c.cq, s.TQ)
	if err != nil {
		return benchResult{}, err
	}
	// The identity layer's source is its own keys and values.
	src, err := id.PrepareSource(c.ckv, s.TK, nil)
	if err != nil {
		return benchResult{}, err
	}
	wi := id.NewWorkspace(o.threads)
	defer wi.Close()
	core, _, err := timeIt(o, nil, func() error { return wi.ForwardPrepared(res, pq, src, xattn.NoAttention) })
	if err != nil {
		return benchResult{}, err
	}
	c.core = append([]float32(nil), res.Out...)
	projF, coreF := l.FLOPs(s.TQ, s.TK)
	proj := (phases.Inputs + phases.Output).Seconds() / float64(max(phases.Calls, 1))
	out := benchResult{Shape: s, ProjMS: proj * 1e3, CoreMS: core * 1e3, BlockMS: block * 1e3,
		CoreGFLOPS: coreF / core / 1e9, BlockGFLOPS: (projF + coreF) / block / 1e9}
	if proj > 0 {
		out.ProjGFLOPS = projF / proj / 1e9
	}
	if ob != nil {
		if err := ob.run(ctx, s, c, o, &out); err != nil {
			return benchResult{}, err
		}
		out.ORTBlockGFLOPS = (projF + coreF) / (out.ORTBlockMS / 1e3) / 1e9
		out.ORTCoreGFLOPS = coreF / (out.ORTCoreMS / 1e3) / 1e9
		out.SpeedupBlock = out.ORTBlockMS / out.BlockMS
		out.SpeedupCore = out.ORTCoreMS / out.CoreMS
		out.ORTProjGFLOPS = projF / (out.ORTProjMS / 1e3) / 1e9
		if out.ProjMS > 0 {
			out.SpeedupProj = out.ORTProjMS / out.ProjMS
		}
	}
	return out, nil
}

// timeIt returns the best of o.count measurements of f's seconds per call,
// each running f for at least o.minTime, and, when ws is not nil, the
// workspace's phase timings during that best measurement.
func timeIt(o benchOptions, ws *xattn.Workspace, f func() error) (float64, xattnhooks.Timings, error) {
	if err := f(); err != nil { // warm-up: buffers, workers
		return 0, xattnhooks.Timings{}, err
	}
	best := math.Inf(1)
	var bestT xattnhooks.Timings
	phases := new(xattnhooks.Timings) // ws's, when there is one
	if ws != nil {
		phases = xattnhooks.PhaseTimes(ws)
	}
	for c := 0; c < o.count; c++ {
		*phases = xattnhooks.Timings{}
		n := 0
		start := time.Now()
		for time.Since(start) < o.minTime || n == 0 {
			if err := f(); err != nil {
				return 0, xattnhooks.Timings{}, err
			}
			n++
		}
		if t := time.Since(start).Seconds() / float64(n); t < best {
			best, bestT = t, *phases
		}
	}
	return best, bestT, nil
}
