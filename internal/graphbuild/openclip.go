package graphbuild

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conditionhq/condition/tensorio"
)

// OpenCLIPFile is the safetensors checkpoint of a model in OpenCLIP's
// layout (beside its open_clip_config.json).
const OpenCLIPFile = "open_clip_model.safetensors"

// view is a tensor under a Hugging Face CLIPModel name made from one of
// OpenCLIP's: src as it is, rows [lo, hi) of its first axis, or its
// transpose.
type view struct {
	src       string
	shape     []int
	lo, hi    int // rows of src (hi 0: all of them)
	transpose bool
}

// openCLIPEntry is one OpenCLIP tensor, its shape, and the Hugging Face
// names it becomes.
type openCLIPEntry struct {
	src   string
	shape []int
	kind  byte // '=' as it is, 'T' transposed, '3' split in q, k, v rows
	hf    []string
}

// OpenOpenCLIPCheckpoint opens dir/open_clip_model.safetensors, a CLIP
// model in OpenCLIP's layout, and serves its tensors under the names of
// Hugging Face's CLIPModel, as the graph builder reads them (the config c
// gives the sizes; no tensor is read until asked for):
//
//	visual.conv1.weight                    vision_model.embeddings.patch_embedding.weight
//	visual.class_embedding                 vision_model.embeddings.class_embedding
//	visual.positional_embedding            vision_model.embeddings.position_embedding.weight
//	visual.ln_pre.*                        vision_model.pre_layrnorm.*
//	visual.transformer.resblocks.N.ln_1.*  vision_model.encoder.layers.N.layer_norm1.*
//	  attn.in_proj_weight [3D, D]          self_attn.{q,k,v}_proj.weight (rows 0:D, D:2D, 2D:3D)
//	  attn.in_proj_bias [3D]               self_attn.{q,k,v}_proj.bias
//	  attn.out_proj.*                      self_attn.out_proj.*
//	  ln_2.*, mlp.c_fc.*, mlp.c_proj.*     layer_norm2.*, mlp.fc1.*, mlp.fc2.*
//	visual.ln_post.*                       vision_model.post_layernorm.*
//	visual.proj [D, E] (x @ proj)          visual_projection.weight [E, D] (its transpose)
//	token_embedding.weight                 text_model.embeddings.token_embedding.weight
//	positional_embedding                   text_model.embeddings.position_embedding.weight
//	transformer.resblocks.N.*              text_model.encoder.layers.N.* (as above)
//	ln_final.*                             text_model.final_layer_norm.*
//	text_projection [D, E] (x @ proj)      text_projection.weight [E, D] (its transpose)
//	logit_scale, logit_bias                as they are
//
// CustomTextCLIP's checkpoints (custom_text) have the text tower's under
// text. (text.token_embedding.weight, text.transformer.resblocks.N.*,
// text.ln_final.*, text.text_projection). A PE-Core vision tower
// (c.Vision.PE) keeps its timm names under visual.trunk. (see PEVision);
// its blocks' norm1, attn.qkv (split in q, k, v rows) and attn.proj are
// also served as vision_model.encoder.layers.N.{layer_norm1, self_attn.*}.
//
// Every OpenCLIP tensor the graphs use is checked first: missing, not
// floating point, or of a shape other than the config's is an error naming
// the tensor, what was expected and what was found.
func OpenOpenCLIPCheckpoint(dir string, c CLIPConfig) (*Checkpoint, error) {
	path := filepath.Join(dir, OpenCLIPFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("graphbuild: %w", err)
	}
	ck := &Checkpoint{where: map[string]int{}}
	if err := ck.add(path); err != nil {
		ck.Close()
		return nil, err
	}
	var errs []string
	ck.views = map[string]view{}
	// CustomTextCLIP (custom_text, every PE-Core config) keeps the text
	// tower under text.; CLIP keeps it at the top.
	text := ""
	if ck.Has(customTextPrefix + "token_embedding.weight") {
		text = customTextPrefix
	}
	for _, e := range openCLIPEntries(c, text) {
		info, ok := ck.Info(e.src)
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("tensor %s is missing (expected shape %v)", e.src, e.shape))
			continue
		case !isFloat(info.DType):
			errs = append(errs, fmt.Sprintf("tensor %s is %s, expected a floating-point tensor", e.src, info.DType))
			continue
		case !slices.Equal(info.Shape, e.shape):
			errs = append(errs, fmt.Sprintf("tensor %s has shape %v, expected %v", e.src, info.Shape, e.shape))
			continue
		}
		switch e.kind {
		case 'T':
			ck.views[e.hf[0]] = view{src: e.src, shape: []int{e.shape[1], e.shape[0]}, transpose: true}
		case '3':
			n := e.shape[0] / 3
			for i, h := range e.hf {
				ck.views[h] = view{src: e.src, shape: append([]int{n}, e.shape[1:]...), lo: i * n, hi: (i + 1) * n}
			}
		default:
			for _, h := range e.hf {
				ck.views[h] = view{src: e.src, shape: e.shape}
			}
		}
	}
	if len(errs) > 0 {
		ck.Close()
		return nil, fmt.Errorf("graphbuild: %s does not match its open_clip_config.json: %s", path, strings.Join(errs, "; "))
	}
	return ck, nil
}

