package graphbuild

import (
	"errors"
	"fmt"
	"math"

	"github.com/conditionhq/condition/internal/aaresize"
)

// TipsConfig is what the TIPSv2 graphs are built from: a Hugging Face
// Tipsv2Config's fields (model_type tipsv2), plus the pixel size the
// vision graph is built for.
type TipsConfig struct {
	ModelType string // "tipsv2"
	// Text is text_config's sizes (hidden_act relu; EosTokenID is not
	// used: the pooled output is the mean over the attention mask).
	Text TextConfig
	// ScaleSqrtDepth is text_config.scale_sqrt_depth: the token vectors
	// are multiplied by √hidden_size before the positions are added.
	ScaleSqrtDepth bool
	// PoolingEpsilon is text_config.pooling_epsilon, added to the mask's
	// sum before it divides.
	PoolingEpsilon float64
	Vision         TipsVisionConfig
	// Temperature is Tipsv2Config.temperature: scores are cosine
	// similarities divided by it. The graphs do not use it.
	Temperature float64
	// Height and Width are the vision graph's pixel size (0: Vision.ImageSize).
	// The graph's input has that fixed size; a grid of patches other than
	// the position table's gets the table resized to it when the graph is
	// built, as Tipsv2VisionEmbeddings resizes it (see BuildTips).
	Height, Width int
}

// TipsVisionConfig is a Tipsv2VisionConfig's fields (DINOv2 with
// registers).
type TipsVisionConfig struct {
	HiddenSize, Layers, Heads int
	// MLPRatio is mlp_ratio: the MLP is int(hidden_size·mlp_ratio) wide.
	MLPRatio            float64
	Channels, ImageSize int
	PatchSize           int
	HiddenAct           string
	LayerNormEps        float64
	// Registers is num_register_tokens.
	Registers int
	// QKVBias is qkv_bias; UseSwiGLU is use_swiglu_ffn: the MLP is a
	// SwiGLU (mlp.weights_in, mlp.weights_out; the g14 size), hidden_act
	// is not used then.
	QKVBias, UseSwiGLU bool
	// InterpolateAntialias and InterpolateOffset are interpolate_antialias
	// and interpolate_offset: how the position table is resized to
	// another grid.
	InterpolateAntialias bool
	InterpolateOffset    float64
}

// intermediate returns the MLP's width, int(hidden_size·mlp_ratio) as
// Python truncates it.
func (v TipsVisionConfig) intermediate() int { return int(float64(v.HiddenSize) * v.MLPRatio) }

// swigluWidth returns the SwiGLU MLP's hidden width F (weights_in is
// [2F, d]): two thirds of intermediate(), rounded up to a multiple of 8,
// as Tipsv2VisionSwiGLUFFN computes it.
func (v TipsVisionConfig) swigluWidth() int { return swigluWidth(v.intermediate()) }

// size returns the vision graph's pixel height and width.
func (c TipsConfig) size() (h, w int) {
	h, w = c.Height, c.Width
	if h == 0 {
		h = c.Vision.ImageSize
	}
	if w == 0 {
		w = c.Vision.ImageSize
	}
	return h, w
}

// resized reports whether the position table is resized for the graph's
// pixel size: when the patch grid holds another number of patches than
// the table or the image is not square, as Tipsv2VisionEmbeddings decides.
func (c TipsConfig) resized() bool {
	h, w := c.size()
	v := c.Vision
	side := v.ImageSize / v.PatchSize
	return (h/v.PatchSize)*(w/v.PatchSize) != side*side || h != w
}

