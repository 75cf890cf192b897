package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/pipeline/internal/encstream"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// Config is a batch job: images × prompts → features, attention both ways,
// heatmaps and a manifest.
//
// The vision encoder runs Streams batches at once, each on the engine's
// Threads ONNX Runtime intra-op threads (EncoderPlan picks both for a
// machine: separate batches on separate cores keep the cores busier than
// one batch split across them).
//
// Each stream does all the CPU work of its batch in turn on its own
// threads: decoding and preprocessing its images (on Threads goroutines),
// encoding them, then the attention and the writing. Only reading files
// runs ahead of it, on Workers goroutines. With every core running an
// encoder, work beside the encoder could only take a core from it; done in
// turn, it does not break into the encoder's computation, which then runs
// as fast as alone (bench pipeline measures both).
type Config struct {
	// Engine is the model the job runs (see Open); the job prepares its
	// prompts once. Its Threads is each stream's (see EncoderPlan); it
	// should be opened with NoSpinning.
	Engine  *pipeline.Engine
	Inputs  []string // folders (walked recursively), files and WebDataset .tar shards; brace patterns expand
	Lists   []string // list files: text (a path a line), CSV or Parquet with a path or url column
	Prompts []string
	Out     string

	PerHead  bool // also write per-head attention maps
	Heatmaps bool // write a PNG per image and prompt
	// Windows makes the maps cover the whole image, not the model's centre
	// crop (pipeline.AttendOptions.Windows): each image's windows are
	// encoded and its maps stitched on one patch grid over it (its
	// metadata's grid). The files layout only (images of other aspects
	// have other grids), without the index; image_embeds is the image's
	// over its windows (pipeline.Attention.ImageEmbeds), patch_features is
	// left out, and the centre crop is not encoded.
	Windows bool
	// CaptionPrompt adds each tar sample's own caption as one more prompt
	// for that image (numbered after the job's prompts, truncated to the
	// context); images without a caption get the job's prompts alone.
	CaptionPrompt bool
	Format        string // "safetensors" (default) or "npz", for the files layout
	// Layout is "files" (default: one file per image) or "shards": every
	// ShardSize images (default 10,000) one shard of stacked .npy arrays
	// and a Parquet metadata file (see shardout.go's package comment).
	Layout    string
	ShardSize int
	// Index also writes the collection index: every ShardSize images
	// (default 10,000, in either layout) one part of the images'
	// normalised image_embeds [N, D] and joint-space patches [N, P, D]
	// with an index.json (see index.go's package comment; for SigLIP 2
	// NaFlex, P is the patch budget and grids.npy [N, 2] each row's grid).
	// It needs the engine in CLIP's joint space both ways (the default
	// layer).
	Index bool
	// IndexDType is the index's values: "float16" (the default, ""),
	// "float32" or "int8" (with a float32 scale per vector).
	IndexDType string
	// Collection writes each image's vectors into a collection in
	// Weaviate instead of index parts (see collection.go); nil: none.
	Collection *CollectionConfig
	// Video is how video inputs (.mp4 .mkv .webm .mov .avi .m4v, decoded
	// by FFmpeg) are sampled into frames, each an item (see video.go).
	Video video.Options

	Workers   int   // goroutines reading and hashing files ahead of the encoder streams (default GOMAXPROCS, and at least 16 when inputs are in object stores or come from lists, which may name objects)
	ReadAhead int64 // bytes of files read ahead of the encoder streams, at most (default 256 MiB; one file larger passes alone)
	Batch     int   // images per vision encoder call (default 8)
	Streams   int   // vision encoder runs in flight at once (0: see EncoderPlan)
	Resume    bool  // skip images already done with the same inputs and settings
	// Overwrite clears what an earlier job in Out wrote (the files its
	// manifest lists) before starting. Without Resume or Overwrite a job
	// refuses an output folder holding an earlier job's manifest (or, for
	// an unsharded job, anything).
	Overwrite bool
	Shard     Shard // the part of the inputs this process takes

	Version  string // program version, written into metadata
	Log      *slog.Logger
	Progress func(Progress) // called from one goroutine after every image, may be nil
	// Started, when set, is called once the job is set up (prompts
	// prepared, outputs opened), before it reads the first image.
	Started func()
}

