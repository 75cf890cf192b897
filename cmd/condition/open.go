package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	_ "github.com/conditionhq/condition/models/embedded" // the model "default"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/xattn"
)

// engineFlags are the flags that open a model and its engine, defined here
// once with one help text each: --model, --variant, --ort-lib, --threads,
// and as a command asks for them --decode and --max-pixels (images),
// --truncate (prompts) and the layer flags --xattn, --xattn-prefix,
// --heads and --direction.
type engineFlags struct {
	model, variant, ortLib string
	threads                int
	decode                 string
	maxPixels              int64
	truncate               bool
	precision              pipeline.Precision
	readout                clip.Readout // "": the model's default
	xattn, prefix          string
	heads                  int
	direction              string

	has engineFlagSet
}

// engineFlagSet says which optional engine flags a command takes.
type engineFlagSet int

const (
	withImages    engineFlagSet = 1 << iota // --decode, --max-pixels
	withPrompts                             // --truncate
	withLayer                               // --xattn, --xattn-prefix, --heads, --direction
	withPrecision                           // --precision
	withReadout                             // --readout
	runtimeOnly                             // only --ort-lib and --threads: a command naming its model otherwise
	withStreams                             // the command has --streams (said in --threads' help)
)

// AddFlags binds the engine flags of has to fs.
func (f *engineFlags) AddFlags(fs *pflag.FlagSet, has engineFlagSet) {
	f.has = has
	f.model = models.DefaultRef
	if has&runtimeOnly == 0 {
		fs.StringVar(&f.model, "model", models.DefaultRef, "model: a directory in the Hugging Face layout, a hub id org/name[@revision], or default (built in)")
		fs.StringVar(&f.variant, "variant", "", "graph variant by suffix: fp16, quantized, optimized-int8, ... (onnx/text_model_<variant>.onnx)")
	}
	fs.StringVar(&f.ortLib, "ort-lib", "", ortLibUsage)
	threads := "ONNX Runtime intra-op threads (0: one per core)"
	if has&withStreams != 0 {
		threads = "ONNX Runtime intra-op threads (0: one per core, shared among the encoder streams, see --streams)"
	}
	fs.IntVar(&f.threads, "threads", 0, threads)
	if has&withImages != 0 {
		fs.StringVar(&f.decode, "decode", string(pipeline.DecodeExact), decodeUsage)
		fs.Int64Var(&f.maxPixels, "max-pixels", 0, maxPixelsUsage)
	}
	if has&withPrompts != 0 {
		fs.BoolVar(&f.truncate, "truncate", false, "cut prompts longer than the model's context (as Hugging Face's truncation=True) instead of failing")
	}
	if has&withPrecision != 0 {
		f.precision = pipeline.PrecisionFP32
		fs.Var(parsed(&f.precision, pipeline.ParsePrecision), "precision", "the encoders' arithmetic: fp32, or int8 (the model's int8 variant, made on first use with a check against fp32 and kept in this program's cache; 8-bit weights on CPUs with VNNI, 7-bit elsewhere; activations quantized per row, so an image's outputs do not depend on its batch)")
	}
	if has&withReadout != 0 {
		fs.Var(parsed(&f.readout, clip.ParseReadout), "readout", readoutUsage)
	}
	if has&withLayer != 0 {
		fs.StringVar(&f.direction, "direction", "both", "image-to-text, text-to-image or both")
		fs.StringVar(&f.xattn, "xattn", "joint", "attention weights: joint (CLIP's joint space), identity, or a .safetensors file of a learned layer")
		fs.StringVar(&f.prefix, "xattn-prefix", "", "tensor name prefix of the learned layer (diffusers names to_q, to_k, to_v, to_out.0 follow it)")
		fs.IntVar(&f.heads, "heads", 0, "heads of a learned or identity layer (default 8 learned, 1 identity)")
	}
}

// ortLibUsage describes --ort-lib.
const ortLibUsage = "ONNX Runtime shared library to use (default: " + models.RuntimeEnv + ", beside the executable, the user cache, the system folders)"

// readoutUsage describes --readout.
var readoutUsage = "how the patches' joint-space vectors are read from the vision tower: raw (the last layer's patch tokens), or a training-free dense readout that recomputes the last layer's attention without its residual and MLP: " +
	"clearclip (q-q attention), naclip (k-k attention and a Gaussian neighbourhood), maskclip (its values; for TIPSv2, its authors' value attention, residual and MLP kept) or pearl (q-k attention with the keys rotated onto the queries; CLIP and MetaCLIP 2); " +
	"default clearclip for CLIP checkpoints, raw for the built-in model, SigLIP and TIPSv2"

