package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
)

func init() {
	addSubcommand(subcommand{name: "pipeline", summary: "the whole pipeline on a folder of images: images/s, peak RSS", run: runPipeline})
}

// pipeBenchOptions are the flags of `condition-bench pipeline`.
type pipeBenchOptions struct {
	variant   string
	precision string
	ort       ortFlags
	program   string
	model     string
	images    string
	n         int
	size      int
	batch     int
	workers   int
	streams   int
	rounds    int
	repeat    int
	rss       bool
	rssBig    int
	json      bool
	cpuProf   string
	tune      bool
	decode    string
	mode      pipeline.DecodeMode
	noArena   bool
	pin       bool
	readout   string
	readouts  []clip.Readout // --readout split at commas; [""] for the engine's default
	noJob     bool
	keep      bool
	alone     bool
	// readoutProfile is --readout-profile: ONNX Runtime's per-node profile
	// of the --readout-alone sessions.
	readoutProfile string
}

func (o *pipeBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", "default", "model to run")
	fs.StringVar(&o.variant, "variant", "", "graph variant by suffix: fp16, quantized, ... (onnx/text_model_<variant>.onnx)")
	fs.StringVar(&o.precision, "precision", "fp32", "fp32, or int8: the model's int8 variant, as condition run --precision int8 runs it (made on first use)")
	fs.StringVar(&o.images, "images", "", "image folder (default: synthetic JPEGs made for the run)")
	fs.IntVar(&o.n, "n", 200, "synthetic images to make")
	fs.IntVar(&o.size, "size", 256, "side of the synthetic images in pixels")
	fs.IntVar(&o.batch, "batch", 8, "images per vision encoder call (the same for the job and the encoder alone)")
	fs.IntVar(&o.workers, "workers", 0, "file-reading goroutines of the job (0: one per core)")
	fs.IntVar(&o.streams, "streams", 0, "vision encoder batches in flight at once, each on --threads threads (0: as a job chooses: min(cores, 4) streams sharing the cores, or one stream when --threads is set)")
	fs.IntVar(&o.rounds, "rounds", 2, "passes of the encoder-alone measurement")
	fs.IntVar(&o.repeat, "repeat", 1, "measure the encoder alone and then the job this many times (reports the medians)")
	fs.BoolVar(&o.rss, "rss", false, "also measure the peak RSS of jobs of 100 and --rss-images images (separate processes)")
	fs.IntVar(&o.rssBig, "rss-images", 5000, "images of the large job of --rss")
	fs.StringVar(&o.program, "condition", "", "the condition program whose run --rss measures (default: condition beside this program, else on the PATH)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.BoolVar(&o.tune, "tune", false, "try streams × threads × batch (8, 16, 32) × spinning on the whole job, --rounds rounds in turned order, and print the best setting for run")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the job phase to this file (Go's threads, and ONNX Runtime's work on the calling thread; not its pool threads)")
	fs.StringVar(&o.decode, "decode", "exact", decodeHelp)
	fs.BoolVar(&o.noArena, "no-arena", false, "turn ONNX Runtime's CPU memory arena off, as condition run --no-arena does (--tune tries both)")
	fs.BoolVar(&o.pin, "pin-threads", false, "pin ONNX Runtime's pool threads to one processor each, as condition run --pin-threads does (--tune tries both)")
	fs.StringVar(&o.readout, "readout", "", "the patches' readout, as condition run --readout takes it: raw, clearclip, naclip, maskclip or pearl (default: the engine's, clearclip for a CLIP checkpoint other than the built-in model); several, comma-separated, are measured in each repeat in an order that turns, each against the first")
	fs.BoolVar(&o.noJob, "no-job", false, "measure the encoder alone only, not the job")
	fs.BoolVar(&o.alone, "readout-alone", false, "also time each non-raw readout's graph alone (its own session, the engine's threads, random inputs of the batch's shape) right after its encoder, on as many batches: the readout's cost without the plumbing between the two ONNX Runtime sessions")
	fs.StringVar(&o.readoutProfile, "readout-profile", "", "with --readout-alone, write ONNX Runtime's per-node profile of each readout's graph to files named PREFIX-<readout>_<time>.json")
	fs.BoolVar(&o.keep, "keep-graphs", false, "run the model's graph files as they are, not a copy whose weights ONNX Runtime maps from a file (pipeline.Options.KeepGraphs)")
	o.ort.AddFlags(fs)
}

