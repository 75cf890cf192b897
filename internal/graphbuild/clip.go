package graphbuild

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// CLIPConfig is what the CLIP graphs are built from: a Hugging Face
// CLIPConfig's fields (models.Config translates a config.json).
type CLIPConfig struct {
	ModelType     string // "clip", or "metaclip_2" (CLIP's graphs, pooled at the first EOS)
	ProjectionDim int
	Text          TextConfig
	Vision        VisionConfig
}

// TextConfig is a CLIPTextConfig's sizes.
type TextConfig struct {
	VocabSize, HiddenSize, IntermediateSize int
	Layers, Heads, MaxPositions             int
	HiddenAct                               string
	LayerNormEps                            float64
	// EosTokenID picks the pooled position: the first position holding
	// it, or, when it is 2 in a clip config (configs older than
	// transformers 4.31), the position of the largest id, as transformers
	// does. A metaclip_2 config always pools at the first EOS (its XLM-V
	// EOS is 2).
	EosTokenID int
}

// VisionConfig is a CLIPVisionConfig's sizes.
type VisionConfig struct {
	HiddenSize, IntermediateSize int
	Layers, Heads                int
	Channels, ImageSize          int
	PatchSize                    int
	HiddenAct                    string
	LayerNormEps                 float64
	// NumPatches is SigLIP 2 NaFlex's num_patches: the rows of its
	// position table, a square grid (ImageSize is not used then).
	NumPatches int
	// PE, when not nil, makes the vision tower PE-Core's (see PEVision)
	// in a clip config.
	PE *PEVision
}

// QKV forms of self-attention.
const (
	// QKVSeparate: three MatMuls, then com.microsoft.MultiHeadAttention with
	// the three biases in its bias input [3D].
	QKVSeparate = "separate"
	// QKVSplit: one MatMul by the packed weights [D, 3D], Split, then
	// MultiHeadAttention (one MatMul for int8 to quantize).
	QKVSplit = "split"
	// QKVPacked: com.microsoft.Attention with the packed weights inside it.
	QKVPacked = "packed"
)

// Options chooses how the graphs are written.
type Options struct {
	// QKV is the form of self-attention (QKVSeparate when empty). A
	// PE-Core vision tower (PEVision) takes QKVSeparate or QKVSplit, its
	// RoPE turning q and k after the Split; QKVPacked is refused there
	// (com.microsoft.Attention projects q and k inside itself, where RoPE
	// cannot turn them).
	QKV string
	// ExternalAbove stores the weights of a graph in a data file beside it
	// (<graph>.onnx_data) when they add up to more than this many bytes
	// (0: 1.9 GiB, under protobuf's 2 GiB limit; < 0: always).
	ExternalAbove int64
}

const defaultExternalAbove = 19 << 30 / 10

// builder assembles one tower, checking every tensor it uses against the
// checkpoint before anything is read.
type builder struct {
	ck   *Checkpoint
	g    *graph
	errs []error
	opts Options
}

// need checks that the checkpoint holds name as a floating-point tensor of
// shape dims, recording an error otherwise.
func (b *builder) need(name string, dims ...int64) bool {
	info, ok := b.ck.Info(name)
	if !ok {
		b.errs = append(b.errs, fmt.Errorf("tensor %s is missing (expected shape %v)", name, dims))
		return false
	}
	if !isFloat(info.DType) {
		b.errs = append(b.errs, fmt.Errorf("tensor %s is %s, expected a floating-point tensor (F32, F16, BF16)", name, info.DType))
		return false
	}
	same := len(info.Shape) == len(dims)
	for i := 0; same && i < len(dims); i++ {
		same = int64(info.Shape[i]) == dims[i]
	}
	if !same {
		b.errs = append(b.errs, fmt.Errorf("tensor %s has shape %v, the config gives %v", name, info.Shape, dims))
		return false
	}
	return true
}

func (b *builder) read(name string) func() ([]float32, error) {
	return func() ([]float32, error) { return b.ck.Float32(name) }
}

// w adds the tensor name as it is.
func (b *builder) w(name string, dims ...int64) string {
	b.need(name, dims...)
	return b.g.weight(name, dims, b.read(name))
}

// wT adds the Linear weight name [out, in] transposed to [in, out], for
// MatMul(x [.., in], w).
func (b *builder) wT(name string, out, in int64) string {
	b.need(name, out, in)
	return b.g.weight(name+".T", []int64{in, out}, func() ([]float32, error) {
		v, err := b.ck.Float32(name)
		if err != nil {
			return nil, err
		}
		return transpose(v, int(out), int(in)), nil
	})
}