// customTextPrefix is where OpenCLIP's CustomTextCLIP keeps its text
// tower's tensors.
const customTextPrefix = "text."

// openCLIPEntries lists the OpenCLIP tensors of a CLIP model of config c
// with their shapes and Hugging Face names, the text tower's under the
// prefix text. A PE-Core vision tower (c.Vision.PE) is read under its own
// names (see PEVision): the text tower, logit_scale and each block's
// attention and first norm (for the readouts) are listed.
func openCLIPEntries(c CLIPConfig, text string) []openCLIPEntry {
	v, t, e := c.Vision, c.Text, c.ProjectionDim
	out := []openCLIPEntry{
		{text + "token_embedding.weight", []int{t.VocabSize, t.HiddenSize}, '=', []string{"text_model.embeddings.token_embedding.weight"}},
		{text + "positional_embedding", []int{t.MaxPositions, t.HiddenSize}, '=', []string{"text_model.embeddings.position_embedding.weight"}},
		{text + "text_projection", []int{t.HiddenSize, e}, 'T', []string{"text_projection.weight"}},
		{"logit_scale", []int{}, '=', []string{"logit_scale"}},
	}
	out = append(out, openCLIPNorm(text+"ln_final", "text_model.final_layer_norm", t.HiddenSize)...)
	for i := range t.Layers {
		out = append(out, openCLIPBlock(fmt.Sprintf("%stransformer.resblocks.%d.", text, i), fmt.Sprintf("text_model.encoder.layers.%d.", i), t.HiddenSize, t.IntermediateSize)...)
	}
	if v.PE != nil {
		// Each block's attention under CLIPEncoderLayer's names, for the
		// readouts of the last one (the graph builder reads the timm names).
		d := v.HiddenSize
		for i := range v.Layers {
			src, hf := fmt.Sprintf("%sblocks.%d.", peTrunk, i), fmt.Sprintf("vision_model.encoder.layers.%d.", i)
			qkv := func(s string) []string {
				return []string{hf + "self_attn.q_proj." + s, hf + "self_attn.k_proj." + s, hf + "self_attn.v_proj." + s}
			}
			out = append(out,
				openCLIPEntry{src + "attn.qkv.weight", []int{3 * d, d}, '3', qkv("weight")},
				openCLIPEntry{src + "attn.qkv.bias", []int{3 * d}, '3', qkv("bias")},
				openCLIPEntry{src + "attn.proj.weight", []int{d, d}, '=', []string{hf + "self_attn.out_proj.weight"}},
				openCLIPEntry{src + "attn.proj.bias", []int{d}, '=', []string{hf + "self_attn.out_proj.bias"}})
			out = append(out, openCLIPNorm(src+"norm1", hf+"layer_norm1", d)...)
		}
		return out
	}
	grid := 0
	if v.PatchSize > 0 {
		grid = v.ImageSize / v.PatchSize
	}
	out = append(out,
		openCLIPEntry{"visual.conv1.weight", []int{v.HiddenSize, v.Channels, v.PatchSize, v.PatchSize}, '=', []string{"vision_model.embeddings.patch_embedding.weight"}},
		openCLIPEntry{"visual.class_embedding", []int{v.HiddenSize}, '=', []string{"vision_model.embeddings.class_embedding"}},
		openCLIPEntry{"visual.positional_embedding", []int{1 + grid*grid, v.HiddenSize}, '=', []string{"vision_model.embeddings.position_embedding.weight"}},
		openCLIPEntry{"visual.proj", []int{v.HiddenSize, e}, 'T', []string{"visual_projection.weight"}})
	out = append(out, openCLIPNorm("visual.ln_pre", "vision_model.pre_layrnorm", v.HiddenSize)...)
	out = append(out, openCLIPNorm("visual.ln_post", "vision_model.post_layernorm", v.HiddenSize)...)
	for i := range v.Layers {
		out = append(out, openCLIPBlock(fmt.Sprintf("visual.transformer.resblocks.%d.", i), fmt.Sprintf("vision_model.encoder.layers.%d.", i), v.HiddenSize, v.IntermediateSize)...)
	}
	return out
}