// Progress is a job's state, reported after every image.
type Progress struct {
	Done, Skipped, Failed int
	Seen                  int  // images found (in this shard) so far, counted ahead of the job
	Walked                bool // the count has finished, so Seen is the total
	Elapsed               time.Duration
	Last                  string // the image just finished
}

// Summary is what a finished (or interrupted) job did.
type Summary struct {
	Done, Skipped, Failed int
	Elapsed               time.Duration
	Manifest              string // path of the manifest written
	Interrupted           bool
}

// ImagesPerSec is the rate of images done (not skipped) per second.
func (s *Summary) ImagesPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Done) / s.Elapsed.Seconds()
}

// work is one image on its way through the stages.
type work struct {
	it      Item
	entry   Entry
	data    []byte                  // the file, read and not yet decoded
	held    int64                   // bytes of data counted in the job's read-ahead budget
	base    pipeline.HeatmapBase    // the heatmap base panel, when heatmaps are asked for
	img     image.Image             // the decoded image, kept for its windows (Config.Windows)
	sheet   image.Image             // the decoded image, kept for its heatmaps over the whole image (Config.Windows)
	seq     int                     // the image's place in this process's walk (its shard and row in the shards layout, its index part and row)
	redo    bool                    // --resume: its index part is not whole, so the image is done again whatever the manifest says
	kept    bool                    // --resume: its index part is whole from an earlier run and stays as it is
	obj     *index.CollectionObject // its object for the collection in Weaviate, written by the collector
	started time.Time
	timings map[string]float64
	fail    error
}

func (w *work) mark(stage string, since time.Time) {
	w.timings[stage] += float64(time.Since(since).Microseconds()) / 1000
}

// Run runs the job to the end, or until ctx is cancelled: then it stops
// taking new images, finishes the batches already being decoded or encoded
// (attending and writing their images), closes the manifest and returns
// the summary with ctx's error.
//
// A failure to write the manifest stops the job: it takes no new images and
// returns the error once the images under way are done.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	j, err := newJob(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer j.close()
	if cfg.Started != nil {
		cfg.Started()
	}
	return j.run(ctx)
}

// statusSkipped marks work that resume found done; it is never written.
const statusSkipped = "skipped"

// read reads and hashes w's file, and marks it skipped when --resume finds
// it done with the same contents and settings. The file's size (from stat)
// is taken from budget before it is read, so that the files held ahead of
// the streams stay within it; the bytes held are in w.held.
func (j *job) read(w *work, budget *byteBudget) {
	w.entry = Entry{Path: w.it.Rel, Source: w.it.Path, Settings: j.settings, Caption: w.it.Caption, Video: w.it.Video}
	if w.it.Frame != nil {
		w.entry.Time = &w.it.Time
	}
	if w.fail == nil {
		w.fail = w.it.Err
	}
	if j.index != nil && j.cfg.Resume {
		// The index part decides first: a whole one stays, the images of
		// another are all done again so that it is written whole.
		if j.index.whole(w.seq / j.index.size) {
			w.kept = true
		} else {
			w.redo = true
		}
	}
	if j.shards != nil && j.cfg.Resume && !w.redo && j.shardComplete(w.seq/j.shards.size) {
		w.entry.Status = statusSkipped
		return
	}
	if w.fail != nil {
		return
	}
	t := time.Now()
	if f := w.it.Frame; f != nil {
		// A video's frame, decoded by the walk: its pixels are hashed.
		w.held = int64(len(f.Pix))
		budget.take(w.held)
		j.hashed(w, f.Pix, t)
		return
	}
	if w.it.Member {
		// A tar member, read by the walk.
		data := w.it.Data
		w.it.Data = nil
		w.held = int64(len(data))
		budget.take(w.held)
		j.hashed(w, data, t)
		return
	}
	if w.it.Obj != nil {
		// An object in a store: its size (from the listing, when it gave
		// one) is taken from the budget before it is read.
		w.held = w.it.Size
		budget.take(w.held)
		data, err := j.stores.ReadAll(j.ctx, *w.it.Obj, maxObject)
		if err != nil {
			w.fail = fmt.Errorf("read: %w", err)
			return
		}
		if extra := int64(len(data)) - w.held; extra > 0 {
			budget.take(extra)
			w.held += extra
		}
		j.hashed(w, data, t)
		return
	}
	f, err := os.Open(w.it.Path)
	if err != nil {
		w.fail = fmt.Errorf("read: %w", err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		w.fail = fmt.Errorf("read: %w", err)
		return
	}
	w.held = st.Size()
	budget.take(w.held)
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		w.fail = fmt.Errorf("read %s: %w (did the file change while it was read?)", w.it.Path, err)
		return
	}
	j.hashed(w, data, t)
}

