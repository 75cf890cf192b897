package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/internal/halfdot"
	"github.com/conditionhq/condition/internal/xattnhooks"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/index/dedup"
	"github.com/conditionhq/condition/tensorio"
)

func init() {
	addSubcommand(subcommand{name: "dedup", summary: "near-duplicate pairs over a synthetic float16 index with planted pairs: time, pairs/s, GFLOP/s, the planted pairs found, and the time extrapolated to --extrapolate images", run: runBenchDedup})
}

// dedupBenchOptions are the flags of `condition-bench dedup`.
type dedupBenchOptions struct {
	n, dim, planted, block, workers, extrapolate int
	clusters, probe, recall, faissQueries        int
	nearest, float, rows                         bool
	threshold                                    float32
	dir, python, impl                            string
	json, faiss                                  bool
}

func (o *dedupBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.n, "n", 50_000, "images in the index")
	fs.IntVar(&o.dim, "dim", 512, "width D of the vectors")
	fs.IntVar(&o.planted, "planted", 1000, "of them, near copies (cosine about 0.97–0.995) of earlier random ones")
	fs.Float32Var(&o.threshold, "threshold", dedup.DefaultThreshold, "the pairs' least cosine")
	fs.IntVar(&o.block, "block", dedup.DefaultBlockRows, "rows per block")
	fs.IntVar(&o.workers, "workers", 0, "goroutines (0: GOMAXPROCS)")
	fs.IntVar(&o.extrapolate, "extrapolate", 1_000_000, "also give the time for this many images, from the measured pairs/s (time ∝ N²): an extrapolation, not a measurement")
	fs.IntVar(&o.clusters, "clusters", 0, "approximate search in this many k-means clusters (0: exact)")
	fs.IntVar(&o.probe, "probe", dedup.DefaultProbe, "with --clusters: each image compared within its 1 or 2 nearest clusters")
	fs.IntVar(&o.recall, "check-recall", 1000, "with --clusters: images compared with every other exactly to measure the recall (its time is reported apart)")
	fs.BoolVar(&o.nearest, "nearest", false, "keep nearest-neighbour cosines, as dedup does when it writes its pictures (up to 50,000 images every image's, by the row-by-row search; above, with a tile kernel (AVX-512 or AVX2), a sample of 20,000 images', beside the fast search)")
	fs.BoolVar(&o.float, "compare-float", false, "where the int8 filter runs, also run the float32 tiled search without it (the same pairs) in the same run, and report the ratio of their CPU times")
	fs.StringVar(&o.impl, "impl", "auto", "halfdot's kernels: auto (the fastest this CPU runs), avx512, avx2 (an AVX2-only CPU's: the float32 tile, no int8 filter) or go")
	fs.BoolVar(&o.rows, "compare-rows", false, "also run the row-by-row search (the one of CPUs without a tile kernel, with the same --impl) in the same run, and report the ratio of their CPU times")
	fs.StringVar(&o.dir, "dir", "", "folder for the index (default: a temporary one, removed)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.faiss, "faiss", false, "also time faiss IndexFlatIP's range_search at the threshold over the same vectors as float32 (python3 with faiss and numpy), and compare its pairs")
	fs.IntVar(&o.faissQueries, "faiss-queries", 0, "with --faiss: search only the first this many rows against every row, and scale faiss's times by N over it (every query of a flat index costs the same), for sizes where its whole search takes hours (0: every row)")
	fs.StringVar(&o.python, "python", "", "the Python interpreter for --faiss (default: the first of python3 and /usr/bin/python3 that imports faiss and numpy, as Debian's python3-faiss installs them)")
}