// parseReadouts splits --readout at commas: [""] (the engine's default)
// when it is empty; each name once.
func parseReadouts(s string) ([]clip.Readout, error) {
	if strings.TrimSpace(s) == "" {
		return []clip.Readout{""}, nil
	}
	var out []clip.Readout
	seen := map[clip.Readout]bool{}
	for _, name := range strings.Split(s, ",") {
		r, err := clip.ParseReadout(strings.TrimSpace(name))
		if err != nil {
			return nil, usagef("--readout: %v", err)
		}
		if seen[r] {
			return nil, usagef("--readout: %s given twice", r)
		}
		seen[r] = true
		out = append(out, r)
	}
	return out, nil
}

type pipeBenchResult struct {
	Model         string       `json:"model"`
	Readout       clip.Readout `json:"readout"` // the engine's, as it resolved --readout
	Images        int          `json:"images"`
	ImageSize     int          `json:"image_size,omitempty"` // side of the synthetic images
	Batch         int          `json:"batch"`
	Cores         int          `json:"cores"`
	Streams       int          `json:"encoder_streams"`
	Threads       int          `json:"encoder_threads"`
	EncoderPerSec float64      `json:"encoder_images_per_sec"`
	JobPerSec     float64      `json:"job_images_per_sec,omitempty"`
	Ratio         float64      `json:"job_to_encoder_ratio,omitempty"`
	EncoderCPUms  float64      `json:"encoder_cpu_ms_per_image,omitempty"`
	JobCPUms      float64      `json:"job_cpu_ms_per_image,omitempty"`
	// The encoder's calls, read on their threads (streams of one thread only).
	EncoderCallCPUms    float64             `json:"encoder_call_cpu_ms_per_image,omitempty"`
	JobEncoderCallCPUms float64             `json:"job_encoder_call_cpu_ms_per_image,omitempty"`
	JobEncoderShare     float64             `json:"job_encoder_cpu_share,omitempty"`
	Decode              pipeline.DecodeMode `json:"decode"`
	JPEGDraft           int                 `json:"jpeg_draft,omitempty"`
	DecodeDistance      *pipebench.Distance `json:"decode_distance,omitempty"` // to the exact decode, --decode fast/fastest
	StagesMs            map[string]float64  `json:"job_stage_medians_ms,omitempty"`
	Pairs               []pipeBenchPair     `json:"pairs"`
	RSSSmallMB          float64             `json:"rss_100_mb,omitempty"`
	RSSLargeMB          float64             `json:"rss_large_mb,omitempty"`
	RSSLargeImages      int                 `json:"rss_large_images,omitempty"`
}

// pipeBenchPair is one measurement of the encoder alone and the job right after it.
type pipeBenchPair struct {
	EncoderPerSec float64 `json:"encoder_images_per_sec"`
	EncoderCPUms  float64 `json:"encoder_cpu_ms_per_image,omitempty"`
	JobPerSec     float64 `json:"job_images_per_sec,omitempty"`
	JobCPUms      float64 `json:"job_cpu_ms_per_image,omitempty"`
	Ratio         float64 `json:"job_to_encoder_ratio,omitempty"`
	// The encoder's calls' CPU per image alone and inside the job, and
	// their share of the job's CPU (streams of one thread only).
	EncoderCallCPUms    float64 `json:"encoder_call_cpu_ms_per_image,omitempty"`
	JobEncoderCallCPUms float64 `json:"job_encoder_call_cpu_ms_per_image,omitempty"`
	JobEncoderShare     float64 `json:"job_encoder_cpu_share,omitempty"`
	// The readout's graph alone (--readout-alone), right after the encoder:
	// wall and process CPU time per image.
	ReadoutAloneMs    float64 `json:"readout_alone_ms_per_image,omitempty"`
	ReadoutAloneCPUms float64 `json:"readout_alone_cpu_ms_per_image,omitempty"`
	// Its calls' CPU per image, read on their threads (streams of one
	// thread only).
	ReadoutAloneCallCPUms float64 `json:"readout_alone_call_cpu_ms_per_image,omitempty"`
}