// hashed records data's hash, and keeps it for decoding unless --resume
// finds the image done with the same contents and settings.
func (j *job) hashed(w *work, data []byte, t time.Time) {
	sum := sha256.Sum256(data)
	w.entry.SHA256 = hex.EncodeToString(sum[:])
	w.mark("read", t)
	if j.cfg.Resume && !w.redo {
		if p, ok := j.prior[w.it.Rel]; ok && p.Status == StatusOK && p.SHA256 == w.entry.SHA256 && p.Settings == j.settings && j.outputsExist(p.Outputs) {
			w.entry.Status = statusSkipped
			return
		}
	}
	if len(data) == 0 {
		w.fail = fmt.Errorf("empty file")
		return
	}
	w.data = data
}

// decode decodes w's file and preprocesses it into dst, [3, inH, inW]. A
// decoder that panics fails this image only.
func (j *job) decode(w *work, dst []float32) {
	data := w.data
	w.data = nil
	t := time.Now()
	img, info, err := frameImage(w)
	if img == nil && err == nil {
		img, info, err = j.eng.DecodeImageInfo(data)
	}
	if err != nil {
		w.fail = err
		return
	}
	w.entry.Width, w.entry.Height = info.Width, info.Height // before any scaled decode
	w.mark("decode", t)
	t = time.Now()
	if j.cfg.Windows {
		w.img = img // its windows are cut when it is attended
	} else {
		defer vision.Release(img) // nothing keeps the decoded image
	}
	if j.cfg.Windows {
		w.mark("preprocess", t)
		return // its windows are cut and encoded when it is attended
	}
	if err := j.eng.Preprocess(dst, img); err != nil {
		w.fail = err
		return
	}
	if j.cfg.Heatmaps && !j.cfg.Windows {
		// Keep the 224² panel, not the decoded image, until the writing.
		w.base = j.eng.HeatmapBase(img)
	}
	w.mark("preprocess", t)
}

func (j *job) outputsExist(outs []string) bool {
	if len(outs) == 0 {
		return false
	}
	for _, o := range outs {
		if !j.out.Exists(o) {
			return false
		}
	}
	return true
}

// stream is one encoder stream (see encstream.Run): it gathers up to batch read
// images (not waiting for a full batch when reading is slower), decodes
// them into its input buffer, encodes them, then attends and writes each,
// and passes every image it took to out, failed or done. Several streams
// share in and out. Each keeps to its thread and adds the CPU time of its
// encoder calls to cpu when it is set. Once ctx is cancelled it takes no new images. It
// gives the bytes of the files it takes back to budget once they are
// decoded (or dropped).
func (j *job) stream(ctx context.Context, in <-chan *work, out chan<- *work, batch int, tail *tailShare, budget *byteBudget, cpu *cputime.Counter) {
	var file []byte // the encoding of the stream's last output file
	// One timer for every wait for a batch to fill.
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	defer wait.Stop()
	gather := func(pending []*work) ([]*work, bool) {
		for {
			w, ok := <-in
			if !ok {
				return nil, false
			}
			pending = append(pending[:0], w)
			tail.taken.Add(1)
			limit := tail.limit(batch)
			wait.Reset(2 * time.Millisecond)
		fill:
			for len(pending) < limit {
				select {
				case w, ok := <-in:
					if !ok {
						break fill
					}
					pending = append(pending, w)
					tail.taken.Add(1)
				case <-wait.C:
					break fill
				}
			}
			wait.Stop()
			if ctx.Err() == nil {
				return pending, true
			}
			for _, w := range pending {
				budget.give(w.held)
			}
			// Interrupted: take no new images.
		}
	}
	enc := encstream.Encoder[pipeline.ImageEncoding]{Encode: j.eng.EncodePixels, PerImage: j.eng.Preprocessor().BufferLen(j.eng.InputSize()), Threads: j.eng.Threads()}
	if j.cfg.Windows {
		// Each image's windows are encoded when it is attended
		// (Engine.AttendImages): the stream passes images on unencoded.
		enc.Encode = func(_ context.Context, _ []float32, n int) ([]pipeline.ImageEncoding, error) {
			return make([]pipeline.ImageEncoding, n), nil
		}
	}
	encstream.Run(enc, batch, encstream.Hooks[*work, pipeline.ImageEncoding]{
		Next: gather,
		Decode: func(w *work, dst []float32) error {
			j.decode(w, dst)
			return w.fail
		},
		Decoded: func(w *work, err error) {
			budget.give(w.held)
			if err != nil {
				out <- w
			}
		},
		Encoded: func(pending []*work, encs []pipeline.ImageEncoding, took time.Duration, err error) {
			encodeMs := float64(took.Microseconds()) / 1000
			captions := j.captionPrompts(pending)
			var wins [][]pipeline.Attention
			if j.cfg.Windows && err == nil {
				wins = j.attendWindows(pending, captions)
			}
			for i, w := range pending {
				w.timings["encode"] += encodeMs // the batch's, not counting the attention and writing of the images before
				if err != nil {
					w.fail = err
				} else {
					var win []pipeline.Attention
					if wins != nil {
						win = wins[i]
					}
					file = j.attendAndWrite(w, &encs[i], file, captions[i], win)
				}
				out <- w
			}
		},
		CPU: cpu,
	})
}

