package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/models/clip"
)

func init() {
	addSubcommand(subcommand{name: "naflex", summary: "a SigLIP 2 NaFlex vision encoder beside a fixed-resolution one of the same patch count, in alternated rounds: ms per image and ratios", run: runBenchNaFlex})
}

// naflexBenchOptions are the flags of `condition-bench naflex`.
type naflexBenchOptions struct {
	ort        ortFlags
	fixed      string
	naflex     string
	images     int
	batches    []int
	grids      string
	rounds     int
	calls      int
	noSpinning bool
	json       bool
}

func (o *naflexBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.fixed, "fixed", "", "the fixed-resolution SigLIP model (folder or hub id), say scripts/bench_models' siglip2-b-16-256")
	fs.StringVar(&o.naflex, "naflex", "", "the SigLIP 2 NaFlex model (folder or hub id), say siglip2-b-16-naflex")
	fs.IntVar(&o.images, "images", 8, "images encoded per timed call of each case")
	fs.IntSliceVar(&o.batches, "batch", []int{8, 1}, "batch sizes (images per encoder call), each a divisor of --images")
	fs.StringVar(&o.grids, "grids", "11x23,23x11,16x16,12x21", "patch grids (rows x columns) of the mixed NaFlex case, repeated over the images; each within the fixed model's patch count")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; each round runs every case --calls times, in an order that turns each round")
	fs.IntVar(&o.calls, "calls", 2, "timed calls per case and round (a call encodes --images images)")
	fs.BoolVar(&o.noSpinning, "no-spinning", false, "stop ONNX Runtime's intra-op threads from spinning between calls")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	o.ort.AddFlags(fs)
}

// naflexBenchRow is one case's result.
type naflexBenchRow struct {
	Case  string `json:"case"`
	Batch int    `json:"batch"`
	// MedianMS is the wall time per image, the median over rounds. Ratio
	// is this case's time over the fixed-resolution encoder's at the same
	// batch in the same round, the median over rounds, RatioMin and
	// RatioMax the lowest and highest (the two ran minutes apart at most,
	// so a change in the machine's load moves both).
	MedianMS float64   `json:"median_ms_per_image"`
	Ratio    float64   `json:"ratio_vs_fixed"`
	RatioMin float64   `json:"ratio_vs_fixed_min"`
	RatioMax float64   `json:"ratio_vs_fixed_max"`
	RoundsMS []float64 `json:"round_ms_per_image"`
	// CPUMedianMS is the process's CPU time per image (every thread), the
	// median over rounds, and CPURatio this over the fixed encoder's,
	// paired by round as Ratio is.
	CPUMedianMS float64   `json:"cpu_median_ms_per_image,omitempty"`
	CPURatio    float64   `json:"cpu_ratio_vs_fixed,omitempty"`
	RoundsCPUMS []float64 `json:"round_cpu_ms_per_image,omitempty"`
	// MaxRelDiff, for the square NaFlex case, is max |Δ| / max |fixed| of
	// the pooled embeddings of the same images: near 0 when the two models
	// share their weights (as make_siglip.py's presets do), meaningless
	// otherwise.
	MaxRelDiff *float64 `json:"max_rel_diff_vs_fixed,omitempty"`

	run func(ctx context.Context) error
}

// parseGrids parses "11x23,23x11" into grids, each of at most budget patches.
func parseGrids(s string, budget int) ([][2]int, error) {
	var out [][2]int
	for _, f := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(f), "x")
		h, err1 := strconv.Atoi(a)
		w, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || h <= 0 || w <= 0 {
			return nil, usagef("--grids: %q is not ROWSxCOLUMNS", f)
		}
		if h*w > budget {
			return nil, usagef("--grids: %dx%d is %d patches, more than the fixed model's %d", h, w, h*w, budget)
		}
		out = append(out, [2]int{h, w})
	}
	return out, nil
}