// transpose returns the [c, r] transpose of v [r, c].
func transpose(v []float32, r, c int) []float32 {
	t := make([]float32, len(v))
	const blk = 32
	for i0 := 0; i0 < r; i0 += blk {
		for j0 := 0; j0 < c; j0 += blk {
			for i := i0; i < min(i0+blk, r); i++ {
				for j := j0; j < min(j0+blk, c); j++ {
					t[j*r+i] = v[i*c+j]
				}
			}
		}
	}
	return t
}

// packedQKV adds the q, k, v projections of prefix (CLIP's q_proj, k_proj,
// v_proj) packed as [D, 3D] (the columns q, then k, then v).
func (b *builder) packedQKV(prefix string, d int64) string {
	return b.packedQKVOf(prefix+"qkv", clipQKV(prefix), d)
}

// clipQKV names CLIP's q, k, v Linear layers under prefix.
func clipQKV(prefix string) [3]string {
	return [3]string{prefix + "q_proj", prefix + "k_proj", prefix + "v_proj"}
}

// packedQKVOf adds the weights of the Linear layers lin (q, k, v, each
// [D, D]) packed as key.weight.T [D, 3D] (the columns q, then k, then v).
func (b *builder) packedQKVOf(key string, lin [3]string, d int64) string {
	var names [3]string
	for i, l := range lin {
		names[i] = l + ".weight"
		b.need(names[i], d, d)
	}
	return b.g.weight(key+".weight.T", []int64{d, 3 * d}, func() ([]float32, error) {
		out := make([]float32, d*3*d)
		for k, n := range names {
			v, err := b.ck.Float32(n)
			if err != nil {
				return nil, err
			}
			// out[i, k*d + o] = w_k[o, i]
			for o := int64(0); o < d; o++ {
				for i := int64(0); i < d; i++ {
					out[i*3*d+int64(k)*d+o] = v[o*d+i]
				}
			}
		}
		return out, nil
	})
}

// qkvBias adds the [3D] biases of the q, k, v projections of prefix.
func (b *builder) qkvBias(prefix string, d int64) string {
	return b.qkvBiasOf(prefix+"qkv", clipQKV(prefix), d)
}

// qkvBiasOf adds the biases of the Linear layers lin (q, k, v, each [D])
// as key.bias [3D].
func (b *builder) qkvBiasOf(key string, lin [3]string, d int64) string {
	var names [3]string
	for i, l := range lin {
		names[i] = l + ".bias"
		b.need(names[i], d)
	}
	return b.g.weight(key+".bias", []int64{3 * d}, func() ([]float32, error) {
		out := make([]float32, 0, 3*d)
		for _, n := range names {
			v, err := b.ck.Float32(n)
			if err != nil {
				return nil, err
			}
			out = append(out, v...)
		}
		return out, nil
	})
}

func (b *builder) layerNorm(x, prefix string, d int64, eps float64, out string) string {
	w, bias := b.w(prefix+".weight", d), b.w(prefix+".bias", d)
	y := b.g.op("LayerNormalization", out, x, w, bias)
	b.g.last().with(intAttr("axis", -1), floatAttr("epsilon", float32(eps)))
	return y
}

// linear adds x·Wᵀ + bias for the Linear prefix [out, in].
func (b *builder) linear(x, prefix string, out, in int64) string {
	y := b.g.op("MatMul", "", x, b.wT(prefix+".weight", out, in))
	return b.g.op("Add", "", y, b.w(prefix+".bias", out))
}

func (b *builder) activation(x, act string) string {
	switch act {
	case "quick_gelu":
		y := b.g.op("QuickGelu", "", x)
		b.g.last().with(floatAttr("alpha", 1.702)).domain = msDomain
		return y
	case "gelu":
		y := b.g.op("Gelu", "", x)
		b.g.last().domain = msDomain
		return y
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		y := b.g.op("FastGelu", "", x)
		b.g.last().domain = msDomain
		return y
	case "relu":
		return b.g.op("Relu", "", x)
	}
	return x // checked before
}

