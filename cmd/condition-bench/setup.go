package main

import (
	"context"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	_ "github.com/conditionhq/condition/models/embedded" // the model "default"
	"github.com/conditionhq/condition/models/hub"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
)

// version goes into the metadata of the outputs the benchmarked jobs write.
const version = "bench"

// ortFlags are --ort-lib and --threads, as condition's commands take them.
type ortFlags struct {
	Lib     string
	Threads int
}

func (o *ortFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Lib, "ort-lib", "", "ONNX Runtime shared library to use (default: the search 'condition runtime' shows)")
	fs.IntVar(&o.Threads, "threads", 0, "ONNX Runtime intra-op threads (0: one per core; for pipeline, the cores shared among the encoder batches, see --streams)")
}

// threads is --threads, 0 meaning one per core.
func (o *ortFlags) threads() int {
	if o.Threads > 0 {
		return o.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// check checks --threads.
func (o *ortFlags) check() error {
	if o.Threads < 0 {
		return usagef("--threads must be 0 or more, got %d", o.Threads)
	}
	return nil
}

// load checks the flags and loads ONNX Runtime.
func (o *ortFlags) load(e *env) error {
	if err := o.check(); err != nil {
		return err
	}
	_, err := ort.Load(ort.LoadOptions{LibPath: o.Lib, Logger: e.Log})
	return err
}

// openModel opens a --model reference, logging each file a download
// finishes.
func openModel(ctx context.Context, e *env, ref, variant string) (*models.Model, error) {
	progress := func(p hub.Progress) {
		if p.Total >= 0 && p.Done >= p.Total {
			e.Log.Info("downloaded", "repo", p.Repo, "file", p.File, "bytes", p.Done)
		}
	}
	return models.OpenContext(ctx, ref, models.Options{Variant: variant, Progress: progress, Logger: e.Log})
}

// openBenchModel opens a --model reference as openModel does, or with
// --precision int8 its int8 variant, as condition's --precision int8 does
// (made and checked on first use).
func openBenchModel(ctx context.Context, e *env, ref, variant, precision string, threads int) (*models.Model, error) {
	if err := checkPrecision(precision, variant); err != nil {
		return nil, err
	}
	if pipeline.Precision(precision) != pipeline.PrecisionInt8 {
		return openModel(ctx, e, ref, variant)
	}
	return pipeline.OpenModel(ctx, ref, pipeline.Options{Precision: pipeline.PrecisionInt8, Threads: threads, Log: e.Log, Model: models.Options{Logger: e.Log}})
}

// checkPrecision checks --precision, and --variant beside it.
func checkPrecision(precision, variant string) error {
	prec, err := pipeline.ParsePrecision(precision)
	if err != nil {
		return usagef("--precision: %v", err)
	}
	if prec == pipeline.PrecisionInt8 && variant != "" && variant != models.VariantOptimizedInt8 {
		return usagef("--precision int8 runs the variant %s; drop --variant %s", models.VariantOptimizedInt8, variant)
	}
	return nil
}

// openEngine opens m's engine with CLIP's joint space both ways, logging
// to e.
func openEngine(ctx context.Context, e *env, m *models.Model, opts pipeline.Options) (*pipeline.Engine, error) {
	opts.Log = e.Log
	return pipeline.New(ctx, m, opts)
}

// streamsFlag is Options.Streams for a --streams or --workers value whose
// 0 shares the cores among as many streams as they hold.
func streamsFlag(n int) int {
	if n == 0 {
		return pipeline.AutoStreams
	}
	return n
}

// decodeHelp describes --decode.
const decodeHelp = "JPEG decoding: exact, fast or fastest (scaled in the DCT to twice or once the model's input side; needs libjpeg-turbo: libturbojpeg0, or a build with -tags libjpeg)"

// decodeMode parses --decode; the scaled modes need libjpeg-turbo.
func decodeMode(s string) (m pipeline.DecodeMode, err error) {
	if m, err = pipeline.ParseDecodeMode(s); err != nil {
		err = usagef("--decode: %v", err)
	} else if m != pipeline.DecodeExact && !vision.CanDraft() {
		err = usagef("--decode %s needs libjpeg-turbo's TurboJPEG library, libturbojpeg0 (JPEGs are decoded here by %s)", m, vision.JPEGDecoder())
	}
	return m, err
}
