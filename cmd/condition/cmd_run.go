package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision/video"
)

type runOptions struct {
	eng         engineFlags
	images      []string
	lists       []string
	prompts     []string
	promptsFile string
	out         string
	heatmaps    bool
	windows     bool
	captions    bool
	perHead     bool
	format      string
	layout      string
	shardSize   int
	index       bool   // index parts under --out
	indexAt     string // --index's value: "files", or a collection's weaviate:// URL
	collection  string // the collection in Weaviate (--index weaviate://...)
	indexDType  string
	consistency string
	coll        collectionFlags // deprecated: collection create's
	workers     int
	streams     int
	batch       int
	resume      bool
	overwrite   bool
	shardIndex  int
	shardCount  int
	maxFailures int
	fps         float64       // videos: frames sampled per second
	frames      string        // videos: fps, all or keyframes
	spoolLimit  string        // videos: --video-spool-limit, a size
	video       video.Options // --fps, --frames and --video-spool-limit, parsed
	noArena     bool
	pinThreads  bool
	quiet       bool
	logFormat   string
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.images, "images", nil, "image folder (walked recursively), file, WebDataset .tar shard, or object-store URL (s3://bucket/prefix/, gs://, azblob://: a prefix's images, or one object); brace patterns such as 'shards/{000000..000099}.tar' expand; repeatable; positional arguments are added")
	fs.StringArrayVar(&o.lists, "list", nil, "a list of images: a text file with one path or s3://, gs://, azblob:// URL a line, or a CSV or Parquet file with a path (or url) column; relative paths are relative to the list; repeatable")
	fs.StringArrayVarP(&o.prompts, "prompt", "p", nil, "prompt text; repeatable")
	fs.StringVar(&o.promptsFile, "prompts", "", "file with one prompt per line (blank lines and lines starting with # are skipped)")
	fs.StringVarP(&o.out, "out", "o", "", "output folder, or object-store prefix (s3://bucket/prefix/, gs://, azblob://; needs --layout shards) (required)")
	fs.BoolVar(&o.heatmaps, "heatmaps", false, "write a PNG per image and prompt: the image and one overlay per word")
	fs.BoolVar(&o.windows, "windows", false, windowsUsage+"; the files layout, without --index")
	fs.BoolVar(&o.perHead, "per-head", false, "also write the attention maps of every head")
	fs.BoolVar(&o.captions, "caption-prompt", false, "add each tar sample's own caption (its .txt or .json member) as one more prompt for that image")
	fs.StringVar(&o.format, "format", "safetensors", "output format of the files layout: safetensors or npz")
	fs.StringVar(&o.layout, "layout", "files", "files (one file per image) or shards (every --shard-size images one shard of stacked .npy arrays, img_emb/ and metadata/ Parquet as clip-retrieval names them)")
	fs.IntVar(&o.shardSize, "shard-size", 10000, "images per output shard with --layout shards, and per index part with --index")
	fs.StringVar(&o.indexAt, "index", "", "also write the collection index, for searching the collection later without encoding it again (needs the default --xattn joint and --direction both): --index alone, every --shard-size images one part under index/ of the normalised image embeddings and the patches in CLIP's joint space; --index weaviate://HOST:PORT/Name, one object per image in that collection of a Weaviate database (made with Weaviate's defaults when it does not exist: condition collection create makes one with other settings; API key from $"+weaviateKeyEnv+")")
	fs.Lookup("index").NoOptDefVal = "files"
	fs.StringVar(&o.consistency, "consistency", "QUORUM", "with --index weaviate://...: the writes' consistency level, ONE, QUORUM or ALL")
	o.coll.AddFlags(fs)
	for _, f := range collectionFlagNames {
		// A collection's settings are fixed when it is made: they are
		// collection create's, kept here so that scripts keep running.
		fs.MarkDeprecated(f, "a collection's settings are fixed when it is made: give it to `condition collection create weaviate://HOST:PORT/Name`, then run --index writes into that collection")
	}
	fs.StringVar(&o.indexDType, "index-dtype", "float16", "the index's values with --index: float16, float32 or int8 (with a float32 scale per vector)")
	fs.IntVar(&o.workers, "workers", 0, "goroutines reading and hashing files ahead of the encoder (0: one per core; decoding and preprocessing run on the encoder streams' threads)")
	fs.IntVar(&o.streams, "streams", 0, "vision encoder batches run at once (0: with --threads 0, min(cores, 4) batches of cores/streams ONNX Runtime threads; with --threads N, one)")
	fs.IntVar(&o.batch, "batch", 8, "images per vision encoder call")
	fs.BoolVar(&o.resume, "resume", false, "skip images already done with the same inputs and settings; keep the manifest")
	fs.BoolVar(&o.overwrite, "overwrite", false, "first remove what an earlier job in --out wrote (only the files its manifest lists)")
	fs.IntVar(&o.shardIndex, "shard-index", -1, "this process's shard (default: JOB_COMPLETION_INDEX or AWS_BATCH_JOB_ARRAY_INDEX)")
	fs.IntVar(&o.shardCount, "shard-count", 0, "number of shards the job is split into")
	fs.IntVar(&o.maxFailures, "max-failures", 0, "exit 1 when more images than this fail (the job still runs to the end)")
	fs.BoolVar(&o.noArena, "no-arena", false, "turn ONNX Runtime's CPU memory arena off (condition-bench pipeline --tune measures whether it helps)")
	fs.BoolVar(&o.pinThreads, "pin-threads", false, "pin ONNX Runtime's pool threads to one processor each (with --threads 2 or more; bench pipeline --tune measures whether it helps)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "no progress display (the final summary and errors still print)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.Float64Var(&o.fps, "fps", video.DefaultFPS, "videos (.mp4 .mkv .webm .mov .avi .m4v, decoded by FFmpeg): frames per second kept, the first frame at or after each k/FPS seconds")
	fs.StringVar(&o.frames, "frames", "fps", "videos: which frames are items: fps (see --fps), all, keyframes, or scene[:THRESHOLD] (where the picture changes: ffmpeg's scene score over THRESHOLD, default 0.3, and the first frame)")
	fs.StringVar(&o.spoolLimit, "video-spool-limit", "2GiB", "videos: the largest video member of a tar shard or object of a store written to a temporary file ($TMPDIR) to be decoded: an MP4 or MOV whose header (moov) follows its data, or one whose caption member follows it with --caption-prompt; bytes, or with a unit (500MB, 2GiB); 0 refuses MP4s that must be spooled (write them with ffmpeg -movflags +faststart)")
	o.eng.AddFlags(fs, withImages|withPrompts|withLayer|withPrecision|withReadout|withStreams)
}

