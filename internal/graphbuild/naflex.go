package graphbuild

import (
	"fmt"
	"math"
)

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

	// The probe's scores get the lowest float32 on padding keys, [B, 1, 1,
	// M]. Self-attention (MultiHeadAttention) gets the same effect from an
	// extra column per head (naflexAttention): a bias input would turn off
	// ONNX Runtime's flash attention on CPU, which fixed-resolution towers
	// use; packed (the Attention operator) takes the bias [B, 1, M, M].
	padding := b.paddingOf("pixel_attention_mask")
	keys := b.keyBias(padding)
	var self, keyCol string
	if b.opts.QKV == QKVPacked {
		self = b.selfBias(keys, "pixel_attention_mask")
	} else {
		keyCol = b.naflexKeyColumn(padding, d, heads)
	}

	for i := 0; i < v.Layers; i++ {
		if i == v.Layers-1 {
			x = g.op("Identity", ReadoutInput, x)
		}
		prefix := fmt.Sprintf("vision_model.encoder.layers.%d.", i)
		if keyCol == "" {
			x = b.encoderLayer(x, prefix, d, inter, heads, v.HiddenAct, v.LayerNormEps, self, "")
			continue
		}
		x = b.encoderBlock(x, prefix, d, inter, v.HiddenAct, v.LayerNormEps, "", func(h string) string {
			return b.naflexAttention(h, prefix+"self_attn.", d, heads, keyCol)
		})
	}
	x = b.layerNorm(x, "vision_model.post_layernorm", d, v.LayerNormEps, "last_hidden_state")
	b.poolingHead(x, v, keys)
}

// naflexKeyOffset is the key column's value on padding keys: with the
// query column's 1, it adds −1e9 to their scores before the scale, far past
// where exp underflows to 0 (as torch's lowest-float bias does), and far
// from where a score could overflow.
const naflexKeyOffset = -1e9

// naflexKeyColumn adds the key column of naflexAttention [B, M,
// heads·(hd+1)] for padding [B, M] (paddingOf): naflexKeyOffset in each
// head's last column on padding rows, 0 elsewhere.
func (b *builder) naflexKeyColumn(padding string, d, heads int64) string {
	g := b.g
	hd := d / heads
	slots := make([]float32, heads*(hd+1))
	for h := int64(0); h < heads; h++ {
		slots[h*(hd+1)+hd] = naflexKeyOffset
	}
	col := g.op("Unsqueeze", "", padding, g.constInts("axes", []int64{1}, 2))
	return g.op("Mul", "", col, g.constFloats("key_column", []int64{heads * (hd + 1)}, slots...))
}

// naflexAttention adds self-attention over h [B, M, d] as selfAttention's
// MultiHeadAttention forms do (QKVSeparate, QKVSplit), with the key
// padding mask in an extra column per head instead of a bias input: the
// queries' column is 1 (a zero weight column, bias 1), the keys' is 0 plus
// keyCol (naflexKeyColumn), so each score gains 0 on the image's patches
// and naflexKeyOffset on padding; the values keep their width, and the
// scale stays 1/√hd. ONNX Runtime then runs its flash attention. Returns
// the heads' outputs [B, M, d].
func (b *builder) naflexAttention(h, prefix string, d, heads int64, keyCol string) string {
	g := b.g
	hd := d / heads
	wide := heads * (hd + 1)
	lin := clipQKV(prefix)
	var q, k, v string
	if b.opts.QKV == QKVSplit {
		qkv := g.op("MatMul", "", h, b.naflexPackedT(prefix+"qkv.naflex", lin, d, heads))
		q, k, v = g.tmp("q"), g.tmp("k"), g.tmp("v")
		g.nodes = append(g.nodes, &node{op: "Split", name: q, in: []string{qkv, g.constInts("qkv_sizes", []int64{3}, wide, wide, d)},
			out: []string{q, k, v}, attrs: []attr{intAttr("axis", -1)}})
	} else {
		q = g.op("MatMul", "", h, b.naflexT(lin[0]+".weight", d, heads))
		k = g.op("MatMul", "", h, b.naflexT(lin[1]+".weight", d, heads))
		v = g.op("MatMul", "", h, b.wT(lin[2]+".weight", d, d))
	}
	k = g.op("Add", "", k, keyCol)
	attn := g.op("MultiHeadAttention", "", q, k, v, b.naflexBias(prefix+"qkv.naflex", lin, d, heads))
	n := g.last()
	n.domain = msDomain
	n.with(intAttr("num_heads", heads), floatAttr("scale", float32(1/math.Sqrt(float64(hd)))))
	return attn
}