// openCLIPNorm maps a LayerNorm's weight and bias.
func openCLIPNorm(src, hf string, d int) []openCLIPEntry {
	return []openCLIPEntry{
		{src + ".weight", []int{d}, '=', []string{hf + ".weight"}},
		{src + ".bias", []int{d}, '=', []string{hf + ".bias"}},
	}
}

// openCLIPBlock maps one residual attention block of width d and MLP
// width inter: OpenCLIP's ResidualAttentionBlock (nn.MultiheadAttention's
// packed in_proj) to CLIPEncoderLayer.
func openCLIPBlock(src, hf string, d, inter int) []openCLIPEntry {
	qkv := func(s string) []string {
		return []string{hf + "self_attn.q_proj." + s, hf + "self_attn.k_proj." + s, hf + "self_attn.v_proj." + s}
	}
	out := []openCLIPEntry{
		{src + "attn.in_proj_weight", []int{3 * d, d}, '3', qkv("weight")},
		{src + "attn.in_proj_bias", []int{3 * d}, '3', qkv("bias")},
		{src + "attn.out_proj.weight", []int{d, d}, '=', []string{hf + "self_attn.out_proj.weight"}},
		{src + "attn.out_proj.bias", []int{d}, '=', []string{hf + "self_attn.out_proj.bias"}},
		{src + "mlp.c_fc.weight", []int{inter, d}, '=', []string{hf + "mlp.fc1.weight"}},
		{src + "mlp.c_fc.bias", []int{inter}, '=', []string{hf + "mlp.fc1.bias"}},
		{src + "mlp.c_proj.weight", []int{d, inter}, '=', []string{hf + "mlp.fc2.weight"}},
		{src + "mlp.c_proj.bias", []int{d}, '=', []string{hf + "mlp.fc2.bias"}},
	}
	out = append(out, openCLIPNorm(src+"ln_1", hf+"layer_norm1", d)...)
	return append(out, openCLIPNorm(src+"ln_2", hf+"layer_norm2", d)...)
}

// viewInfo returns the dtype and shape of the view name.
func (c *Checkpoint) viewInfo(name string) (tensorio.TensorInfo, bool) {
	v, ok := c.views[name]
	if !ok {
		return tensorio.TensorInfo{}, false
	}
	info := c.headers[c.where[v.src]].Tensors[v.src]
	return tensorio.TensorInfo{DType: info.DType, Shape: slices.Clone(v.shape)}, true
}

// viewFloat32 reads the view v from its OpenCLIP tensor.
func (c *Checkpoint) viewFloat32(v view) ([]float32, error) {
	x, err := c.fileFloat32(v.src)
	if err != nil {
		return nil, err
	}
	switch {
	case v.transpose:
		return transpose(x, v.shape[1], v.shape[0]), nil
	case v.hi > 0:
		row := 1
		for _, s := range v.shape[1:] {
			row *= s
		}
		return x[v.lo*row : v.hi*row : v.hi*row], nil
	}
	return x, nil
}