// runPipeline is condition-bench pipeline.
func runPipeline(ctx context.Context, e *env, args []string) error {
	var o pipeBenchOptions
	fs := newFlagSet(e, "pipeline", "pipeline [--model REF] [--images DIR | --n N --size S] [--batch N] [--tune] [--rss] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "condition-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var res pipeBenchResult
	// Peak RSS first, while this process is still small: a child's
	// ru_maxrss starts from its parent's resident size at fork.
	if o.rss {
		if err := measureRSS(ctx, o, tmp, &res); err != nil {
			return err
		}
	}
	if err := o.ort.load(e); err != nil {
		return err
	}
	m, err := openBenchModel(ctx, e, o.model, o.variant, o.precision, o.ort.Threads)
	if err != nil {
		return err
	}
	images := o.images
	if images == "" {
		images = filepath.Join(tmp, "images")
		if err := pipebench.WriteSyntheticImages(images, o.n, o.size, 1); err != nil {
			return err
		}
	}
	if o.tune {
		return runPipeTune(ctx, e, o, m, images, tmp)
	}
	// An engine per readout, all open before the first measurement.
	arms := make([]*pipeArm, len(o.readouts))
	for i, r := range o.readouts {
		eng, err := openEngine(ctx, e, m, pipeline.Options{Threads: o.ort.Threads, Streams: streamsFlag(o.streams), NoSpinning: true, Decode: o.mode,
			NoArena: o.noArena, PinThreads: o.pin, Readout: r, KeepGraphs: o.keep})
		if err != nil {
			return err
		}
		defer eng.Close()
		a := &pipeArm{eng: eng, res: res}
		a.res.Model, a.res.Readout, a.res.Batch, a.res.Cores = m.Name(), eng.Options().Readout, o.batch, runtime.GOMAXPROCS(0)
		a.res.Threads, a.res.Streams = eng.Threads(), eng.Streams()
		if o.images == "" {
			a.res.ImageSize = o.size
		}
		a.cfg = batch.Config{Engine: eng, Inputs: []string{images}, Prompts: []string{"a red circle", "a blue square"},
			Out: filepath.Join(tmp, "out"), Batch: o.batch, Workers: o.workers, Streams: a.res.Streams, Version: version, Log: e.Log}
		if o.alone && a.res.Readout != pipeline.ReadoutRaw {
			if a.alone, err = openReadoutAlone(m, eng, string(a.res.Readout), o.batch, o); err != nil {
				return err
			}
			defer a.alone.close()
		}
		arms[i] = a
	}
	var prof *os.File
	if o.cpuProf != "" {
		if prof, err = os.Create(o.cpuProf); err != nil {
			return err
		}
		defer prof.Close()
	}
	// Encoder alone, then the job, repeat times: back-to-back pairs, so
	// that a change in the machine's load spoils one pair, not the figure;
	// the readouts in turn within each repeat, starting with the next one
	// each time, so that each meets every part of the run.
	for r := range o.repeat {
		for j := range arms {
			k := (j + r) % len(arms)
			var p *os.File
			if r == 0 && k == 0 {
				p = prof // the first readout's first job
			}
			if err := arms[k].measure(ctx, e, o, tmp, fmt.Sprintf("out-%d-%d", r, k), p); err != nil {
				return err
			}
			if len(arms) > 1 {
				q := arms[k].res.Pairs[len(arms[k].res.Pairs)-1]
				e.Log.Info("pipeline", "repeat", r+1, "readout", arms[k].res.Readout, "encoder images/s", fmt.Sprintf("%.2f", q.EncoderPerSec),
					"job images/s", fmt.Sprintf("%.2f", q.JobPerSec))
			}
		}
	}
	for i, a := range arms {
		a.finish()
		a.res.Decode, a.res.JPEGDraft = o.mode, a.eng.JPEGDraft()
		if a.res.JPEGDraft > 0 && i == 0 {
			// What the speed costs: the first images against their exact
			// decode (the readout changes neither).
			d, err := pipebench.DecodeDistance(ctx, a.eng, a.cfg.Inputs, 50)
			if err != nil {
				return err
			}
			a.res.DecodeDistance = &d
		}
	}
	return reportPipeline(e, o, arms)
}

// reportPipeline writes the arms' results: JSON (with the readouts'
// comparison when there are several) or text.
func reportPipeline(e *env, o pipeBenchOptions, arms []*pipeArm) error {
	cmp := compareReadouts(arms)
	if o.json {
		var v any = arms[0].res
		if len(arms) > 1 {
			all := make([]pipeBenchResult, len(arms))
			for i, a := range arms {
				all[i] = a.res
			}
			v = map[string]any{"readouts": all, "comparison": cmp}
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(e.Stdout, string(b))
		return nil
	}
	for _, a := range arms {
		a.print(e, o)
	}
	if len(arms) > 1 {
		printReadoutComparison(e, cmp, o.repeat)
	}
	return nil
}

// check checks the flags and parses --decode and --readout into o.
func (o *pipeBenchOptions) check() error {
	if o.n < 1 || o.size < 8 || o.batch < 1 || o.rounds < 1 || o.repeat < 1 {
		return usagef("--n, --batch, --rounds and --repeat must be at least 1, --size at least 8")
	}
	if o.streams < 0 || o.workers < 0 {
		return usagef("--streams and --workers must be 0 or more")
	}
	var err error
	if o.mode, err = decodeMode(o.decode); err != nil {
		return err
	}
	if err := checkPrecision(o.precision, o.variant); err != nil {
		return err
	}
	if err := o.ort.check(); err != nil {
		return err
	}
	if o.readouts, err = parseReadouts(o.readout); err != nil {
		return err
	}
	if len(o.readouts) > 1 && (o.tune || o.rss) {
		return usagef("--tune and --rss take one --readout")
	}
	if o.noJob && (o.tune || o.cpuProf != "") {
		return usagef("--no-job measures no job to --tune or to profile (--cpuprofile)")
	}
	return nil
}

// measureRSS runs condition's job on 100 and on --rss-big synthetic
// images, each in a child process, and records the children's peak RSS.
func measureRSS(ctx context.Context, o pipeBenchOptions, tmp string, res *pipeBenchResult) error {
	exe, err := conditionProgram(o.program)
	if err != nil {
		return err
	}
	for _, k := range []int{100, o.rssBig} {
		dir := filepath.Join(tmp, fmt.Sprintf("rss-%d", k))
		if err := pipebench.WriteSyntheticImages(dir, k, 64, 2); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, exe, "run", "--model", o.model, "--images", dir, "--out", dir+"-out", "--quiet",
			"--prompt", "a red circle", "--batch", fmt.Sprint(o.batch), "--log-format", "json", "--decode", string(o.mode))
		cmd.Env = os.Environ()
		if o.ort.Lib != "" {
			cmd.Args = append(cmd.Args, "--ort-lib", o.ort.Lib)
		}
		if o.readouts[0] != "" {
			cmd.Args = append(cmd.Args, "--readout", string(o.readouts[0]))
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("rss job of %d images: %v\n%s", k, err, out)
		}
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			return fmt.Errorf("rss: no resource usage on this system")
		}
		mb := float64(ru.Maxrss) / 1024 // Linux reports KiB
		if k == 100 {
			res.RSSSmallMB = mb
		} else {
			res.RSSLargeMB, res.RSSLargeImages = mb, k
		}
	}
	return nil
}