// encoderLayer adds one pre-LN transformer block to x [B, T, d]; bias, if
// not "", is added to the attention scores [B|1, 1, T, T].
func (b *builder) encoderLayer(x, prefix string, d, inter, heads int64, act string, eps float64, bias, out string) string {
	ap := prefix + "self_attn."
	return b.encoderBlock(x, prefix, d, inter, act, eps, out, func(h string) string {
		return b.selfAttention(h, ap+"qkv", clipQKV(ap), d, heads, bias)
	})
}

// encoderBlock adds the pre-LN transformer block of encoderLayer with
// attend(h) as its attention: the heads' outputs [B, T, d] for the first
// layer norm's output h, before the output projection.
func (b *builder) encoderBlock(x, prefix string, d, inter int64, act string, eps float64, out string, attend func(h string) string) string {
	h := b.layerNorm(x, prefix+"layer_norm1", d, eps, "")
	ap := prefix + "self_attn."
	attn := attend(h)
	o := b.linear(attn, ap+"out_proj", d, d)
	x = b.g.op("Add", "", x, o)
	h = b.layerNorm(x, prefix+"layer_norm2", d, eps, "")
	f := b.linear(h, prefix+"mlp.fc1", inter, d)
	f = b.activation(f, act)
	f = b.linear(f, prefix+"mlp.fc2", d, inter)
	return b.g.op("Add", out, x, f)
}

// selfAttention adds multi-head self-attention over h [B, T, d] with the
// q, k, v Linear layers lin (weights and biases [d, d], [d]), in the form
// opts.QKV asks for (packed weights named key.weight.T, key.bias), and
// returns the heads' outputs [B, T, d] before the output projection; bias,
// if not "", is added to the scores [B|1, 1, T, T].
func (b *builder) selfAttention(h, key string, lin [3]string, d, heads int64, bias string) string {
	scale := float32(1 / math.Sqrt(float64(d/heads)))
	var attn string
	switch b.opts.QKV {
	case QKVPacked:
		ins := []string{h, b.packedQKVOf(key, lin, d), b.qkvBiasOf(key, lin, d)}
		if bias != "" {
			ins = append(ins, "", "", bias)
		}
		attn = b.g.op("Attention", "", ins...)
	case QKVSplit:
		qkv := b.g.op("MatMul", "", h, b.packedQKVOf(key, lin, d))
		q, k, v := b.g.tmp("q"), b.g.tmp("k"), b.g.tmp("v")
		b.g.nodes = append(b.g.nodes, &node{op: "Split", name: q, in: []string{qkv, b.g.constInts("qkv_sizes", []int64{3}, d, d, d)},
			out: []string{q, k, v}, attrs: []attr{intAttr("axis", -1)}})
		ins := []string{q, k, v, b.qkvBiasOf(key, lin, d)}
		if bias != "" {
			ins = append(ins, "", bias)
		}
		attn = b.g.op("MultiHeadAttention", "", ins...)
	default:
		q := b.g.op("MatMul", "", h, b.wT(lin[0]+".weight", d, d))
		k := b.g.op("MatMul", "", h, b.wT(lin[1]+".weight", d, d))
		v := b.g.op("MatMul", "", h, b.wT(lin[2]+".weight", d, d))
		ins := []string{q, k, v, b.qkvBiasOf(key, lin, d)}
		if bias != "" {
			ins = append(ins, "", bias)
		}
		attn = b.g.op("MultiHeadAttention", "", ins...)
	}
	n := b.g.last()
	n.domain = msDomain
	n.with(intAttr("num_heads", heads), floatAttr("scale", scale))
	return attn
}

func checkAct(tower, act string) error {
	switch act {
	case "quick_gelu", "gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu":
		return nil
	}
	return fmt.Errorf("%s.hidden_act %q is not one this program builds (quick_gelu, gelu, gelu_new, gelu_pytorch_tanh, relu)", tower, act)
}

func (c CLIPConfig) check() error {
	if c.ModelType != "clip" && c.ModelType != "metaclip_2" {
		return fmt.Errorf("model_type %q: only clip and metaclip_2 graphs are built", c.ModelType)
	}
	var errs []error
	if c.ProjectionDim <= 0 {
		errs = append(errs, fmt.Errorf("projection_dim is %d, expected a positive number", c.ProjectionDim))
	}
	if c.Vision.PE != nil {
		if err := c.checkPE(); err != nil {
			errs = append(errs, fmt.Errorf("PE-Core vision tower: %w", err))
		}
	}
	return errors.Join(append(errs, checkTowers(c.Text, c.Vision)...)...)
}