// dedupBenchResult is what `condition-bench dedup` reports.
type dedupBenchResult struct {
	N, Dim, Workers, Block int
	Kernel                 string  // halfdot's kernel
	Seconds                float64 // the pair search and grouping (dedup.Run), the index open and written aside
	CPUSeconds             float64 // the process's CPU time over the same span (other programs on the machine aside)
	Pairs                  float64 // row pairs compared, N(N-1)/2
	PairsPerSec            float64 // per second of wall time
	PairsPerCPUSec         float64 // per CPU second: what one core does when it is not shared
	GFLOPs, GFLOPsPerCore  float64 // 2·D flops per pair compared, per wall second and per CPU second
	PeakGFLOPs             float64 // one core's float32 FMA peak, measured in the same run with the kernel's instruction set
	TileGFLOPs             float64 // halfdot.Tile alone on one core, the same panels again and again (0: no tile kernel)
	Found, Planted         int     // pairs found; planted pairs among them / planted
	PlantedFound           int
	Extrapolate            int
	ExtrapolatedSeconds    float64        // exact: from PairsPerCPUSec on Workers cores, none of them shared; approximate: CPU time × (Extrapolate/N)^1.5 / Workers
	Clusters, Probe        int            // the approximate search's (0: exact)
	ExtrapolateClusters    int            // approximate: Clusters × √(Extrapolate/N), the clusters the extrapolation assumes
	Recall                 *dedup.Recall  // approximate: the recall check (Seconds and CPUSeconds end at the last cluster compared, before it)
	Rescored               int64          // pairs the int8 filter passed on to float32 (0: no filter ran)
	RescoredFraction       float64        // of Pairs
	NearestSampled         int            // images whose nearest cosine a sample measured (0: every image's, or none)
	Float                  *dedupFloatRun // --compare-float: the float32 search alone, same run
	Rows                   *dedupFloatRun // --compare-rows: the row-by-row search, same run
	Faiss                  *dedupFaiss
	FaissError             string `json:"faiss_error,omitempty"`
}

func runBenchDedup(ctx context.Context, e *env, args []string) error {
	var o dedupBenchOptions
	fs := newFlagSet(e, "dedup", "dedup [flags]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("dedup takes no arguments, got %q", fs.Args())
	}
	if o.n < 2 || o.dim < 1 || o.planted < 0 || o.planted >= o.n || o.block < 1 || o.workers < 0 || o.extrapolate < 0 || !(o.threshold > 0 && o.threshold <= 1) ||
		o.clusters < 0 || o.probe < 1 || o.probe > 2 || o.recall < 0 || o.faissQueries < 0 || o.faissQueries > o.n {
		return usagef("--n (2 or more), --dim, --block must be positive, --planted below --n, --threshold in (0, 1], --clusters, --check-recall and --faiss-queries (at most --n) 0 or more, --probe 1 or 2")
	}
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "condition-bench-dedup-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	if o.impl != "auto" {
		restore, err := halfdot.SetImpl(o.impl)
		if err != nil {
			return usagef("--impl: %v", err)
		}
		defer restore()
	}
	e.Log.Info("writing the index", "n", o.n, "dim", o.dim, "planted", o.planted, "dir", dir)
	planted, err := writeDedupIndex(filepath.Join(dir, "index", "000000"), o)
	if err != nil {
		return err
	}
	x, err := index.Open(ctx, dir, index.Options{})
	if err != nil {
		return err
	}
	defer x.Close()
	workers := o.workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	peak := xattnhooks.PeakGFLOPS(halfdot.Impl(), 500*time.Millisecond)
	tileAlone := tileAloneGFLOPS(o.dim, 500*time.Millisecond)
	c0, _ := cputime.Process()
	t0 := time.Now()
	opts := dedup.Options{Threshold: o.threshold, BlockRows: o.block, Workers: workers, Clusters: o.clusters, Probe: o.probe, NoNearest: !o.nearest}
	var tEnd time.Time
	var cEnd time.Duration
	if o.clusters > 0 {
		// the recall check runs after the last cluster: its time is left out
		opts.CheckRecall = o.recall
		opts.Progress = func(done, total int) {
			if done == total {
				tEnd = time.Now()
				cEnd, _ = cputime.Process()
			}
		}
	}
	res, err := dedup.Run(ctx, x, opts)
	if err != nil {
		return err
	}
	c1, _ := cputime.Process()
	r := dedupBenchResult{N: o.n, Dim: o.dim, Workers: workers, Block: o.block, Kernel: halfdot.Impl(), Seconds: time.Since(t0).Seconds(),
		Pairs: float64(o.n) * float64(o.n-1) / 2, Found: len(res.Pairs), Planted: len(planted), Extrapolate: o.extrapolate,
		Clusters: o.clusters, Recall: res.Recall}
	r.CPUSeconds, r.PeakGFLOPs, r.TileGFLOPs = (c1 - c0).Seconds(), peak, tileAlone
	if o.clusters > 0 {
		r.Seconds, r.CPUSeconds = tEnd.Sub(t0).Seconds(), (cEnd - c0).Seconds()
	}
	r.PairsPerSec, r.PairsPerCPUSec = r.Pairs/r.Seconds, r.Pairs/r.CPUSeconds
	r.GFLOPs, r.GFLOPsPerCore = r.PairsPerSec*2*float64(o.dim)/1e9, r.PairsPerCPUSec*2*float64(o.dim)/1e9
	for _, p := range res.Pairs {
		if planted[[2]int{p.A, p.B}] {
			r.PlantedFound++
		}
	}
	r.Rescored, r.RescoredFraction = res.Rescored, float64(res.Rescored)/r.Pairs
	r.NearestSampled = res.Sampled
	if r.Rescored > 0 {
		r.Kernel += " + int8 filter (vnni)"
	}
	if o.float && r.Rescored > 0 {
		e.Log.Info("running the float32 search without the int8 filter")
		opts.NoFilter = true
		if r.Float, err = runDedupFloat(ctx, x, opts, res.Pairs); err != nil {
			return err
		}
	}
	if o.rows && o.clusters == 0 && halfdot.HasTileKernel() {
		e.Log.Info("running the row-by-row search")
		restore := halfdot.DisableTile()
		opts.NoFilter = true
		r.Rows, err = runDedupFloat(ctx, x, opts, res.Pairs)
		restore()
		if err != nil {
			return err
		}
	}
	if o.extrapolate > 0 {
		r.ExtrapolatedSeconds = float64(o.extrapolate) * float64(o.extrapolate-1) / 2 / (r.PairsPerCPUSec * float64(workers))
	}
	if o.faiss {
		e.Log.Info("running faiss")
		if r.Faiss, err = runDedupFaiss(ctx, o.python, filepath.Join(dir, "index", "000000", index.EmbedsFile), o.n, o.faissQueries, o.threshold, workers, res.Pairs); err != nil {
			r.FaissError = err.Error()
		}
	}
	if o.clusters > 0 {
		r.Probe = max(o.probe, 1)
		return reportApproxDedup(e, &r, o)
	}
	if o.json {
		return json.NewEncoder(e.Stdout).Encode(r)
	}
	printDedupBench(e, o, r)
	return nil
}

