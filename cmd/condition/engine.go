package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	_ "github.com/conditionhq/condition/models/embedded" // the model "default"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/xattn"
)

// layerOptions are the flags that pick the attention layer: --xattn,
// --xattn-prefix, --heads and --direction.
type layerOptions struct {
	xattn     string
	prefix    string
	heads     int
	direction string
}

func (o *layerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.direction, "direction", "both", "image-to-text, text-to-image or both")
	fs.StringVar(&o.xattn, "xattn", "joint", "attention weights: joint (CLIP's joint space), identity, or a .safetensors file of a learned layer")
	fs.StringVar(&o.prefix, "xattn-prefix", "", "tensor name prefix of the learned layer (diffusers names to_q, to_k, to_v, to_out.0 follow it)")
	fs.IntVar(&o.heads, "heads", 0, "heads of a learned or identity layer (default 8 learned, 1 identity)")
}

// apply parses the flags into engine options for model m.
func (o *layerOptions) apply(m *models.Model, opts *pipeline.Options) error {
	if o.heads < 0 {
		return usagef("--heads must be 0 or more, got %d", o.heads)
	}
	dir, err := xattn.ParseDirection(o.direction)
	if err != nil {
		return usagef("--direction %q: want image-to-text, text-to-image or both", o.direction)
	}
	opts.Direction = dir
	switch o.xattn {
	case "joint", "":
		if o.heads != 0 {
			return usagef("--heads applies to --xattn identity or a learned layer; --xattn joint (CLIP's joint space) has no heads")
		}
		if o.prefix != "" {
			return usagef("--xattn-prefix applies to a learned layer (--xattn FILE.safetensors), not to --xattn joint")
		}
		return nil
	case "identity":
		dt, dv := m.Config().TextConfig.HiddenSize, m.Config().VisionConfig.HiddenSize
		if dt != dv {
			return usagef("--xattn identity needs token and patch states of one width; model %s has %d and %d (use --xattn joint)", m.Name(), dt, dv)
		}
		heads := o.heads
		if heads == 0 {
			heads = 1
		}
		if opts.Layer, err = xattn.Identity(dt, heads, 0); err != nil {
			return usagef("--xattn identity --heads %d: %v", heads, err)
		}
		opts.LayerName = "identity"
		if heads != 1 {
			opts.LayerName = fmt.Sprintf("identity/%d", heads)
		}
		return nil
	}
	heads := o.heads
	if heads == 0 {
		heads = 8
	}
	if opts.Layer, err = pipeline.LoadDiffusersLayer(o.xattn, o.prefix, heads); err != nil {
		return fmt.Errorf("--xattn: %w", err)
	}
	opts.LayerName = fmt.Sprintf("%s#%s/%d", o.xattn, o.prefix, heads)
	return nil
}

// openEngine opens the engine of model m with opts, the attention layer
// given by lo (nil: CLIP's joint space both ways).
func openEngine(ctx context.Context, e *env, m *models.Model, lo *layerOptions, opts pipeline.Options) (*pipeline.Engine, error) {
	if lo != nil {
		if err := lo.apply(m, &opts); err != nil {
			return nil, err
		}
	}
	opts.Log = e.Log
	return pipeline.New(ctx, m, opts)
}

// autoStreams is Options.Streams for a --streams (or --workers) flag whose
// 0 means as many encoder streams as the cores hold.
func autoStreams(n int) int {
	if n == 0 {
		return pipeline.AutoStreams
	}
	return n
}
