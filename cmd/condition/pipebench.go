package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline"
)

// pipeBenchOptions are the flags of `condition bench pipeline`.
type pipeBenchOptions struct {
	variant string
	ort     ortOptions
	model   string
	images  string
	n       int
	size    int
	batch   int
	workers int
	rounds  int
	rss     bool
	rssBig  int
	json    bool
}

func (o *pipeBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", "default", "model to run")
	fs.StringVar(&o.variant, "variant", "", "graph variant by suffix: fp16, quantized, ... (onnx/text_model_<variant>.onnx)")
	fs.StringVar(&o.images, "images", "", "image folder (default: synthetic PNGs made for the run)")
	fs.IntVar(&o.n, "n", 200, "synthetic images to make")
	fs.IntVar(&o.size, "size", 256, "side of the synthetic images in pixels")
	fs.IntVar(&o.batch, "batch", 8, "images per vision encoder call (the same for the job and the encoder alone)")
	fs.IntVar(&o.workers, "workers", 0, "decode goroutines of the job (0: one per core)")
	fs.IntVar(&o.rounds, "rounds", 2, "passes of the encoder-alone measurement")
	fs.BoolVar(&o.rss, "rss", false, "also measure the peak RSS of jobs of 100 and --rss-images images (separate processes)")
	fs.IntVar(&o.rssBig, "rss-images", 5000, "images of the large job of --rss")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	o.ort.AddFlags(fs)
}

type pipeBenchResult struct {
	Model          string  `json:"model"`
	Images         int     `json:"images"`
	Batch          int     `json:"batch"`
	EncoderPerSec  float64 `json:"encoder_images_per_sec"`
	JobPerSec      float64 `json:"job_images_per_sec"`
	Ratio          float64 `json:"job_to_encoder_ratio"`
	RSSSmallMB     float64 `json:"rss_100_mb,omitempty"`
	RSSLargeMB     float64 `json:"rss_large_mb,omitempty"`
	RSSLargeImages int     `json:"rss_large_images,omitempty"`
}

func runBenchPipeline(ctx context.Context, e *env, args []string) error {
	var o pipeBenchOptions
	fs := newFlagSet(e, "bench pipeline", "bench pipeline [--model REF] [--images DIR | --n N --size S] [--batch N] [--rss] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.n < 1 || o.size < 8 || o.batch < 1 || o.rounds < 1 {
		return usagef("--n, --batch and --rounds must be at least 1, --size at least 8")
	}
	if err := o.ort.validate(); err != nil {
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
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		for _, k := range []int{100, o.rssBig} {
			dir := filepath.Join(tmp, fmt.Sprintf("rss-%d", k))
			if err := pipeline.WriteSyntheticImages(dir, k, 64, 2); err != nil {
				return err
			}
			cmd := exec.CommandContext(ctx, exe, "run", "--model", o.model, "--images", dir, "--out", dir+"-out", "--quiet",
				"--prompt", "a red circle", "--batch", fmt.Sprint(o.batch), "--log-format", "json")
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
	if _, err := o.ort.load(e); err != nil {
		return err
	}
	m, err := openModel(ctx, e, o.model, o.variant)
	if err != nil {
		return err
	}
	images := o.images
	if images == "" {
		images = filepath.Join(tmp, "images")
		if err := pipeline.WriteSyntheticImages(images, o.n, o.size, 1); err != nil {
			return err
		}
	}
	cfg := pipeline.Config{Model: m, Inputs: []string{images}, Prompts: []string{"a red circle", "a blue square"},
		Out: filepath.Join(tmp, "out"), Batch: o.batch, Workers: o.workers, Threads: o.ort.Threads, Version: Version, Log: e.Log}
	res.Model, res.Batch = m.Name(), o.batch
	var n int
	if res.EncoderPerSec, n, err = pipeline.EncoderRate(ctx, cfg, o.rounds); err != nil {
		return err
	}
	res.Images = n
	sum, err := pipeline.Run(ctx, cfg)
	if err != nil {
		return err
	}
	res.JobPerSec = sum.ImagesPerSec()
	res.Ratio = res.JobPerSec / res.EncoderPerSec
	if o.json {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.Stdout, string(b))
		return nil
	}
	fmt.Fprintf(e.Stdout, "model %s, %d images, batch %d\n", res.Model, res.Images, res.Batch)
	fmt.Fprintf(e.Stdout, "  vision encoder alone  %8.1f images/s\n", res.EncoderPerSec)
	fmt.Fprintf(e.Stdout, "  whole job             %8.1f images/s  (%.0f%% of the encoder's rate; target ≥ 90%%)\n", res.JobPerSec, 100*res.Ratio)
	if o.rss {
		fmt.Fprintf(e.Stdout, "  peak RSS: %.1f MB at 100 images, %.1f MB at %d images (growth %.1f MB; target < 50 MB)\n",
			res.RSSSmallMB, res.RSSLargeMB, res.RSSLargeImages, res.RSSLargeMB-res.RSSSmallMB)
	}
	return nil
}