// pipeArm is one engine's measurements (one readout's) in
// condition-bench pipeline.
type pipeArm struct {
	eng   *pipeline.Engine
	alone *readoutAlone // --readout-alone, for a non-raw readout
	cfg   batch.Config
	res   pipeBenchResult
}

// measure measures the encoder alone, then (unless --no-job) the job, once,
// adding a pair to the result; prof, when not nil, receives a CPU profile
// of the job.
func (a *pipeArm) measure(ctx context.Context, e *env, o pipeBenchOptions, tmp, out string, prof *os.File) error {
	enc, n, err := pipebench.EncoderRate(ctx, a.eng, a.cfg, o.rounds)
	if err != nil {
		return err
	}
	a.res.Images = n
	p := pipeBenchPair{EncoderPerSec: enc.PerSec(), EncoderCPUms: ms(enc.CPUPerImage())}
	if a.res.Threads == 1 && enc.EncoderCPU > 0 {
		p.EncoderCallCPUms = ms(enc.EncoderCPU / time.Duration(enc.Images))
	}
	if a.alone != nil {
		rt, err := a.alone.rate(ctx, o.rounds*((n+o.batch-1)/o.batch))
		if err != nil {
			return err
		}
		p.ReadoutAloneMs, p.ReadoutAloneCPUms = 1000/rt.PerSec(), ms(rt.CPUPerImage())
		if a.res.Threads == 1 && rt.EncoderCPU > 0 {
			p.ReadoutAloneCallCPUms = float64(rt.EncoderCPU.Nanoseconds()) / 1e6 / float64(rt.Images)
		}
	}
	if o.noJob {
		a.res.Pairs = append(a.res.Pairs, p)
		return nil
	}
	cfg := a.cfg
	cfg.Out = filepath.Join(tmp, out)
	defer os.RemoveAll(cfg.Out)
	var profErr error
	cfg.Started = func() {
		if prof != nil {
			profErr = pprof.StartCPUProfile(prof)
		}
	}
	sum, job, err := pipebench.JobRate(ctx, cfg)
	if prof != nil && profErr == nil {
		pprof.StopCPUProfile()
	}
	if err == nil {
		err = profErr
	}
	if err != nil {
		return err
	}
	if sum.Failed > 0 {
		e.Log.Warn("pipeline: some images failed; the job's rate counts the others", "failed", sum.Failed, "done", sum.Done)
	}
	p.JobPerSec, p.JobCPUms = job.PerSec(), ms(job.CPUPerImage())
	p.Ratio = p.JobPerSec / p.EncoderPerSec
	if a.res.Threads == 1 && enc.EncoderCPU > 0 && job.EncoderCPU > 0 && job.Images > 0 {
		// With more threads a stream's work is partly on ONNX Runtime's
		// own threads, which the calls' threads do not see.
		p.JobEncoderCallCPUms = ms(job.EncoderCPU / time.Duration(job.Images))
		p.JobEncoderShare = job.EncoderShare()
	} else {
		p.EncoderCallCPUms = 0
	}
	a.res.Pairs = append(a.res.Pairs, p)
	if f, err := os.Open(sum.Manifest); err == nil {
		entries, perr := batch.ParseManifest(f)
		f.Close()
		if perr == nil {
			a.res.StagesMs = pipebench.StageMedians(entries)
		}
	}
	return nil
}