func runRun(ctx context.Context, e *env, args []string) error {
	var o runOptions
	fs := newFlagSet(e, "run", "run --images PATH... (--prompt TEXT... | --prompts FILE) --out DIR [flags] [PATH...]")
	o.AddFlags(fs)
	if err := parseFlags(fs, joinIndexURL(args)); err != nil {
		return err
	}
	args = fs.Args()
	switch {
	case o.indexAt == "files":
		o.index = true
	case index.IsCollectionURL(o.indexAt):
		o.collection = o.indexAt
	case o.indexAt != "":
		return usagef("--index %q: want --index alone (index parts under --out) or --index weaviate://HOST:PORT/Name", o.indexAt)
	}
	for _, a := range args {
		if index.IsCollectionURL(a) {
			return usagef("%s is not an image input: a collection in Weaviate is given with --index", a)
		}
	}
	o.images = append(o.images, args...)
	if len(o.images) == 0 && len(o.lists) == 0 {
		return usagef("no images: give --images PATH, --list FILE or paths as arguments")
	}
	if err := checkInputNames(o.images); err != nil {
		return err
	}
	if o.out == "" {
		return usagef("--out DIR is required")
	}
	if o.promptsFile != "" {
		ps, err := readPromptsFile(o.promptsFile)
		if err != nil {
			return err
		}
		o.prompts = append(o.prompts, ps...)
	}
	if len(o.prompts) == 0 {
		return usagef("no prompts: give --prompt TEXT or --prompts FILE")
	}
	if err := o.checkOutputs(fs); err != nil {
		return err
	}
	if err := o.checkCollection(fs); err != nil {
		return err
	}
	if o.resume && o.overwrite {
		return usagef("--resume and --overwrite exclude each other")
	}
	for i, p := range o.prompts {
		if strings.TrimSpace(p) == "" {
			return usagef("prompt %d is empty (prompts are numbered from 0)", i)
		}
	}
	if !fs.Changed("threads") {
		// A Slurm task's CPUs, when --threads is not given.
		if n, err := strconv.Atoi(os.Getenv("SLURM_CPUS_PER_TASK")); err == nil && n > 0 {
			o.eng.threads = n
		}
	}
	base := pipeline.Options{Streams: autoStreams(o.streams), NoSpinning: true, NoArena: o.noArena, PinThreads: o.pinThreads}
	if _, err := o.eng.options(base); err != nil {
		return err
	}
	shard, err := batch.ResolveShard(o.shardIndex, o.shardCount, os.Getenv)
	if err != nil {
		return usageError{err}
	}
	level := logLevel()
	if o.quiet {
		level = max(level, slog.LevelWarn) // --quiet: warnings and errors only
	}
	switch o.logFormat {
	case "text":
		e.Log = slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: level}))
	case "json":
		e.Log = slog.New(slog.NewJSONHandler(e.Stderr, &slog.HandlerOptions{Level: level}))
	default:
		return usagef("--log-format %q: want text or json", o.logFormat)
	}
	eng, err := o.eng.open(ctx, e, base)
	if err != nil {
		return err
	}
	m := eng.Model()
	defer eng.Close()
	if (o.index || o.collection != "") && eng.JointDim() == 0 {
		return usagef("--index needs the engine in CLIP's joint space both ways: the default --xattn joint and --direction both")
	}
	prog := newProgressDisplay(e.Stderr, o.quiet)
	cfg := batch.Config{
		Engine: eng, Inputs: o.images, Lists: o.lists, Prompts: o.prompts, Out: o.out,
		PerHead: o.perHead, Heatmaps: o.heatmaps, Windows: o.windows, CaptionPrompt: o.captions, Format: o.format, Layout: o.layout, ShardSize: o.shardSize,
		Index: o.index, IndexDType: o.indexDType,
		Collection: o.collectionConfig(), Video: o.video,
		Workers: o.workers, Batch: o.batch, Resume: o.resume, Overwrite: o.overwrite, Shard: shard,
		Version: Version, Log: e.Log,
		Progress: prog.update,
	}
	e.Log.Info("job", "model", m.Name(), "images", strings.Join(o.images, ","), "prompts", len(o.prompts), "out", o.out, "shard", fmt.Sprintf("%d/%d", shard.Index, max(shard.Count, 1)),
		"threads", eng.Threads(), "streams", eng.Streams())
	sum, err := batch.Run(ctx, cfg)
	prog.finish()
	if err != nil {
		if err := jobUsageError(err); err != nil {
			return err
		}
	}
	if sum != nil {
		o.printSummary(e, sum)
	}
	if err != nil {
		return err
	}
	if sum.Failed > o.maxFailures {
		return exitError{code: exitFailed, msg: fmt.Sprintf("%d images failed (--max-failures %d); see %s", sum.Failed, o.maxFailures, sum.Manifest)}
	}
	return nil
}