// attendWindows attends the windows of a batch's images together (their
// windows encoded in the engine's batches across the images), when they
// share the job's prompts; nil when an image has a caption prompt of its
// own or the batch fails as a whole (each image is then attended on its
// own, so that one bad image fails alone).
func (j *job) attendWindows(pending []*work, captions []*pipeline.Prompt) [][]pipeline.Attention {
	imgs := make([]image.Image, len(pending))
	for i, w := range pending {
		if captions[i] != nil || w.img == nil {
			return nil
		}
		imgs[i] = w.img
	}
	t := time.Now()
	atts, err := j.eng.AttendImages(context.Background(), imgs, j.prompts, pipeline.AttendOptions{PerHead: j.cfg.PerHead, Conditioned: true, Windows: true})
	if err != nil {
		return nil
	}
	ms := float64(time.Since(t).Microseconds()) / 1000 / float64(len(pending))
	for _, w := range pending {
		w.timings["attend"] += ms // each image's share of the batch's windows
	}
	return atts
}

// attendAndWrite attends one encoded image with the job's prompts and
// writes its results to the sinks, encoding its file into buf; it returns
// buf for the next image. With windows, win is the image's attentions when
// its batch attended them together (else nil: they are computed here).
func (j *job) attendAndWrite(w *work, enc *pipeline.ImageEncoding, buf []byte, caption *pipeline.Prompt, win []pipeline.Attention) []byte {
	t := time.Now()
	r, err := j.attend(w, enc, caption, win)
	if err != nil {
		w.fail = err
		return buf
	}
	w.mark("attend", t)
	t = time.Now()
	r.meta = j.metadata(w, r.grid)
	if caption != nil {
		r.meta["caption"] = caption.Text
		r.meta["caption_prompt"] = strconv.Itoa(len(j.prompts)) // the prompt.<k>. tensors of the caption
	}
	r.buf = buf
	for _, s := range j.sinks {
		if err := s.write(w, r); err != nil {
			w.fail = err
			return r.buf
		}
	}
	if len(r.scores) > 0 {
		w.entry.Scores = r.scores
	}
	w.mark("write", t)
	return r.buf
}