// finish sets the result's figures to the medians over its pairs.
func (a *pipeArm) finish() {
	res := &a.res
	med := func(f func(pipeBenchPair) float64) float64 {
		v := make([]float64, len(res.Pairs))
		for i, p := range res.Pairs {
			v[i] = f(p)
		}
		return pipebench.Median(v)
	}
	res.EncoderPerSec = med(func(p pipeBenchPair) float64 { return p.EncoderPerSec })
	res.JobPerSec = med(func(p pipeBenchPair) float64 { return p.JobPerSec })
	res.Ratio = med(func(p pipeBenchPair) float64 { return p.Ratio })
	res.EncoderCPUms = med(func(p pipeBenchPair) float64 { return p.EncoderCPUms })
	res.JobCPUms = med(func(p pipeBenchPair) float64 { return p.JobCPUms })
	res.EncoderCallCPUms = med(func(p pipeBenchPair) float64 { return p.EncoderCallCPUms })
	res.JobEncoderCallCPUms = med(func(p pipeBenchPair) float64 { return p.JobEncoderCallCPUms })
	res.JobEncoderShare = med(func(p pipeBenchPair) float64 { return p.JobEncoderShare })
}

// print prints the result as text.
func (a *pipeArm) print(e *env, o pipeBenchOptions) {
	res := a.res
	what := fmt.Sprintf("%d images", res.Images)
	if res.ImageSize > 0 {
		what = fmt.Sprintf("%d synthetic %d×%d JPEGs", res.Images, res.ImageSize, res.ImageSize)
	}
	fmt.Fprintf(e.Stdout, "model %s, readout %s, %s, batch %d, %d cores, encoder %d stream(s) × %d thread(s)\n", res.Model, res.Readout, what, res.Batch, res.Cores, res.Streams, res.Threads)
	if len(res.Pairs) > 1 {
		for i, p := range res.Pairs {
			alone := ""
			if p.ReadoutAloneMs > 0 {
				alone = fmt.Sprintf("; the readout's graph alone %.2f ms/image, CPU %.2f ms/image", p.ReadoutAloneMs, p.ReadoutAloneCPUms)
			}
			if o.noJob {
				fmt.Fprintf(e.Stdout, "  repeat %d: encoder %.2f images/s (%.2f ms/image, CPU %.2f ms/image)%s\n", i+1, p.EncoderPerSec, 1000/p.EncoderPerSec, p.EncoderCPUms, alone)
				continue
			}
			share := ""
			if p.JobEncoderShare > 0 {
				share = fmt.Sprintf("; encoder's share of the job's CPU %.0f%%", 100*p.JobEncoderShare)
			}
			fmt.Fprintf(e.Stdout, "  pair %d: encoder %.1f images/s (CPU %.2f ms/image), job %.1f images/s (CPU %.2f ms/image): %.0f%%%s\n",
				i+1, p.EncoderPerSec, p.EncoderCPUms, p.JobPerSec, p.JobCPUms, 100*p.Ratio, share)
		}
		fmt.Fprintf(e.Stdout, "  medians of %d %s:\n", len(res.Pairs), map[bool]string{true: "repeats", false: "pairs"}[o.noJob])
	}
	fmt.Fprintf(e.Stdout, "  vision encoder alone  %8.1f images/s%s\n", res.EncoderPerSec, cpuNote(res.EncoderCPUms))
	if o.noJob {
		return
	}
	fmt.Fprintf(e.Stdout, "  whole job             %8.1f images/s%s  (%.0f%% of the encoder's rate; target ≥ 90%%)\n", res.JobPerSec, cpuNote(res.JobCPUms), 100*res.Ratio)
	if res.EncoderCPUms > 0 && res.JobCPUms > 0 {
		fmt.Fprintf(e.Stdout, "  CPU per image, encoder alone / job: %.0f%% (the job's ceiling when the encoder keeps every core busy)\n", 100*res.EncoderCPUms/res.JobCPUms)
	}
	if res.JobEncoderShare > 0 {
		fmt.Fprintf(e.Stdout, "  encoder's share of the job's CPU: %.0f%% (read inside the job, over the same seconds: the job's rate relative to the encoder's when the encoder keeps every core busy; the machine's load moves it far less)\n", 100*res.JobEncoderShare)
		fmt.Fprintf(e.Stdout, "  encoder calls' CPU per image: alone %.2f ms, inside the job %.2f ms\n", res.EncoderCallCPUms, res.JobEncoderCallCPUms)
	}
	if d := res.DecodeDistance; d != nil {
		fmt.Fprintf(e.Stdout, "  --decode %s (JPEGs scaled in the DCT to sides ≥ %d) against the exact decode, %d images: pixel_values max %.1f, mean %.2f levels; image_embeds cosine min %.5f, mean %.5f\n",
			res.Decode, res.JPEGDraft, d.Images, d.MaxLevels, d.MeanLevels, d.MinCosine, d.MeanCosine)
	}
	if len(res.StagesMs) > 0 {
		fmt.Fprintf(e.Stdout, "  job stages, median ms per image: %s (encode: the wall time of a batch)\n", stageList(res.StagesMs))
	}
	if o.rss {
		fmt.Fprintf(e.Stdout, "  peak RSS: %.1f MB at 100 images, %.1f MB at %d images (growth %.1f MB; target < 50 MB)\n",
			res.RSSSmallMB, res.RSSLargeMB, res.RSSLargeImages, res.RSSLargeMB-res.RSSSmallMB)
	}
}

