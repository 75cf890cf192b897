package main

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// optimizeOptions are the flags of `condition models optimize`.
type optimizeOptions struct {
	modelFlags
	rt        engineFlags // --ort-lib and --threads
	int8      bool
	qkv       string
	out       string
	images    string
	fullRange bool
	integer   bool
	scheme    string
	calib     string
	outliers  float64
	keepQuant bool
	tolerance float64
	minCosine float64
	fusions   []string
}

func (o *optimizeOptions) AddFlags(fs *pflag.FlagSet) {
	o.modelFlags.AddFlags(fs)
	o.rt.AddFlags(fs, runtimeOnly)
	fs.BoolVar(&o.int8, "int8", false, "also quantize the weight MatMuls to int8 (variant optimized-int8; activations quantized at run time)")
	fs.StringSliceVar(&o.fusions, "fusions", []string{"attention", "quick-gelu"}, "fusions to apply: attention, skip-layer-norm, quick-gelu (skip-layer-norm is off by default: ONNX Runtime 1.30's CPU SkipLayerNormalization measured slower than LayerNormalization and Add)")
	fs.StringVar(&o.qkv, "qkv", "", "self-attention's q, k, v projections: separate (three MatMuls, then MultiHeadAttention), split (one MatMul by the packed weights, split for MultiHeadAttention) or packed (com.microsoft.Attention, float32 only); default separate, split with --int8 (measured faster)")
	fs.StringVar(&o.out, "out", "", "write the rewritten graphs to DIR/onnx/ instead of this program's cache (they are then not picked up by --variant)")
	fs.StringVar(&o.images, "images", "", "folder of images to check the rewrites on (default: 8 generated scenes)")
	fs.BoolVar(&o.fullRange, "int8-full-range", false, "int8 weights over [-127, 127], 8 bits; =false: 7 bits, [-63, 63], exact on CPUs without VNNI (default: as run --precision int8, 8 bits where the CPU has VNNI, 7 where it has not or where a graph fails the check with 8)")
	fs.BoolVar(&o.integer, "int8-integer", false, "with --int8-scheme per-call: write DynamicQuantizeLinear + MatMulInteger instead of DynamicQuantizeMatMul")
	fs.StringVar(&o.scheme, "int8-scheme", "per-row", "how activations are quantized: per-row (each token of each image or prompt its own scale; variant optimized-int8, what run --precision int8 runs), per-call (one scale for a whole call, so that an image's outputs depend on its batch-mates; variant optimized-int8-per-call, for comparison) or static (one constant scale per MatMul input, calibrated on images; variant optimized-int8-static, for comparison)")
	fs.StringVar(&o.calib, "calibration", "", "with --int8-scheme static: folder of images whose activations' ranges set the scales (the first 64 by name; default: the images the rewrites are checked on); the text graph is calibrated on the check's prompts")
	fs.Float64Var(&o.outliers, "outlier-ratio", clip.DefaultOutlierRatio, "per-row and static schemes: a layer norm whose largest |gain| is at least this many times its median has outlier channels (the MatMuls it feeds smoothed, those downstream kept float32); 0 turns the rule off")
	fs.Float64Var(&o.tolerance, "tolerance", 1e-4, "largest difference of a float32 rewrite's outputs, relative to the original's largest magnitude")
	fs.Float64Var(&o.minCosine, "min-cosine", 0.99, "smallest cosine of an int8 rewrite's output rows (embeddings, token and patch states) to the original's")
}

