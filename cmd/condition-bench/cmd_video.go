package main

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/vision/video"
)

func init() {
	addSubcommand(subcommand{name: "video", summary: "a video through the job: FFmpeg's decode rate at --fps and at every frame, its share of the job's CPU, and the job's frames/s against the encoder alone on the same frames", run: runBenchVideo})
}

// videoBenchOptions are the flags of `condition-bench video`.
type videoBenchOptions struct {
	model, variant, video string
	width, height         int
	seconds, rate, gop    int
	fps                   float64
	batch, rounds, repeat int
	json, noSeek          bool
	ort                   ortFlags
}

func (o *videoBenchOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "model", "default", "model to run")
	fs.StringVar(&o.variant, "variant", "", "graph variant by suffix: fp16, quantized, ... (onnx/vision_model_<variant>.onnx)")
	fs.StringVar(&o.video, "video", "", "the video (default: a synthetic H.264 MP4 of --size, --seconds and --rate made with ffmpeg's testsrc2 for the run)")
	fs.IntVar(&o.width, "width", 1920, "width of the synthetic video")
	fs.IntVar(&o.height, "height", 1080, "height of the synthetic video")
	fs.IntVar(&o.seconds, "seconds", 60, "length of the synthetic video in seconds")
	fs.IntVar(&o.rate, "rate", 30, "frames per second of the synthetic video")
	fs.IntVar(&o.gop, "gop", 0, "key-frame interval of the synthetic video in frames (0: 2 s, twice --rate; 250 is x264's own default)")
	fs.Float64Var(&o.fps, "fps", video.DefaultFPS, "frames sampled per second, as condition run --fps")
	fs.IntVar(&o.batch, "batch", 8, "frames per vision encoder call (the same for the job and the encoder alone)")
	fs.IntVar(&o.rounds, "rounds", 2, "passes of the encoder-alone measurement")
	fs.IntVar(&o.repeat, "repeat", 1, "measure the decode, the encoder alone and the job this many times (reports the medians)")
	fs.BoolVar(&o.noSeek, "no-seek", false, "the job decodes every frame in order, never from key frames (video.Options.NoSeek)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	o.ort.AddFlags(fs)
}

func (o *videoBenchOptions) check() error {
	switch {
	case o.fps <= 0:
		return usagef("--fps must be above 0, got %g", o.fps)
	case o.video == "" && (o.width < 16 || o.height < 16 || o.width%2 != 0 || o.height%2 != 0):
		return usagef("--width and --height must be even and at least 16, got %dx%d", o.width, o.height)
	case o.video == "" && (o.seconds < 1 || o.rate < 1):
		return usagef("--seconds and --rate must be at least 1, got %d and %d", o.seconds, o.rate)
	case o.gop < 0:
		return usagef("--gop must be 0 (2 s) or a number of frames, got %d", o.gop)
	case o.batch < 1 || o.rounds < 1 || o.repeat < 1:
		return usagef("--batch, --rounds and --repeat must be at least 1")
	}
	return o.ort.check()
}

// decodeRate is one decode of the whole video: frames kept, wall time,
// and the CPU of ffmpeg (the children) and of this process reading its
// frames.
type decodeRate struct {
	Frames    int     `json:"frames"`
	Wall      float64 `json:"wall_s"`
	FFmpegCPU float64 `json:"ffmpeg_cpu_s"`
	SelfCPU   float64 `json:"self_cpu_s"`
	PerSec    float64 `json:"frames_per_s"`
	// FFmpegMs is ffmpeg's CPU (ffprobe's included) per frame kept, ms.
	FFmpegMs float64 `json:"ffmpeg_cpu_ms_per_frame"`
}

// videoBenchRound is one repeat's figures.
type videoBenchRound struct {
	DecodeFPS       decodeRate `json:"decode_fps"`          // as the job decodes: from key frames where that decodes less
	DecodeFPSOrder  decodeRate `json:"decode_fps_in_order"` // every frame decoded (video.Options.NoSeek)
	DecodeAll       decodeRate `json:"decode_all"`
	EncoderPerSec   float64    `json:"encoder_frames_per_s"`
	EncoderCPUms    float64    `json:"encoder_cpu_ms_per_frame"`
	JobPerSec       float64    `json:"job_frames_per_s"`
	JobCPUms        float64    `json:"job_cpu_ms_per_frame"` // this process and ffmpeg
	JobFFmpegCPUms  float64    `json:"job_ffmpeg_cpu_ms_per_frame"`
	FFmpegShare     float64    `json:"ffmpeg_share_of_job_cpu"`
	JobOverEncoder  float64    `json:"job_over_encoder"`
	JobFramesOK     int        `json:"job_frames"`
	JobFramesFailed int        `json:"job_frames_failed"`
}