// readoutCost is one readout's encoder against the first readout's, from
// the pairs of the same repeats (a repeat measures every readout, one after
// the other).
type readoutCost struct {
	Readout string `json:"readout"`
	// The encoder alone's wall and CPU time per image: medians over the
	// repeats.
	EncoderMs    float64 `json:"encoder_ms_per_image"`
	EncoderCPUms float64 `json:"encoder_cpu_ms_per_image,omitempty"`
	// CallCPU says the CPU figures are the encoder calls' own, read on
	// their threads (streams of one thread), not the process's.
	CallCPU bool `json:"cpu_of_calls,omitempty"`
	// Time per image over the first readout's in the same repeat: the
	// median, lowest and highest of the repeats' ratios.
	Ratio    float64 `json:"encoder_time_ratio"`
	RatioMin float64 `json:"encoder_time_ratio_min"`
	RatioMax float64 `json:"encoder_time_ratio_max"`
	// The same, of the CPU time per image (0 when unknown).
	CPURatio    float64 `json:"encoder_cpu_ratio,omitempty"`
	CPURatioMin float64 `json:"encoder_cpu_ratio_min,omitempty"`
	CPURatioMax float64 `json:"encoder_cpu_ratio_max,omitempty"`
	// The readout's graph alone (--readout-alone) over the first readout's
	// encoder in the same repeat, of the wall and of the CPU time per image:
	// median, lowest, highest.
	AloneRatio       float64 `json:"readout_alone_time_ratio,omitempty"`
	AloneRatioMin    float64 `json:"readout_alone_time_ratio_min,omitempty"`
	AloneRatioMax    float64 `json:"readout_alone_time_ratio_max,omitempty"`
	AloneCPURatio    float64 `json:"readout_alone_cpu_ratio,omitempty"`
	AloneCPURatioMin float64 `json:"readout_alone_cpu_ratio_min,omitempty"`
	AloneCPURatioMax float64 `json:"readout_alone_cpu_ratio_max,omitempty"`
	// The job's median rate and job ÷ encoder (0 with --no-job).
	JobPerSec float64 `json:"job_images_per_sec,omitempty"`
	JobRatio  float64 `json:"job_to_encoder_ratio,omitempty"`
}

