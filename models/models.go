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
// A folder or hub model that has config.json and safetensors weights
// (model.safetensors, or model.safetensors.index.json and its shards) but
// no ONNX graphs has them built on first use, without being asked
// (Model.Build, into the derived cache; the logger hears of it), and reused
// from then on: for a folder while its checkpoint's size and modification
// time stay the same, for a hub model by commit, offline too. For such a
// hub model Open fetches the configs, the tokenizer files and the
// safetensors only, never pytorch_model.bin or another framework's weights,
// and at most Options.MaxBuildDownload bytes of them (by default
// DefaultMaxBuildDownload, 2 GiB: a larger checkpoint is an error naming
// its size and the option, ErrBuildDownload, before anything is
// downloaded). Options.NoBuild turns building off (for programs that read
// only the tokenizer or the config). A model whose config.json the graph
// builder does not write (see CanBuild) opens without graphs, and asking
// for one says why.
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
	// hub is downloaded whole for its projection heads (0: SmallWeights);
	// past it only the heads are read, with range requests. It does not
	// apply to a checkpoint downloaded to build graphs (MaxBuildDownload).
	MaxWeightsDownload int64
	// NoBuild leaves a model without ONNX graphs as it is. By default, a
	// folder or hub model that has config.json and safetensors weights
	// (model.safetensors, or model.safetensors.index.json and its shards)
	// but no onnx/ graphs has them built on first use (Model.Build, into
	// the derived cache) and reused from then on. Graphs built earlier are
	// used either way.
	NoBuild bool
	// MaxBuildDownload is the most bytes of safetensors Open downloads
	// from the hub to build a model's graphs (0: DefaultMaxBuildDownload;
	// negative: no limit). A larger checkpoint is an error naming its size
	// (ErrBuildDownload), before anything is downloaded; files already in
	// the cache do not count.
	MaxBuildDownload int64
	// Hub, when set, is the hub client to use (endpoint, token, HTTP client);
	// nil means hub.FromEnv(). HubCache, Offline, Progress and Logger are
	// applied to a copy of it.
	Hub *hub.Client
	// Progress, when set, is called as files download.
	Progress func(hub.Progress)
	// Logger receives a line per file fetched; nil discards.
	Logger *slog.Logger
}