// naflexWiden writes w [d, d] (a Linear's [out, in]) transposed into dst
// [d, stride] from column c0: output o = head·hd + j goes to column
// c0 + head·(hd+1) + j; each head's column hd is left as it is (zero).
func naflexWiden(dst, w []float32, d, heads, stride, c0 int64) {
	hd := d / heads
	for o := int64(0); o < d; o++ {
		c := c0 + o/hd*(hd+1) + o%hd
		for i := int64(0); i < d; i++ {
			dst[i*stride+c] = w[o*d+i]
		}
	}
}

// naflexT adds the Linear name [d, d] transposed and widened for
// naflexAttention: [d, heads·(hd+1)], each head's last column zero.
func (b *builder) naflexT(name string, d, heads int64) string {
	b.need(name, d, d)
	wide := heads * (d/heads + 1)
	return b.g.weight(name+".naflex.T", []int64{d, wide}, func() ([]float32, error) {
		w, err := b.ck.Float32(name)
		if err != nil {
			return nil, err
		}
		out := make([]float32, d*wide)
		naflexWiden(out, w, d, heads, wide, 0)
		return out, nil
	})
}

// naflexPackedT adds the q, k, v Linear weights of lin side by side for
// naflexAttention's QKVSplit: [d, 2·heads·(hd+1) + d], q and k widened as
// naflexT does, v as it is.
func (b *builder) naflexPackedT(key string, lin [3]string, d, heads int64) string {
	var names [3]string
	for i, l := range lin {
		names[i] = l + ".weight"
		b.need(names[i], d, d)
	}
	wide := heads * (d/heads + 1)
	stride := 2*wide + d
	return b.g.weight(key+".weight.T", []int64{d, stride}, func() ([]float32, error) {
		out := make([]float32, d*stride)
		for k, n := range names {
			w, err := b.ck.Float32(n)
			if err != nil {
				return nil, err
			}
			if k < 2 {
				naflexWiden(out, w, d, heads, stride, int64(k)*wide)
				continue
			}
			for o := int64(0); o < d; o++ {
				for i := int64(0); i < d; i++ {
					out[i*stride+2*wide+o] = w[o*d+i]
				}
			}
		}
		return out, nil
	})
}

// naflexBias adds MultiHeadAttention's bias input for naflexAttention
// [2·heads·(hd+1) + d]: the q bias widened with 1 in each head's last
// column, the k bias widened with 0 there, the v bias.
func (b *builder) naflexBias(key string, lin [3]string, d, heads int64) string {
	var names [3]string
	for i, l := range lin {
		names[i] = l + ".bias"
		b.need(names[i], d)
	}
	hd := d / heads
	wide := heads * (hd + 1)
	return b.g.weight(key+".bias", []int64{2*wide + d}, func() ([]float32, error) {
		out := make([]float32, 2*wide+d)
		for k, n := range names {
			v, err := b.ck.Float32(n)
			if err != nil {
				return nil, err
			}
			if k == 2 {
				copy(out[2*wide:], v)
				continue
			}
			for o := int64(0); o < d; o++ {
				out[int64(k)*wide+o/hd*(hd+1)+o%hd] = v[o]
			}
		}
		for h := int64(0); h < heads; h++ {
			out[h*(hd+1)+hd] = 1 // the queries' column
		}
		return out, nil
	})
}
