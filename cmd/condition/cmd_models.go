package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/hub"
)

const modelsUsage = `REF is a directory, org/name[@revision], or <graphs>+<weights> (the ONNX graphs
of one, the projection heads from the model.safetensors of the other, read with
range requests: Xenova/clip-vit-base-patch32+org/pytorch-checkpoint).
The cache is the Hugging Face one (HF_HUB_CACHE, HF_HOME/hub,
~/.cache/huggingface/hub); HF_ENDPOINT, HF_TOKEN (or HF_HOME/token) and
HF_HUB_OFFLINE apply as in Python.`

// modelFlags are the model-opening flags of the models subcommands.
type modelFlags struct {
	Variant  string
	HubCache string
	Offline  bool
	Update   bool
	JSON     bool
}

func (o *modelFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Variant, "variant", "", "graph variant by suffix: fp16, quantized, ... (onnx/text_model_<variant>.onnx)")
	fs.StringVar(&o.HubCache, "hub-cache", "", "Hugging Face hub cache folder (default: HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)")
	fs.BoolVar(&o.Offline, "offline", false, "never touch the network (as HF_HUB_OFFLINE=1)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
}

// options returns models.Options with a progress bar on stderr.
func (o *modelFlags) options(e *env) models.Options {
	return models.Options{
		HubCache: o.HubCache,
		Offline:  o.Offline,
		Update:   o.Update,
		Variant:  o.Variant,
		Progress: progressBar(e.Stderr),
		Logger:   e.Log,
	}
}

// parseModelRef parses the flags of models SUB and its one model
// reference.
func parseModelRef(e *env, sub string, args []string) (modelFlags, string, error) {
	var o modelFlags
	fs := newFlagSet(e, "models "+sub, "models "+sub+" REF [flags]\n\n"+modelsUsage)
	o.AddFlags(fs)
	if sub == "fetch" {
		fs.BoolVar(&o.Update, "update", true, "ask the hub which commit the revision is at, even when the cache has the model")
	}
	if err := parseFlags(fs, args); err != nil {
		return o, "", err
	}
	if fs.NArg() != 1 {
		return o, "", usagef("models %s takes one model reference (a directory, org/name[@revision], or <graphs>+<weights>)", sub)
	}
	return o, fs.Arg(0), nil
}

// openModelRef parses the arguments of models SUB and opens the model
// they name.
func openModelRef(ctx context.Context, e *env, sub string, args []string) (*models.Model, modelFlags, error) {
	o, ref, err := parseModelRef(e, sub, args)
	if err != nil {
		return nil, o, err
	}
	cacheOnly := false
	if sub == "info" && !o.Offline {
		// info reads what is there; it fetches nothing unless asked (models
		// fetch), except the heads of a <graphs>+<weights> reference.
		if _, weights, err := models.SplitRef(ref); err == nil && weights == "" {
			o.Offline, cacheOnly = true, true
		}
	}
	opts := o.options(e)
	// info describes what is there: graphs built before are shown, none
	// are built for it.
	opts.NoBuild = sub == "info"
	m, err := models.OpenContext(ctx, ref, opts)
	if err != nil {
		if cacheOnly && !hub.OfflineFromEnv() && errors.Is(err, hub.ErrOffline) {
			return nil, o, fmt.Errorf("info reads only the Hugging Face cache, fetching nothing (`condition models fetch %s` fetches): %w", ref, err)
		}
		return nil, o, advise(err, ref)
	}
	return m, o, nil
}