// videoBenchResult is what `condition-bench video` reports.
type videoBenchResult struct {
	Model    string            `json:"model"`
	Video    string            `json:"video"`
	Width    int               `json:"width"`
	Height   int               `json:"height"`
	Duration float64           `json:"duration_s"`
	GOP      int               `json:"gop,omitempty"` // the synthetic video's key-frame interval, frames
	FPS      float64           `json:"fps"`
	NoSeek   bool              `json:"no_seek,omitempty"` // the job decoded in order
	Batch    int               `json:"batch"`
	Cores    int               `json:"cores"`
	Rounds   []videoBenchRound `json:"rounds"`
	Median   videoBenchRound   `json:"median"`
}

func runBenchVideo(ctx context.Context, e *env, args []string) error {
	var o videoBenchOptions
	fs := newFlagSet(e, "video", "video [--model REF] [--video FILE | --width W --height H --seconds S --rate R --gop N] [--fps F] [--no-seek] [--batch N] [--repeat N] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("video takes no arguments, got %q (the video is --video FILE)", fs.Args())
	}
	if err := o.check(); err != nil {
		return err
	}
	progs, err := video.Find(video.Options{})
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "condition-bench-video-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	path := o.video
	if path == "" {
		path = filepath.Join(tmp, "synthetic.mp4")
		e.Log.Info("video: making a synthetic H.264 video", "size", fmt.Sprintf("%dx%d", o.width, o.height), "seconds", o.seconds, "rate", o.rate)
		if err := makeSyntheticVideo(ctx, progs.FFmpeg, path, o); err != nil {
			return err
		}
	}
	vo := video.Options{FPS: o.fps}
	info, err := video.Probe(ctx, path, vo)
	if err != nil {
		return err
	}
	// The sampled frames as PNGs: the encoder alone runs on them.
	frames := filepath.Join(tmp, "frames")
	if err := writeFramePNGs(ctx, path, vo, frames); err != nil {
		return err
	}
	if err := o.ort.load(e); err != nil {
		return err
	}
	m, err := openBenchModel(ctx, e, o.model, o.variant, "fp32", o.ort.Threads)
	if err != nil {
		return err
	}
	eng, err := openEngine(ctx, e, m, pipeline.Options{Threads: o.ort.Threads, NoSpinning: true})
	if err != nil {
		return err
	}
	defer eng.Close()
	res := videoBenchResult{Model: m.Name(), Video: path, Width: info.Width, Height: info.Height, Duration: info.Duration,
		FPS: o.fps, NoSeek: o.noSeek, Batch: o.batch, Cores: runtime.GOMAXPROCS(0)}
	if o.video == "" {
		res.GOP = o.keyInterval()
	}
	for r := range o.repeat {
		round, err := videoBenchOnce(ctx, e, o, eng, path, frames, filepath.Join(tmp, "out-"+strconv.Itoa(r)))
		if err != nil {
			return err
		}
		res.Rounds = append(res.Rounds, round)
		e.Log.Info("video", "repeat", r+1, "job frames/s", fmt.Sprintf("%.2f", round.JobPerSec),
			"encoder frames/s", fmt.Sprintf("%.2f", round.EncoderPerSec), "ffmpeg share", fmt.Sprintf("%.3f", round.FFmpegShare))
	}
	res.Median = medianVideoRound(res.Rounds)
	return reportVideoBench(e, o, res)
}

