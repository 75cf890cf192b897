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
//     RoPE on the patch rows, the class token's left as they are: per head
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
	rope := newRope(g, int(grid), int(grid), int(cls), v.HiddenSize/v.Heads, v.Heads, pe.RefGrid, pe.GridOffset)
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

// peRope holds the RoPE tables of a PE-Core tower, cos and sin [T, d]
// (heads side by side, each head's columns in the pairs-split order of
// RopeTables), and the shapes that view a [B, T, d] row as [B, T, heads,
// 2, d_h/2] and back.
type peRope struct{ cos, sin, split, merge, halves string }

// newRope adds the RoPE tables of a gh×gw grid after cls rows, heads of
// width hd (RopeTables), to g.
func newRope(g *graph, gh, gw, cls, hd, heads, ref int, offset float64) peRope {
	cos, sin := RopeTables(gh, gw, cls, hd, heads, ref, offset)
	n, d := int64(cls+gh*gw), int64(hd*heads)
	return peRope{
		cos:    g.addInit(&initializer{name: "rope_cos", dims: []int64{n, d}, dtype: tFloat, floats: cos}),
		sin:    g.addInit(&initializer{name: "rope_sin", dims: []int64{n, d}, dtype: tFloat, floats: sin}),
		split:  g.constInts("rope_split", []int64{5}, 0, 0, int64(heads), 2, int64(hd/2)),
		merge:  g.constInts("rope_merge", []int64{3}, 0, 0, d),
		halves: g.constInts("rope_halves", []int64{2}, 1, 0),
	}
}

// apply turns x [B, T, d], whose heads' columns are in the pairs-split
// order: x·cos + swap(x)·sin, swap exchanging each head's two halves (a
// Gather of contiguous blocks).
func (r peRope) apply(g *graph, x string) string {
	v := g.op("Reshape", "", x, r.split)
	sw := g.op("Gather", "", v, r.halves)
	g.last().with(intAttr("axis", 3))
	sw = g.op("Reshape", "", sw, r.merge)
	return g.op("Add", "", g.op("Mul", "", x, r.cos), g.op("Mul", "", sw, r.sin))
}

// pairsSplit returns, for d columns in heads of width hd, the checkpoint's
// column each column of the pairs-split order takes: within a head, the
// first elements of the pairs (2j) first, then the second ones (2j+1).
// Permuting q and k alike leaves every head's scores as they are.
func pairsSplit(d, hd int) []int {
	out := make([]int, d)
	n := hd / 2
	for c := range out {
		h, m := c/hd, c%hd
		if m < n {
			out[c] = h*hd + 2*m
		} else {
			out[c] = h*hd + 2*(m-n) + 1
		}
	}
	return out
}

// RopeTables returns PE-Core's RoPE tables for a gh×gw patch grid after
// cls unrotated rows, for heads heads of width hd (see PEVision): cos and
// sin [cls + gh·gw, heads·hd], row-major over the grid, each head's
// columns in the pairs-split order (pairsSplit: a_0 … a_{n-1}, b_0 …
// b_{n-1} for the pairs (a_j, b_j) = the head's dimensions (2j, 2j+1),
// n = hd/2), so that a row r in that order is turned as y = r·cos +
// swap(r)·sin, swap exchanging the two halves of each head: sin holds
// −sin θ_j in the first half and sin θ_j in the second. The class rows
// have cos 1, sin 0. Positions are (c + offset)·ref/g on each axis, the
// bands 1/10000^(i/(hd/4)); pairs j < hd/4 turn with the column x, the
// others with the row y.
func RopeTables(gh, gw, cls, hd, heads, ref int, offset float64) (cos, sin []float32) {
	nb, n := hd/4, hd/2
	d := hd * heads
	rows := cls + gh*gw
	cos = make([]float32, rows*d)
	sin = make([]float32, rows*d)
	for r := 0; r < cls; r++ {
		for c := 0; c < d; c++ {
			cos[r*d+c] = 1
		}
	}
	band := make([]float64, nb)
	for i := range band {
		band[i] = 1 / math.Pow(10000, float64(i)/float64(nb))
	}
	pair := make([]float64, n) // the angle of each pair of a head
	for y := 0; y < gh; y++ {
		ty := (float64(y) + offset) / float64(gh) * float64(ref)
		for x := 0; x < gw; x++ {
			tx := (float64(x) + offset) / float64(gw) * float64(ref)
			for j := range pair {
				if j < nb {
					pair[j] = tx * band[j]
				} else {
					pair[j] = ty * band[j-nb]
				}
			}
			row := (cls + y*gw + x) * d
			for c := 0; c < d; c++ {
				m := c % hd
				a := pair[m%n]
				cos[row+c] = float32(math.Cos(a))
				sn := math.Sin(a)
				if m < n {
					sn = -sn
				}
				sin[row+c] = float32(sn)
			}
		}
	}
	return cos, sin
}