// attend attends one encoded image with the job's prompts, and its
// caption's: its results but their metadata.
func (j *job) attend(w *work, enc *pipeline.ImageEncoding, caption *pipeline.Prompt, win []pipeline.Attention) (*result, error) {
	r := &result{enc: enc, grid: enc.Grid, p: enc.P(), ts: map[string]tensorio.Tensor{}}
	if enc.Embeds != nil {
		r.ts["image_embeds"] = tensorio.F32([]int{len(enc.Embeds)}, enc.Embeds)
	}
	prompts := j.prompts
	if caption != nil {
		prompts = append(slices.Clip(prompts), caption)
	}
	opts := pipeline.AttendOptions{PerHead: j.cfg.PerHead, Conditioned: true}
	var atts []pipeline.Attention
	var err error
	if j.cfg.Windows {
		atts, err = j.attendWhole(w, r, prompts, opts, win)
	} else {
		r.ts["patch_features"] = tensorio.F32([]int{r.p, enc.Width}, enc.Patches())
		atts, err = j.eng.Attend(context.Background(), enc, prompts, opts)
	}
	if err != nil {
		return nil, err
	}
	j.addAttentions(r, atts)
	return r, nil
}

// attendWhole attends w's image over its windows (or takes win, its
// batch's attentions of it), setting r's grid and image_embeds to the
// whole image's. The image is kept for its heatmaps.
func (j *job) attendWhole(w *work, r *result, prompts pipeline.Prompts, opts pipeline.AttendOptions, win []pipeline.Attention) ([]pipeline.Attention, error) {
	opts.Windows = true
	img := w.img
	w.img = nil
	var atts []pipeline.Attention
	var got [][]pipeline.Attention
	var err error
	if win != nil {
		got = [][]pipeline.Attention{win}
	} else {
		got, err = j.eng.AttendImages(context.Background(), []image.Image{img}, prompts, opts)
	}
	if err == nil {
		atts = got[0]
		r.grid = atts[0].Grid
		r.p = r.grid.Patches()
		if e := atts[0].ImageEmbeds; e != nil {
			r.ts["image_embeds"] = tensorio.F32([]int{len(e)}, e)
		}
	}
	if j.cfg.Heatmaps {
		w.sheet = img // the maps cover the whole image
	} else {
		vision.Release(img)
	}
	return atts, err
}

// addAttentions adds an image's attentions with the prompts to r: their
// tensors, its scores and the heatmaps to draw.
func (j *job) addAttentions(r *result, atts []pipeline.Attention) {
	p, ts := r.p, r.ts
	var scores []Score
	var sheets []*pipeline.Attention
	sc := make([]float32, len(atts))
	for k := range atts {
		a := &atts[k]
		ps := a.Prompt
		pre := fmt.Sprintf("prompt.%d.", k)
		t := ps.T()
		ts[pre+"input_ids"] = tensorio.I64([]int{t}, ps.IDs)
		if a.ImageToText != nil {
			ts[pre+"conditioned_patches"] = tensorio.F32([]int{p, a.DOut}, a.ConditionedPatches)
			ts[pre+"image_to_text"] = tensorio.F32([]int{p, t}, a.ImageToText)
			if a.ImageToTextHeads != nil {
				ts[pre+"image_to_text_heads"] = tensorio.F32([]int{a.Heads, p, t}, a.ImageToTextHeads)
			}
		}
		if a.TextToImage != nil {
			ts[pre+"conditioned_tokens"] = tensorio.F32([]int{t, a.DOut}, a.ConditionedTokens)
			ts[pre+"text_to_image"] = tensorio.F32([]int{t, p}, a.TextToImage)
			if a.TextToImageHeads != nil {
				ts[pre+"text_to_image_heads"] = tensorio.F32([]int{a.Heads, t, p}, a.TextToImageHeads)
			}
		}
		if a.HasScore {
			s := Score{Prompt: k, Text: ps.Text, Score: a.Score}
			if j.eng.Scores() == pipeline.SigmoidScores {
				p := a.Prob
				s.Sigmoid = &p
			}
			scores = append(scores, s)
			sc[k] = float32(a.Score)
		}
		if j.cfg.Heatmaps {
			sheets = append(sheets, a)
		}
	}
	if len(scores) > 0 {
		ts["scores"] = tensorio.F32([]int{len(sc)}, sc)
	}
	r.scores, r.sheets = scores, sheets
}

func (j *job) metadata(w *work, g vision.Grid) map[string]string {
	m := make(map[string]string, len(j.baseMeta)+4)
	for k, v := range j.baseMeta {
		m[k] = v
	}
	m["source"] = w.it.Rel
	m["source_sha256"] = w.entry.SHA256
	m["grid"] = g.String()
	m["source_size"] = fmt.Sprintf("%dx%d", w.entry.Width, w.entry.Height)
	if w.it.Video != "" {
		m["video"], m["time"] = w.it.Video, video.Seconds(w.it.Time)
	}
	return m
}