// windowsUsage describes --windows.
const windowsUsage = "maps over the whole image, not the model's centre crop: the short side resized to the model's input side, windows of that size every half side (the last flush with the edge), each encoded, the maps stitched on one patch grid"

// maxPixelsUsage describes --max-pixels.
var maxPixelsUsage = fmt.Sprintf("refuse images with more pixels than this, read from the header (0: Pillow's limit, %d; -1: no limit)", vision.DefaultMaxPixels)

// decodeUsage describes --decode.
const decodeUsage = "how to decode JPEGs: exact (whole, as Pillow), fast (scaled down in the DCT to at least twice the model's input side, as Pillow's draft; a few levels off exact, much faster on photos) or fastest (to at least the input side); fast and fastest need libjpeg-turbo (libturbojpeg0, or a build with -tags libjpeg)"

// parsedFlag is a flag parsed into the library's type T by parse as it
// is given: a wrong value is a usage error naming the flag and the valid
// values.
type parsedFlag[T ~string] struct {
	v     *T
	parse func(string) (T, error)
}

// parsed binds a flag that parse reads into *v (whose value then is the
// flag's default).
func parsed[T ~string](v *T, parse func(string) (T, error)) pflag.Value {
	return parsedFlag[T]{v, parse}
}

func (f parsedFlag[T]) Type() string { return "string" }

func (f parsedFlag[T]) String() string {
	if f.v == nil {
		return "" // the zero Value pflag may make to tell a default
	}
	return string(*f.v)
}

func (f parsedFlag[T]) Set(s string) error {
	v, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.v = v
	return nil
}

// options checks the flags and returns the engine options they give, on
// top of base (a command's own: streams, batch, spinning).
func (f *engineFlags) options(base pipeline.Options) (pipeline.Options, error) {
	o := base
	if f.threads < 0 {
		return o, usagef("--threads must be 0 or more, got %d", f.threads)
	}
	o.Threads = f.threads
	if o.Threads == 0 && o.Streams == 0 {
		// One image at a time: every core in one run (ONNX Runtime's own
		// default may use fewer).
		o.Threads = runtime.GOMAXPROCS(0)
	}
	o.ORTLibrary = f.ortLib
	if f.has&withImages != 0 {
		if err := checkMaxPixels(f.maxPixels); err != nil {
			return o, err
		}
		o.MaxPixels = f.maxPixels
		d, err := parseDecode(f.decode)
		if err != nil {
			return o, err
		}
		o.Decode = d
	}
	o.Truncate = f.truncate
	if f.has&withPrecision != 0 {
		if f.precision == pipeline.PrecisionInt8 && f.variant != "" && f.variant != models.VariantOptimizedInt8 {
			return o, usagef("--precision int8 runs the variant %s; --variant %s asks for another", models.VariantOptimizedInt8, f.variant)
		}
		o.Precision = f.precision
	}
	if f.has&withLayer != 0 {
		if err := f.layer(&o); err != nil {
			return o, err
		}
	}
	if f.has&withReadout != 0 {
		o.Readout = f.readout
	}
	return o, nil
}

// layer parses the layer flags into o.
func (f *engineFlags) layer(o *pipeline.Options) error {
	if f.heads < 0 {
		return usagef("--heads must be 0 or more, got %d", f.heads)
	}
	dir, err := xattn.ParseDirection(f.direction)
	if err != nil {
		return usagef("--direction %q: want image-to-text, text-to-image or both", f.direction)
	}
	o.Direction = dir
	l, err := pipeline.ParseLayer(f.xattn)
	if err != nil {
		return usagef("--xattn %q: %v", f.xattn, err)
	}
	if f.prefix != "" {
		l.Prefix = f.prefix
	}
	if f.heads != 0 {
		l.Heads = f.heads
	}
	switch {
	case l.String() == "joint" && f.heads != 0:
		return usagef("--heads applies to --xattn identity or a learned layer; --xattn joint (CLIP's joint space) has no heads")
	case l.String() == "joint" && f.prefix != "":
		return usagef("--xattn-prefix applies to a learned layer (--xattn FILE.safetensors), not to --xattn joint")
	case l.Weights == "identity" && f.prefix != "":
		return usagef("--xattn-prefix applies to a learned layer (--xattn FILE.safetensors), not to --xattn identity")
	}
	o.Layer = l
	return nil
}

// checkMaxPixels checks a --max-pixels value.
func checkMaxPixels(n int64) error {
	if n < -1 {
		return usagef("--max-pixels must be -1 (no limit), 0 (Pillow's limit, %d) or positive, got %d", vision.DefaultMaxPixels, n)
	}
	return nil
}

