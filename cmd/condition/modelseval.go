package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/pipeline"
)

type evalOptions struct {
	ort     ortOptions
	variant string
	scenes  int
	json    bool
}

func (o *evalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.scenes, "scenes", 1000, "held-out scenes of each kind")
	fs.StringVar(&o.variant, "variant", "", "graph variant by suffix (fp16, quantized, ...)")
	fs.BoolVar(&o.json, "json", false, "print the figures as JSON")
	o.ort.AddFlags(fs)
}

// runModelsEval measures a model on held-out scenes of the generator the
// default model was trained on (internal/scenes): zero-shot top-1, where the
// text → image maps peak, and which words the patches attend to.
func runModelsEval(ctx context.Context, e *env, args []string) error {
	var o evalOptions
	fs := newFlagSet(e, "models eval", "models eval [default | DIR | org/name] [--scenes N] [--json]")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ref := "default"
	switch fs.NArg() {
	case 0:
	case 1:
		ref = fs.Arg(0)
	default:
		return usagef("models eval takes one model reference")
	}
	if o.scenes < 1 {
		return usagef("--scenes must be at least 1")
	}
	if err := o.ort.validate(); err != nil {
		return err
	}
	if _, err := o.ort.load(e); err != nil {
		return err
	}
	m, err := openModel(ctx, e, ref, o.variant)
	if err != nil {
		return err
	}
	eng, err := openEngine(ctx, e, m, nil, pipeline.Options{Threads: o.ort.threads()})
	if err != nil {
		return err
	}
	defer eng.Close()
	opts := pipeline.EvalOptions{Scenes: o.scenes}
	line := newStatusLine(e.Stderr, o.json)
	opts.Progress = func(done, total int) {
		line.show(fmt.Sprintf("%sevaluating: %d/%d images", bar(done, total, 24), done, total), false)
	}
	defer line.done()
	res, err := pipeline.Evaluate(ctx, eng, opts)
	if err != nil {
		return err
	}
	if o.json {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.Stdout, string(b))
		return nil
	}
	fmt.Fprintf(e.Stdout, "model %s on held-out generated scenes (seeds %d and %d)\n", m.Name(), pipeline.EvalSingleSeed, pipeline.EvalPairSeed)
	fmt.Fprintf(e.Stdout, "  zero-shot top-1, single objects, %d colour×shape prompts: %5.1f%%  (%d scenes; target ≥ 90%%)\n", len(scenes.Colours)*len(scenes.Shapes), 100*res.ZeroShotTop1, res.ZeroShotN)
	fmt.Fprintf(e.Stdout, "  text → image peak inside the named object:            %5.1f%%  (%d words; target ≥ 80%%)\n", 100*res.PeakInside, res.PeakWords)
	fmt.Fprintf(e.Stdout, "  image → text: object patches attend most to its words: %5.1f%%  (%d patches; target ≥ 70%%)\n", 100*res.OwnWord, res.OwnPatches)
	return nil
}
