package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"sync"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// Options controls Open and New. The zero value is a usable engine: CLIP's
// joint space both ways, ONNX Runtime's default threads, prompts longer
// than the model's context refused.
type Options struct {
	// Model is how Open resolves its reference: hub cache, variant, heads,
	// downloads (see models.Options). Its Logger defaults to Log.
	Model models.Options

	// Layer is the attention layer (the zero value: CLIP's joint space).
	Layer Layer
	// Direction is which attention Attend computes (0: both).
	Direction xattn.Direction
	// Readout is how CLIP's joint space reads an image's patch vectors
	// from the vision tower ("": the model's default; see Readout): the last
	// layer's patch tokens as they are, or a training-free dense readout
	// that recomputes the last layer's attention without its residual and
	// MLP (ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP). It changes
	// the patches' joint-space vectors only, never the class token,
	// image_embeds or ImageEncoding.States, and needs the joint space.
	Readout clip.Readout

	// Threads is each encoder run's ONNX Runtime intra-op threads and each
	// attention call's goroutines (0: ONNX Runtime's default and one
	// goroutine for attention; with Streams set, the cores shared among the
	// streams).
	Threads int
	// Streams is the number of vision encoder runs in flight at once in
	// EncodeImageStream (and the batch job built on it), each decoding its
	// next batch while the others encode. 0: one, for one image at a time;
	// AutoStreams: as many as the cores hold runs of Threads (min(cores, 4)
	// runs of cores/runs threads when Threads is 0; one when Threads is
	// set). Engine.Threads and Engine.Streams report what was chosen.
	Streams int
	// NoSpinning keeps ONNX Runtime's threads from spinning between runs
	// (for programs that share the cores with other work).
	NoSpinning bool
	// NoArena turns ONNX Runtime's CPU memory arena off (buffers are
	// allocated per run instead of kept in a growing pool).
	NoArena bool
	// PinThreads pins ONNX Runtime's intra-op pool threads (Threads − 1 of
	// them; the calling thread is not one) to one logical processor each.
	PinThreads bool
	// NoPrepack starts the encoders without packing their weights for the
	// matrix kernels first: a first result sooner (about a second less per
	// ViT-B/32 tower here), each run a few per cent slower. For programs
	// that encode a few images and exit.
	NoPrepack bool
	// KeepGraphs runs the model's graph files as they are. By default a
	// graph file holding more than models.MapAbove bytes of weights inside
	// it is run from a copy in this program's cache whose weights ONNX
	// Runtime maps from a file beside it (models.Model.MapGraphs, made once).
	KeepGraphs bool
	// Batch is the most images EncodeImages gives the vision encoder at
	// once (default 8).
	Batch int
	// Truncate cuts prompts longer than the model's context (as Hugging
	// Face's truncation=True: BOS, the first tokens, EOS) instead of
	// refusing them.
	Truncate bool
	// MaxPixels refuses larger images in DecodeImage (0:
	// vision.DefaultMaxPixels, Pillow's limit; negative: no limit).
	MaxPixels int64
	// Decode is how DecodeImage decodes JPEGs ("": DecodeExact). The
	// faster modes need a JPEG decoder that scales in the DCT
	// (vision.CanDraft(): libjpeg-turbo); New refuses them otherwise.
	Decode DecodeMode

	// Precision is the encoders' arithmetic (""/PrecisionFP32: the model's
	// graphs; PrecisionInt8: their int8 variant, made by Open on first use
	// and kept in this program's cache). New takes the model as opened.
	Precision Precision

	// ORTLibrary is the path of the ONNX Runtime shared library to load
	// when none is loaded yet in this process ("": models.FindRuntime's
	// search).
	ORTLibrary string

	// Log receives what the engine has to say; nil discards.
	Log *slog.Logger
}

// AutoStreams, as Options.Streams, shares the cores among encoder streams
// for throughput over many images.
const AutoStreams = -1