// jobUsageError returns the usage error (exit 2) a job's setup error is, or
// nil when it is not one: inputs that do not exist or hold no image, an
// output folder holding an earlier job's results, a prompt the model cannot
// take.
func jobUsageError(err error) error {
	var ie *batch.InputError
	var oe *batch.OutputExistsError
	var pe *pipeline.PromptError
	switch {
	case errors.As(err, &oe):
		if oe.Manifest != "" {
			return usagef("--out %s holds an earlier job's results (%s): add --resume to finish that job, or --overwrite to remove what it wrote first", oe.Dir, oe.Manifest)
		}
		return usagef("--out %s is not empty: give an empty or new folder, or add --overwrite to write into it anyway", oe.Dir)
	case errors.As(err, &ie):
		return usageError{err}
	case errors.As(err, &pe):
		if errors.Is(err, text.ErrTooLong) {
			return usagef("%v (add --truncate to cut it)", err)
		}
		return usageError{err}
	}
	return nil
}

func readPromptsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--prompts: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		line := sc.Text()
		if first {
			line = strings.TrimPrefix(line, "\ufeff") // a UTF-8 byte-order mark
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--prompts %q: %w", path, err)
	}
	return out, nil
}

// progressDisplay shows a job's progress: images done of the total (counted
// ahead of the job; "counting…" until known), the rate, the time left and
// the failures.
type progressDisplay struct {
	line *statusLine
}

func newProgressDisplay(w io.Writer, quiet bool) *progressDisplay {
	return &progressDisplay{line: newStatusLine(w, quiet)}
}