// peBlock adds one PE-Core block to x [B, T, d]: norm1, q, k, v from the
// packed qkv Linear (q and k with their biases, then RoPE), attention,
// proj, the residual; norm2, the GELU MLP, the residual.
func (b *builder) peBlock(x, prefix string, d, inter, heads int64, eps float64, rope peRope, out string) string {
	g := b.g
	h := b.layerNorm(x, prefix+"norm1", d, eps, "")
	qkvW, qkvB := prefix+"attn.qkv.weight", prefix+"attn.qkv.bias"
	b.need(qkvW, 3*d, d)
	b.need(qkvB, 3*d)
	// q and k in the pairs-split order RoPE is applied in (see RopeTables).
	perm := pairsSplit(int(d), int(d/heads))
	q := g.op("MatMul", "", h, b.rowsPermT(qkvW, "q", 0, perm, d))
	k := g.op("MatMul", "", h, b.rowsPermT(qkvW, "k", d, perm, d))
	v := g.op("MatMul", "", h, b.rowsT(qkvW, "v", 2*d, d, d))
	q = rope.apply(g, g.op("Add", "", q, b.biasPerm(qkvB, "q", 0, perm)))
	k = rope.apply(g, g.op("Add", "", k, b.biasPerm(qkvB, "k", d, perm)))
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
	attn := g.op("MultiHeadAttention", "", q, k, v, vb)
	g.last().with(intAttr("num_heads", heads), floatAttr("scale", float32(1/math.Sqrt(float64(d/heads))))).domain = msDomain
	x = g.op("Add", "", x, b.linear(attn, prefix+"attn.proj", d, d))
	h = b.layerNorm(x, prefix+"norm2", d, eps, "")
	f := b.activation(b.linear(h, prefix+"mlp.fc1", inter, d), "gelu")
	f = b.linear(f, prefix+"mlp.fc2", d, inter)
	return g.op("Add", out, x, f)
}

// rowsPermT adds rows r0 + perm[i] of the weight name [.., in] (checked by
// the caller), transposed to [in, len(perm)], for MatMul(x [.., in], w).
func (b *builder) rowsPermT(name, part string, r0 int64, perm []int, in int64) string {
	n := int64(len(perm))
	return b.g.weight(name+"."+part+".pairs_split.T", []int64{in, n}, func() ([]float32, error) {
		v, err := b.ck.Float32(name)
		if err != nil {
			return nil, err
		}
		if int64(len(v)) < (r0+n)*in {
			return nil, fmt.Errorf("tensor %s: %d values, expected at least %d", name, len(v), (r0+n)*in)
		}
		rows := make([]float32, 0, n*in)
		for _, p := range perm {
			o := (r0 + int64(p)) * in
			rows = append(rows, v[o:o+in]...)
		}
		return transpose(rows, int(n), int(in)), nil
	})
}

// biasPerm adds values r0 + perm[i] of the bias name (checked by the
// caller).
func (b *builder) biasPerm(name, part string, r0 int64, perm []int) string {
	return b.g.weight(name+"."+part+".pairs_split", []int64{int64(len(perm))}, func() ([]float32, error) {
		v, err := b.ck.Float32(name)
		if err != nil {
			return nil, err
		}
		if int64(len(v)) < r0+int64(len(perm)) {
			return nil, fmt.Errorf("tensor %s: %d values, expected at least %d", name, len(v), r0+int64(len(perm)))
		}
		out := make([]float32, len(perm))
		for i, p := range perm {
			out[i] = v[r0+int64(p)]
		}
		return out, nil
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
