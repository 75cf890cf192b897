package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
)

// buildOptions are the flags of `condition models build`.
type buildOptions struct {
	modelFlags
	rt     engineFlags // --ort-lib and --threads
	int8   bool
	out    string
	qkv    string
	images string
}

func (o *buildOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.HubCache, "hub-cache", "", "Hugging Face hub cache folder (default: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	o.rt.AddFlags(fs, runtimeOnly)
	fs.BoolVar(&o.int8, "int8", false, "also make the int8 variant of the built graphs (as models optimize --int8 does, with its checks)")
	fs.StringVar(&o.out, "out", "", "write the graphs to DIR/onnx/ instead of this program's cache")
	fs.StringVar(&o.qkv, "qkv", "", "self-attention's q, k, v projections: separate (three MatMuls, then MultiHeadAttention; default), split (one MatMul by the packed weights, split for MultiHeadAttention; for PE-Core's vision graph, RoPE on the split q and k) or packed (com.microsoft.Attention; refused for PE-Core, whose RoPE turns q and k between their projections and the attention)")
	fs.StringVar(&o.images, "images", "", "with --int8: folder of images to check the int8 graphs on (default: 8 generated scenes)")
}

func runModelsBuild(ctx context.Context, e *env, args []string) error {
	var o buildOptions
	fs := newFlagSet(e, "models build", "models build REF [--int8] [--out DIR] [--qkv separate|split|packed] [--json]\n\n"+
		"Builds onnx/text_model.onnx and onnx/vision_model.onnx from the model's config.json and\n"+
		"model.safetensors (or model.safetensors.index.json and its shards), checks them on probe\n"+
		"inputs, and writes them to this program's cache (the model then uses them) or to --out.\n"+
		"REF is a folder or a hub id org/name[@revision], whose safetensors are downloaded whatever\n"+
		"their size (other commands build on first use, and download at most 2 GiB for it).")
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("models build takes one model reference (a folder or org/name[@revision])")
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
	opts.NoBuild = true // built below, as the flags say
	m, err := models.OpenContext(ctx, fs.Arg(0), opts)
	if err != nil {
		return advise(err, fs.Arg(0))
	}
	rep, err := m.Build(ctx, models.BuildOptions{Out: o.out, QKV: o.qkv, Threads: rtOpts.Threads})
	if err != nil {
		return err
	}
	var opt []clip.Optimized
	if o.int8 {
		if o.out != "" {
			if err := m.UseGraphsFrom(o.out); err != nil {
				return err
			}
		}
		probes, err := optimizeProbes(m, o.images)
		if err != nil {
			return err
		}
		save := func(r *clip.Optimized, write func(io.Writer) error) (string, error) {
			if o.out == "" {
				return m.SaveVariant(r.Variant, r.Graph, r, write)
			}
			p := filepath.Join(o.out, filepath.FromSlash(strings.TrimSuffix(r.Graph, ".onnx")+"_"+r.Variant+".onnx"))
			return p, tensorio.WriteFileAtomic(p, write)
		}
		opt, err = clip.Optimize(ctx, m, probes, clip.OptimizeOptions{Int8: true, Threads: rtOpts.Threads}, save)
		if err != nil {
			if o.JSON {
				writeJSONIndent(e.Stdout, map[string]any{"build": rep, "int8": opt})
			}
			if errors.Is(err, clip.ErrCheckFailed) {
				return fmt.Errorf("%w\n(the float32 graphs were written; the int8 one that failed was not)", err)
			}
			return err
		}
	}
	if o.JSON {
		return writeJSONIndent(e.Stdout, map[string]any{"build": rep, "int8": opt})
	}
	fmt.Fprintf(e.Stdout, "built from %s (%.1f MB) in %.2f s, checked in %.2f s (q, k, v %s):\n",
		strings.Join(rep.Checkpoint, ", "), float64(rep.CheckpointBytes)/1e6, rep.BuildSeconds, rep.CheckSeconds, rep.QKV)
	for _, g := range rep.Graphs {
		fmt.Fprintf(e.Stdout, "  %s: %d nodes, %.1f MB; %s\n    wrote %s\n", g.Graph, g.Nodes, float64(g.Bytes)/1e6, g.Check, g.Path)
		if g.External != "" {
			fmt.Fprintf(e.Stdout, "    weights (%.1f MB) in %s\n", float64(g.WeightBytes)/1e6, g.External)
		}
	}
	for _, r := range opt {
		fmt.Fprintf(e.Stdout, "  %s (%s): %s\n", r.Graph, r.Variant, r.Quant)
		for _, c := range r.Checks {
			fmt.Fprintf(e.Stdout, "    check on %s: %-17s cosine min %.6f mean %.6f\n", r.Probes, c.Output, c.MinCosine, c.MeanCosine)
		}
		fmt.Fprintf(e.Stdout, "    wrote %s\n", r.Written)
	}
	if o.out == "" {
		fmt.Fprintf(e.Stdout, "the model %s uses them from now on", fs.Arg(0))
		if o.int8 {
			fmt.Fprintf(e.Stdout, " (--variant %s for the int8 ones)", models.VariantOptimizedInt8)
		}
		fmt.Fprintln(e.Stdout)
	}
	return nil
}