// Engine is one opened model ready to encode prompts and images and attend
// between them: the tokenizer, the preprocessor, both ONNX Runtime encoders,
// the projection heads and the attention layers.
//
// An Engine is safe for concurrent use by any number of goroutines. Shared
// and read-only after Open: the model, the tokenizer, the preprocessor, the
// encoders' sessions (ONNX Runtime runs concurrent calls on one session) and
// the layers' packed weights. Per call: the tensors fed to and read from ONNX
// Runtime, and the attention workspace (projections of the image side and
// score buffers), taken from a small free list and given back. Prepared
// prompts (Prompts) are immutable and may be shared too. Concurrent image
// requests may be gathered into one EncodePixels call by the caller.
type Engine struct {
	m        *models.Model
	opts     Options
	log      *slog.Logger
	tok      *text.Tokenizer // pads to the model's context; errors or truncates per Options.Truncate
	strict   *text.Tokenizer // refuses prompts over the context
	trunc    *text.Tokenizer // truncates them
	ctxLen   int
	pre      *vision.Preprocessor
	tenc     *clip.TextEncoder
	venc     *clip.VisionEncoder
	inH, inW int
	// per is one image's pixel buffer: pixel_values [3, inH, inW], or for
	// SigLIP 2 NaFlex (naflex) its packed patches and grid
	// (vision.NaFlex.PackedLen).
	per      int
	naflex   *vision.NaFlex
	dt, dv   int
	i2t, t2i *xattn.Layer
	// jointPatches: i2t projects patches as queries exactly as t2i
	// projects them as keys (and values), so one projection serves both.
	jointPatches bool
	layerName    string
	logitScale   float64 // exp(logit_scale); 0 when unknown
	logitBias    float64 // SigLIP's logit_bias; 0 for CLIP
	family       models.Family
	cls          int                // class-token rows before an image's patches: 1 (CLIP) or 0 (SigLIP)
	readout      clip.Readout       // the vision encoder's readout: "" for raw
	patchHead    *xattn.PoolingHead // SigLIP's joint space: patches through the vision head's value path
	threads      int                // attention goroutines per call
	draft        int                // vision.DecodeOptions.Draft for DecodeImage
	streams      int                // vision encoder runs in flight in EncodeImageStream

	labelMu sync.Mutex
	labels  map[labelKey]TextEncoding // Classify's label prompts, encoded

	free      chan *workspaces
	freeMu    sync.RWMutex // putWorkspaces holds it shared, Close exclusively
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// Open resolves ref (a folder, a hub id org/name[@revision], or "default"
// when the built-in model is linked in: see models/embedded) and opens its
// engine. ctx bounds any download and the opening.
func Open(ctx context.Context, ref string, opts Options) (*Engine, error) {
	if err := begin(opts); err != nil {
		return nil, err
	}
	m, err := openModel(ctx, ref, opts)
	if err != nil {
		return nil, err
	}
	return newEngine(ctx, m, opts)
}

// OpenModel resolves ref and opens the model Open would open its engine on
// with opts: opts.Model's variant, or with Precision int8 the model's int8
// variant, made and checked on first use and kept in this program's cache.
func OpenModel(ctx context.Context, ref string, opts Options) (*models.Model, error) {
	if err := begin(opts); err != nil {
		return nil, err
	}
	return openModel(ctx, ref, opts)
}

// New opens the engine of a model already opened.
func New(ctx context.Context, m *models.Model, opts Options) (*Engine, error) {
	if m == nil {
		return nil, errors.New("pipeline: no model")
	}
	if err := begin(opts); err != nil {
		return nil, err
	}
	return newEngine(ctx, m, opts)
}

// begin checks opts.Precision and loads ONNX Runtime (Options.ORTLibrary,
// or the default search), logging which library it used: once for each
// Open, OpenModel or New.
func begin(opts Options) error {
	if err := opts.Precision.check(); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	_, err := models.LoadRuntime(models.RuntimeOptions{LibPath: opts.ORTLibrary, Logger: opts.Log})
	return err
}

// openModel is OpenModel once begin has run.
func openModel(ctx context.Context, ref string, opts Options) (*models.Model, error) {
	mo := opts.Model
	if mo.Logger == nil {
		mo.Logger = opts.Log
	}
	if opts.Precision == PrecisionInt8 {
		log := opts.Log
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		return openInt8(ctx, ref, mo, opts.Threads, log)
	}
	return models.OpenContext(ctx, ref, mo)
}

// newEngine is New once begin has run.
func newEngine(ctx context.Context, m *models.Model, opts Options) (_ *Engine, err error) {
	if int8 := models.IsInt8Variant(m.Variant()); opts.Precision == PrecisionInt8 && !int8 {
		return nil, fmt.Errorf("pipeline: precision int8 needs the model opened with its variant %s (Open makes it); model %s has variant %q", models.VariantOptimizedInt8, m.Name(), m.Variant())
	} else if int8 {
		opts.Precision = PrecisionInt8
	} else {
		opts.Precision = PrecisionFP32
	}
	e := &Engine{m: m, opts: opts, log: opts.Log, free: make(chan *workspaces, 8)}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("pipeline: %d threads: want 0 or more", opts.Threads)
	}
	e.opts.Threads, e.streams = encoderPlan(opts.Threads, opts.Streams, runtime.GOMAXPROCS(0))
	e.threads = max(e.opts.Threads, 1)
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Direction == 0 {
		e.opts.Direction = xattn.Both
	}
	if opts.Batch <= 0 {
		e.opts.Batch = 8
	}
	if e.opts.Decode, err = ParseDecodeMode(string(opts.Decode)); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	defaultReadout := false
	if e.readout, e.opts.Readout, defaultReadout, err = resolveReadout(m, opts); err != nil {
		return nil, err
	}
	if e.opts.Decode != DecodeExact && !vision.CanDraft() {
		return nil, fmt.Errorf("pipeline: decode mode %s needs a JPEG decoder that scales in the DCT: JPEGs are decoded here by %s; install libjpeg-turbo's TurboJPEG library (Debian: libturbojpeg0, Ubuntu: libturbojpeg)", e.opts.Decode, vision.JPEGDecoder())
	}
	if !opts.KeepGraphs {
		e.mapGraphs()
	}
	// The encoders open in the background, seconds for a real-size model,
	// while the tokenizer and the preprocessor load.
	opened := make(chan error, 1)
	go func() { opened <- e.openEncoders(ctx, defaultReadout) }()
	waited := false
	waitEncoders := func() error {
		waited = true
		return <-opened
	}
	defer func() {
		if err != nil {
			if !waited {
				waitEncoders() // what it opened, Close closes
			}
			e.Close()
		}
	}()
	if err := e.loadText(); err != nil {
		return nil, err
	}
	if e.pre, err = vision.LoadPreprocessor(m.FS()); err != nil {
		return nil, fmt.Errorf("pipeline: model %s: %w", m.Name(), err)
	}
	e.draft = draftSide(e.opts.Decode, e.pre)
	if err := waitEncoders(); err != nil {
		return nil, err
	}
	if err := e.inputSize(); err != nil {
		return nil, err
	}
	e.dt, e.dv = m.Config().TextConfig.HiddenSize, m.Config().VisionConfig.HiddenSize
	if s, _, err := m.LogitScale(); err == nil {
		e.logitScale = math.Exp(float64(s))
	} else {
		e.log.Warn("no logit_scale: scores are left out", "model", m.Name(), "err", err)
	}
	e.family, e.cls = m.Family(), e.venc.ClassTokens()
	if e.family.Sigmoid() {
		b, ok, err := m.LogitBias()
		switch {
		case err != nil:
			return nil, fmt.Errorf("pipeline: %w", err)
		case !ok && m.Has(models.WeightsFile):
			return nil, fmt.Errorf("pipeline: model %s is %s, and its %s has no logit_bias", m.Name(), e.family, models.WeightsFile)
		}
		e.logitBias = float64(b)
	}
	if err := e.buildLayers(); err != nil {
		return nil, err
	}
	return e, nil
}