// compareReadouts compares each arm's encoder with the first arm's, repeat
// by repeat; nil for one arm.
func compareReadouts(arms []*pipeArm) []readoutCost {
	if len(arms) < 2 {
		return nil
	}
	base := arms[0].res.Pairs
	out := make([]readoutCost, len(arms))
	for i, a := range arms {
		c := readoutCost{Readout: string(a.res.Readout), EncoderMs: 1000 / a.res.EncoderPerSec, EncoderCPUms: a.res.EncoderCPUms,
			JobPerSec: a.res.JobPerSec, JobRatio: a.res.Ratio}
		// CPU time: the calls' own, read on their threads (ns), where the
		// streams have one thread each; else the process's (in clock ticks).
		calls := a.res.Threads == 1
		for _, p := range append(append([]pipeBenchPair(nil), a.res.Pairs...), base...) {
			calls = calls && p.EncoderCallCPUms > 0
		}
		encCPU := func(p pipeBenchPair) float64 {
			if calls {
				return p.EncoderCallCPUms
			}
			return p.EncoderCPUms
		}
		aloneCPUOf := func(p pipeBenchPair) float64 {
			if calls {
				return p.ReadoutAloneCallCPUms
			}
			return p.ReadoutAloneCPUms
		}
		c.CallCPU = calls
		if calls {
			c.EncoderCPUms = a.res.EncoderCallCPUms
		}
		var wall, cpu, aloneWall, aloneCPU []float64
		for r, p := range a.res.Pairs {
			if r >= len(base) || p.EncoderPerSec <= 0 {
				continue
			}
			wall = append(wall, base[r].EncoderPerSec/p.EncoderPerSec)
			if encCPU(p) > 0 && encCPU(base[r]) > 0 {
				cpu = append(cpu, encCPU(p)/encCPU(base[r]))
			}
			if p.ReadoutAloneMs > 0 {
				aloneWall = append(aloneWall, p.ReadoutAloneMs*base[r].EncoderPerSec/1000)
			}
			if aloneCPUOf(p) > 0 && encCPU(base[r]) > 0 {
				aloneCPU = append(aloneCPU, aloneCPUOf(p)/encCPU(base[r]))
			}
		}
		c.Ratio, c.RatioMin, c.RatioMax = spread(wall)
		c.CPURatio, c.CPURatioMin, c.CPURatioMax = spread(cpu)
		c.AloneRatio, c.AloneRatioMin, c.AloneRatioMax = spread(aloneWall)
		c.AloneCPURatio, c.AloneCPURatioMin, c.AloneCPURatioMax = spread(aloneCPU)
		out[i] = c
	}
	return out
}