func runModelsOptimize(ctx context.Context, e *env, args []string) error {
	var o optimizeOptions
	fs := newFlagSet(e, "models optimize", "models optimize REF [--int8] [--qkv separate|split|packed] [--fusions LIST] [--out DIR] [--images DIR] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("models optimize takes one model reference (a directory, org/name[@revision], or default)")
	}
	if o.Variant != "" {
		return usagef("models optimize starts from the model's own graphs; --variant does not apply")
	}
	rtOpts, err := o.rt.options(pipeline.Options{})
	if err != nil {
		return err
	}
	if _, err := o.rt.loadRuntime(e); err != nil {
		return err
	}
	opts := o.options(e)
	opts.Variant = models.VariantPlain
	m, err := models.OpenContext(ctx, fs.Arg(0), opts)
	if err != nil {
		return advise(err, fs.Arg(0))
	}
	probes, err := optimizeProbes(m, o.images)
	if err != nil {
		return err
	}
	if o.scheme != "per-row" && o.scheme != "per-call" && o.scheme != "static" {
		return usagef("--int8-scheme %q: want per-row, per-call or static", o.scheme)
	}
	if o.calib != "" && o.scheme != "static" {
		return usagef("--calibration sets the scales of --int8-scheme static")
	}
	if o.integer && o.scheme != "per-call" {
		return usagef("--int8-integer is a form of --int8-scheme per-call")
	}
	if o.outliers < 0 {
		return usagef("--outlier-ratio %g: want 0 (off) or more", o.outliers)
	}
	outliers := o.outliers
	if outliers == 0 {
		outliers = -1 // off
	}
	copts := clip.OptimizeOptions{
		Int8PerCall:   o.scheme == "per-call",
		Int8Static:    o.scheme == "static",
		OutlierRatio:  outliers,
		Int8:          o.int8,
		QKV:           o.qkv,
		Fusions:       o.fusions,
		Int8FullRange: o.fullRange,
		Int8Integer:   o.integer,
		Threads:       rtOpts.Threads,
		Tolerance:     o.tolerance,
		MinCosine:     o.minCosine,
	}
	if o.calib != "" {
		cal, err := imageProbes(m, o.calib, 64)
		if err != nil {
			return fmt.Errorf("--calibration: %w", err)
		}
		copts.Calibration = &cal
	}
	save := func(r *clip.Optimized, write func(io.Writer) error) (string, error) {
		if o.out == "" {
			return m.SaveVariant(r.Variant, r.Graph, r, write)
		}
		p := filepath.Join(o.out, filepath.FromSlash(strings.TrimSuffix(r.Graph, ".onnx")+"_"+r.Variant+".onnx"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		return p, tensorio.WriteFileAtomic(p, write)
	}
	var res []clip.Optimized
	if o.int8 && !fs.Changed("int8-full-range") {
		// The width --precision int8 gives: 8 bits with VNNI, and 7 for a
		// graph that fails the check with 8.
		var again []string
		res, again, err = clip.OptimizeInt8(ctx, m, probes, copts, save)
		for _, g := range again {
			e.Log.Info("a graph failed the check with 8-bit weights; made with 7-bit ones", "graph", g)
		}
	} else {
		res, err = clip.Optimize(ctx, m, probes, copts, save)
	}
	if o.JSON {
		if jerr := writeJSONIndent(e.Stdout, res); jerr != nil {
			return jerr
		}
	} else {
		printOptimized(e.Stdout, res, err == nil && o.out == "")
	}
	if errors.Is(err, clip.ErrCheckFailed) {
		return fmt.Errorf("%w\n(nothing was saved for that graph; --tolerance or --min-cosine set the limits)", err)
	}
	return err
}

// printOptimized prints what models optimize did to each graph, and,
// when saved to this program's cache, how to use the variant.
func printOptimized(w io.Writer, res []clip.Optimized, saved bool) {
	for _, r := range res {
		fmt.Fprintf(w, "%s (%s):\n", r.Graph, r.Variant)
		if r.Fuse != nil {
			fmt.Fprintf(w, "  fused: %s\n", r.Fuse)
			for _, s := range r.Fuse.Skipped {
				fmt.Fprintf(w, "    left as it was: %s\n", s)
			}
		}
		if r.Quant != nil {
			fmt.Fprintf(w, "  int8: %s\n", r.Quant)
			for _, s := range r.Quant.Kept {
				fmt.Fprintf(w, "    float32: %s\n", s)
			}
		}
		if r.Calibration != "" {
			fmt.Fprintf(w, "  static scales calibrated on %s\n", r.Calibration)
		}
		for _, c := range r.Checks {
			fmt.Fprintf(w, "  check on %s: %-17s relative difference %.3g, max |Δ| %.3g, cosine min %.6f mean %.6f\n",
				r.Probes, c.Output, c.RelDiff, c.MaxAbs, c.MinCosine, c.MeanCosine)
		}
		switch {
		case r.Written != "":
			fmt.Fprintf(w, "  wrote %s\n", r.Written)
		case r.Error != "":
			fmt.Fprintf(w, "  not saved: %s\n", r.Error)
		}
	}
	if saved {
		fmt.Fprintf(w, "use it with --variant %s", res[0].Variant)
		if res[0].Variant == models.VariantOptimized {
			fmt.Fprintf(w, " (picked by default from now on; --variant plain for the original graphs)")
		}
		fmt.Fprintln(w)
	}
}

// optimizeProbes returns the inputs the rewrites are checked on: the
// images of dir (sorted, at most 16), or the engine's drawn scenes, and
// its everyday prompts (see pipeline.OptimizeProbes).
func optimizeProbes(m *models.Model, dir string) (clip.Probes, error) {
	if dir == "" {
		return pipeline.OptimizeProbes(m, nil, nil)
	}
	return imageProbes(m, dir, 16)
}

// imageProbes returns the first limit images of dir (sorted by name;
// files that are not images skipped), preprocessed for m, and the
// engine's everyday prompts.
func imageProbes(m *models.Model, dir string, limit int) (clip.Probes, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return clip.Probes{}, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var imgs []image.Image
	for _, n := range names {
		if len(imgs) == limit {
			break
		}
		img, err := vision.DecodeFile(filepath.Join(dir, n), vision.DecodeOptions{})
		if err != nil {
			continue // not an image
		}
		imgs = append(imgs, img)
	}
	if len(imgs) == 0 {
		return clip.Probes{}, fmt.Errorf("no images in %s", dir)
	}
	return pipeline.OptimizeProbes(m, imgs, nil)
}