// printDedupBench prints r as text.
func printDedupBench(e *env, o dedupBenchOptions, r dedupBenchResult) {
	flops := "GFLOP/s"
	if r.Rescored > 0 {
		flops = "float32-equivalent GFLOP/s (int8 operations, mostly)"
	}
	fmt.Fprintf(e.Stdout, "dedup N=%d D=%d, %d workers, blocks of %d rows, halfdot %s: %.1f s (%.1f CPU s), %.3g pairs/s (%.3g per CPU s), %.1f %s (%.1f per core, %.0f%% of one core's float32 peak %.1f); %d pairs found, %d of %d planted\n",
		r.N, r.Dim, r.Workers, r.Block, r.Kernel, r.Seconds, r.CPUSeconds, r.PairsPerSec, r.PairsPerCPUSec, r.GFLOPs, flops, r.GFLOPsPerCore, 100*r.GFLOPsPerCore/r.PeakGFLOPs, r.PeakGFLOPs, r.Found, r.PlantedFound, r.Planted)
	if r.TileGFLOPs > 0 {
		fmt.Fprintf(e.Stdout, "halfdot.Tile alone (%d×%d×%d, the same panels again and again, one core, best of short runs): %.1f GFLOP/s, %.0f%% of the peak\n",
			halfdot.TileRows, halfdot.TileCols, r.Dim, r.TileGFLOPs, 100*r.TileGFLOPs/r.PeakGFLOPs)
	}
	if r.NearestSampled > 0 {
		fmt.Fprintf(e.Stdout, "nearest cosines: a sample of %d images of %d, each against every image (in the times above)\n", r.NearestSampled, r.N)
	}
	if o.extrapolate > 0 {
		fmt.Fprintf(e.Stdout, "extrapolated (N² at the measured pairs per CPU second on %d unshared cores; not measured): N=%d in %.0f s (%.1f h)\n", r.Workers, o.extrapolate, r.ExtrapolatedSeconds, r.ExtrapolatedSeconds/3600)
	}
	if f := r.Faiss; f != nil {
		if f.Queries < r.N {
			fmt.Fprintf(e.Stdout, "faiss searched the first %d rows of %d as queries: %.1f s (%.1f CPU s) measured, scaled by %.0f for every row below (not measured whole); pairs compared for those rows only\n",
				f.Queries, r.N, f.Measured[0], f.Measured[1], float64(r.N)/float64(f.Queries))
		}
		fmt.Fprintf(e.Stdout, "faiss %s IndexFlatIP range_search (float32, %d threads): %.1f s (%.1f CPU s), %.3g pairs per CPU s; ours %.2f× its CPU time, %.2f× its wall time; %d pairs found, %d only ours, %d only faiss's\n",
			f.Version, f.Threads, f.Seconds, f.CPUSeconds, r.Pairs/f.CPUSeconds, r.CPUSeconds/f.CPUSeconds, r.Seconds/f.Seconds, f.Found, f.OnlyOurs, f.OnlyIts)
		if o.extrapolate > 0 {
			fmt.Fprintf(e.Stdout, "faiss extrapolated (N² at its pairs per CPU second on %d unshared cores; not measured): N=%d in %.0f s\n", r.Workers, o.extrapolate, float64(o.extrapolate)*float64(o.extrapolate-1)/2/(r.Pairs/f.CPUSeconds*float64(r.Workers)))
		}
	}
	if f := r.Float; f != nil {
		fmt.Fprintf(e.Stdout, "int8 filter: %.3g of the pairs rescored in float32; float32 tiled search alone: %.1f s (%.1f CPU s), %.3g pairs per CPU s; the filtered search %.2f× its CPU time; the same pairs: %v\n",
			r.RescoredFraction, f.Seconds, f.CPUSeconds, r.Pairs/f.CPUSeconds, r.CPUSeconds/f.CPUSeconds, f.Same)
	} else if r.Rescored > 0 {
		fmt.Fprintf(e.Stdout, "int8 filter: %.3g of the pairs rescored in float32\n", r.RescoredFraction)
	}
	if f := r.Rows; f != nil {
		fmt.Fprintf(e.Stdout, "row-by-row search (halfdot %s, no tile): %.1f s (%.1f CPU s), %.3g pairs per CPU s; the tiled search %.2f× its CPU time; %d pairs found, the same pairs: %v (cosines within %.2g; to the bit: %v)\n",
			halfdot.Impl(), f.Seconds, f.CPUSeconds, r.Pairs/f.CPUSeconds, r.CPUSeconds/f.CPUSeconds, f.Found, f.SameRows, f.MaxCosDiff, f.Same)
		if o.extrapolate > 0 {
			fmt.Fprintf(e.Stdout, "row-by-row extrapolated (N² at its pairs per CPU second on %d unshared cores; not measured): N=%d in %.0f s\n", r.Workers, o.extrapolate, float64(o.extrapolate)*float64(o.extrapolate-1)/2/(r.Pairs/f.CPUSeconds*float64(r.Workers)))
		}
	}
	if r.FaissError != "" {
		fmt.Fprintf(e.Stdout, "faiss: not run: %s\n", r.FaissError)
	}
}