func (c TipsConfig) check() error {
	if c.ModelType != "tipsv2" {
		return fmt.Errorf("model_type %q: only tipsv2 graphs are built here", c.ModelType)
	}
	v := c.Vision
	act := v.HiddenAct
	if v.UseSwiGLU {
		act = "gelu" // not used: the SwiGLU's activation is SiLU
	}
	inter := v.intermediate()
	if !(v.MLPRatio > 0) {
		inter = 1 // said below, in mlp_ratio's words
	}
	errs := checkTowers(c.Text, VisionConfig{HiddenSize: v.HiddenSize, IntermediateSize: inter, Layers: v.Layers,
		Heads: v.Heads, Channels: v.Channels, ImageSize: v.ImageSize, PatchSize: v.PatchSize, HiddenAct: act,
		LayerNormEps: v.LayerNormEps})
	if c.Text.HiddenSize != v.HiddenSize {
		errs = append(errs, fmt.Errorf("text_config.hidden_size %d and vision_config.hidden_size %d differ: TIPSv2 has no projection heads, both towers embed into one space", c.Text.HiddenSize, v.HiddenSize))
	}
	if !(v.MLPRatio > 0) {
		errs = append(errs, fmt.Errorf("vision_config.mlp_ratio is %g, expected a positive number", v.MLPRatio))
	}
	if v.Registers < 0 {
		errs = append(errs, fmt.Errorf("vision_config.num_register_tokens is %d, expected 0 or more", v.Registers))
	}
	if !(c.PoolingEpsilon >= 0) {
		errs = append(errs, fmt.Errorf("text_config.pooling_epsilon is %g, expected 0 or more", c.PoolingEpsilon))
	}
	if !v.QKVBias {
		errs = append(errs, errors.New("vision_config.qkv_bias is false: only q, k, v projections with biases are built here"))
	}
	h, w := c.size()
	if c.Height < 0 || c.Width < 0 || h < v.PatchSize || w < v.PatchSize {
		errs = append(errs, fmt.Errorf("the vision graph's pixel size %dx%d is smaller than patch_size %d", h, w, v.PatchSize))
	}
	if len(errs) == 0 && c.resized() {
		if !v.InterpolateAntialias {
			errs = append(errs, fmt.Errorf("vision_config.interpolate_antialias is false: positions for a %dx%d image (not the %dx%d of image_size) would be resized without antialiasing, which is not built here", h, w, v.ImageSize, v.ImageSize))
		}
		if fh, fw, ok := c.offsetFactors(); ok {
			side := v.ImageSize / v.PatchSize
			gh, gw := h/v.PatchSize, w/v.PatchSize
			if oh, ow := aaresize.ScaledSize(side, fh), aaresize.ScaledSize(side, fw); oh != gh || ow != gw {
				errs = append(errs, fmt.Errorf("vision_config.interpolate_offset is %g: the position grid %dx%d scaled by (%d+%g)/%d and (%d+%g)/%d becomes %dx%d, not the %dx%d patches of a %dx%d image", v.InterpolateOffset, side, side, gh, v.InterpolateOffset, side, gw, v.InterpolateOffset, side, oh, ow, gh, gw, h, w))
			}
		}
	}
	return errors.Join(errs...)
}

// BuildTips writes outDir/onnx/text_model.onnx and
// outDir/onnx/vision_model.onnx from the checkpoint ck of a TIPSv2 model
// (Tipsv2Model: text_model.*, vision_model.*) whose config is c:
//
//	text_model.onnx    input_ids, attention_mask int64 [batch, sequence] (sequence ≤ max_position_embeddings) →
//	                   last_hidden_state [batch, sequence, d] (after final_layer_norm),
//	                   text_embeds [batch, d] (the mean of last_hidden_state over the
//	                   attention mask: Tipsv2TextModel's pooler_output, not normalised)
//	vision_model.onnx  pixel_values float32 [batch, C, H, W] (H, W fixed: c.Height, c.Width) →
//	                   last_hidden_state [batch, 1+R+P, d] (after layernorm; row 0 the class
//	                   token, rows 1..R the R register tokens, then the P = (H/p)·(W/p)
//	                   patches row-major over their grid),
//	                   image_embeds [batch, d] (row 0: Tipsv2VisionModel's pooler_output,
//	                   not normalised),
//	                   patch_embeds [batch, P, d] (rows 1+R..: the patches in the joint space),
//	                   readout_input [batch, 1+R+P, d] (the last block's input, from which
//	                   ReadoutGraph with ReadoutConfig.Dino recomputes that block)
//
// The vision blocks' MLP is fc1, hidden_act, fc2, or with
// Vision.UseSwiGLU (the g14 size) Tipsv2VisionSwiGLUFFN's weights_in,
// SiLU gate, weights_out.
// TIPSv2 has no projection heads: text_embeds, image_embeds and each row
// of patch_embeds share one space, in which the model scores by cosine
// similarity divided by c.Temperature; patch_embeds against text_embeds is
// the dense patch–text alignment the model is trained for.
//
// The text graph masks padded keys (the lowest float32 added to their
// scores) and adds the sinusoidal positions (√d-scaled tokens when
// c.ScaleSqrtDepth), a table computed here: it is not in the checkpoint.
// The vision graph adds the position table as it is when its patch grid is
// the table's and the image square; otherwise the table's patch rows are
// resized to the grid as transformers resizes them (F.interpolate,
// bilinear, antialiased, align_corners false, to the grid's size, or with
// a nonzero Vision.InterpolateOffset by the scale factors (grid + offset)
// / side, DINOv2's: internal/aaresize, equal to torch bit for bit) while
// the graph is built, so one graph serves one pixel size. An offset whose
// factors do not give the grid's size is an error, as it is in torch.
//
// Nothing is written when the config or the checkpoint is found wrong; a
// graph is written whole or not at all.
func BuildTips(ck *Checkpoint, c TipsConfig, outDir string, opts Options) ([]Written, error) {
	text, vision, err := planTips(ck, c, opts)
	if err != nil {
		return nil, err
	}
	return writeTowers(text, vision, outDir, opts)
}

