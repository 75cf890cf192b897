// Package graphbuild writes ONNX graphs of a model's encoders from its
// config and safetensors weights, without Python: CLIP's text and vision
// towers as Hugging Face's CLIPTextModelWithProjection and
// CLIPVisionModelWithProjection compute them, and SigLIP's (SigLIP 2's at a
// fixed resolution: the same towers) as SiglipTextModel and
// SiglipVisionModel do, and TIPSv2's as Tipsv2TextModel and
// Tipsv2VisionModel do, in the operators ONNX Runtime runs fastest
// (com.microsoft.MultiHeadAttention or Attention, QuickGelu, Gelu, FastGelu,
// LayerNormalization, MatMul by weights stored transposed).
//
// The graphs (BuildCLIP):
//
//	onnx/text_model.onnx    input_ids, attention_mask int64 [batch, sequence] →
//	                        last_hidden_state [batch, sequence, d_t], text_embeds [batch, d_p]
//	onnx/vision_model.onnx  pixel_values float32 [batch, C, S, S] →
//	                        last_hidden_state [batch, 1+P, d_v], image_embeds [batch, d_p],
//	                        readout_input [batch, 1+P, d_v] (the last layer's input)
//
// and, for a dense readout of the patches (ReadoutGraph, held in memory),
// a graph of the last layer's attention alone:
//
//	readout_input [batch, S, d_v] → readout_hidden_state [batch, S, d_v]
//
// (S = 1+P for CLIP; P for SigLIP, whose readout ends with post_layernorm,
// as its last_hidden_state does)
//
// and (BuildSiglip), named as optimum's and Transformers.js' SigLIP exports:
//
//	onnx/text_model.onnx    input_ids int64 [batch_size, T] (T = max_position_embeddings, 64) →
//	                        last_hidden_state [batch_size, T, d_t], pooler_output [batch_size, p]
//	                        (text_model.head of the last position; p = projection_size, d_v)
//	onnx/vision_model.onnx  pixel_values float32 [batch_size, C, S, S] →
//	                        last_hidden_state [batch_size, P, d_v] (after post_layernorm),
//	                        pooler_output [batch_size, d_v] (the attention-pooling head's),
//	                        readout_input [batch_size, P, d_v] (the last layer's input)
//
// and (BuildTips), TIPSv2's, with no projection heads (d = both widths):
//
//	onnx/text_model.onnx    input_ids, attention_mask int64 [batch, sequence] →
//	                        last_hidden_state [batch, sequence, d], text_embeds [batch, d] (the masked mean)
//	onnx/vision_model.onnx  pixel_values float32 [batch, C, H, W] (H, W fixed at build) →
//	                        last_hidden_state [batch, 1+R+P, d] (class, R registers, patches),
//	                        image_embeds [batch, d] (row 0), patch_embeds [batch, P, d] (the patch rows)
//
// Weights are read one tensor at a time by their header offsets (F32, F16,
// BF16 or F64 in the checkpoint, float32 in the graph; one file or the
// shards of model.safetensors.index.json) and streamed into the graph
// file, so that building holds about one weight in memory, not the
// checkpoint. Every tensor the graphs use is checked (present, floating
// point, the shape the config gives) before anything is written.
//
// A graph whose weights exceed 2 GiB (protobuf's limit on one message)
// keeps them in external data, a file <graph>.onnx_data beside it. That
// file is a copy, not a reference into model.safetensors: the graphs store
// weights transposed, packed (q, k, v) and in float32, which a safetensors
// file does not hold, and ONNX Runtime resolves external data relative to
// the graph's folder, where the checkpoint (often in a read-only cache) is
// not.
//
// Files are written atomically (a temporary file, then rename): the data
// file first, then the graph; a failed build leaves no partial file.
package graphbuild

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/conditionhq/condition/tensorio"
)

// Graph file names, relative to the output folder.
const (
	TextModelFile   = "onnx/text_model.onnx"
	VisionModelFile = "onnx/vision_model.onnx"
)