// dedupFloatRun is the float32 tiled search without the int8 filter, run
// after the filtered one over the same index.
type dedupFloatRun struct {
	Seconds, CPUSeconds float64
	Found               int
	Same                bool    // the same pairs, cosines to the bit
	SameRows            bool    // the same pairs of rows, cosines aside
	MaxCosDiff          float64 // with SameRows: the largest difference of a pair's cosines
}

// runDedupFloat runs dedup with opts (NoFilter set) and compares its
// pairs with want.
func runDedupFloat(ctx context.Context, x *index.Index, opts dedup.Options, want []dedup.Pair) (*dedupFloatRun, error) {
	c0, _ := cputime.Process()
	t0 := time.Now()
	res, err := dedup.Run(ctx, x, opts)
	if err != nil {
		return nil, err
	}
	c1, _ := cputime.Process()
	f := &dedupFloatRun{Seconds: time.Since(t0).Seconds(), CPUSeconds: (c1 - c0).Seconds(), Found: len(res.Pairs), Same: slices.Equal(res.Pairs, want)}
	f.SameRows = slices.EqualFunc(res.Pairs, want, func(p, q dedup.Pair) bool { return p.A == q.A && p.B == q.B })
	if f.SameRows {
		for i, p := range res.Pairs {
			f.MaxCosDiff = max(f.MaxCosDiff, math.Abs(float64(p.Cos)-float64(want[i].Cos)))
		}
	}
	return f, nil
}