// CheckTipsConfig checks the config c as BuildTips does before it reads
// the checkpoint: the model type, the sizes, the activations and the parts
// of TIPSv2 that are not built here.
func CheckTipsConfig(c TipsConfig) error {
	if err := c.check(); err != nil {
		return fmt.Errorf("graphbuild: config: %w", err)
	}
	return nil
}

// CheckTips checks the config c and the checkpoint ck as BuildTips does,
// without writing anything.
func CheckTips(ck *Checkpoint, c TipsConfig, opts Options) error {
	_, _, err := planTips(ck, c, opts)
	return err
}

func planTips(ck *Checkpoint, c TipsConfig, opts Options) (text, vision *graph, err error) {
	if err := c.check(); err != nil {
		return nil, nil, fmt.Errorf("graphbuild: config: %w", err)
	}
	return assemble(ck, opts, func(b *builder) { b.tipsText(c) }, func(b *builder) { b.tipsVision(c) })
}

// keyPaddingBias adds the attention scores' bias for the key mask named
// mask (int64 [B, T], 1 for a key to attend to): the lowest float32 on the
// other keys, as keys [B, 1, 1, T] and expanded for self-attention as
// self [B, 1, T, T].
func (b *builder) keyPaddingBias(mask string) (keys, self string) {
	keys = b.keyBias(b.paddingOf(mask))
	return keys, b.selfBias(keys, mask)
}

// keyBias adds keyPaddingBias's keys [B, 1, 1, T] for padding, paddingOf's
// output.
func (b *builder) keyBias(padding string) string {
	g := b.g
	keys := g.op("Mul", "", padding, g.constFloats("lowest", nil, lowestFloat32))
	return g.op("Unsqueeze", "", keys, g.constInts("axes", []int64{2}, 1, 2))
}

// paddingOf adds 1 − mask as floats [B, T]: 1 on the keys not to attend to.
func (b *builder) paddingOf(mask string) string {
	g := b.g
	mf := g.op("Cast", "", mask)
	g.last().with(intAttr("to", int64(tFloat)))
	return g.op("Sub", "", g.constFloats("one", nil, 1), mf)
}

// selfBias adds keys [B, 1, 1, T] expanded to [B, 1, T, T], T the mask's
// second dimension.
func (b *builder) selfBias(keys, mask string) string {
	g := b.g
	bm := g.op("Shape", "", mask)
	bs := g.op("Slice", "", bm, g.constInts("zero", []int64{1}, 0), g.constInts("one_i", []int64{1}, 1))
	ms := g.op("Slice", "", bm, g.constInts("one_i", []int64{1}, 1), g.constInts("two_i", []int64{1}, 2))
	shape := g.op("Concat", "", bs, g.constInts("one_i", []int64{1}, 1), ms, ms)
	g.last().with(intAttr("axis", 0))
	return g.op("Expand", "", keys, shape)
}

