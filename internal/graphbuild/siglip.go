package graphbuild

import (
	"errors"
	"fmt"
	"math"
)

// SiglipConfig is what the SigLIP graphs are built from: a Hugging Face
// SiglipConfig's fields (models.Config translates a config.json). SigLIP 2
// at a fixed resolution has the same towers and config; its NaFlex form
// (model_type siglip2, Vision.NumPatches set) has SigLIP's text tower and
// a vision tower over patch sequences (see BuildSiglip).
type SiglipConfig struct {
	ModelType string // "siglip", or "siglip2" (NaFlex)
	// Text is the text tower's sizes; EosTokenID is not used (the pooled
	// position is the last one).
	Text TextConfig
	// ProjectionSize is text_config.projection_size, the width of
	// text_model.head's output (0: Text.HiddenSize, as transformers
	// defaults it).
	ProjectionSize int
	Vision         VisionConfig
}

// projectionSize returns the text head's output width.
func (c SiglipConfig) projectionSize() int {
	if c.ProjectionSize == 0 {
		return c.Text.HiddenSize
	}
	return c.ProjectionSize
}

func (c SiglipConfig) check() error {
	var errs []error
	switch c.ModelType {
	case "siglip":
		if c.Vision.NumPatches != 0 {
			errs = append(errs, fmt.Errorf("vision_config.num_patches %d in a siglip config: NaFlex is model_type \"siglip2\"", c.Vision.NumPatches))
		}
	case "siglip2":
		n := c.Vision.NumPatches
		if side := int(math.Sqrt(float64(n))); n <= 0 || side*side != n {
			errs = append(errs, fmt.Errorf("vision_config.num_patches is %d, expected a square number (the position grid)", n))
		}
	default:
		return fmt.Errorf("model_type %q: only siglip and siglip2 graphs are built here", c.ModelType)
	}
	if c.ProjectionSize < 0 {
		errs = append(errs, fmt.Errorf("text_config.projection_size is %d, expected a positive number", c.ProjectionSize))
	}
	return errors.Join(append(errs, checkTowers(c.Text, c.Vision)...)...)
}

// BuildSiglip writes outDir/onnx/text_model.onnx and
// outDir/onnx/vision_model.onnx from the checkpoint ck of a SigLIP (or
// fixed-resolution SigLIP 2) model whose config is c, laid out as the
// Transformers.js and optimum exports of SiglipTextModel and
// SiglipVisionModel are:
//
//	text_model.onnx    input_ids int64 [batch_size, T] (T = max_position_embeddings; no attention_mask) →
//	                   last_hidden_state [batch_size, T, d_t] (after final_layer_norm),
//	                   pooler_output [batch_size, P] (text_model.head of the last position's state)
//	vision_model.onnx  pixel_values float32 [batch_size, C, S, S] →
//	                   last_hidden_state [batch_size, (S/p)², d_v] (every row a patch, after post_layernorm),
//	                   pooler_output [batch_size, d_v] (the attention-pooling head's),
//	                   readout_input [batch_size, (S/p)², d_v] (the last encoder layer's input,
//	                   which dense readouts recompute from; not in the exports)
//
// SigLIP 2 NaFlex (model_type siglip2) has the same text graph and this
// vision graph, over each image's patches as Siglip2ImageProcessor lays
// them out (M = its max_num_patches, p the patch):
//
//	vision_model.onnx  pixel_values float32 [batch_size, M, C·p²] (row-major patches, channel-last, zero padding rows),
//	                   pixel_attention_mask int64 [batch_size, M] (1 for the image's patches),
//	                   position_embeddings float32 [batch_size, M, d_v] (the position table resized
//	                   to the image's grid and padded, as Siglip2VisionEmbeddings computes it:
//	                   the caller's, in Go) →
//	                   last_hidden_state [batch_size, M, d_v] (after post_layernorm; padding rows included),
//	                   pooler_output [batch_size, d_v], readout_input [batch_size, M, d_v]
//
// where the encoder's and the pooling head's attention see only the
// image's patches (the lowest float32 added to the scores of padding keys).
//
// Nothing is written when the config or the checkpoint is found wrong; a
// graph is written whole or not at all.
func BuildSiglip(ck *Checkpoint, c SiglipConfig, outDir string, opts Options) ([]Written, error) {
	text, vision, err := planSiglip(ck, c, opts)
	if err != nil {
		return nil, err
	}
	return writeTowers(text, vision, outDir, opts)
}