// mapGraphs has the model's graph files that hold more than
// models.MapAbove bytes of weights run from their mapped copies, made once.
func (e *Engine) mapGraphs() {
	mapped, err := e.m.MapGraphs(models.MapAbove)
	for _, g := range mapped {
		if g.Made {
			e.log.Info("wrote a copy of the graph whose weights ONNX Runtime maps from a file (once; kept in this program's cache)",
				"graph", g.Graph, "source", g.Source, "copy", g.Path, "weight_bytes", g.Bytes, "seconds", g.Seconds)
		}
	}
	if err != nil {
		e.log.Warn("running the graph files as they are: their mapped copy could not be made", "err", err)
	}
}

// openEncoders opens the engine's text and vision encoders with its
// readout; the default readout, where the graph does not allow it, falls
// back to the raw patch tokens, said once.
func (e *Engine) openEncoders(ctx context.Context, defaultReadout bool) error {
	o := e.opts
	topts := clip.TextOptions{Threads: o.Threads, NoSpinning: o.NoSpinning, NoArena: o.NoArena, PinThreads: o.PinThreads, NoPrepack: o.NoPrepack}
	vopts := clip.VisionOptions{Threads: o.Threads, NoSpinning: o.NoSpinning, NoArena: o.NoArena, PinThreads: o.PinThreads, NoPrepack: o.NoPrepack, Readout: e.readout}
	var err error
	e.tenc, e.venc, err = openEncoders(ctx, e.m, topts, vopts)
	if err != nil && defaultReadout && e.readout != "" && ctx.Err() == nil {
		e.log.Warn("the default readout is not available for this model's graph: reading the raw patch tokens (ask for readout raw to say so)",
			"readout", e.readout, "model", e.m.Name(), "err", err)
		e.readout, e.opts.Readout, vopts.Readout = "", ReadoutRaw, ""
		e.tenc, e.venc, err = openEncoders(ctx, e.m, topts, vopts)
	}
	return err
}