// sinusoids returns Tipsv2SinusoidalPositionalEmbedding's table [n, d]:
// row t holds sin(t·f_i) for i < d/2, then cos(t·f_i), then a zero column
// when d is odd, with f_i = exp(-i·ln(10000)/(d/2-1)); float32 steps as
// torch takes them (the products rounded to float32 before sin and cos).
func sinusoids(n, d int) []float32 {
	half := d / 2
	step := float32(-math.Log(10000) / float64(half-1))
	freq := make([]float32, half)
	for i := range freq {
		freq[i] = float32(math.Exp(float64(float32(i) * step)))
	}
	out := make([]float32, n*d)
	for t := 0; t < n; t++ {
		row := out[t*d : (t+1)*d]
		for i, f := range freq {
			a := float64(float32(t) * f)
			row[i] = float32(math.Sin(a))
			row[half+i] = float32(math.Cos(a))
		}
	}
	return out
}

// tipsText assembles Tipsv2TextModel: token embeddings (times √d when
// ScaleSqrtDepth) plus sinusoidal positions, CLIP's pre-LN blocks with a
// key padding mask and no causal mask (ReLU MLPs), final_layer_norm, and
// the mean over the attention mask.
func (b *builder) tipsText(c TipsConfig) {
	t := c.Text
	g := b.g
	d, inter, heads := int64(t.HiddenSize), int64(t.IntermediateSize), int64(t.Heads)
	g.inputs = []valueInfo{
		{name: "input_ids", elem: tInt64, dims: []any{"batch", "sequence"}},
		{name: "attention_mask", elem: tInt64, dims: []any{"batch", "sequence"}},
	}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch", "sequence", d}},
		{name: "text_embeds", elem: tFloat, dims: []any{"batch", d}},
	}
	for _, n := range []string{"input_ids", "attention_mask", "last_hidden_state", "text_embeds"} {
		g.names[n] = true
	}

	x := g.op("Gather", "", b.w("text_model.embeddings.token_embedding.weight", int64(t.VocabSize), d), "input_ids")
	if c.ScaleSqrtDepth {
		// torch multiplies by the Python float √d in float32.
		x = g.op("Mul", "", x, g.constFloats("embed_scale", nil, float32(math.Sqrt(float64(t.HiddenSize)))))
	}
	m := int64(t.MaxPositions)
	table := g.addInit(&initializer{name: "text_model.embeddings.position_embedding.weights", dims: []int64{m, d},
		dtype: tFloat, floats: sinusoids(t.MaxPositions, t.HiddenSize)})
	tlen := g.op("Shape", "", "input_ids")
	g.last().with(intAttr("start", 1), intAttr("end", 2))
	zero := g.constInts("zero", []int64{1}, 0)
	x = g.op("Add", "", x, g.op("Slice", "", table, zero, tlen, zero))

	_, self := b.keyPaddingBias("attention_mask")
	for i := 0; i < t.Layers; i++ {
		x = b.encoderLayer(x, fmt.Sprintf("text_model.encoder.layers.%d.", i), d, inter, heads, t.HiddenAct, t.LayerNormEps, self, "")
	}
	h := b.layerNorm(x, "text_model.final_layer_norm", d, t.LayerNormEps, "last_hidden_state")

	// Σ_t h·m / (Σ_t m + pooling_epsilon)
	mf := g.op("Cast", "", "attention_mask")
	g.last().with(intAttr("to", int64(tFloat)))
	mh := g.op("Mul", "", h, g.op("Unsqueeze", "", mf, g.constInts("axes", []int64{1}, 2)))
	axis := g.constInts("axes", []int64{1}, 1)
	sum := g.op("ReduceSum", "", mh, axis)
	g.last().with(intAttr("keepdims", 0))
	n := g.op("ReduceSum", "", mf, axis)
	g.last().with(intAttr("keepdims", 1))
	n = g.op("Add", "", n, g.constFloats("pooling_epsilon", nil, float32(c.PoolingEpsilon)))
	g.op("Div", "text_embeds", sum, n)
}

