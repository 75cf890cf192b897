// Package models resolves model references and reads models in the Hugging
// Face layout (config.json, preprocessor_config.json, tokenizer files,
// onnx/text_model.onnx, onnx/vision_model.onnx, model.safetensors).
//
// A reference is
//
//   - a directory;
//   - a hub id "org/name[@revision]", looked up in the Hugging Face cache
//     (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub) and
//     fetched from the hub (HF_ENDPOINT, HF_TOKEN) into it when missing,
//     unless HF_HUB_OFFLINE is set;
//   - "default", the small model built into the binary;
//   - "<graphs>+<weights>": the ONNX graphs, configs and tokenizer from the
//     first (a directory or hub id), the projection heads (text_projection,
//     visual_projection, vision_model.post_layernorm, logit_scale) from the
//     model.safetensors of the second. Many ONNX exports ship no safetensors:
//     "Xenova/clip-vit-large-patch14+openai/clip-vit-large-patch14". Only the
//     heads are read from the second, with HTTP range requests when it is on
//     the hub: a 1.7 GB checkpoint is not downloaded for 3 MB of heads.
//
// ParseRef and SplitRef say which of these a string is; hub.ParseRef is the
// one authority on hub ids. A directory on disk wins over a hub id of the
// same spelling.
//
// Graphs fetched from the hub come with the files their initializers'
// external data point to (onnx/vision_model.onnx_data, ...), in the same
// snapshot folder, so that ONNX Runtime finds them beside the graph.
//
// The Hugging Face cache is a mirror of the hub: its snapshots hold what the
// hub serves and nothing else. What this program makes from a hub model
// (the heads read by ranges, graphs rewritten by Expose) is kept in its own
// cache, DefaultDerivedDir(), by repository and commit.
//
// Options.Variant picks graphs by suffix (onnx/text_model_fp16.onnx for
// "fp16"). A graph rewritten by Model.Expose (onnx/<name>.exposed.onnx,
// beside the original in a directory, in the derived cache for a hub model)
// is used in place of the original.
//
// Whatever the files' real names, the model's FS serves them under the
// canonical names: onnx/text_model.onnx, onnx/vision_model.onnx and
// model.safetensors.
package models

import (
	"log/slog"

	"github.com/conditionhq/condition/models/hub"
)

// Well-known file names inside a model.
const (
	ConfigFile       = "config.json"
	PreprocessorFile = "preprocessor_config.json"
	TextModelFile    = "onnx/text_model.onnx"
	VisionModelFile  = "onnx/vision_model.onnx"
	WeightsFile      = "model.safetensors"
)

// DefaultRef is the reference of the model built into the binary.
const DefaultRef = "default"

// Options controls Open.
type Options struct {
	// HubCache overrides the Hugging Face hub cache folder (default:
	// HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub).
	HubCache string
	// DerivedCache overrides the folder of the files made from hub models:
	// projection heads read by ranges and graphs rewritten by Expose
	// (default: DefaultDerivedDir()).
	DerivedCache string
	// Offline never touches the network (as HF_HUB_OFFLINE=1 does).
	Offline bool
	// Update asks the hub which commit a branch is at even when the cache
	// already holds the model (by default a cached model is used as is).
	Update bool
	// Variant picks graphs by suffix: "fp16" → onnx/text_model_fp16.onnx.
	Variant string
	// Weights is a directory or hub id whose model.safetensors holds the
	// projection heads (the same as "<ref>+<weights>").
	Weights string
	// MaxWeightsDownload is the size up to which a model.safetensors on the
	// hub is downloaded whole (0: SmallWeights); past it only the heads are
	// read, with range requests.
	MaxWeightsDownload int64
	// Hub, when set, is the hub client to use (endpoint, token, HTTP client);
	// nil means hub.FromEnv(). HubCache, Offline, Progress and Logger are
	// applied to a copy of it.
	Hub *hub.Client
	// Progress, when set, is called as files download.
	Progress func(hub.Progress)
	// Logger receives a line per file fetched; nil discards.
	Logger *slog.Logger
}