func runBenchNaFlex(ctx context.Context, e *env, args []string) error {
	var o naflexBenchOptions
	fs := newFlagSet(e, "naflex", "naflex --fixed MODEL --naflex MODEL [--images N] [--batch 8,1] [--grids 11x23,...] [--rounds N] [--threads N] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("naflex takes no arguments, got %q", fs.Args())
	case o.fixed == "" || o.naflex == "":
		return usagef("naflex needs --fixed and --naflex")
	case o.images < 1 || o.rounds < 1 || o.calls < 1 || len(o.batches) == 0:
		return usagef("--images, --rounds and --calls must be at least 1, --batch not empty")
	}
	for _, b := range o.batches {
		if b < 1 || o.images%b != 0 {
			return usagef("--batch %d does not divide --images %d", b, o.images)
		}
	}
	if err := o.ort.load(e); err != nil {
		return err
	}
	fm, err := openModel(ctx, e, o.fixed, "")
	if err != nil {
		return err
	}
	nm, err := openModel(ctx, e, o.naflex, "")
	if err != nil {
		return err
	}
	if fm.Config().NaFlex() || !nm.Config().NaFlex() {
		return usagef("--fixed must name a fixed-resolution model and --naflex a SigLIP 2 NaFlex one (model_type siglip2)")
	}
	vo := clip.VisionOptions{Threads: o.ort.threads(), NoSpinning: o.noSpinning}
	fe, err := clip.OpenVision(fm, vo)
	if err != nil {
		return err
	}
	defer fe.Close()
	ne, err := clip.OpenVision(nm, vo)
	if err != nil {
		return err
	}
	defer ne.Close()

	ch, h, w := fe.InputSize()
	if ch == 0 {
		ch = 3
	}
	if h == 0 || w == 0 {
		h, w = fm.Config().VisionConfig.ImageSize, fm.Config().VisionConfig.ImageSize
	}
	p := fe.PatchSize()
	if p <= 0 || h%p != 0 || w%p != 0 || h != w {
		return fmt.Errorf("--fixed: %s takes %dx%d images in %d-pixel patches: want a square grid", fm.Name(), h, w, p)
	}
	side := h / p
	budget := side * side
	np := nm.Config().VisionConfig.PatchSize
	per := nm.Config().VisionConfig.NumChannels * np * np
	mixed, err := parseGrids(o.grids, budget)
	if err != nil {
		return err
	}

	// The inputs, from a fixed seed: the fixed model's images, the same
	// images as patch sequences (when the patch sizes agree), and random
	// patch sequences of the mixed grids.
	rng := rand.New(rand.NewPCG(7, 11))
	n := o.images
	pixels := make([]float32, n*ch*h*w)
	for i := range pixels {
		pixels[i] = float32(rng.NormFloat64())
	}
	square := make([]float32, n*budget*per)
	if np == p && ch*p*p == per {
		patchify(square, pixels, n, ch, side, p)
	} else {
		for i := range square {
			square[i] = float32(rng.NormFloat64())
		}
	}
	mix := make([]float32, n*budget*per)
	mixGrids := make([][2]int, n)
	for i := range mixGrids {
		g := mixed[i%len(mixed)]
		mixGrids[i] = g
		for j := 0; j < g[0]*g[1]*per; j++ {
			mix[i*budget*per+j] = float32(rng.NormFloat64())
		}
	}
	squareGrids := make([][2]int, n)
	for i := range squareGrids {
		squareGrids[i] = [2]int{side, side}
	}

	fixedCall := func(b int) func(context.Context) error {
		sz := ch * h * w
		return func(ctx context.Context) error {
			for i := 0; i < n; i += b {
				if _, err := fe.Encode(ctx, pixels[i*sz:(i+b)*sz], b, h, w); err != nil {
					return err
				}
			}
			return nil
		}
	}
	patchCall := func(b int, px []float32, grids [][2]int) func(context.Context) error {
		sz := budget * per
		return func(ctx context.Context) error {
			for i := 0; i < n; i += b {
				if _, err := ne.EncodePatches(ctx, px[i*sz:(i+b)*sz], grids[i:i+b], budget); err != nil {
					return err
				}
			}
			return nil
		}
	}
	var rows []naflexBenchRow
	gridNames := make([]string, len(mixed))
	for i, g := range mixed {
		gridNames[i] = fmt.Sprintf("%dx%d", g[0], g[1])
	}
	for _, b := range o.batches {
		rows = append(rows,
			naflexBenchRow{Case: fmt.Sprintf("fixed %dx%d px", h, w), Batch: b, run: fixedCall(b)},
			naflexBenchRow{Case: fmt.Sprintf("naflex %dx%d", side, side), Batch: b, run: patchCall(b, square, squareGrids)},
			naflexBenchRow{Case: "naflex " + strings.Join(gridNames, ","), Batch: b, run: patchCall(b, mix, mixGrids)})
	}

	// Warm-up, and the square case checked against the fixed encoder on
	// the same images.
	for i := range rows {
		if err := rows[i].run(ctx); err != nil {
			return err
		}
	}
	if np == p && ch*p*p == per {
		fenc, err := fe.Encode(ctx, pixels, n, h, w)
		if err != nil {
			return err
		}
		nenc, err := ne.EncodePatches(ctx, square, squareGrids, budget)
		if err != nil {
			return err
		}
		var d, m float64
		for i := range fenc {
			for k, v := range fenc[i].Embeds {
				if k < len(nenc[i].Embeds) {
					d = math.Max(d, math.Abs(float64(v)-float64(nenc[i].Embeds[k])))
				}
				m = math.Max(m, math.Abs(float64(v)))
			}
		}
		r := d / math.Max(m, 1e-30)
		for i := range rows {
			if strings.HasPrefix(rows[i].Case, "naflex") && strings.HasSuffix(rows[i].Case, fmt.Sprintf(" %dx%d", side, side)) {
				rows[i].MaxRelDiff = &r
			}
		}
	}

	for r := 0; r < o.rounds; r++ {
		for j := range rows {
			i := (j + r) % len(rows) // each round starts with the next case
			start := time.Now()
			cpu0, cpuOK := cputime.Process()
			for c := 0; c < o.calls; c++ {
				if err := rows[i].run(ctx); err != nil {
					return err
				}
			}
			per := float64(o.calls * n)
			rows[i].RoundsMS = append(rows[i].RoundsMS, float64(time.Since(start).Microseconds())/1e3/per)
			if cpu1, ok := cputime.Process(); ok && cpuOK {
				rows[i].RoundsCPUMS = append(rows[i].RoundsCPUMS, float64((cpu1-cpu0).Microseconds())/1e3/per)
			}
		}
		e.Log.Info("naflex", "round", r+1, "of", o.rounds)
	}
	for i := range rows {
		rows[i].MedianMS = median(rows[i].RoundsMS)
		if len(rows[i].RoundsCPUMS) > 0 {
			rows[i].CPUMedianMS = median(rows[i].RoundsCPUMS)
		}
	}
	for i := range rows {
		f := &rows[i-i%3] // the fixed encoder at the same batch
		rows[i].Ratio, rows[i].RatioMin, rows[i].RatioMax = pairedRatios(rows[i].RoundsMS, f.RoundsMS)
		if len(rows[i].RoundsCPUMS) == len(f.RoundsCPUMS) && len(f.RoundsCPUMS) > 0 {
			rows[i].CPURatio, _, _ = pairedRatios(rows[i].RoundsCPUMS, f.RoundsCPUMS)
		}
	}
	if o.json {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"fixed": o.fixed, "naflex": o.naflex, "images": n, "patches": budget,
			"threads": o.ort.threads(), "rounds": o.rounds, "calls": o.calls, "cases": rows})
	}
	tw := tabwriter.NewWriter(e.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "case\tbatch\tms/image\t÷ fixed [lowest, highest]\tCPU ms/image\tCPU ÷ fixed\tmax rel diff vs fixed\n")
	for _, r := range rows {
		diff := ""
		if r.MaxRelDiff != nil {
			diff = fmt.Sprintf("%.2g", *r.MaxRelDiff)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.3f [%.3f, %.3f]\t%.2f\t%.3f\t%s\n", r.Case, r.Batch, r.MedianMS, r.Ratio, r.RatioMin, r.RatioMax, r.CPUMedianMS, r.CPURatio, diff)
	}
	fmt.Fprintf(tw, "%d images of %d patches per call, %d threads, %d rounds of %d calls each, order turned every round; medians over rounds, ratios paired by round\n", n, budget, o.ort.threads(), o.rounds, o.calls)
	return tw.Flush()
}