// tipsVision assembles Tipsv2VisionModel: the patch Conv (with its bias),
// the class token first, positions added to the class and patch rows, the
// register tokens after the class row (no positions), DINOv2 blocks with
// layer scale, and layernorm.
func (b *builder) tipsVision(c TipsConfig) {
	v := c.Vision
	g := b.g
	d, inter, heads := int64(v.HiddenSize), int64(v.intermediate()), int64(v.Heads)
	hpx, wpx := c.size()
	p, ch, r := int64(v.PatchSize), int64(v.Channels), int64(v.Registers)
	gh, gw := int64(hpx)/p, int64(wpx)/p
	np := gh * gw
	side := int64(v.ImageSize) / p
	g.inputs = []valueInfo{{name: "pixel_values", elem: tFloat, dims: []any{"batch", ch, int64(hpx), int64(wpx)}}}
	g.outputs = []valueInfo{
		{name: "last_hidden_state", elem: tFloat, dims: []any{"batch", 1 + r + np, d}},
		{name: "image_embeds", elem: tFloat, dims: []any{"batch", d}},
		{name: "patch_embeds", elem: tFloat, dims: []any{"batch", np, d}},
		{name: ReadoutInput, elem: tFloat, dims: []any{"batch", 1 + r + np, d}},
	}
	for _, n := range []string{"pixel_values", "last_hidden_state", "image_embeds", "patch_embeds", ReadoutInput} {
		g.names[n] = true
	}

	const ep = "vision_model.embeddings."
	tr := b.patchConv(ep+"patch_embeddings.projection", d, ch, p, true)
	const posName, clsName, regName = ep + "position_embeddings", ep + "cls_token", ep + "register_tokens"
	b.need(posName, 1, side*side+1, d)
	b.need(clsName, 1, 1, d)
	if r > 0 {
		b.need(regName, 1, r, d)
	}
	pos := g.weight(ep+"patch_positions", []int64{np, d}, func() ([]float32, error) { return tipsPositions(b.ck, c) })
	// The class row with its position added (one float32 sum, as torch
	// adds them), then the registers.
	head := g.weight(ep+"class_and_registers", []int64{1, 1 + r, d}, func() ([]float32, error) {
		table, err := b.ck.Float32(posName)
		if err != nil {
			return nil, err
		}
		cls, err := b.ck.Float32(clsName)
		if err != nil {
			return nil, err
		}
		out := make([]float32, d, (1+r)*d)
		for i := range out {
			out[i] = cls[i] + table[i]
		}
		if r > 0 {
			reg, err := b.ck.Float32(regName)
			if err != nil {
				return nil, err
			}
			out = append(out, reg...)
		}
		return out, nil
	})
	patches := g.op("Add", "", tr, pos)
	bs := g.op("Shape", "", "pixel_values")
	g.last().with(intAttr("start", 0), intAttr("end", 1))
	es := g.op("Concat", "", bs, g.constInts("shape", []int64{2}, 1+r, d))
	g.last().with(intAttr("axis", 0))
	x := g.op("Concat", "", g.op("Expand", "", head, es), patches)
	g.last().with(intAttr("axis", 1))

	for i := 0; i < v.Layers; i++ {
		if i == v.Layers-1 {
			x = g.op("Identity", ReadoutInput, x)
		}
		x = b.dinoLayer(x, fmt.Sprintf("vision_model.encoder.layer.%d.", i), v, d, inter, heads)
	}
	h := b.layerNorm(x, "vision_model.layernorm", d, v.LayerNormEps, "last_hidden_state")
	g.op("Gather", "image_embeds", h, g.constInts("cls_index", nil, 0))
	g.last().with(intAttr("axis", 1))
	g.op("Slice", "patch_embeds", h, g.constInts("start", []int64{1}, 1+r), g.constInts("end", []int64{1}, 1+r+np),
		g.constInts("axes", []int64{1}, 1))
}