// CheckSiglipConfig checks the config c as BuildSiglip does before it
// reads the checkpoint: the model type, the sizes and the activations.
func CheckSiglipConfig(c SiglipConfig) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("graphbuild: config: %w", err)
	}
	return nil
}

// CheckSiglip checks the config c and the checkpoint ck as BuildSiglip
// does, without writing anything.
func CheckSiglip(ck *Checkpoint, c SiglipConfig, opts Options) error {
	_, _, err := planSiglip(ck, c, opts)
	return err
}

func planSiglip(ck *Checkpoint, c SiglipConfig, opts Options) (text, vision *graph, err error) {
	if err := c.check(); err != nil {
		return nil, nil, fmt.Errorf("graphbuild: config: %w", err)
	}
	tower := func(b *builder) { b.siglipVision(c) }
	if c.ModelType == "siglip2" {
		tower = func(b *builder) { b.naflexVision(c) }
	}
	return assemble(ck, opts, func(b *builder) { b.siglipText(c) }, tower)
}

// siglipText assembles SiglipTextTransformer: token and position
// embeddings, encoder blocks without any mask (SigLIP's text attends
// everywhere, its padding included), final_layer_norm, and head of the last
// position ("sticky" EOS: prompts are padded with </s> to T).
func (b *builder) siglipText(c SiglipConfig) {
	t := c.Text
	g := b.g
	d, inter, heads := int64(t.HiddenSize), int64(t.IntermediateSize), int64(t.Heads)
	seq, ps := int64(t.MaxPositions), int64(c.projectionSize())
	g.inputs = []valueInfo{{name: "input_ids", elem: tInt64, dims: []any{"batch_size", seq}}}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch_size", seq, d}},
		{name: "pooler_output", elem: tFloat, dims: []any{"batch_size", ps}},
	}
	g.names["input_ids"], g.names["last_hidden_state"], g.names["pooler_output"] = true, true, true

	tok := g.op("Gather", "", b.w("text_model.embeddings.token_embedding.weight", int64(t.VocabSize), d), "input_ids")
	// The sequence is all of the positions: no Slice.
	x := g.op("Add", "", tok, b.w("text_model.embeddings.position_embedding.weight", seq, d))
	for i := 0; i < t.Layers; i++ {
		x = b.encoderLayer(x, fmt.Sprintf("text_model.encoder.layers.%d.", i), d, inter, heads, t.HiddenAct, t.LayerNormEps, "", "")
	}
	h := b.layerNorm(x, "text_model.final_layer_norm", d, t.LayerNormEps, "last_hidden_state")
	last := g.op("Gather", "", h, g.constInts("last_position", nil, seq-1))
	g.last().with(intAttr("axis", 1))
	y := g.op("MatMul", "", last, b.wT("text_model.head.weight", ps, d))
	g.op("Add", "pooler_output", y, b.w("text_model.head.bias", ps))
}

