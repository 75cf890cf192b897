package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/cmd/internal/eval"
	"github.com/conditionhq/condition/pipeline"
)

type evalOptions struct {
	eng     engineFlags
	scenes  int
	json    bool
	verbose bool
	windows bool
}

func (o *evalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.scenes, "scenes", 1000, "held-out scenes of each kind")
	fs.BoolVar(&o.json, "json", false, "print the figures as JSON")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "also print each renderer's shape confusion matrix")
	fs.BoolVar(&o.windows, "windows", false, "also measure maps over the whole image (windows) on wide scenes whose object lies outside the centre square")
	o.eng.AddFlags(fs, withPrecision|withReadout)
}

// runModelsEval measures a model on held-out scenes of two renderers, the
// generator the default model was trained on (internal/scenes) and one
// written apart from it for evaluation only (internal/vecscenes): zero-shot
// top-1 and per-shape accuracy, where the text → image maps peak, and which
// words the patches attend to.
func runModelsEval(ctx context.Context, e *env, args []string) error {
	var o evalOptions
	fs := newFlagSet(e, "models eval", "models eval [default | DIR | org/name] [--scenes N] [--json] [--verbose]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
	case 1:
		if fs.Changed("model") {
			return usagef("give the model as --model or as the argument, not both")
		}
		o.eng.model = fs.Arg(0)
	default:
		return usagef("models eval takes one model reference")
	}
	if o.scenes < 1 {
		return usagef("--scenes must be at least 1")
	}
	eng, err := o.eng.open(ctx, e, pipeline.Options{})
	if err != nil {
		return err
	}
	defer eng.Close()
	m := eng.Model()
	opts := eval.Options{Scenes: o.scenes, Windows: o.windows}
	// SigLIP 2 NaFlex: the wide scenes, the model's own grid over the
	// whole image (no windows); the square scenes' figures do not follow
	// its grids.
	opts.WideOnly = eng.Preprocessor().NaFlex != nil
	line := newStatusLine(e.Stderr, o.json)
	opts.Progress = func(done, total int) {
		line.show(fmt.Sprintf("%sevaluating: %d/%d images", bar(done, total, 24), done, total), false)
	}
	defer line.done()
	res, err := eval.Run(ctx, eng, opts)
	if err != nil {
		return err
	}
	if o.json {
		var v any = res
		if opts.WideOnly {
			v = map[string]any{"wide": res.Wide}
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(e.Stdout, string(b))
		return nil
	}
	if opts.WideOnly {
		w := res.Wide
		fmt.Fprintf(e.Stdout, "model %s (SigLIP 2 NaFlex: each image on its own grid, no windows) on wide scenes (3:1, the object in the left third; seed %d)\n", m.Name(), eval.WideSeed)
		fmt.Fprintf(e.Stdout, "  shape word's map peak inside the object:               %5.1f%%  (%d scenes; target ≥ 90%%)\n", 100*w.PeakInside, w.Scenes)
		fmt.Fprintf(e.Stdout, "  shape word's map mIoU (DAAM: normalised, ≥ %.1f):       %5.1f   (target ≥ 60)\n", eval.MapThreshold, 100*w.MapIoU)
		return nil
	}
	fmt.Fprintf(e.Stdout, "model %s on held-out scenes of two renderers\n", m.Name())
	for _, f := range []struct {
		title string
		fig   eval.Figures
		zs    float64
	}{
		{fmt.Sprintf("training renderer (internal/scenes, seeds %d and %d)", eval.SingleSeed, eval.PairSeed), res.Training, 92},
		{fmt.Sprintf("independent renderer (internal/vecscenes, seeds %d and %d; never trained on)", eval.VectorSingleSeed, eval.VectorPairSeed), res.Independent, 90},
	} {
		r := f.fig
		fmt.Fprintf(e.Stdout, "%s\n", f.title)
		fmt.Fprintf(e.Stdout, "  zero-shot top-1, single objects, %d colour×shape prompts: %5.1f%%  (%d scenes; target ≥ %.0f%%)\n", len(eval.Colours)*len(eval.Shapes), 100*r.ZeroShotTop1, r.ZeroShotN, f.zs)
		fmt.Fprintf(e.Stdout, "  shape named right, per shape (target ≥ 85%% each):      ")
		for i, a := range r.ShapeAccuracy() {
			fmt.Fprintf(e.Stdout, " %s %.1f%%", eval.Shapes[i], 100*a)
		}
		fmt.Fprintln(e.Stdout)
		fmt.Fprintf(e.Stdout, "  text → image peak inside the named object:            %5.1f%%  (%d words; target ≥ 95%%)\n", 100*r.PeakInside, r.PeakWords)
		fmt.Fprintf(e.Stdout, "  text → image map mIoU (DAAM: normalised, ≥ %.1f):      %5.1f   (the same words)\n", eval.MapThreshold, 100*r.MapIoU)
		fmt.Fprintf(e.Stdout, "  image → text: object patches attend most to its words: %5.1f%%  (%d patches; target ≥ 90%%)\n", 100*r.OwnWord, r.OwnPatches)
		if o.verbose {
			printConfusion(e.Stdout, r.ShapeConfusion)
		}
	}
	if w := res.Wide; w != nil {
		fmt.Fprintf(e.Stdout, "wide scenes (3:1, the object in the left third, outside the centre square; --windows; seed %d)\n", eval.WideSeed)
		fmt.Fprintf(e.Stdout, "  shape word's map peak inside the object:               %5.1f%%  (%d scenes; target ≥ 90%%)\n", 100*w.PeakInside, w.Scenes)
		fmt.Fprintf(e.Stdout, "  shape word's map mIoU (DAAM: normalised, ≥ %.1f):       %5.1f   (target ≥ 60)\n", eval.MapThreshold, 100*w.MapIoU)
	}
	return nil
}

// printConfusion writes a shape confusion matrix: rows the true shape,
// columns the shape of the top-1 prompt.
func printConfusion(w io.Writer, m [][]int) {
	fmt.Fprintf(w, "  confusion (rows: true shape; columns: predicted)\n  %-10s", "")
	for _, s := range eval.Shapes {
		fmt.Fprintf(w, "%9s", s)
	}
	fmt.Fprintln(w)
	for i, row := range m {
		fmt.Fprintf(w, "  %-10s", eval.Shapes[i])
		for _, c := range row {
			fmt.Fprintf(w, "%9d", c)
		}
		fmt.Fprintln(w)
	}
}