// videoBenchOnce measures, one after the other: the decode at --fps and at
// every frame, the encoder alone on the sampled frames, and the job.
func videoBenchOnce(ctx context.Context, e *env, o videoBenchOptions, eng *pipeline.Engine, path, frames, out string) (videoBenchRound, error) {
	var r videoBenchRound
	var err error
	if r.DecodeFPS, err = timeDecode(ctx, path, video.Options{FPS: o.fps}); err != nil {
		return r, err
	}
	if r.DecodeFPSOrder, err = timeDecode(ctx, path, video.Options{FPS: o.fps, NoSeek: true}); err != nil {
		return r, err
	}
	if r.DecodeAll, err = timeDecode(ctx, path, video.Options{Sampling: video.SampleAll}); err != nil {
		return r, err
	}
	cfg := batch.Config{Engine: eng, Inputs: []string{frames}, Prompts: []string{"a red circle", "a blue square"},
		Batch: o.batch, Streams: eng.Streams(), Version: version, Log: e.Log}
	enc, _, err := pipebench.EncoderRate(ctx, eng, cfg, o.rounds)
	if err != nil {
		return r, err
	}
	r.EncoderPerSec, r.EncoderCPUms = enc.PerSec(), ms(enc.CPUPerImage())
	cfg.Inputs, cfg.Out, cfg.Video = []string{path}, out, video.Options{FPS: o.fps, NoSeek: o.noSeek}
	defer os.RemoveAll(out)
	c0, _ := cputime.Children()
	sum, job, err := pipebench.JobRate(ctx, cfg)
	if err != nil {
		return r, err
	}
	c1, _ := cputime.Children()
	r.JobFramesOK, r.JobFramesFailed = sum.Done, sum.Failed
	if job.Images == 0 {
		return r, fmt.Errorf("video: the job encoded no frames of %s", path)
	}
	ff := c1 - c0
	r.JobPerSec = job.PerSec()
	r.JobCPUms = ms((job.CPU + ff) / time.Duration(job.Images))
	r.JobFFmpegCPUms = ms(ff / time.Duration(job.Images))
	if job.CPU+ff > 0 {
		r.FFmpegShare = ff.Seconds() / (job.CPU + ff).Seconds()
	}
	r.JobOverEncoder = r.JobPerSec / r.EncoderPerSec
	return r, nil
}

// timeDecode decodes the whole video, dropping the frames, and measures it.
func timeDecode(ctx context.Context, path string, o video.Options) (decodeRate, error) {
	c0, _ := cputime.Children()
	p0, _ := cputime.Process()
	t0 := time.Now()
	n := 0
	_, err := video.DecodeFile(ctx, path, o, func(video.Frame) error { n++; return nil })
	if err != nil {
		return decodeRate{}, err
	}
	wall := time.Since(t0)
	c1, _ := cputime.Children()
	p1, _ := cputime.Process()
	d := decodeRate{Frames: n, Wall: wall.Seconds(), FFmpegCPU: (c1 - c0).Seconds(), SelfCPU: (p1 - p0).Seconds()}
	if wall > 0 {
		d.PerSec = float64(n) / wall.Seconds()
	}
	if n > 0 {
		d.FFmpegMs = 1000 * d.FFmpegCPU / float64(n)
	}
	return d, nil
}

// writeFramePNGs writes the video's sampled frames into dir as PNGs.
func writeFramePNGs(ctx context.Context, path string, o video.Options, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_, err := video.DecodeFile(ctx, path, o, func(f video.Frame) error {
		w, err := os.Create(filepath.Join(dir, fmt.Sprintf("frame_%06d.png", f.Index)))
		if err != nil {
			return err
		}
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, f.Image)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return err
}

// makeSyntheticVideo writes an H.264 MP4 of ffmpeg's testsrc2 pattern (a
// moving picture with colour bars and a counter), as a camera's file is
// encoded: yuv420p, a key frame every --gop frames (2 s by default).
func makeSyntheticVideo(ctx context.Context, ffmpeg, path string, o videoBenchOptions) error {
	src := fmt.Sprintf("testsrc2=size=%dx%d:rate=%d", o.width, o.height, o.rate)
	cmd := exec.CommandContext(ctx, ffmpeg, "-v", "error", "-f", "lavfi", "-i", src, "-t", strconv.Itoa(o.seconds),
		"-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-g", strconv.Itoa(o.keyInterval()), "-y", path)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("video: making the synthetic video with %s: %v: %s", ffmpeg, err, b)
	}
	return nil
}

