package graphbuild

import (
	"errors"
	"fmt"
	"math"
)

// PEVision describes the vision tower of Meta's Perception Encoder
// (PE-Core) as timm's Eva builds it for OpenCLIP's vit_pe_core_* towers
// (timm_pool "map", timm_proj null), beyond VisionConfig's sizes:
//
//   - a patch Conv without bias, a class token (none when ClassToken is
//     false, as PE-Core bigG), an absolute position table over the class
//     token and the patches, norm_pre;
//   - pre-LN blocks whose q and k (after their biases) are turned by 2-D
//     RoPE on the patch rows, the class token's left as they are (q, k, v
//     three MatMuls, or with Options.QKV QKVSplit one and a Split): per head
//     of d_h dimensions, n = d_h/4 bands 1/10000^(i/n); the first half of
//     the head turns with the patch's column x, the second with its row y,
//     each (c + GridOffset)·RefGrid/grid; pairs (2j, 2j+1) interleaved:
//     (a, b) → (a cos θ − b sin θ, b cos θ + a sin θ);
//   - the trunk's norm, then AttentionPoolLatent: a learned latent through
//     q attends with PoolHeads heads over every row (the class token's
//     too) with k and v from kv, then proj, then y + mlp(norm(y))
//     (PoolIntermediate wide, exact GELU); then the head Linear (with bias)
//     to the projection width.
//
// Tensors are read under OpenCLIP's names for the tower
// (visual.trunk.patch_embed.proj.weight, .cls_token, .pos_embed,
// .norm_pre, .blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1,
// mlp.fc2}, .norm, .attn_pool.{latent, q, kv, proj, norm, mlp.fc1,
// mlp.fc2}, .head).
type PEVision struct {
	ClassToken       bool
	RefGrid          int     // ref_feat_shape (a square grid)
	GridOffset       float64 // rope_grid_offset
	PoolHeads        int     // attn_pool_num_heads
	PoolIntermediate int     // the pooling head's MLP width
}

// peTrunk is the prefix of the PE-Core vision tower's tensors.
const peTrunk = "visual.trunk."

// checkPE checks a PE-Core tower beyond checkTowers: head widths RoPE can
// split, the pooling head's heads and width, the reference grid, GELU.
func (c CLIPConfig) checkPE() error {
	v, pe := c.Vision, c.Vision.PE
	var errs []error
	if v.HiddenSize <= 0 || v.Heads <= 0 || v.HiddenSize%v.Heads != 0 {
		return nil // checkTowers says why
	}
	if hd := v.HiddenSize / v.Heads; hd%4 != 0 {
		errs = append(errs, fmt.Errorf("vision head width %d is not a multiple of 4, which 2-D RoPE needs (two axes of cos, sin pairs)", hd))
	}
	if pe.PoolHeads <= 0 || v.HiddenSize%pe.PoolHeads != 0 {
		errs = append(errs, fmt.Errorf("attn_pool_num_heads %d does not divide the vision width %d", pe.PoolHeads, v.HiddenSize))
	}
	if pe.RefGrid <= 0 {
		errs = append(errs, fmt.Errorf("ref_feat_shape %d: want a positive grid", pe.RefGrid))
	}
	if pe.PoolIntermediate <= 0 {
		errs = append(errs, fmt.Errorf("the pooling head's MLP width is %d, expected a positive number", pe.PoolIntermediate))
	}
	if v.HiddenAct != "gelu" {
		errs = append(errs, fmt.Errorf("vision_config.hidden_act %q: PE-Core's blocks use exact GELU (\"gelu\")", v.HiddenAct))
	}
	return errors.Join(errs...)
}