// streams returns the number of encoder streams: Config.Streams, else the
// engine's default (see StreamOptions.Streams).
func (j *job) streams() int {
	if j.cfg.Streams > 0 {
		return j.cfg.Streams
	}
	return j.eng.Streams()
}

// captionPrompts prepares the captions of a batch's images as prompts, in
// one text encoder call (CaptionPrompt): one per image, nil for those
// without a caption. A caption that cannot be prepared is logged and left
// out.
func (j *job) captionPrompts(batch []*work) []*pipeline.Prompt {
	out := make([]*pipeline.Prompt, len(batch))
	if !j.cfg.CaptionPrompt {
		return out
	}
	var texts []string
	var at []int
	for i, w := range batch {
		if c := w.it.Caption; strings.TrimSpace(c) != "" && w.fail == nil {
			texts, at = append(texts, c), append(at, i)
		}
	}
	if len(texts) == 0 {
		return out
	}
	ps, err := j.eng.PrepareWith(context.Background(), pipeline.TextOptions{Truncate: true}, texts...)
	if err != nil {
		j.log.Warn("captions could not be prepared as prompts", "err", err)
		return out
	}
	for k, i := range at {
		out[i] = ps[k]
	}
	return out
}

// storeReaders is the number of reads in flight by default when inputs are
// in object stores.
const storeReaders = 16

// readsStores reports whether any input or list is in an object store (a
// list may name objects too, so lists count).
func (j *job) readsStores() bool {
	if len(j.cfg.Lists) > 0 {
		return true
	}
	for _, in := range j.sources {
		if _, ok := in.(storeSource); ok {
			return true
		}
	}
	return false
}

// shardComplete reports whether output shard i was finished by an earlier
// run with the same settings (read once per shard).
func (j *job) shardComplete(i int) bool {
	if v, ok := j.doneShards.Load(i); ok {
		return v.(bool)
	}
	done := j.shards.complete(i)
	j.doneShards.Store(i, done)
	return done
}

// nameCheck remembers output names where two images could share one.
type nameCheck struct {
	all   bool            // inputs whose own names collide, or lists: every name is kept
	names map[string]bool // names kept
	unit  string          // the tar shard whose member names are kept
}

func newNameCheck(inputs, lists []string) *nameCheck {
	c := &nameCheck{all: len(lists) > 0, names: map[string]bool{}}
	base := map[string]bool{}
	for _, in := range inputs {
		b := filepath.Base(filepath.Clean(in))
		if isTarName(b) {
			b = strings.TrimSuffix(b, filepath.Ext(b))
		}
		if base[b] {
			c.all = true
		}
		base[b] = true
	}
	return c
}

// seen reports whether it's output name came before, and remembers it.
func (c *nameCheck) seen(it Item) bool {
	if !c.all {
		if !it.Member {
			return false // one folder's files have distinct names
		}
		if it.Unit != c.unit {
			c.unit, c.names = it.Unit, map[string]bool{}
		}
	}
	dup := c.names[it.Rel]
	c.names[it.Rel] = true
	return dup
}

// tailShare shares the end of a job among its encoder streams, so that
// they finish together rather than one encoding the last full batch while
// the others have nothing left (a core idle for a whole batch's encoding).
// Once the walk has found every image, a stream's next batch is capped at
// its share of the images no stream has taken yet, the one it has just
// taken included: ceil(left / streams), but not under a floor of an eighth
// of the batch (at least 1), below which calls cost more per image.
type tailShare struct {
	walked  *atomic.Bool  // the walk is over: seen is the job's total
	seen    *atomic.Int64 // images walked
	taken   atomic.Int64  // images taken by a stream or gone to the manifest before one
	streams int
}

// limit is the size of the batch a stream that has just taken one image
// fills up to.
func (t *tailShare) limit(batch int) int {
	if !t.walked.Load() {
		return batch
	}
	left := int(t.seen.Load()-t.taken.Load()) + 1
	share := (left + t.streams - 1) / t.streams
	return min(batch, max(share, batch/8, 1))
}