// checkTowers checks the sizes both families' towers are built from.
func checkTowers(t TextConfig, v VisionConfig) []error {
	var errs []error
	pos := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s is %d, expected a positive number", name, v))
		}
	}
	pos("text_config.vocab_size", t.VocabSize)
	pos("text_config.hidden_size", t.HiddenSize)
	pos("text_config.intermediate_size", t.IntermediateSize)
	pos("text_config.num_hidden_layers", t.Layers)
	pos("text_config.num_attention_heads", t.Heads)
	pos("text_config.max_position_embeddings", t.MaxPositions)
	pos("vision_config.hidden_size", v.HiddenSize)
	pos("vision_config.intermediate_size", v.IntermediateSize)
	pos("vision_config.num_hidden_layers", v.Layers)
	pos("vision_config.num_attention_heads", v.Heads)
	pos("vision_config.num_channels", v.Channels)
	if v.NumPatches == 0 {
		pos("vision_config.image_size", v.ImageSize)
	} else {
		pos("vision_config.num_patches", v.NumPatches)
	}
	pos("vision_config.patch_size", v.PatchSize)
	if len(errs) > 0 {
		return errs
	}
	if t.HiddenSize%t.Heads != 0 {
		errs = append(errs, fmt.Errorf("text_config.hidden_size %d is not a multiple of num_attention_heads %d", t.HiddenSize, t.Heads))
	}
	if v.HiddenSize%v.Heads != 0 {
		errs = append(errs, fmt.Errorf("vision_config.hidden_size %d is not a multiple of num_attention_heads %d", v.HiddenSize, v.Heads))
	}
	// A remainder smaller than a patch is dropped, as transformers'
	// convolution (no padding) drops it: (image_size // patch_size)² patches.
	if v.NumPatches == 0 && v.ImageSize < v.PatchSize {
		errs = append(errs, fmt.Errorf("vision_config.image_size %d is smaller than patch_size %d", v.ImageSize, v.PatchSize))
	}
	if err := checkAct("text_config", t.HiddenAct); err != nil {
		errs = append(errs, err)
	}
	if err := checkAct("vision_config", v.HiddenAct); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// textGraph assembles the text tower:
//
//	input_ids, attention_mask int64 [batch, sequence] →
//	last_hidden_state [batch, sequence, d_t] (after final_layer_norm),
//	text_embeds [batch, projection_dim] (the EOS position's state through text_projection).
func (b *builder) textGraph(c CLIPConfig) {
	t := c.Text
	g := b.g
	d, inter, heads := int64(t.HiddenSize), int64(t.IntermediateSize), int64(t.Heads)
	g.inputs = []valueInfo{
		{name: "input_ids", elem: tInt64, dims: []any{"batch", "sequence"}},
		{name: "attention_mask", elem: tInt64, dims: []any{"batch", "sequence"}},
	}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch", "sequence", d}},
		{name: "text_embeds", elem: tFloat, dims: []any{"batch", int64(c.ProjectionDim)}},
	}
	g.names["input_ids"], g.names["attention_mask"] = true, true
	g.names["last_hidden_state"], g.names["text_embeds"] = true, true

	tok := g.op("Gather", "", b.w("text_model.embeddings.token_embedding.weight", int64(t.VocabSize), d), "input_ids")
	tlen := g.op("Shape", "", "input_ids")
	g.last().with(intAttr("start", 1), intAttr("end", 2))
	zero := g.constInts("zero", []int64{1}, 0)
	pos := g.op("Slice", "", b.w("text_model.embeddings.position_embedding.weight", int64(t.MaxPositions), d), zero, tlen, zero)
	x := g.op("Add", "", tok, pos)

	// The scores' bias [B, 1, T, T]: the lowest float32 where a query may
	// not look (a later position, or a padded one), as transformers masks.
	lowest := lowestFloat32
	m := int64(t.MaxPositions)
	causal := make([]float32, m*m)
	for i := int64(0); i < m; i++ {
		for j := i + 1; j < m; j++ {
			causal[i*m+j] = lowest
		}
	}
	cm := g.addInit(&initializer{name: "causal_mask", dims: []int64{m, m}, dtype: tFloat, floats: causal})
	tt := g.op("Concat", "", tlen, tlen)
	g.last().with(intAttr("axis", 0))
	cs := g.op("Slice", "", cm, g.constInts("zeros", []int64{2}, 0, 0), tt, g.constInts("axes", []int64{2}, 0, 1))
	mf := g.op("Cast", "", "attention_mask")
	g.last().with(intAttr("to", int64(tFloat)))
	inv := g.op("Sub", "", g.constFloats("one", nil, 1), mf)
	pad := g.op("Mul", "", inv, g.constFloats("lowest", nil, lowest))
	pad = g.op("Unsqueeze", "", pad, g.constInts("axes", []int64{2}, 1, 2))
	bias := g.op("Min", "", cs, pad)

	for i := 0; i < t.Layers; i++ {
		x = b.encoderLayer(x, fmt.Sprintf("text_model.encoder.layers.%d.", i), d, inter, heads, t.HiddenAct, t.LayerNormEps, bias, "")
	}
	h := b.layerNorm(x, "text_model.final_layer_norm", d, t.LayerNormEps, "last_hidden_state")

	var key string
	if t.EosTokenID == 2 && c.ModelType == "clip" {
		key = g.op("Cast", "", "input_ids")
	} else {
		eq := g.op("Equal", "", "input_ids", g.constInts("eos_token_id", nil, int64(t.EosTokenID)))
		key = g.op("Cast", "", eq)
	}
	g.last().with(intAttr("to", int64(tFloat)))
	at := g.op("ArgMax", "", key)
	g.last().with(intAttr("axis", 1), intAttr("keepdims", 1))
	pooled := g.op("GatherND", "", h, at)
	g.last().with(intAttr("batch_dims", 1))
	g.op("MatMul", "text_embeds", pooled, b.wT("text_projection.weight", int64(c.ProjectionDim), d))
}