// tipsPositions returns the positions [P, d] the patch rows of c's vision
// graph get: the checkpoint's table without its class row, resized from
// its grid to the graph's when c.resized() (see BuildTips).
func tipsPositions(ck *Checkpoint, c TipsConfig) ([]float32, error) {
	v := c.Vision
	d, side := v.HiddenSize, v.ImageSize/v.PatchSize
	table, err := ck.Float32("vision_model.embeddings.position_embeddings")
	if err != nil {
		return nil, err
	}
	if len(table) != (1+side*side)*d {
		return nil, fmt.Errorf("tensor vision_model.embeddings.position_embeddings: %d values, expected %d", len(table), (1+side*side)*d)
	}
	rows := table[d:]
	if !c.resized() {
		return rows, nil
	}
	h, w := c.size()
	gh, gw := h/v.PatchSize, w/v.PatchSize
	// [side², d] → [d, side, side], resized to [d, gh, gw], back to [gh·gw, d].
	dst := make([]float32, d*gh*gw)
	if fh, fw, ok := c.offsetFactors(); ok {
		aaresize.BilinearScaled(dst, transpose(rows, side*side, d), d, side, side, fh, fw) // sizes checked by c.check
	} else {
		aaresize.Bilinear(dst, transpose(rows, side*side, d), d, side, side, gh, gw)
	}
	return transpose(dst, d, gh*gw), nil
}

// offsetFactors returns the scale factors the position table is resized
// by when Vision.InterpolateOffset is not 0 (ok false otherwise: it is
// resized to the grid's size), as Tipsv2VisionEmbeddings (and DINOv2)
// computes them: (grid height + offset) / side and (grid width + offset) /
// side, in float64, side being the table's grid.
func (c TipsConfig) offsetFactors() (fh, fw float64, ok bool) {
	v := c.Vision
	if v.InterpolateOffset == 0 {
		return 0, 0, false
	}
	h, w := c.size()
	side := float64(v.ImageSize / v.PatchSize)
	return (float64(h/v.PatchSize) + v.InterpolateOffset) / side, (float64(w/v.PatchSize) + v.InterpolateOffset) / side, true
}

// dinoLayer adds one DINOv2 block (Tipsv2VisionLayer) to x [B, T, d]:
// x + λ1·attention(norm1(x)), then that + λ2·mlp(norm2(that)), with the
// layer scales λ [d] multiplied after each branch's last Linear, as torch
// does; the MLP is fc1, hidden_act, fc2 ([inter, d], [d, inter]), or with
// v.UseSwiGLU weights_in [2F, d], silu(first half)·(second half),
// weights_out [d, F].
func (b *builder) dinoLayer(x, prefix string, v TipsVisionConfig, d, inter, heads int64) string {
	g := b.g
	eps := v.LayerNormEps
	h := b.layerNorm(x, prefix+"norm1", d, eps, "")
	ap := prefix + "attention."
	lin := [3]string{ap + "attention.query", ap + "attention.key", ap + "attention.value"}
	a := b.selfAttention(h, ap+"attention.qkv", lin, d, heads, "")
	a = b.linear(a, ap+"output.dense", d, d)
	a = g.op("Mul", "", a, b.w(prefix+"layer_scale1.lambda1", d))
	x = g.op("Add", "", a, x)
	h = b.layerNorm(x, prefix+"norm2", d, eps, "")
	var f string
	if v.UseSwiGLU {
		hf := int64(v.swigluWidth())
		y := b.linear(h, prefix+"mlp.weights_in", 2*hf, d)
		x1, x2 := g.tmp("swiglu_gate"), g.tmp("swiglu_value")
		g.nodes = append(g.nodes, &node{op: "Split", name: x1, in: []string{y, g.constInts("swiglu_sizes", []int64{2}, hf, hf)},
			out: []string{x1, x2}, attrs: []attr{intAttr("axis", -1)}})
		s := g.op("Mul", "", x1, g.op("Sigmoid", "", x1))
		f = b.linear(g.op("Mul", "", s, x2), prefix+"mlp.weights_out", d, hf)
	} else {
		f = b.linear(h, prefix+"mlp.fc1", inter, d)
		f = b.activation(f, v.HiddenAct)
		f = b.linear(f, prefix+"mlp.fc2", d, inter)
	}
	f = g.op("Mul", "", f, b.w(prefix+"layer_scale2.lambda1", d))
	return g.op("Add", "", f, x)
}
