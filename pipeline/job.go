package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// Direction picks which attention a job computes.
type Direction int

// Directions. Both is the default.
const (
	ImageToText Direction = 1 << iota // patches query the prompt's tokens (diffusion style)
	TextToImage                       // tokens query the image's patches (VLM style)
	Both        = ImageToText | TextToImage
)

// ParseDirection parses image-to-text, text-to-image or both.
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "image-to-text":
		return ImageToText, nil
	case "text-to-image":
		return TextToImage, nil
	case "both", "":
		return Both, nil
	}
	return 0, fmt.Errorf("pipeline: direction %q: want image-to-text, text-to-image or both", s)
}

func (d Direction) String() string {
	switch d {
	case ImageToText:
		return "image-to-text"
	case TextToImage:
		return "text-to-image"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Config is a batch job: images × prompts → features, attention both ways,
// heatmaps and a manifest.
//
// The vision encoder runs Streams batches at once, each on Threads ONNX
// Runtime intra-op threads. Left at zero, a job of C cores (GOMAXPROCS) runs
// min(C, 4) streams of C/min(C, 4) threads: separate batches on separate
// cores keep the cores busier than one batch split across them. Threads
// alone means one stream of that many threads; Streams alone shares the
// cores among the streams.
//
// Each stream does all the CPU work of its batch in turn on its own
// threads: decoding and preprocessing its images (on Threads goroutines),
// encoding them, then the attention and the writing. Only reading files
// runs ahead of it, on Workers goroutines. With every core running an
// encoder, work beside the encoder could only take a core from it; done in
// turn, it does not break into the encoder's computation, which then runs
// as fast as alone (bench pipeline measures both).
type Config struct {
	Model   *models.Model
	Inputs  []string // folders (walked recursively) and files
	Prompts []string
	Out     string

	Direction   Direction
	XAttn       string // "joint" (default), "identity", or a .safetensors file of learned weights
	XAttnPrefix string // tensor name prefix in that file (diffusers names follow it)
	Heads       int    // heads of a learned or identity layer (default 8 learned, 1 identity)
	PerHead     bool   // also write per-head attention maps
	Heatmaps    bool   // write a PNG per image and prompt
	Format      string // "safetensors" (default) or "npz"

	Workers   int   // goroutines reading and hashing files ahead of the encoder streams (default GOMAXPROCS)
	ReadAhead int64 // bytes of files read ahead of the encoder streams, at most (default 256 MiB; one file larger passes alone)
	Batch     int   // images per vision encoder call (default 8)
	Threads   int   // ONNX Runtime intra-op and attention threads per encoder stream (0: see above)
	Streams   int   // vision encoder runs in flight at once (0: see above)
	Resume    bool  // skip images already done with the same inputs and settings
	Shard     Shard // the part of the inputs this process takes
	MaxPixels int64 // refuse larger images (0: vision.DefaultMaxPixels)

	Version  string // program version, written into metadata
	Log      *slog.Logger
	Progress func(Progress) // called from one goroutine after every image, may be nil
}

// Progress is a job's state, reported after every image.
type Progress struct {
	Done, Skipped, Failed int
	Seen                  int  // images found (in this shard) so far
	Walked                bool // the walk has finished, so Seen is the total
	Elapsed               time.Duration
	Last                  string // the image just finished
}

// Summary is what a finished (or interrupted) job did.
type Summary struct {
	Done, Skipped, Failed int
	Elapsed               time.Duration
	Manifest              string // path of the manifest written
	Interrupted           bool
	// EncoderCPU is the CPU time of the vision encoder's calls, read on
	// the threads that made them: all of the encoder's work when each
	// stream runs one thread (see Rate); 0 where it cannot be read.
	EncoderCPU time.Duration
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
	data    []byte      // the file, read and not yet decoded
	held    int64       // bytes of data counted in the job's read-ahead budget
	base    *image.RGBA // the heatmap base panel (HeatmapBase), when heatmaps are asked for
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
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	j, err := newJob(cfg)
	if err != nil {
		return nil, err
	}
	defer j.close()
	return j.run(ctx)
}

func (j *job) run(ctx context.Context) (*Summary, error) {
	cfg := j.cfg
	start := time.Now()
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	batch := cfg.Batch
	if batch <= 0 {
		batch = 8
	}
	items := make(chan *work, 2*workers)
	// Read ahead: enough files for every stream's next batch, within
	// readAheadBytes (the queue and the files being read together).
	ready := make(chan *work, (cfg.Streams+1)*batch)
	readAhead := cfg.ReadAhead
	if readAhead <= 0 {
		readAhead = readAheadBytes
	}
	budget := newByteBudget(readAhead)
	done := make(chan *work, 2*batch)

	var seen atomic.Int64
	var walked atomic.Bool
	var walkErr error
	// Stage 1: walk, in a stable order, keeping this shard's files.
	go func() {
		defer close(items)
		defer walked.Store(true)
		rels := map[string]bool{}
		walkErr = Walk(ctx, cfg.Inputs, func(it Item) error {
			if !cfg.Shard.Takes(it.Rel) {
				return nil
			}
			seen.Add(1)
			w := &work{it: it, started: time.Now(), timings: map[string]float64{}}
			if rels[it.Rel] {
				w.fail = fmt.Errorf("two inputs map to the output name %q; pass them as separate jobs or rename one", it.Rel)
			}
			rels[it.Rel] = true
			select {
			case items <- w:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, func(path string, err error) error {
			j.log.Warn("skipping unreadable folder", "path", path, "err", err)
			return nil
		})
	}()

	// Stage 2: read and hash, ahead of the streams (a slow disk waits here,
	// not in an encoder stream); images done before (--resume) and files
	// that cannot be read go straight to the manifest.
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range items {
				if ctx.Err() != nil {
					continue // interrupted: take no new images
				}
				if j.read(w); w.fail != nil || w.entry.Status == statusSkipped {
					done <- w
					continue
				}
				w.held = int64(len(w.data))
				budget.take(w.held)
				ready <- w
			}
		}()
	}
	go func() { wg.Wait(); close(ready) }()

	// Stage 3: the encoder streams, each decoding, encoding, attending and
	// writing its batches in turn (see Config).
	var encCPU encoderCPU
	var wg3 sync.WaitGroup
	for range max(cfg.Streams, 1) {
		wg3.Add(1)
		go func() {
			defer wg3.Done()
			j.stream(ctx, ready, done, batch, budget, &encCPU)
		}()
	}
	go func() { wg3.Wait(); close(done) }()

	// Collect: manifest entries and progress, in one goroutine.
	sum := &Summary{Manifest: j.manifestPath}
	var manErr error
	for w := range done {
		switch {
		case w.entry.Status == statusSkipped:
			sum.Skipped++
		default:
			if w.fail != nil {
				w.entry.Status = StatusError
				w.entry.Error = w.fail.Error()
				w.entry.Outputs = nil
				sum.Failed++
				j.log.Warn("image failed", "path", w.it.Path, "err", w.fail)
			} else {
				w.entry.Status = StatusOK
				sum.Done++
			}
			w.mark("total", w.started)
			w.entry.Timings = w.timings
			if err := j.man.Add(w.entry); err != nil && manErr == nil {
				manErr = err
			}
		}
		if cfg.Progress != nil {
			cfg.Progress(Progress{Done: sum.Done, Skipped: sum.Skipped, Failed: sum.Failed,
				Seen: int(seen.Load()), Walked: walked.Load(), Elapsed: time.Since(start), Last: w.it.Rel})
		}
	}
	sum.Elapsed = time.Since(start)
	if budget.used != 0 && manErr == nil { // every stream has returned
		manErr = fmt.Errorf("pipeline: %d bytes of files read ahead were never given back", budget.used)
	}
	sum.EncoderCPU = encCPU.total()
	if err := j.man.Close(); err != nil && manErr == nil {
		manErr = err
	}
	if manErr != nil {
		return sum, manErr
	}
	if err := ctx.Err(); err != nil {
		sum.Interrupted = true
		return sum, err
	}
	if walkErr != nil {
		return sum, walkErr
	}
	return sum, nil
}

// statusSkipped marks work that resume found done; it is never written.
const statusSkipped = "skipped"

// read reads and hashes w's file, and marks it skipped when --resume finds
// it done with the same contents and settings.
func (j *job) read(w *work) {
	w.entry = Entry{Path: w.it.Rel, Source: w.it.Path, Settings: j.settings}
	if w.fail != nil {
		return
	}
	t := time.Now()
	data, err := os.ReadFile(w.it.Path)
	if err != nil {
		w.fail = fmt.Errorf("read: %w", err)
		return
	}
	sum := sha256.Sum256(data)
	w.entry.SHA256 = hex.EncodeToString(sum[:])
	w.mark("read", t)
	if j.cfg.Resume {
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

// decode decodes w's file and preprocesses it into dst, [3, inH, inW].
func (j *job) decode(w *work, dst []float32) {
	data := w.data
	w.data = nil
	t := time.Now()
	img, err := vision.Decode(data, vision.DecodeOptions{MaxPixels: j.cfg.MaxPixels})
	if err != nil {
		w.fail = err
		return
	}
	b := img.Bounds()
	w.entry.Width, w.entry.Height = b.Dx(), b.Dy()
	w.mark("decode", t)
	t = time.Now()
	if h, wd := j.pre.OutputSize(b.Dx(), b.Dy()); h != j.inH || wd != j.inW {
		w.fail = fmt.Errorf("preprocessing gives %d×%d pixels, the vision model takes %d×%d", h, wd, j.inH, j.inW)
		return
	}
	if _, _, err := j.pre.ApplyInto(dst, img); err != nil {
		w.fail = err
		return
	}
	if j.cfg.Heatmaps {
		// Keep the 224² panel, not the decoded image, until the writing.
		w.base = HeatmapBase(img, j.cropRegion(img.Bounds()))
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

// stream is one encoder stream: it gathers up to batch read images (not
// waiting for a full batch when reading is slower), decodes them into its
// input buffer, encodes them, then attends and writes each, and passes
// every image it took to out, failed or done. Several streams share in and
// out. Each keeps to its thread and adds the CPU time of its encoder calls
// to cpu. Once ctx is cancelled it takes no new images. It gives the bytes
// of the files it takes back to budget once they are decoded (or dropped).
func (j *job) stream(ctx context.Context, in <-chan *work, out chan<- *work, batch int, budget *byteBudget, cpu *encoderCPU) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ws := j.newWorkspaces()
	defer ws.close()
	per := 3 * j.inH * j.inW
	buf := make([]float32, batch*per)
	pending := make([]*work, 0, batch)
	for {
		w, ok := <-in
		if !ok {
			return
		}
		pending = append(pending[:0], w)
	gather:
		for len(pending) < batch {
			select {
			case w, ok := <-in:
				if !ok {
					break gather
				}
				pending = append(pending, w)
			case <-time.After(2 * time.Millisecond):
				break gather
			}
		}
		if ctx.Err() != nil {
			for _, w := range pending {
				budget.give(w.held)
			}
			continue // interrupted: take no new images
		}
		pending = j.decodeBatch(pending, buf, per, budget, out)
		if len(pending) == 0 {
			continue
		}
		t := time.Now()
		var encs []vision.Encoding
		err := cpu.encode(func() (err error) {
			encs, err = j.venc.Encode(context.Background(), buf[:len(pending)*per], len(pending), j.inH, j.inW)
			return err
		})
		encodeMs := float64(time.Since(t).Microseconds()) / 1000
		for i, w := range pending {
			w.timings["encode"] += encodeMs // the batch's, not counting the attention and writing of the images before
			if err != nil {
				w.fail = err
			} else {
				j.attendAndWrite(w, &encs[i], ws)
			}
			out <- w
		}
	}
}

// decodeBatch decodes and preprocesses the images of ws into buf, image i
// at [i·per, (i+1)·per), on up to Config.Threads goroutines, and gives
// their files' bytes back to budget. The ones that fail go to out; it
// returns the others, their pixels moved up to close the gaps.
func (j *job) decodeBatch(ws []*work, buf []float32, per int, budget *byteBudget, out chan<- *work) []*work {
	par := min(max(j.cfg.Threads, 1), len(ws))
	if par == 1 {
		for i, w := range ws {
			j.decode(w, buf[i*per:(i+1)*per])
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < len(ws); i = int(next.Add(1)) - 1 {
					j.decode(ws[i], buf[i*per:(i+1)*per])
				}
			}()
		}
		wg.Wait()
	}
	k := 0
	for i, w := range ws {
		budget.give(w.held)
		if w.fail != nil {
			out <- w
			continue
		}
		if k != i {
			copy(buf[k*per:(k+1)*per], buf[i*per:(i+1)*per])
		}
		ws[k] = w
		k++
	}
	return ws[:k]
}

// workspaces are one stream's attention workspaces and result buffers,
// and the image side of the attention, prepared once per image for every
// prompt.
type workspaces struct {
	i2t, t2i *xattn.Workspace
	res      xattn.Result
	patchQ   xattn.Query  // the patches as queries (image → text)
	patchSrc xattn.Source // the patches as keys and values (text → image)
	file     []byte       // the encoding of the last output file
}

func (j *engine) newWorkspaces() *workspaces {
	ws := &workspaces{}
	if j.i2t != nil {
		ws.i2t = j.i2t.NewWorkspace(j.cfg.Threads)
	}
	if j.t2i != nil {
		ws.t2i = j.t2i.NewWorkspace(j.cfg.Threads)
	}
	return ws
}

func (ws *workspaces) close() {
	if ws.i2t != nil {
		ws.i2t.Close()
	}
	if ws.t2i != nil {
		ws.t2i.Close()
	}
}

func (j *job) attendAndWrite(w *work, enc *vision.Encoding, ws *workspaces) {
	t := time.Now()
	p := enc.Tokens - 1
	patches := enc.States[enc.Width:] // rows 1..P: drop the class token
	ts := map[string]tensorio.Tensor{
		"patch_features": tensorio.F32([]int{p, enc.Width}, patches),
	}
	if enc.Embeds != nil {
		ts["image_embeds"] = tensorio.F32([]int{len(enc.Embeds)}, enc.Embeds)
	}
	mode := xattn.MeanAttention
	if j.cfg.PerHead {
		mode = xattn.PerHeadAttention
	}
	if err := j.preparePatches(ws, patches, p); err != nil {
		w.fail = err
		return
	}
	scores := map[string]float64{}
	var sheets [][]Overlay
	for k, ps := range j.prompts {
		pre := fmt.Sprintf("prompt.%d.", k)
		ts[pre+"input_ids"] = tensorio.I64([]int{len(ps.ids)}, ps.ids)
		var i2tMap, t2iMap []float32
		if j.i2t != nil {
			if err := ws.i2t.ForwardPrepared(&ws.res, &ws.patchQ, ps.src, mode); err != nil {
				w.fail = fmt.Errorf("attention (image to text, prompt %d): %w", k, err)
				return
			}
			ts[pre+"conditioned_patches"] = tensorio.F32([]int{p, ws.res.DOut}, clone(ws.res.Out))
			i2tMap = headMean(ws.res.Attn, ws.res.Heads, p*ps.t, mode)
			ts[pre+"image_to_text"] = tensorio.F32([]int{p, ps.t}, i2tMap)
			if mode == xattn.PerHeadAttention {
				ts[pre+"image_to_text_heads"] = tensorio.F32([]int{ws.res.Heads, p, ps.t}, clone(ws.res.Attn))
			}
		}
		if j.t2i != nil {
			if err := ws.t2i.ForwardPrepared(&ws.res, ps.q, &ws.patchSrc, mode); err != nil {
				w.fail = fmt.Errorf("attention (text to image, prompt %d): %w", k, err)
				return
			}
			ts[pre+"conditioned_tokens"] = tensorio.F32([]int{ps.t, ws.res.DOut}, clone(ws.res.Out))
			t2iMap = headMean(ws.res.Attn, ws.res.Heads, ps.t*p, mode)
			ts[pre+"text_to_image"] = tensorio.F32([]int{ps.t, p}, t2iMap)
			if mode == xattn.PerHeadAttention {
				ts[pre+"text_to_image_heads"] = tensorio.F32([]int{ws.res.Heads, ps.t, p}, clone(ws.res.Attn))
			}
		}
		if enc.Embeds != nil && ps.embeds != nil && j.logitScale != 0 {
			scores[ps.text] = j.logitScale * cosine(enc.Embeds, ps.embeds)
		}
		if j.cfg.Heatmaps {
			sheets = append(sheets, wordOverlays(ps, t2iMap, i2tMap, p))
		}
	}
	if len(scores) > 0 {
		sc := make([]float32, len(j.prompts))
		for k, ps := range j.prompts {
			sc[k] = float32(scores[ps.text])
		}
		ts["scores"] = tensorio.F32([]int{len(sc)}, sc)
	}
	w.mark("attend", t)
	t = time.Now()
	meta := j.metadata(w, enc.Grid)
	outName := w.it.Rel + "." + j.format
	var data []byte
	var err error
	if j.format == "npz" {
		mb, _ := json.Marshal(meta)
		ts["metadata_json"] = tensorio.Tensor{DType: tensorio.DTypeU8, Shape: []int{len(mb)}, Data: mb}
		data, err = tensorio.EncodeNPZ(ts)
	} else {
		data, err = tensorio.AppendSafetensors(ws.file[:0], ts, meta)
		ws.file = data
	}
	if err == nil {
		err = j.out.WriteFile(outName, data)
	}
	if err != nil {
		w.fail = err
		return
	}
	w.entry.Outputs = append(w.entry.Outputs, outName)
	for k, ov := range sheets {
		if len(ov) == 0 {
			continue
		}
		name := fmt.Sprintf("%s.heatmap.%d.png", w.it.Rel, k)
		if err := j.writeHeatmap(name, w.base, enc.Grid, ov); err != nil {
			w.fail = err
			return
		}
		w.entry.Outputs = append(w.entry.Outputs, name)
	}
	w.base = nil
	if len(scores) > 0 {
		w.entry.Scores = scores
	}
	w.mark("write", t)
}

// preparePatches projects an image's patches [p, width] once for all the
// prompts: as queries (image → text) and as keys and values (text → image),
// the latter from the former in CLIP's joint space, where both are the same
// rows.
func (j *engine) preparePatches(ws *workspaces, patches []float32, p int) error {
	if j.i2t != nil {
		if err := ws.i2t.PrepareQuery(&ws.patchQ, patches, p); err != nil {
			return fmt.Errorf("attention (image to text): %w", err)
		}
	}
	if j.t2i == nil {
		return nil
	}
	var err error
	if j.jointPatches {
		err = ws.t2i.PrepareSourceProjected(&ws.patchSrc, ws.patchQ.Rows(), nil, p, nil)
	} else {
		err = ws.t2i.PrepareSource(&ws.patchSrc, patches, p, nil)
	}
	if err != nil {
		return fmt.Errorf("attention (text to image): %w", err)
	}
	return nil
}

// headMean returns the head-averaged map [n] from attn, which holds it
// already (MeanAttention) or per head [heads, n].
func headMean(attn []float32, heads, n int, mode xattn.AttnMode) []float32 {
	out := make([]float32, n)
	if mode != xattn.PerHeadAttention || heads <= 1 {
		copy(out, attn[:n])
		return out
	}
	for h := range heads {
		for i, v := range attn[h*n : (h+1)*n] {
			out[i] += v
		}
	}
	inv := 1 / float32(heads)
	for i := range out {
		out[i] *= inv
	}
	return out
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// wordOverlays makes one overlay per content word of a prompt: the
// text → image map averaged over the word's tokens, or, without it, the
// image → text attention the patches give the word (averaged likewise).
func wordOverlays(ps *promptSide, t2i, i2t []float32, p int) []Overlay {
	var out []Overlay
	for _, wd := range ps.words {
		if wd.Special || IsStopWord(wd.Text) {
			continue
		}
		m := make([]float32, p)
		for tok := wd.Start; tok < wd.End; tok++ {
			for j := range p {
				if t2i != nil {
					m[j] += t2i[tok*p+j]
				} else if i2t != nil {
					m[j] += i2t[j*ps.t+tok]
				}
			}
		}
		if n := wd.End - wd.Start; n > 1 {
			for j := range m {
				m[j] /= float32(n)
			}
		}
		out = append(out, Overlay{Label: wd.Text, Start: wd.Start, End: wd.End, Map: m})
	}
	return out
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "on": true, "in": true, "and": true, "with": true,
	"at": true, "to": true, "is": true, "are": true, ",": true, ".": true, "'s": true,
}

// IsStopWord reports whether a word is too common to deserve its own heatmap.
func IsStopWord(w string) bool { return stopWords[strings.ToLower(strings.TrimSpace(w))] }

func (j *job) metadata(w *work, g vision.Grid) map[string]string {
	m := make(map[string]string, len(j.baseMeta)+4)
	for k, v := range j.baseMeta {
		m[k] = v
	}
	m["source"] = w.it.Rel
	m["source_sha256"] = w.entry.SHA256
	m["grid"] = g.String()
	m["source_size"] = fmt.Sprintf("%dx%d", w.entry.Width, w.entry.Height)
	return m
}

func (j *job) writeHeatmap(name string, base *image.RGBA, g vision.Grid, ov []Overlay) error {
	sheet, err := RenderHeatmaps(base, g.H, g.W, ov)
	if err != nil {
		return err
	}
	data, err := EncodePNG(sheet)
	if err != nil {
		return err
	}
	return j.out.WriteFile(name, data)
}

// cropRegion is the part of a source image of bounds b that the model saw:
// the centre crop, mapped back from the resized image to source pixels.
func (j *engine) cropRegion(b image.Rectangle) image.Rectangle {
	w, h := b.Dx(), b.Dy()
	rh, rw := j.pre.ResizedSize(w, h)
	if !j.pre.DoCenterCrop || rh <= 0 || rw <= 0 {
		return b
	}
	ch, cw := j.pre.CropSize.Height, j.pre.CropSize.Width
	top, left := (rh-ch)/2, (rw-cw)/2
	sx, sy := float64(w)/float64(rw), float64(h)/float64(rh)
	r := image.Rect(int(float64(left)*sx), int(float64(top)*sy), int(float64(left+cw)*sx+0.5), int(float64(top+ch)*sy+0.5))
	return r.Add(b.Min).Intersect(b)
}