func (p *progressDisplay) update(s batch.Progress) {
	p.line.show(progressText(s, p.line.terminal), false)
}

// progressText is the line of a job's state.
func progressText(s batch.Progress, withBar bool) string {
	n := s.Done + s.Skipped + s.Failed
	rate := float64(s.Done+s.Failed) / max(s.Elapsed.Seconds(), 1e-9)
	total, eta := "counting…", "?"
	if s.Walked {
		total = fmt.Sprint(s.Seen)
		if rate > 0 {
			eta = (time.Duration(float64(s.Seen-n)/rate) * time.Second).Round(time.Second).String()
		}
	} else if s.Seen > 0 {
		total = fmt.Sprintf("%d+ (counting…)", s.Seen)
	}
	line := fmt.Sprintf("%d/%s images, %.1f/s, ETA %s, %d failed, %d skipped", n, total, rate, eta, s.Failed, s.Skipped)
	if withBar && s.Walked {
		line = bar(n, s.Seen, 30) + line
	}
	return line
}

func (p *progressDisplay) finish() { p.line.done() }

// outPath joins names below out, a folder or an object-store prefix.
func outPath(out string, names ...string) string {
	if batch.IsStoreURL(out) {
		return strings.TrimSuffix(out, "/") + "/" + strings.Join(names, "/")
	}
	return filepath.Join(append([]string{out}, names...)...)
}

// weaviateKeyEnv is the environment variable that holds Weaviate's API key.
const weaviateKeyEnv = "WEAVIATE_API_KEY"

// checkVideo parses --frames, --fps and --video-spool-limit into o.video.
func (o *runOptions) checkVideo() (err error) {
	if o.video, err = videoSampling(o.frames, o.fps, o.eng.maxPixels); err != nil {
		return err
	}
	n, err := parseSize(o.spoolLimit)
	if err != nil {
		return usagef("--video-spool-limit %q: %v", o.spoolLimit, err)
	}
	o.video.MaxSpool = n
	if n == 0 {
		o.video.MaxSpool = -1 // video.Options: negative, never spooled
	}
	return nil
}

// videoSampling parses --frames and --fps (run's and attend's).
func videoSampling(frames string, fps float64, maxPixels int64) (video.Options, error) {
	s, scene, err := video.ParseFrames(frames)
	if err != nil {
		return video.Options{}, usagef("--frames %q: want fps, all, keyframes, or scene[:THRESHOLD] with a threshold between 0 and 1 (scene:0.3)", frames)
	}
	if !(fps > 0) || fps > 1e6 {
		return video.Options{}, usagef("--fps %v: want a positive number of frames per second", fps)
	}
	return video.Options{Sampling: s, FPS: fps, Scene: scene, MaxPixels: maxPixels}, nil
}

// collectionConfig returns the job's collection in Weaviate, nil without
// one.
func (o *runOptions) collectionConfig() *batch.CollectionConfig {
	if o.collection == "" {
		return nil
	}
	co := o.coll.options(os.Getenv(weaviateKeyEnv), o.consistency)
	return &batch.CollectionConfig{URL: o.collection, APIKey: co.APIKey, Replication: co.Replication,
		Consistency: co.Consistency, Muvera: co.Muvera, VectorIndex: co.VectorIndex, EFConstruction: co.EFConstruction, MaxConnections: co.MaxConnections,
		Quantization: co.Quantization, RescoreLimit: co.RescoreLimit}
}