// parseDecode checks a --decode value: a known mode, and one this build
// can honour.
func parseDecode(s string) (pipeline.DecodeMode, error) {
	m, err := pipeline.ParseDecodeMode(s)
	if err != nil {
		return "", usagef("--decode: %v", err)
	}
	if m != pipeline.DecodeExact && !vision.CanDraft() {
		return "", usagef("--decode %s needs libjpeg-turbo's scaled decoding: JPEGs are decoded here by %s; install libjpeg-turbo's TurboJPEG library (Debian: libturbojpeg0, Ubuntu: libturbojpeg; see the README)", m, vision.JPEGDecoder())
	}
	return m, nil
}

// loadRuntime loads ONNX Runtime as --ort-lib says, logging which library
// was used.
func (f *engineFlags) loadRuntime(e *env) (*models.Runtime, error) {
	rt, err := models.LoadRuntime(models.RuntimeOptions{LibPath: f.ortLib, Logger: e.Log})
	return rt, f.advise(err)
}

// openModel resolves a model reference for a command that reads its
// tokenizer or preprocessor (and runs no graph): a hub model missing from
// the cache is downloaded with a progress bar on stderr; graphs are not
// built for it (those built before are used).
func openModel(ctx context.Context, e *env, ref, variant string) (*models.Model, error) {
	return models.OpenContext(ctx, ref, models.Options{Variant: variant, Progress: progressBar(e.Stderr), Logger: e.Log, NoBuild: true})
}

// open checks the flags, opens the model and its engine with base as the
// command's own options (pipeline.Open loads ONNX Runtime, logging which
// library it used): the one way every command opens an engine.
func (f *engineFlags) open(ctx context.Context, e *env, base pipeline.Options) (*pipeline.Engine, error) {
	opts, err := f.options(base)
	if err != nil {
		return nil, err
	}
	if _, err := models.ParseRef(f.model); err != nil {
		// Neither a folder nor a hub id: a mistake in --model, found
		// before any work.
		return nil, usageError{fmt.Errorf("--model: %w", err)}
	}
	opts.Log = e.Log
	opts.Model = models.Options{Variant: f.variant, Progress: progressBar(e.Stderr), Logger: e.Log}
	eng, err := pipeline.Open(ctx, f.model, opts)
	return eng, f.advise(err)
}

// advise adds to a library error what to do about it with this program's
// commands and flags.
func (f *engineFlags) advise(err error) error {
	var pe *pipeline.PromptError
	if errors.As(err, &pe) {
		if errors.Is(err, text.ErrTooLong) && f.has&withPrompts != 0 {
			return usagef("%v (add --truncate to cut it)", err)
		}
		return usageError{err}
	}
	return advise(err, f.model)
}

// advise adds to an error of opening model ref (or its runtime) what to do
// about it with this program's commands and flags.
func advise(err error, ref string) error {
	var nf *models.RuntimeNotFoundError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nf):
		return fmt.Errorf("%w\n(install it with `condition runtime install`, or give --ort-lib or %s)", err, models.RuntimeEnv)
	case errors.Is(err, hub.ErrOffline):
		return fmt.Errorf("%w\n(run `condition models fetch %s` where there is a network)", err, ref)
	case errors.Is(err, clip.ErrReadoutWeights):
		return fmt.Errorf("%w\n(give --readout raw to read the patch tokens as they are)", err)
	case errors.Is(err, clip.ErrMissingOutput):
		return fmt.Errorf("%w\n(run `condition models expose %s` to add the output)", err, ref)
	case errors.Is(err, models.ErrBuildDownload):
		return fmt.Errorf("%w\n(`condition models build %s` downloads it whatever its size and builds the graphs, once)", err, ref)
	}
	return err
}

// autoStreams is Options.Streams for a --streams (or --workers) flag whose
// 0 means as many encoder streams as the cores hold.
func autoStreams(n int) int {
	if n == 0 {
		return pipeline.AutoStreams
	}
	return n
}

// indexReadout makes the engine read patches as the index meta's job did:
// its readout unless --readout names another, which is a usage error
// naming both.
func (f *engineFlags) indexReadout(flag, where string, meta index.Meta) error {
	have := meta.ReadoutName()
	if f.readout != "" && f.readout != have {
		return usagef("%s %s holds patches of readout %s; --readout %s asks for another (leave --readout out to use the index's)", flag, where, have, f.readout)
	}
	f.readout = have
	return nil
}