// producer is the producer_name written into the graphs.
const producer = "condition graphbuild"

// Written is one graph written by BuildCLIP, BuildSiglip or BuildTips.
type Written struct {
	Graph    string `json:"graph"`              // TextModelFile or VisionModelFile
	Path     string `json:"path"`               // where
	Bytes    int64  `json:"bytes"`              // the graph file's size
	External string `json:"external,omitempty"` // the external data file, when the weights are there
	Nodes    int    `json:"nodes"`
	Weights  int64  `json:"weight_bytes"` // bytes of initializers
}

// BuildCLIP writes outDir/onnx/text_model.onnx and outDir/onnx/vision_model.onnx
// (see the package doc) from the checkpoint ck of a CLIP model whose config
// is c. Nothing is written when the config or the checkpoint is found
// wrong; a graph is written whole or not at all.
func BuildCLIP(ck *Checkpoint, c CLIPConfig, outDir string, opts Options) ([]Written, error) {
	text, vision, err := plan(ck, c, opts)
	if err != nil {
		return nil, err
	}
	return writeTowers(text, vision, outDir, opts)
}

// writeTowers writes the text and vision graphs into outDir/onnx/, both or
// neither.
func writeTowers(text, vision *graph, outDir string, opts Options) ([]Written, error) {
	if err := os.MkdirAll(filepath.Join(outDir, "onnx"), 0o755); err != nil {
		return nil, fmt.Errorf("graphbuild: %w", err)
	}
	// The two graphs are written at once: one reads and converts while
	// the other waits on the disk.
	names := []string{TextModelFile, VisionModelFile}
	out := make([]Written, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, g := range []*graph{text, vision} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = writeGraph(g, filepath.Join(outDir, filepath.FromSlash(names[i])), opts)
			out[i].Graph = names[i]
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, w := range out {
			os.Remove(w.Path)
			if w.External != "" {
				os.Remove(w.External)
			}
		}
		return nil, err
	}
	return out, nil
}

// opsets of the graphs: ONNX 17 (LayerNormalization) and ONNX Runtime's
// contrib operators.
var opsets = map[string]int64{"": 17, msDomain: 1}

// writeGraph writes g to path (and its external data beside it when its
// weights are over opts.ExternalAbove).
func writeGraph(g *graph, path string, opts Options) (Written, error) {
	w := Written{Path: path, Nodes: len(g.nodes)}
	for _, t := range g.inits {
		w.Weights += t.nbytes()
	}
	limit := opts.ExternalAbove
	if limit == 0 {
		limit = defaultExternalAbove
	}
	location := ""
	if w.Weights > limit {
		location = filepath.Base(path) + "_data"
		var off int64
		for _, t := range g.inits {
			if t.nbytes() < 1024 {
				continue
			}
			off = (off + 63) &^ 63
			t.external, t.offset = true, off
			off += t.nbytes()
		}
		dp := filepath.Join(filepath.Dir(path), location)
		if err := tensorio.WriteFileAtomic(dp, func(f io.Writer) error { return writeExternal(f, g) }); err != nil {
			return w, fmt.Errorf("graphbuild: %w", err)
		}
		w.External = dp
	}
	if err := tensorio.WriteFileAtomic(path, func(f io.Writer) error { return writeModel(f, g, opsets, producer, location) }); err != nil {
		if w.External != "" {
			os.Remove(w.External)
		}
		return w, fmt.Errorf("graphbuild: %w", err)
	}
	if fi, err := os.Stat(path); err == nil {
		w.Bytes = fi.Size()
	}
	return w, nil
}

// CheckConfig checks the config c as BuildCLIP does before it reads the
// checkpoint: the model type, the sizes and the activations.
func CheckConfig(c CLIPConfig) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("graphbuild: config: %w", err)
	}
	return nil
}

// CheckCLIP checks the config c and the checkpoint ck as BuildCLIP does,
// without writing anything.
func CheckCLIP(ck *Checkpoint, c CLIPConfig, opts Options) error {
	_, _, err := plan(ck, c, opts)
	return err
}