// joinIndexURL returns args with "--index weaviate://..." joined into
// "--index=weaviate://...": pflag gives a flag whose value is optional
// (--index alone is the file index) only what follows "=".
func joinIndexURL(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			return append(out, args[i:]...)
		}
		if args[i] == "--index" && i+1 < len(args) && index.IsCollectionURL(args[i+1]) {
			out = append(out, "--index="+args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// checkOutputs checks the flags of what the job writes and how it runs:
// the format, layout, shard size, index dtype, workers, streams and batch.
func (o *runOptions) checkOutputs(fs *pflag.FlagSet) error {
	if o.format != "safetensors" && o.format != "npz" {
		return usagef("--format %q: want safetensors or npz", o.format)
	}
	for flag, v := range map[string]int{"--workers": o.workers, "--streams": o.streams, "--max-failures": o.maxFailures} {
		if v < 0 {
			return usagef("%s must be 0 or more, got %d", flag, v)
		}
	}
	if o.batch < 1 {
		return usagef("--batch must be at least 1, got %d", o.batch)
	}
	if o.layout != "files" && o.layout != "shards" {
		return usagef("--layout %q: want files or shards", o.layout)
	}
	if o.shardSize < 1 {
		return usagef("--shard-size must be at least 1, got %d", o.shardSize)
	}
	if batch.IsStoreURL(o.out) && o.layout != "shards" {
		return usagef("--out %s: an object-store output needs --layout shards (one object per image is what that layout avoids)", o.out)
	}
	if err := checkWritableDir("--out", o.out); err != nil {
		return err
	}
	if o.windows && (o.layout == "shards" || o.index || o.collection != "") {
		return usagef("--windows gives each image a grid of its own aspect: it takes --layout files, without --index")
	}
	if o.layout == "shards" && o.captions {
		return usagef("--caption-prompt needs --layout files (a shard stacks the same prompts for every image)")
	}
	switch o.indexDType {
	case "float16", "float32", "int8":
	default:
		return usagef("--index-dtype %q: want float16, float32 or int8", o.indexDType)
	}
	if fs.Changed("index-dtype") && !o.index {
		return usagef("--index-dtype needs --index (index parts; a collection in Weaviate stores float32)")
	}
	return o.checkVideo()
}

// checkCollection checks the flags of a collection in Weaviate
// (--index weaviate://...): each needs one; their values are checked by
// the library, and a value it refuses is a usage error naming its flag.
func (o *runOptions) checkCollection(fs *pflag.FlagSet) error {
	for _, f := range append([]string{"consistency"}, collectionFlagNames...) {
		if fs.Changed(f) && o.collection == "" {
			return usagef("--%s needs --index weaviate://HOST:PORT/Name", f)
		}
	}
	if o.collection == "" {
		return nil
	}
	if err := index.CheckCollectionURL(o.collection); err != nil {
		return usagef("--index: %v", err)
	}
	co := o.coll.options("", o.consistency)
	return settingUsage(co.Check())
}

// printSummary prints the job's summary line to stderr (JSON with
// --log-format json) and, when images were done, where their results are.
func (o *runOptions) printSummary(e *env, sum *batch.Summary) {
	if o.logFormat == "json" {
		b, _ := json.Marshal(map[string]any{"summary": map[string]any{"done": sum.Done, "skipped": sum.Skipped, "failed": sum.Failed,
			"elapsed_s": sum.Elapsed.Seconds(), "images_per_s": sum.ImagesPerSec(), "manifest": sum.Manifest, "interrupted": sum.Interrupted,
			"outputs": filepath.Join(o.out, "<image>."+o.format)}})
		fmt.Fprintln(e.Stderr, string(b))
	} else {
		fmt.Fprintf(e.Stderr, "done %d, skipped %d, failed %d in %s (%.1f images/s); manifest %s\n",
			sum.Done, sum.Skipped, sum.Failed, sum.Elapsed.Round(time.Millisecond), sum.ImagesPerSec(), shown(sum.Manifest))
		if sum.Done > 0 {
			if o.layout == "shards" {
				fmt.Fprintf(e.Stderr, "results: %s (stacked arrays), %s, %s\n", shown(outPath(o.out, "shards", "<shard>", "<tensor>.npy")),
					shown(outPath(o.out, "img_emb", "img_emb_<shard>.npy")), shown(outPath(o.out, "metadata", "metadata_<shard>.parquet")))
			} else {
				fmt.Fprintf(e.Stderr, "results: %s (features and attention maps)\n", shown(filepath.Join(o.out, "<image>."+o.format)))
			}
			if o.index {
				fmt.Fprintf(e.Stderr, "index: %s (%s)\n", shown(outPath(o.out, "index", "<part>", "index.json")), o.indexDType)
			}
			if o.collection != "" {
				fmt.Fprintf(e.Stderr, "index: %s (one object per image; condition merge %s checks that it holds every ok image)\n", o.collection, shown(o.out))
			}
			if o.heatmaps {
				for k, p := range o.prompts {
					fmt.Fprintf(e.Stderr, "heatmaps: %s for prompt %d, %s\n", shown(filepath.Join(o.out, fmt.Sprintf("<image>.heatmap.%d.png", k))), k, quotePrompt(p))
				}
			}
		}
	}
}
