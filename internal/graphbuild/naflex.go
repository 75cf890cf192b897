package graphbuild

import "fmt"

// naflexVision assembles SigLIP 2's NaFlex vision tower
// (Siglip2VisionTransformer): the patch embedding, a Linear over each
// patch's C·p² pixels; plus position_embeddings, the caller's resized
// position table; encoder blocks whose attention sees only the image's
// patches; post_layernorm; and the pooling head, masked the same way.
func (b *builder) naflexVision(c SiglipConfig) {
	v := c.Vision
	g := b.g
	d, inter, heads := int64(v.HiddenSize), int64(v.IntermediateSize), int64(v.Heads)
	p, ch := int64(v.PatchSize), int64(v.Channels)
	in := ch * p * p
	g.inputs = []valueInfo{
		{name: "pixel_values", elem: tFloat, dims: []any{"batch_size", "patches", in}},
		{name: "pixel_attention_mask", elem: tInt64, dims: []any{"batch_size", "patches"}},
		{name: "position_embeddings", elem: tFloat, dims: []any{"batch_size", "patches", d}},
	}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch_size", "patches", d}},
		{name: "pooler_output", elem: tFloat, dims: []any{"batch_size", d}},
		{name: ReadoutInput, elem: tFloat, dims: []any{"batch_size", "patches", d}},
	}
	for _, n := range []string{"pixel_values", "pixel_attention_mask", "position_embeddings", "last_hidden_state", "pooler_output", ReadoutInput} {
		g.names[n] = true
	}
	// The position table is read by the caller; the graph checks its
	// shape all the same, so that a checkpoint without it fails here.
	b.need("vision_model.embeddings.position_embedding.weight", int64(v.NumPatches), d)

	x := b.linear("pixel_values", "vision_model.embeddings.patch_embedding", d, in)
	x = g.op("Add", "", x, "position_embeddings")

	// The scores' bias: the lowest float32 on padding keys, [B, 1, 1, M]
	// for the probe, expanded to [B, 1, M, M] for self-attention.
	keys, self := b.keyPaddingBias("pixel_attention_mask")

	for i := 0; i < v.Layers; i++ {
		if i == v.Layers-1 {
			x = g.op("Identity", ReadoutInput, x)
		}
		x = b.encoderLayer(x, fmt.Sprintf("vision_model.encoder.layers.%d.", i), d, inter, heads, v.HiddenAct, v.LayerNormEps, self, "")
	}
	x = b.layerNorm(x, "vision_model.post_layernorm", d, v.LayerNormEps, "last_hidden_state")
	b.poolingHead(x, v, keys)
}
