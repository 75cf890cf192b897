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
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
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
	o.ort.AddFlags(fs)
}

type pipeBenchResult struct {
	Model         string  `json:"model"`
	Images        int     `json:"images"`
	ImageSize     int     `json:"image_size,omitempty"` // side of the synthetic images
	Batch         int     `json:"batch"`
	Cores         int     `json:"cores"`
	Streams       int     `json:"encoder_streams"`
	Threads       int     `json:"encoder_threads"`
	EncoderPerSec float64 `json:"encoder_images_per_sec"`
	JobPerSec     float64 `json:"job_images_per_sec"`
	Ratio         float64 `json:"job_to_encoder_ratio"`
	EncoderCPUms  float64 `json:"encoder_cpu_ms_per_image,omitempty"`
	JobCPUms      float64 `json:"job_cpu_ms_per_image,omitempty"`
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
	JobPerSec     float64 `json:"job_images_per_sec"`
	JobCPUms      float64 `json:"job_cpu_ms_per_image,omitempty"`
	Ratio         float64 `json:"job_to_encoder_ratio"`
	// The encoder's calls' CPU per image alone and inside the job, and
	// their share of the job's CPU (streams of one thread only).
	EncoderCallCPUms    float64 `json:"encoder_call_cpu_ms_per_image,omitempty"`
	JobEncoderCallCPUms float64 `json:"job_encoder_call_cpu_ms_per_image,omitempty"`
	JobEncoderShare     float64 `json:"job_encoder_cpu_share,omitempty"`
}

// runPipeline is condition-bench pipeline.
func runPipeline(ctx context.Context, e *env, args []string) error {
	var o pipeBenchOptions
	fs := newFlagSet(e, "pipeline", "pipeline [--model REF] [--images DIR | --n N --size S] [--batch N] [--tune] [--rss] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
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
	tmp, err := os.MkdirTemp("", "condition-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var res pipeBenchResult
	// Peak RSS first, while this process is still small: a child's
	// ru_maxrss starts from its parent's resident size at fork.
	if o.rss {
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
	res.Model, res.Batch, res.Cores = m.Name(), o.batch, runtime.GOMAXPROCS(0)
	eng, err := openEngine(ctx, e, m, pipeline.Options{Threads: o.ort.Threads, Streams: streamsFlag(o.streams), NoSpinning: true, Decode: o.mode,
		NoArena: o.noArena, PinThreads: o.pin})
	if err != nil {
		return err
	}
	defer eng.Close()
	res.Threads, res.Streams = eng.Threads(), eng.Streams()
	cfg := batch.Config{Engine: eng, Inputs: []string{images}, Prompts: []string{"a red circle", "a blue square"},
		Out: filepath.Join(tmp, "out"), Batch: o.batch, Workers: o.workers, Streams: res.Streams, Version: version, Log: e.Log}
	if o.images == "" {
		res.ImageSize = o.size
	}
	var prof *os.File
	if o.cpuProf != "" {
		if prof, err = os.Create(o.cpuProf); err != nil {
			return err
		}
		defer prof.Close()
	}
	// Encoder alone, then the job, repeat times: back-to-back pairs, so
	// that a change in the machine's load spoils one pair, not the figure.
	for r := range o.repeat {
		enc, n, err := pipebench.EncoderRate(ctx, eng, cfg, o.rounds)
		if err != nil {
			return err
		}
		res.Images = n
		var profErr error
		cfg.Out = filepath.Join(tmp, fmt.Sprintf("out-%d", r))
		cfg.Started = func() {
			if prof != nil && r == 0 {
				profErr = pprof.StartCPUProfile(prof)
			}
		}
		sum, job, err := pipebench.JobRate(ctx, cfg)
		if prof != nil && r == 0 && profErr == nil {
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
		p := pipeBenchPair{EncoderPerSec: enc.PerSec(), EncoderCPUms: ms(enc.CPUPerImage()),
			JobPerSec: job.PerSec(), JobCPUms: ms(job.CPUPerImage())}
		p.Ratio = p.JobPerSec / p.EncoderPerSec
		if res.Threads == 1 && enc.EncoderCPU > 0 && job.EncoderCPU > 0 && job.Images > 0 {
			// With more threads a stream's work is partly on ONNX Runtime's
			// own threads, which the calls' threads do not see.
			p.EncoderCallCPUms = ms(enc.EncoderCPU / time.Duration(enc.Images))
			p.JobEncoderCallCPUms = ms(job.EncoderCPU / time.Duration(job.Images))
			p.JobEncoderShare = job.EncoderShare()
		}
		res.Pairs = append(res.Pairs, p)
		if f, err := os.Open(sum.Manifest); err == nil {
			entries, perr := batch.ParseManifest(f)
			f.Close()
			if perr == nil {
				res.StagesMs = pipebench.StageMedians(entries)
			}
		}
		os.RemoveAll(cfg.Out)
	}
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
	res.Decode, res.JPEGDraft = o.mode, eng.JPEGDraft()
	if res.JPEGDraft > 0 {
		// What the speed costs: the first images against their exact decode.
		d, err := pipebench.DecodeDistance(ctx, eng, cfg.Inputs, 50)
		if err != nil {
			return err
		}
		res.DecodeDistance = &d
	}
	if o.json {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.Stdout, string(b))
		return nil
	}
	what := fmt.Sprintf("%d images", res.Images)
	if res.ImageSize > 0 {
		what = fmt.Sprintf("%d synthetic %d×%d JPEGs", res.Images, res.ImageSize, res.ImageSize)
	}
	fmt.Fprintf(e.Stdout, "model %s, %s, batch %d, %d cores, encoder %d stream(s) × %d thread(s)\n", res.Model, what, res.Batch, res.Cores, res.Streams, res.Threads)
	if len(res.Pairs) > 1 {
		for i, p := range res.Pairs {
			share := ""
			if p.JobEncoderShare > 0 {
				share = fmt.Sprintf("; encoder's share of the job's CPU %.0f%%", 100*p.JobEncoderShare)
			}
			fmt.Fprintf(e.Stdout, "  pair %d: encoder %.1f images/s (CPU %.2f ms/image), job %.1f images/s (CPU %.2f ms/image): %.0f%%%s\n",
				i+1, p.EncoderPerSec, p.EncoderCPUms, p.JobPerSec, p.JobCPUms, 100*p.Ratio, share)
		}
		fmt.Fprintf(e.Stdout, "  medians of %d pairs:\n", len(res.Pairs))
	}
	fmt.Fprintf(e.Stdout, "  vision encoder alone  %8.1f images/s%s\n", res.EncoderPerSec, cpuNote(res.EncoderCPUms))
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
	return nil
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