// loadText loads the model's tokenizer: strict (refusing prompts over the
// context) and truncating, the engine's per Options.Truncate.
func (e *Engine) loadText() error {
	m := e.m
	tok, err := loadTokenizer(m)
	if err != nil {
		return err
	}
	e.ctxLen = tok.ForModel(m.Config().TextConfig.MaxPositionEmbeddings).ContextLength()
	// A model in OpenCLIP's layout cleans text as OpenCLIP's tokenizer
	// does (openai's cleaning, ftfy's fix_text first).
	clean := m.OpenCLIP()
	if e.strict, err = tok.WithOptions(text.Options{ContextLength: e.ctxLen, ErrorOnOverflow: true, OpenAIClean: clean}); err != nil {
		return fmt.Errorf("pipeline: model %s: %w", m.Name(), err)
	}
	if e.trunc, err = tok.WithOptions(text.Options{ContextLength: e.ctxLen, OpenAIClean: clean}); err != nil {
		return fmt.Errorf("pipeline: model %s: %w", m.Name(), err)
	}
	if e.tok = e.strict; e.opts.Truncate {
		e.tok = e.trunc
	}
	return nil
}

// inputSize sets the vision encoder's input side and one image's pixel
// buffer length from the opened encoder and the preprocessor.
func (e *Engine) inputSize() error {
	m := e.m
	switch _, e.inH, e.inW = e.venc.InputSize(); {
	case e.venc.NaFlex():
		// SigLIP 2 NaFlex: each image on its own grid, within the
		// preprocessor's patch budget.
		if e.naflex = e.pre.NaFlex; e.naflex == nil {
			return fmt.Errorf("pipeline: model %s is SigLIP 2 NaFlex, but its %s is not Siglip2ImageProcessor's (no max_num_patches)", m.Name(), models.PreprocessorFile)
		}
		if p := m.Config().VisionConfig.PatchSize; e.naflex.PatchSize != p {
			return fmt.Errorf("pipeline: model %s: %s's patch_size %d differs from config.json's vision_config.patch_size %d", m.Name(), models.PreprocessorFile, e.naflex.PatchSize, p)
		}
		if e.naflex.MaxNumPatchesDefaulted {
			e.log.Info("no max_num_patches in the preprocessor config: Siglip2ImageProcessor's default", "model", m.Name(), "max_num_patches", e.naflex.MaxNumPatches)
		}
		e.per = e.naflex.PackedLen()
	case e.inH <= 0 || e.inW <= 0:
		// A graph with dynamic spatial size takes what the preprocessor makes.
		sz := m.Config().VisionConfig.ImageSize
		e.inH, e.inW = e.pre.OutputSize(sz, sz)
		e.per = 3 * e.inH * e.inW
	default:
		e.per = 3 * e.inH * e.inW
	}
	return nil
}