// peVision assembles the PE-Core vision tower (see PEVision):
//
//	pixel_values float32 [batch, C, S, S] →
//	last_hidden_state [batch, T, d_v] (the last block's output, before the trunk's norm; T = 1+P, or P without a class token),
//	image_embeds [batch, projection_dim] (the pooling head's output through the head Linear),
//	readout_input [batch, T, d_v] (the last block's input).
func (b *builder) peVision(c CLIPConfig) {
	v, pe := c.Vision, c.Vision.PE
	g := b.g
	d, inter, heads := int64(v.HiddenSize), int64(v.IntermediateSize), int64(v.Heads)
	s, p, ch, e := int64(v.ImageSize), int64(v.PatchSize), int64(v.Channels), int64(c.ProjectionDim)
	grid := s / p
	cls := int64(0)
	if pe.ClassToken {
		cls = 1
	}
	n := cls + grid*grid
	g.inputs = []valueInfo{{name: "pixel_values", elem: tFloat, dims: []any{"batch", ch, s, s}}}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch", n, d}},
		{name: "image_embeds", elem: tFloat, dims: []any{"batch", e}},
		{name: ReadoutInput, elem: tFloat, dims: []any{"batch", n, d}},
	}
	g.names["pixel_values"], g.names["last_hidden_state"], g.names["image_embeds"], g.names[ReadoutInput] = true, true, true, true

	x := b.patchConv(peTrunk+"patch_embed.proj", d, ch, p, false)
	if cls == 1 {
		x = g.op("Concat", "", b.batchRows(b.w(peTrunk+"cls_token", 1, 1, d), d), x)
		g.last().with(intAttr("axis", 1))
	}
	x = g.op("Add", "", x, b.w(peTrunk+"pos_embed", 1, n, d))
	x = b.layerNorm(x, peTrunk+"norm_pre", d, v.LayerNormEps, "")
	rope := newRope(g, int(grid), int(grid), int(cls), v.HiddenSize/v.Heads, pe.RefGrid, pe.GridOffset)
	for i := 0; i < v.Layers; i++ {
		out := ""
		if i == v.Layers-1 {
			out = "last_hidden_state"
			x = g.op("Identity", ReadoutInput, x)
		}
		x = b.peBlock(x, fmt.Sprintf("%sblocks.%d.", peTrunk, i), d, inter, heads, v.LayerNormEps, rope, out)
	}
	x = b.layerNorm(x, peTrunk+"norm", d, v.LayerNormEps, "")
	pooled := b.pePool(x, d, int64(pe.PoolIntermediate), int64(pe.PoolHeads), v.LayerNormEps)
	y := g.op("MatMul", "", pooled, b.wT(peTrunk+"head.weight", e, d))
	g.op("Add", "image_embeds", y, b.w(peTrunk+"head.bias", e))
}

// batchRows expands the constant rows w [1, r, d] over pixel_values' batch.
func (b *builder) batchRows(w string, d int64) string {
	g := b.g
	bs := g.op("Shape", "", "pixel_values")
	g.last().with(intAttr("start", 0), intAttr("end", 1))
	es := g.op("Concat", "", bs, g.constInts("shape", []int64{2}, 1, d))
	g.last().with(intAttr("axis", 0))
	return g.op("Expand", "", w, es)
}

// peRope is the RoPE of a PE-Core tower in a graph: the caches of
// RopeTables [T, d_h/2] and the position offset (0) of
// com.microsoft.RotaryEmbedding.
type peRope struct{ cos, sin, pos string }

// newRope adds the RoPE caches of a gh×gw grid after cls rows, heads of
// width hd (RopeTables), to g.
func newRope(g *graph, gh, gw, cls, hd, ref int, offset float64) peRope {
	cos, sin := RopeTables(gh, gw, cls, hd, ref, offset)
	dims := []int64{int64(cls + gh*gw), int64(hd / 2)}
	return peRope{
		cos: g.addInit(&initializer{name: "rope_cos", dims: dims, dtype: tFloat, floats: cos}),
		sin: g.addInit(&initializer{name: "rope_sin", dims: dims, dtype: tFloat, floats: sin}),
		pos: g.constInts("rope_position_offset", []int64{1}, 0),
	}
}

// apply turns x [B, T, heads·d_h] (q or k) by com.microsoft.RotaryEmbedding,
// interleaved: row t's pair (2j, 2j+1) of each head becomes (a cos − b sin,
// b cos + a sin), cos and sin the caches' row t, column j (the position
// ids 0 … T−1: the offset 0).
func (r peRope) apply(g *graph, x string, heads int64) string {
	y := g.op("RotaryEmbedding", "", x, r.pos, r.cos, r.sin)
	g.last().with(intAttr("interleaved", 1), intAttr("num_heads", heads)).domain = msDomain
	return y
}