// patchEmbedding is the patch Conv of pixel_values (with
// vision_model.embeddings.patch_embedding.bias when bias), flattened row by
// row: [batch, P, d].
func (b *builder) patchEmbedding(d, ch, p int64, bias bool) string {
	return b.patchConv("vision_model.embeddings.patch_embedding", d, ch, p, bias)
}

// patchConv is the patch Conv prefix (weight [d, ch, p, p], and bias [d]
// when bias) of pixel_values [batch, ch, H, W], flattened row by row:
// [batch, (H/p)·(W/p), d].
func (b *builder) patchConv(prefix string, d, ch, p int64, bias bool) string {
	g := b.g
	in := []string{"pixel_values", b.w(prefix+".weight", d, ch, p, p)}
	if bias {
		in = append(in, b.w(prefix+".bias", d))
	}
	conv := g.op("Conv", "", in...)
	g.last().with(intsAttr("kernel_shape", p, p), intsAttr("strides", p, p))
	flat := g.op("Reshape", "", conv, g.constInts("shape", []int64{3}, 0, d, -1))
	tr := g.op("Transpose", "", flat)
	g.last().with(intsAttr("perm", 0, 2, 1))
	return tr
}

// visionGraph assembles the vision tower:
//
//	pixel_values float32 [batch, C, S, S] →
//	last_hidden_state [batch, 1+P, d_v] (before post_layernorm),
//	image_embeds [batch, projection_dim] (the CLS state through post_layernorm and visual_projection),
//	readout_input [batch, 1+P, d_v] (the last encoder layer's input, which dense readouts recompute from).
func (b *builder) visionGraph(c CLIPConfig) {
	v := c.Vision
	g := b.g
	d, inter, heads := int64(v.HiddenSize), int64(v.IntermediateSize), int64(v.Heads)
	s, p, ch := int64(v.ImageSize), int64(v.PatchSize), int64(v.Channels)
	grid := s / p
	np := grid * grid
	g.inputs = []valueInfo{{name: "pixel_values", elem: tFloat, dims: []any{"batch", ch, s, s}}}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch", np + 1, d}},
		{name: "image_embeds", elem: tFloat, dims: []any{"batch", int64(c.ProjectionDim)}},
		{name: ReadoutInput, elem: tFloat, dims: []any{"batch", np + 1, d}},
	}
	g.names["pixel_values"], g.names["last_hidden_state"], g.names["image_embeds"], g.names[ReadoutInput] = true, true, true, true

	tr := b.patchEmbedding(d, ch, p, false)

	const posName = "vision_model.embeddings.position_embedding.weight"
	const clsName = "vision_model.embeddings.class_embedding"
	b.need(posName, np+1, d)
	b.need(clsName, d)
	rest := g.weight("vision_model.embeddings.patch_positions", []int64{np, d}, func() ([]float32, error) {
		pos, err := b.ck.Float32(posName)
		if err != nil {
			return nil, err
		}
		return pos[d:], nil
	})
	// The CLS row with its position added, as torch adds them: one
	// float32 sum, so the same bits.
	cls := g.weight("vision_model.embeddings.class_with_position", []int64{1, 1, d}, func() ([]float32, error) {
		pos, err := b.ck.Float32(posName)
		if err != nil {
			return nil, err
		}
		ce, err := b.ck.Float32(clsName)
		if err != nil {
			return nil, err
		}
		out := make([]float32, d)
		for i := range out {
			out[i] = ce[i] + pos[i]
		}
		return out, nil
	})
	patches := g.op("Add", "", tr, rest)
	bs := g.op("Shape", "", "pixel_values")
	g.last().with(intAttr("start", 0), intAttr("end", 1))
	es := g.op("Concat", "", bs, g.constInts("shape", []int64{2}, 1, d))
	g.last().with(intAttr("axis", 0))
	clsB := g.op("Expand", "", cls, es)
	x := g.op("Concat", "", clsB, patches)
	g.last().with(intAttr("axis", 1))
	x = b.layerNorm(x, "vision_model.pre_layrnorm", d, v.LayerNormEps, "")
	for i := 0; i < v.Layers; i++ {
		out := ""
		if i == v.Layers-1 {
			out = "last_hidden_state"
			x = g.op("Identity", ReadoutInput, x)
		}
		x = b.encoderLayer(x, fmt.Sprintf("vision_model.encoder.layers.%d.", i), d, inter, heads, v.HiddenAct, v.LayerNormEps, "", out)
	}
	first := g.op("Gather", "", x, g.constInts("cls_index", nil, 0))
	g.last().with(intAttr("axis", 1))
	pooled := b.layerNorm(first, "vision_model.post_layernorm", d, v.LayerNormEps, "")
	g.op("MatMul", "image_embeds", pooled, b.wT("visual_projection.weight", int64(c.ProjectionDim), d))
}