// keyInterval is the synthetic video's key-frame interval in frames.
func (o videoBenchOptions) keyInterval() int {
	if o.gop == 0 {
		return 2 * o.rate
	}
	return o.gop
}

// medianVideoRound is each figure's median over the rounds.
func medianVideoRound(rs []videoBenchRound) videoBenchRound {
	med := func(f func(videoBenchRound) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return pipebench.Median(v)
	}
	medDecode := func(f func(videoBenchRound) decodeRate) decodeRate {
		return decodeRate{Frames: f(rs[0]).Frames,
			Wall:      med(func(r videoBenchRound) float64 { return f(r).Wall }),
			FFmpegCPU: med(func(r videoBenchRound) float64 { return f(r).FFmpegCPU }),
			SelfCPU:   med(func(r videoBenchRound) float64 { return f(r).SelfCPU }),
			PerSec:    med(func(r videoBenchRound) float64 { return f(r).PerSec }),
			FFmpegMs:  med(func(r videoBenchRound) float64 { return f(r).FFmpegMs })}
	}
	return videoBenchRound{
		DecodeFPS:       medDecode(func(r videoBenchRound) decodeRate { return r.DecodeFPS }),
		DecodeFPSOrder:  medDecode(func(r videoBenchRound) decodeRate { return r.DecodeFPSOrder }),
		DecodeAll:       medDecode(func(r videoBenchRound) decodeRate { return r.DecodeAll }),
		EncoderPerSec:   med(func(r videoBenchRound) float64 { return r.EncoderPerSec }),
		EncoderCPUms:    med(func(r videoBenchRound) float64 { return r.EncoderCPUms }),
		JobPerSec:       med(func(r videoBenchRound) float64 { return r.JobPerSec }),
		JobCPUms:        med(func(r videoBenchRound) float64 { return r.JobCPUms }),
		JobFFmpegCPUms:  med(func(r videoBenchRound) float64 { return r.JobFFmpegCPUms }),
		FFmpegShare:     med(func(r videoBenchRound) float64 { return r.FFmpegShare }),
		JobOverEncoder:  med(func(r videoBenchRound) float64 { return r.JobOverEncoder }),
		JobFramesOK:     rs[0].JobFramesOK,
		JobFramesFailed: rs[0].JobFramesFailed,
	}
}

func reportVideoBench(e *env, o videoBenchOptions, res videoBenchResult) error {
	if o.json {
		enc := json.NewEncoder(e.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	m := res.Median
	gop := ""
	if res.GOP > 0 {
		gop = fmt.Sprintf(", a key frame every %d frames", res.GOP)
	}
	fmt.Fprintf(e.Stdout, "video %s: %dx%d, %.1f s%s; model %s, batch %d, %d cores; medians of %d repeats\n",
		res.Video, res.Width, res.Height, res.Duration, gop, res.Model, res.Batch, res.Cores, len(res.Rounds))
	for _, d := range []struct {
		name string
		r    decodeRate
	}{{fmt.Sprintf("--fps %g", res.FPS), m.DecodeFPS}, {"  in order", m.DecodeFPSOrder}, {"every frame", m.DecodeAll}} {
		fmt.Fprintf(e.Stdout, "decode %-12s %6d frames  %7.2f s  %8.1f frames/s  ffmpeg CPU %.2f s (%.1f ms/frame)  reading CPU %.2f s\n",
			d.name, d.r.Frames, d.r.Wall, d.r.PerSec, d.r.FFmpegCPU, d.r.FFmpegMs, d.r.SelfCPU)
	}
	fmt.Fprintf(e.Stdout, "encoder alone  %8.2f frames/s  CPU %.1f ms/frame\n", m.EncoderPerSec, m.EncoderCPUms)
	job := "job"
	if res.NoSeek {
		job = "job in order"
	}
	fmt.Fprintf(e.Stdout, "%-14s %8.2f frames/s  CPU %.1f ms/frame (ffmpeg %.1f)  ffmpeg's share of the job's CPU %.1f%%\n",
		job, m.JobPerSec, m.JobCPUms, m.JobFFmpegCPUms, 100*m.FFmpegShare)
	fmt.Fprintf(e.Stdout, "job ÷ encoder  %.3f  (%d frames done, %d failed)\n", m.JobOverEncoder, m.JobFramesOK, m.JobFramesFailed)
	return nil
}