// RopeTables returns PE-Core's RoPE caches for a gh×gw patch grid after
// cls unrotated rows, heads of width hd (see PEVision): cos and sin
// [cls + gh·gw, hd/2], row-major over the grid, entry (t, j) the cosine
// and sine of row t's angle for the head's pair j (its dimensions 2j and
// 2j+1). The class rows have cos 1, sin 0. Positions are
// (c + offset)·ref/g on each axis, the bands 1/10000^(i/(hd/4)); pairs
// j < hd/4 turn with the column x, the others with the row y.
func RopeTables(gh, gw, cls, hd, ref int, offset float64) (cos, sin []float32) {
	nb, n := hd/4, hd/2
	rows := cls + gh*gw
	cos = make([]float32, rows*n)
	sin = make([]float32, rows*n)
	for i := range cls * n {
		cos[i] = 1
	}
	band := make([]float64, nb)
	for i := range band {
		band[i] = 1 / math.Pow(10000, float64(i)/float64(nb))
	}
	for y := 0; y < gh; y++ {
		ty := (float64(y) + offset) / float64(gh) * float64(ref)
		for x := 0; x < gw; x++ {
			tx := (float64(x) + offset) / float64(gw) * float64(ref)
			row := (cls + y*gw + x) * n
			for j := 0; j < n; j++ {
				a := tx * band[j%nb]
				if j >= nb {
					a = ty * band[j-nb]
				}
				cos[row+j], sin[row+j] = float32(math.Cos(a)), float32(math.Sin(a))
			}
		}
	}
	return cos, sin
}

// peBlock adds one PE-Core block to x [B, T, d]: norm1, q, k, v from the
// packed qkv Linear (q and k with their biases, then RoPE: peQKV),
// attention, proj, the residual; norm2, the GELU MLP, the residual.
func (b *builder) peBlock(x, prefix string, d, inter, heads int64, eps float64, rope peRope, out string) string {
	g := b.g
	h := b.layerNorm(x, prefix+"norm1", d, eps, "")
	ins := b.peQKV(h, prefix, d, heads, rope)
	attn := g.op("MultiHeadAttention", "", ins...)
	g.last().with(intAttr("num_heads", heads), floatAttr("scale", float32(1/math.Sqrt(float64(d/heads))))).domain = msDomain
	x = g.op("Add", "", x, b.linear(attn, prefix+"attn.proj", d, d))
	h = b.layerNorm(x, prefix+"norm2", d, eps, "")
	f := b.activation(b.linear(h, prefix+"mlp.fc1", inter, d), "gelu")
	f = b.linear(f, prefix+"mlp.fc2", d, inter)
	return g.op("Add", out, x, f)
}