// plan assembles both towers' graphs and checks every tensor they read.
func plan(ck *Checkpoint, c CLIPConfig, opts Options) (text, vision *graph, err error) {
	if err := c.check(); err != nil {
		return nil, nil, fmt.Errorf("graphbuild: config: %w", err)
	}
	tower := func(b *builder) { b.visionGraph(c) }
	if c.Vision.PE != nil {
		if opts.QKV == QKVPacked {
			return nil, nil, errors.New("graphbuild: q, k, v form packed is not built for PE-Core: its vision tower turns q and k by RoPE between their projections and the attention, and com.microsoft.Attention projects them inside itself; want separate or split")
		}
		tower = func(b *builder) { b.peVision(c) }
	}
	return assemble(ck, opts, func(b *builder) { b.textGraph(c) }, tower)
}

// assemble makes the text and vision graphs with the given tower
// functions, then reports every tensor they found missing or wrong.
func assemble(ck *Checkpoint, opts Options, textTower, visionTower func(*builder)) (text, vision *graph, err error) {
	switch opts.QKV {
	case "", QKVSeparate, QKVSplit, QKVPacked:
	default:
		return nil, nil, fmt.Errorf("graphbuild: q, k, v form %q: want separate, split or packed", opts.QKV)
	}
	var errs []error
	for _, tower := range []string{"text", "vision"} {
		b := &builder{ck: ck, g: newGraph(tower + "_model"), opts: opts}
		if tower == "text" {
			textTower(b)
			text = b.g
		} else {
			visionTower(b)
			vision = b.g
		}
		errs = append(errs, b.errs...)
	}
	if len(errs) > 0 {
		const show = 8
		var lines []string
		for i, e := range errs {
			if i == show {
				lines = append(lines, fmt.Sprintf("and %d more", len(errs)-show))
				break
			}
			lines = append(lines, e.Error())
		}
		return nil, nil, fmt.Errorf("graphbuild: the checkpoint %s does not match the config: %s", strings.Join(ck.Files(), ", "), strings.Join(lines, "; "))
	}
	return text, vision, nil
}

// lowestFloat32 is what masked attention scores get added: the lowest
// float32, as transformers' masks hold torch.finfo(float32).min.
const lowestFloat32 = float32(-math.MaxFloat32)