// pairedRatios returns the median, lowest and highest of a[r] / b[r] over
// the rounds r where b[r] > 0 (a CPU time too short to read is 0); all 0
// when there is none.
func pairedRatios(a, b []float64) (med, lo, hi float64) {
	if len(a) != len(b) {
		return 0, 0, 0
	}
	var r []float64
	for i := range a {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	if len(r) == 0 {
		return 0, 0, 0
	}
	lo, hi = r[0], r[0]
	for _, v := range r {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return median(r), lo, hi
}

// patchify lays out pixels [n, ch, side·p, side·p] as patch sequences
// [n, side·side, p·p·ch], as Siglip2ImageProcessor does: the patches row
// by row, each patch's pixels row by row with the channels last.
func patchify(dst, pixels []float32, n, ch, side, p int) {
	s := side * p
	per := ch * p * p
	for i := 0; i < n; i++ {
		img := pixels[i*ch*s*s:]
		for gy := 0; gy < side; gy++ {
			for gx := 0; gx < side; gx++ {
				o := dst[(i*side*side+gy*side+gx)*per:]
				k := 0
				for y := 0; y < p; y++ {
					for x := 0; x < p; x++ {
						for c := 0; c < ch; c++ {
							o[k] = img[(c*s+gy*p+y)*s+gx*p+x]
							k++
						}
					}
				}
			}
		}
	}
}