// siglipVision assembles SiglipVisionTransformer: the patch Conv (with its
// bias), position embeddings (no class token), encoder blocks,
// post_layernorm, and SiglipMultiheadAttentionPoolingHead: the probe
// attends over every patch (torch.nn.MultiheadAttention's in_proj q, k, v
// blocks and out_proj), then h + mlp(layernorm(h)).
func (b *builder) siglipVision(c SiglipConfig) {
	v := c.Vision
	g := b.g
	d, inter, heads := int64(v.HiddenSize), int64(v.IntermediateSize), int64(v.Heads)
	s, p, ch := int64(v.ImageSize), int64(v.PatchSize), int64(v.Channels)
	grid := s / p
	np := grid * grid
	g.inputs = []valueInfo{{name: "pixel_values", elem: tFloat, dims: []any{"batch_size", ch, s, s}}}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch_size", np, d}},
		{name: "pooler_output", elem: tFloat, dims: []any{"batch_size", d}},
		{name: ReadoutInput, elem: tFloat, dims: []any{"batch_size", np, d}},
	}
	g.names["pixel_values"], g.names["last_hidden_state"], g.names["pooler_output"], g.names[ReadoutInput] = true, true, true, true

	tr := b.patchEmbedding(d, ch, p, true)
	x := g.op("Add", "", tr, b.w("vision_model.embeddings.position_embedding.weight", np, d))
	for i := 0; i < v.Layers; i++ {
		if i == v.Layers-1 {
			x = g.op("Identity", ReadoutInput, x)
		}
		x = b.encoderLayer(x, fmt.Sprintf("vision_model.encoder.layers.%d.", i), d, inter, heads, v.HiddenAct, v.LayerNormEps, "", "")
	}
	x = b.layerNorm(x, "vision_model.post_layernorm", d, v.LayerNormEps, "last_hidden_state")
	b.poolingHead(x, v, "")
}

// poolingHead adds SiglipMultiheadAttentionPoolingHead over x [B, P, d]
// (after post_layernorm) as pooler_output [B, d]; bias, if not "", is added
// to the probe's scores [B, 1, 1, P]. The query is the probe's projection
// [1, 1, d] (a constant ONNX Runtime folds), repeated over the batch.
func (b *builder) poolingHead(x string, v VisionConfig, bias string) {
	g := b.g
	d, inter, heads := int64(v.HiddenSize), int64(v.IntermediateSize), int64(v.Heads)
	const hp = "vision_model.head."
	const inW, inB = hp + "attention.in_proj_weight", hp + "attention.in_proj_bias"
	b.need(inW, 3*d, d)
	q := g.op("MatMul", "", b.w(hp+"probe", 1, 1, d), b.rowsT(inW, "q", 0, d, d))
	bs := g.op("Shape", "", "pixel_values")
	g.last().with(intAttr("start", 0), intAttr("end", 1))
	qs := g.op("Concat", "", bs, g.constInts("shape", []int64{2}, 1, d))
	g.last().with(intAttr("axis", 0))
	q = g.op("Expand", "", q, qs)
	k := g.op("MatMul", "", x, b.rowsT(inW, "k", d, d, d))
	val := g.op("MatMul", "", x, b.rowsT(inW, "v", 2*d, d, d))
	ins := []string{q, k, val, b.w(inB, 3*d)}
	if bias != "" {
		ins = append(ins, "", bias)
	}
	attn := g.op("MultiHeadAttention", "", ins...)
	g.last().with(intAttr("num_heads", heads), floatAttr("scale", float32(1/math.Sqrt(float64(d/heads))))).domain = msDomain
	h := b.linear(attn, hp+"attention.out_proj", d, d)
	f := b.layerNorm(h, hp+"layernorm", d, v.LayerNormEps, "")
	f = b.linear(f, hp+"mlp.fc1", inter, d)
	f = b.activation(f, v.HiddenAct)
	f = b.linear(f, hp+"mlp.fc2", d, inter)
	h = g.op("Add", "", h, f)
	g.op("Gather", "pooler_output", h, g.constInts("probe_index", nil, 0))
	g.last().with(intAttr("axis", 1))
}

// rowsT adds rows [r0, r0+n) of the weight name [.., in] (checked by the
// caller) transposed to [in, n], for MatMul(x [.., in], w): one of the
// q, k, v blocks of a packed in_proj_weight.
func (b *builder) rowsT(name, part string, r0, n, in int64) string {
	return b.g.weight(name+"."+part+".T", []int64{in, n}, func() ([]float32, error) {
		v, err := b.ck.Float32(name)
		if err != nil {
			return nil, err
		}
		if int64(len(v)) < (r0+n)*in {
			return nil, fmt.Errorf("tensor %s: %d values, expected at least %d", name, len(v), (r0+n)*in)
		}
		return transpose(v[r0*in:(r0+n)*in], int(n), int(in)), nil
	})
}