// writeDedupIndex writes one index part of o.n random unit vectors in
// float16 (no patches), the last o.planted of them near copies of random
// earlier ones, and returns the planted pairs (rows, the smaller first).
func writeDedupIndex(dir string, o dedupBenchOptions) (map[[2]int]bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(o.n), 5))
	distinct := o.n - o.planted
	src := make([]int, o.planted)
	planted := map[[2]int]bool{}
	for i := range src {
		src[i] = rng.IntN(distinct)
		planted[[2]int{src[i], distinct + i}] = true
	}
	// A copy's source is drawn again from its seed, so that no row is kept.
	row := func(r int) []float32 {
		if r < distinct {
			return randomUnit(rand.New(rand.NewPCG(uint64(r), 11)), o.dim)
		}
		v := randomUnit(rand.New(rand.NewPCG(uint64(src[r-distinct]), 11)), o.dim)
		noise := randomUnit(rand.New(rand.NewPCG(uint64(r), 13)), o.dim)
		a := 0.1 + 0.15*rng.Float64() // cosine ≈ 1/√(1+a²): 0.97–0.995
		var s float64
		for k := range v {
			v[k] += float32(a) * noise[k]
			s += float64(v[k]) * float64(v[k])
		}
		for k := range v {
			v[k] = float32(float64(v[k]) / math.Sqrt(s))
		}
		return v
	}
	if err := writeF16Rows(filepath.Join(dir, index.EmbedsFile), []int{o.n, o.dim}, o.n, o.dim, row); err != nil {
		return nil, err
	}
	if err := writeF16Rows(filepath.Join(dir, index.PatchesFile), []int{o.n, 0, o.dim}, 0, o.dim, nil); err != nil {
		return nil, err
	}
	meta := index.Meta{Format: index.Format, Model: "synthetic", Settings: json.RawMessage(`{}`), DType: index.DTypeF16, Dim: o.dim, LogitScale: 100, Rows: o.n}
	for i := range o.n {
		meta.Items = append(meta.Items, index.Item{Row: i, Path: fmt.Sprintf("%08d.jpg", i), Status: "ok"})
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	return planted, os.WriteFile(filepath.Join(dir, index.MetaFile), b, 0o644)
}

// writeF16Rows writes an .npy of float16 of shape, rows rows of d values
// made by row.
func writeF16Rows(name string, shape []int, rows, d int, row func(int) []float32) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr, err := tensorio.NPYHeader(tensorio.DTypeF16, shape, 0)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(hdr)
	buf := make([]byte, 2*d)
	for r := range rows {
		for k, v := range row(r) {
			binary.LittleEndian.PutUint16(buf[2*k:], tensorio.Float32ToF16(v))
		}
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// reportApproxDedup prints the approximate search's figures: time, CPU
// time, the planted pairs found and the measured recall, and the time
// extrapolated to --extrapolate images with √N-scaled clusters (k-means
// N·K·D and the pairs within clusters N²/K both grow as N^1.5).
func reportApproxDedup(e *env, r *dedupBenchResult, o dedupBenchOptions) error {
	r.GFLOPs, r.GFLOPsPerCore, r.PairsPerSec, r.PairsPerCPUSec = 0, 0, 0, 0
	if o.extrapolate > 0 {
		f := float64(o.extrapolate) / float64(o.n)
		r.ExtrapolatedSeconds = r.CPUSeconds * math.Pow(f, 1.5) / float64(r.Workers)
		r.ExtrapolateClusters = int(math.Round(float64(o.clusters) * math.Sqrt(f)))
	}
	if o.json {
		return json.NewEncoder(e.Stdout).Encode(r)
	}
	recall := "recall not checked"
	if rc := r.Recall; rc != nil && rc.Sampled > 0 {
		recall = fmt.Sprintf("recall %.4f (%d of %d exact pairs of %d images, checked in %.1f s apart)", rc.Ratio, rc.Found, rc.Exact, rc.Sampled, rc.Seconds)
	}
	fmt.Fprintf(e.Stdout, "dedup approximate N=%d D=%d, %d clusters, probe %d, %d workers, halfdot %s: %.1f s (%.1f CPU s); %d pairs found, %d of %d planted; %s\n",
		r.N, r.Dim, r.Clusters, r.Probe, r.Workers, r.Kernel, r.Seconds, r.CPUSeconds, r.Found, r.PlantedFound, r.Planted, recall)
	if o.extrapolate > 0 {
		fmt.Fprintf(e.Stdout, "extrapolated (CPU time × (N'/N)^1.5 on %d unshared cores, %d clusters; not measured): N=%d in %.0f s\n", r.Workers, r.ExtrapolateClusters, o.extrapolate, r.ExtrapolatedSeconds)
	}
	return nil
}