// peQKV adds the q, k and v of h [B, T, d] from the block's packed qkv
// Linear (prefix attn.qkv, weight [3d, d], bias [3d]), q and k with their
// biases and turned by RoPE, in the form opts.QKV asks for, and returns
// the MultiHeadAttention inputs: QKVSeparate (the default), three MatMuls
// by the weight's row blocks, v's bias left to the attention's bias input;
// QKVSplit, one MatMul by the whole weight and one Add of the whole bias,
// then Split (one MatMul for int8 to quantize). (QKVPacked is refused
// before: com.microsoft.Attention projects inside itself, where RoPE
// cannot reach q and k.)
func (b *builder) peQKV(h, prefix string, d, heads int64, rope peRope) []string {
	g := b.g
	qkvW, qkvB := prefix+"attn.qkv.weight", prefix+"attn.qkv.bias"
	b.need(qkvW, 3*d, d)
	b.need(qkvB, 3*d)
	if b.opts.QKV == QKVSplit {
		qkv := g.op("Add", "", g.op("MatMul", "", h, b.wT(qkvW, 3*d, d)), b.w(qkvB, 3*d))
		q, k, v := g.tmp("q"), g.tmp("k"), g.tmp("v")
		g.nodes = append(g.nodes, &node{op: "Split", name: q, in: []string{qkv, g.constInts("qkv_sizes", []int64{3}, d, d, d)},
			out: []string{q, k, v}, attrs: []attr{intAttr("axis", -1)}})
		return []string{rope.apply(g, q, heads), rope.apply(g, k, heads), v}
	}
	q := g.op("MatMul", "", h, b.rowsT(qkvW, "q", 0, d, d))
	k := g.op("MatMul", "", h, b.rowsT(qkvW, "k", d, d, d))
	v := g.op("MatMul", "", h, b.rowsT(qkvW, "v", 2*d, d, d))
	q = rope.apply(g, g.op("Add", "", q, b.biasRows(qkvB, "q", 0, d)), heads)
	k = rope.apply(g, g.op("Add", "", k, b.biasRows(qkvB, "k", d, d)), heads)
	// q and k have their biases; v's goes in the attention's bias input.
	vb := g.weight(qkvB+".v_only", []int64{3 * d}, func() ([]float32, error) {
		all, err := b.ck.Float32(qkvB)
		if err != nil {
			return nil, err
		}
		out := make([]float32, 3*d)
		copy(out[2*d:], all[2*d:3*d])
		return out, nil
	})
	return []string{q, k, v, vb}
}

// biasRows adds values [r0, r0+n) of the bias name (checked by the
// caller).
func (b *builder) biasRows(name, part string, r0, n int64) string {
	return b.g.weight(name+"."+part, []int64{n}, func() ([]float32, error) {
		v, err := b.ck.Float32(name)
		if err != nil {
			return nil, err
		}
		if int64(len(v)) < r0+n {
			return nil, fmt.Errorf("tensor %s: %d values, expected at least %d", name, len(v), r0+n)
		}
		return v[r0 : r0+n : r0+n], nil
	})
}

// pePool adds AttentionPoolLatent over x [B, T, d] (after the trunk's
// norm) and returns its pooled row [B, d]: the latent's query (a constant
// [1, 1, d] ONNX Runtime folds, repeated over the batch) attends over every
// row with k and v from kv; proj; then y + mlp(norm(y)).
func (b *builder) pePool(x string, d, inter, heads int64, eps float64) string {
	g := b.g
	const pp = peTrunk + "attn_pool."
	kvW, kvB, qB := pp+"kv.weight", pp+"kv.bias", pp+"q.bias"
	b.need(kvW, 2*d, d)
	b.need(kvB, 2*d)
	b.need(qB, d)
	q := g.op("MatMul", "", b.w(pp+"latent", 1, 1, d), b.wT(pp+"q.weight", d, d))
	q = b.batchRows(q, d)
	k := g.op("MatMul", "", x, b.rowsT(kvW, "k", 0, d, d))
	v := g.op("MatMul", "", x, b.rowsT(kvW, "v", d, d, d))
	bias := g.weight(pp+"qkv.bias", []int64{3 * d}, func() ([]float32, error) {
		qb, err := b.ck.Float32(qB)
		if err != nil {
			return nil, err
		}
		kvb, err := b.ck.Float32(kvB)
		if err != nil {
			return nil, err
		}
		return append(append(make([]float32, 0, 3*d), qb...), kvb...), nil
	})
	attn := g.op("MultiHeadAttention", "", q, k, v, bias)
	g.last().with(intAttr("num_heads", heads), floatAttr("scale", float32(1/math.Sqrt(float64(d/heads))))).domain = msDomain
	h := b.linear(attn, pp+"proj", d, d)
	f := b.layerNorm(h, pp+"norm", d, eps, "")
	f = b.activation(b.linear(f, pp+"mlp.fc1", inter, d), "gelu")
	f = b.linear(f, pp+"mlp.fc2", d, inter)
	h = g.op("Add", "", h, f)
	out := g.op("Gather", "", h, g.constInts("latent_index", nil, 0))
	g.last().with(intAttr("axis", 1))
	return out
}
