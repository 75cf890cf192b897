package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/pipeline"
)

const classifyUsage = `classify IMAGE... --label LABEL --label LABEL... [--template "a photo of a {}"] [--top N] [--json]

Zero-shot classification: each image against the labels, each label made a
prompt by --template ("{}" replaced by the label), scored as the model scores
(CLIP: the softmax of exp(logit_scale)·cosine over the labels, summing to 1;
SigLIP: each label's own sigmoid). Prints each image's labels best first, as
/v1/classify answers; --json prints one JSON object per image.`

type classifyOptions struct {
	eng      engineFlags
	labels   []string
	template string
	top      int
	json     bool
}

func (o *classifyOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&o.labels, "label", "l", nil, "a label; repeatable, at least two for a softmax model")
	fs.StringVar(&o.template, "template", "a photo of a {}", `the prompt each label becomes: "{}" is replaced by the label ("" or no "{}": the label alone)`)
	fs.IntVar(&o.top, "top", 0, "print only the best N labels of each image (0: all)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per image")
	o.eng.AddFlags(fs, withImages|withPrompts|withPrecision)
}

// classifyReport is one image's answer (--json).
type classifyReport struct {
	Image  string            `json:"image"`
	Scores string            `json:"scores"` // softmax or sigmoid
	Labels []classifiedLabel `json:"labels"` // best first
}

// classifiedLabel is one label's score (see pipeline.Label).
type classifiedLabel struct {
	Label  string  `json:"label"`
	Prompt string  `json:"prompt"`
	Index  int     `json:"index"` // among the labels given, from 0
	Prob   float32 `json:"prob"`
	Logit  float32 `json:"logit"`
}

func runClassify(ctx context.Context, e *env, args []string) error {
	var o classifyOptions
	fs := newFlagSet(e, "classify", classifyUsage)
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usagef("classify takes one or more images")
	}
	if len(o.labels) == 0 {
		return usagef("no labels: give --label LABEL, once for each")
	}
	if o.top < 0 {
		return usagef("--top must be 0 (all) or more, got %d", o.top)
	}
	if err := checkFiles(fs.Args()...); err != nil {
		return err
	}
	eng, err := o.eng.open(ctx, e, pipeline.Options{NoPrepack: fs.NArg() == 1})
	if err != nil {
		return err
	}
	defer eng.Close()
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		encs, err := eng.EncodeImageData(ctx, [][]byte{data})
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		labels, err := eng.Classify(ctx, &encs[0], o.labels, pipeline.ClassifyOptions{Template: o.template, Truncate: o.eng.truncate})
		if err != nil {
			return o.eng.advise(err)
		}
		if o.top > 0 && o.top < len(labels) {
			labels = labels[:o.top]
		}
		r := classifyReport{Image: path, Scores: string(eng.Scores())}
		for _, l := range labels {
			r.Labels = append(r.Labels, classifiedLabel{Label: l.Text, Prompt: l.Prompt, Index: l.Index, Prob: l.Prob, Logit: l.Logit})
		}
		if err := printClassified(e, o.json, r); err != nil {
			return err
		}
	}
	return nil
}

func printClassified(e *env, asJSON bool, r classifyReport) error {
	if asJSON {
		return json.NewEncoder(e.Stdout).Encode(r)
	}
	fmt.Fprintf(e.Stdout, "%s (%s)\n", r.Image, r.Scores)
	for _, l := range r.Labels {
		fmt.Fprintf(e.Stdout, "  %6.2f%%  %-20s logit %.3f\n", 100*l.Prob, l.Label, l.Logit)
	}
	return nil
}