// openEncoders opens m's text and vision encoders side by side: ONNX
// Runtime spends seconds creating a real-size model's sessions, most of it
// on one thread copying weights. On error it closes what it opened.
func openEncoders(ctx context.Context, m *models.Model, topts clip.TextOptions, vopts clip.VisionOptions) (*clip.TextEncoder, *clip.VisionEncoder, error) {
	var ve *clip.VisionEncoder
	var verr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ve, verr = clip.OpenVision(m, vopts)
	}()
	te, err := clip.OpenText(m, topts)
	<-done
	if err = errors.Join(err, verr, ctx.Err()); err != nil {
		te.Close()
		ve.Close()
		return nil, nil, err
	}
	return te, ve, nil
}

// Close releases the encoders and the pooled workspaces. It is safe to call
// more than once. Calls still in flight fail with a closed-session error or
// finish; their workspaces are released as they return.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.freeMu.Lock()
		defer e.freeMu.Unlock()
		e.closed = true
		var errs []error
		if e.tenc != nil {
			errs = append(errs, e.tenc.Close())
		}
		if e.venc != nil {
			errs = append(errs, e.venc.Close())
		}
		for {
			select {
			case ws := <-e.free:
				ws.close()
				continue
			default:
			}
			break
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// Options returns the options the engine was opened with, resolved:
// Threads, Streams, Batch, Direction and Decode as the engine uses them.
func (e *Engine) Options() Options {
	o := e.opts
	o.Streams = e.streams
	return o
}

// Model returns the engine's model.
func (e *Engine) Model() *models.Model { return e.m }

// Tokenizer returns the model's tokenizer, set to the model's context
// length (and to truncate when Options.Truncate).
func (e *Engine) Tokenizer() *text.Tokenizer { return e.tok }

// Preprocessor returns the model's image preprocessing.
func (e *Engine) Preprocessor() *vision.Preprocessor { return e.pre }

// InputSize returns the height and width of the pixel_values the vision
// encoder takes: 0, 0 for SigLIP 2 NaFlex, whose images keep their own
// patch grids (Preprocessor().NaFlex: the patch size and budget).
func (e *Engine) InputSize() (height, width int) { return e.inH, e.inW }

// ContextLength returns the number of token positions prompts are padded to.
func (e *Engine) ContextLength() int { return e.ctxLen }

// LogitScale returns exp(logit_scale), the factor from cosine to CLIP
// logit (0 when the model has none).
func (e *Engine) LogitScale() float64 { return e.logitScale }

// LogitBias returns SigLIP's logit_bias, added to every logit (0 for CLIP).
func (e *Engine) LogitBias() float64 { return e.logitBias }

// Direction returns the directions Attend computes.
func (e *Engine) Direction() xattn.Direction {
	var d xattn.Direction
	if e.i2t != nil {
		d |= xattn.ImageToText
	}
	if e.t2i != nil {
		d |= xattn.TextToImage
	}
	return d
}

// Threads returns the ONNX Runtime intra-op threads of the encoders (0:
// ONNX Runtime's default).
func (e *Engine) Threads() int { return e.opts.Threads }

// Streams returns the number of vision encoder runs EncodeImageStream keeps
// in flight (see Options.Streams).
func (e *Engine) Streams() int { return e.streams }

// encoderPlan resolves Options.Threads and Options.Streams on a machine of
// cores cores: the intra-op threads of each encoder run and the number of
// runs in flight.
func encoderPlan(threads, streams, cores int) (int, int) {
	cores = max(cores, 1)
	switch {
	case streams == 0:
		return threads, 1
	case threads > 0 && streams > 0:
		return threads, streams
	case threads > 0:
		return threads, 1
	case streams > 0:
		return max(1, cores/streams), streams
	}
	streams = min(cores, 4)
	return max(1, cores/streams), streams
}