// spread returns the median, lowest and highest of v (zeros for none).
func spread(v []float64) (med, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	lo, hi = v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return pipebench.Median(append([]float64(nil), v...)), lo, hi
}

// printReadoutComparison prints the readouts' encoders against the first.
func printReadoutComparison(e *env, cmp []readoutCost, repeats int) {
	what := "the process's CPU"
	if cmp[0].CallCPU {
		what = "CPU: the encoder calls' own, read on their threads"
	}
	fmt.Fprintf(e.Stdout, "readouts, the vision encoder alone against %s's in the same repeat (medians of %d repeats; [lowest, highest] ratio; %s):\n", cmp[0].Readout, repeats, what)
	tw := tabwriter.NewWriter(e.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  readout\tms/image\ttime ÷ %s\tCPU ms/image\tCPU ÷ %s\tjob images/s\tjob ÷ encoder\n", cmp[0].Readout, cmp[0].Readout)
	for _, c := range cmp {
		job, jr := "-", "-"
		if c.JobPerSec > 0 {
			job, jr = fmt.Sprintf("%.2f", c.JobPerSec), fmt.Sprintf("%.1f%%", 100*c.JobRatio)
		}
		cpu, cr := "-", "-"
		if c.CPURatio > 0 {
			cpu, cr = fmt.Sprintf("%.2f", c.EncoderCPUms), fmt.Sprintf("%.4f [%.4f, %.4f]", c.CPURatio, c.CPURatioMin, c.CPURatioMax)
		}
		fmt.Fprintf(tw, "  %s\t%.2f\t%.4f [%.4f, %.4f]\t%s\t%s\t%s\t%s\n", c.Readout, c.EncoderMs, c.Ratio, c.RatioMin, c.RatioMax, cpu, cr, job, jr)
	}
	tw.Flush()
	alone := false
	for _, c := range cmp {
		alone = alone || c.AloneRatio > 0
	}
	if !alone {
		return
	}
	fmt.Fprintf(e.Stdout, "readout graphs alone (--readout-alone), their time per image over %s's encoder in the same repeat (medians; [lowest, highest]):\n", cmp[0].Readout)
	for _, c := range cmp {
		if c.AloneRatio > 0 && c.AloneCPURatio == 0 {
			fmt.Fprintf(e.Stdout, "  %-10s wall %.4f [%.4f, %.4f]\n", c.Readout, c.AloneRatio, c.AloneRatioMin, c.AloneRatioMax)
		} else if c.AloneRatio > 0 {
			fmt.Fprintf(e.Stdout, "  %-10s wall %.4f [%.4f, %.4f]  CPU %.4f [%.4f, %.4f]\n", c.Readout, c.AloneRatio, c.AloneRatioMin, c.AloneRatioMax,
				c.AloneCPURatio, c.AloneCPURatioMin, c.AloneCPURatioMax)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func cpuNote(cpuMs float64) string {
	if cpuMs <= 0 {
		return ""
	}
	return fmt.Sprintf("  CPU %7.2f ms/image", cpuMs)
}

// stageList lists the job's stages in pipeline order, then any others.
func stageList(st map[string]float64) string {
	order := []string{"read", "decode", "preprocess", "encode", "attend", "write", "total"}
	rank := func(k string) int {
		for i, o := range order {
			if o == k {
				return i
			}
		}
		return len(order)
	}
	keys := make([]string, 0, len(st))
	for k := range st {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		ra, rb := rank(keys[a]), rank(keys[b])
		if ra != rb {
			return ra < rb
		}
		return keys[a] < keys[b]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, st[k])
	}
	return strings.Join(parts, ", ")
}

// conditionProgram returns the condition program to run: path, else
// condition beside this program, else condition on the PATH.
func conditionProgram(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "condition")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("condition")
	if err != nil {
		return "", fmt.Errorf("--rss runs the condition program: none beside this one nor on the PATH (give --condition)")
	}
	return p, nil
}
