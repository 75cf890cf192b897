package graphbuild

import (
	"bytes"
	"fmt"
	"math"
)

// Readouts: how a patch's vector is read from the last layer of a vision
// tower. ReadoutRaw is the tower's own last_hidden_state; the others
// recompute the last layer's attention from its input without the
// residual and the MLP (training-free dense readouts of the
// open-vocabulary segmentation literature):
//
//	clearclip: softmax(q qᵀ · d_h^-½) v            (ClearCLIP, ECCV 2024)
//	naclip:    softmax(k kᵀ · d_h^-½ + G) v         (NACLIP, WACV 2025)
//	maskclip:  v                                   (MaskCLIP, ECCV 2022)
//	pearl:     softmax((q s)(k R)ᵀ + γ (k_c k_cᵀ) s) v (PEARL, CVPR 2026; see pearlGraph)
//
// with q, k, v the layer's own projections of layer_norm1(x), then its
// out_proj (and, for towers whose last_hidden_state is after the final
// layer norm, as SigLIP's is, that norm: ReadoutConfig.PostLayerNorm). G
// is a Gaussian of the patch grid distance (see NACLIPBias).
const (
	ReadoutRaw       = "raw"
	ReadoutClearCLIP = "clearclip"
	ReadoutNACLIP    = "naclip"
	ReadoutMaskCLIP  = "maskclip"
	ReadoutPEARL     = "pearl"
)

// Readout graph value names.
const (
	ReadoutInput  = "readout_input"        // [batch, S, d]: the input of the last encoder layer
	ReadoutOutput = "readout_hidden_state" // [batch, S, d]: out_proj's output (then post_layernorm when ReadoutConfig.PostLayerNorm is set)
	ReadoutBias   = "readout_bias"         // [S, S]: NACLIP's G, an input of a Dynamic readout graph
)

// NACLIPSigma is the standard deviation of NACLIP's neighbourhood Gaussian,
// in patches.
const NACLIPSigma = 5.0

// ReadoutConfig is the last encoder layer a readout graph recomputes.
type ReadoutConfig struct {
	Kind   string  // ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP or ReadoutPEARL
	Width  int     // d, the layer's width
	Heads  int     // its attention heads (d_h = d / Heads)
	Eps    float64 // layer_norm1's epsilon
	Class  int     // rows before the patches (CLIP's class token: 1; SigLIP: 0)
	GridH  int     // the patch grid, P = GridH·GridW; S = Class + P
	GridW  int
	Prefix string // the layer's tensor names' prefix, e.g. vision_model.encoder.layers.11.
	// PostLayerNorm, when set, is the prefix of a layer norm applied to
	// out_proj's output (its .weight and .bias), with epsilon PostEps:
	// vision_model.post_layernorm for SigLIP, whose last_hidden_state (the
	// rows its readouts stand in for) is after it. Empty for CLIP, whose
	// last_hidden_state is before post_layernorm.
	PostLayerNorm string
	PostEps       float64
	// Dynamic makes S a dimension of the graph ("tokens") instead of
	// Class + GridH·GridW, for images on grids of their own (SigLIP 2
	// NaFlex, run one grid at a time on an image's own rows): GridH and
	// GridW are not used, and NACLIP takes its G as the input ReadoutBias.
	Dynamic bool
	// Dino, when set, makes the layer a DINOv2 block (TIPSv2's vision
	// layers, named as Tipsv2VisionLayer's), whose only readout is
	// ReadoutMaskCLIP in the form the TIPS authors evaluate zero-shot
	// segmentation with (their "value attention"):
	//
	//	y = x + λ1·dense(value(norm1(x)))
	//	readout_hidden_state = Norm(y + λ2·mlp(norm2(y)))
	//
	// the attention replaced by its value path, the layer scales, the
	// residuals and the MLP kept, then the tower's final layer norm, so
	// that its rows stand in for last_hidden_state's. Prefix is the
	// block's (vision_model.encoder.layer.N.); Eps is norm1's and norm2's.
	Dino *DinoBlock
	// Rope, when set, turns q and k of the patch rows (not the Class
	// rows) by PE-Core's 2-D RoPE over the GridH×GridW grid (RopeTables),
	// as the block itself does, before the readout's attention (PE-Core:
	// PEVision). ReadoutMaskCLIP does not use q or k.
	Rope *ReadoutRope
}

// ReadoutRope is the RoPE of a PE-Core block (see PEVision): the grid
// the positions are scaled to and their offset.
type ReadoutRope struct {
	RefGrid    int
	GridOffset float64
}

// DinoBlock is what ReadoutConfig.Dino needs of a DINOv2 block beyond its
// width.
type DinoBlock struct {
	// Inter is the MLP's width, int(hidden_size·mlp_ratio): mlp.fc1 [Inter,
	// d], hidden_act Act, mlp.fc2 [d, Inter]. With SwiGLU the MLP is
	// mlp.weights_in [2F, d], silu(first half)·(second half),
	// mlp.weights_out [d, F], F two thirds of Inter rounded up to a
	// multiple of 8 (Act not used).
	Inter  int
	SwiGLU bool
	Act    string
	// Norm is the prefix of the tower's final layer norm
	// (vision_model.layernorm), with epsilon NormEps.
	Norm    string
	NormEps float64
}

// swigluWidth returns F for the SwiGLU of an MLP inter wide, as
// Tipsv2VisionSwiGLUFFN computes it.
func swigluWidth(inter int) int { return (int(float64(2*inter)/3) + 7) / 8 * 8 }

// ReadoutTensors returns the tensors of the last layer a readout reads
// (and PostLayerNorm's when set), with their shapes ([out, in] for
// weights).
func (c ReadoutConfig) ReadoutTensors() map[string][]int {
	d := c.Width
	if c.Dino != nil {
		return c.dinoTensors()
	}
	ts := map[string][]int{
		c.Prefix + "layer_norm1.weight": {d}, c.Prefix + "layer_norm1.bias": {d},
		c.Prefix + "self_attn.v_proj.weight": {d, d}, c.Prefix + "self_attn.v_proj.bias": {d},
		c.Prefix + "self_attn.out_proj.weight": {d, d}, c.Prefix + "self_attn.out_proj.bias": {d},
	}
	if c.PostLayerNorm != "" {
		ts[c.PostLayerNorm+".weight"], ts[c.PostLayerNorm+".bias"] = []int{d}, []int{d}
	}
	switch c.Kind {
	case ReadoutClearCLIP:
		ts[c.Prefix+"self_attn.q_proj.weight"], ts[c.Prefix+"self_attn.q_proj.bias"] = []int{d, d}, []int{d}
	case ReadoutNACLIP:
		ts[c.Prefix+"self_attn.k_proj.weight"], ts[c.Prefix+"self_attn.k_proj.bias"] = []int{d, d}, []int{d}
	case ReadoutPEARL:
		ts[c.Prefix+"self_attn.q_proj.weight"], ts[c.Prefix+"self_attn.q_proj.bias"] = []int{d, d}, []int{d}
		ts[c.Prefix+"self_attn.k_proj.weight"], ts[c.Prefix+"self_attn.k_proj.bias"] = []int{d, d}, []int{d}
	}
	return ts
}

func (c ReadoutConfig) check() error {
	switch c.Kind {
	case ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP:
	case ReadoutPEARL:
		if err := c.checkPEARL(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("graphbuild: readout %q: want %s, %s, %s or %s", c.Kind, ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP, ReadoutPEARL)
	}
	if c.Width <= 0 || c.Heads <= 0 || c.Width%c.Heads != 0 {
		return fmt.Errorf("graphbuild: readout: width %d in %d heads: want a positive width the heads divide", c.Width, c.Heads)
	}
	if !c.Dynamic && (c.GridH <= 0 || c.GridW <= 0) || c.Class < 0 {
		return fmt.Errorf("graphbuild: readout: grid %dx%d with %d class rows", c.GridH, c.GridW, c.Class)
	}
	if c.PostLayerNorm != "" && !(c.PostEps > 0) {
		return fmt.Errorf("graphbuild: readout: %s's epsilon is %g, want a positive number", c.PostLayerNorm, c.PostEps)
	}
	if c.Dino != nil {
		return c.checkDino()
	}
	if r := c.Rope; r != nil && (c.Dynamic || r.RefGrid <= 0 || (c.Width/c.Heads)%4 != 0) {
		return fmt.Errorf("graphbuild: readout: RoPE over a reference grid of %d, head width %d, dynamic %v: want a fixed grid, a positive reference and a head width that is a multiple of 4", r.RefGrid, c.Width/c.Heads, c.Dynamic)
	}
	return nil
}

// NACLIPBias returns G [S, S] (S = class + gh·gw): G[(i,j),(k,l)] =
// exp(−((i−k)² + (j−l)²) / (2σ²)) between patches (row-major), zero in the
// class rows and columns.
func NACLIPBias(class, gh, gw int, sigma float64) []float32 {
	s := class + gh*gw
	g := make([]float32, s*s)
	for a := 0; a < gh*gw; a++ {
		i, j := a/gw, a%gw
		for b := 0; b < gh*gw; b++ {
			k, l := b/gw, b%gw
			d2 := float64((i-k)*(i-k) + (j-l)*(j-l))
			g[(class+a)*s+class+b] = float32(math.Exp(-d2 / (2 * sigma * sigma)))
		}
	}
	return g
}

// ReadoutGraph returns the ONNX graph of readout c over the last layer's
// weights (read gives a tensor of ReadoutTensors by name, float32, row
// major; PyTorch's [out, in] for Linear weights):
//
//	readout_input float32 [batch, S, d] → readout_hidden_state float32 [batch, S, d]
//
// every row recomputed (the class rows too, which the engine leaves out),
// out_proj's output then c.PostLayerNorm's when it is set. With c.Dynamic
// S is the graph's "tokens" dimension, and NACLIP also takes
// readout_bias float32 [S, S] (NACLIPBias of the image's grid).
func ReadoutGraph(c ReadoutConfig, read func(name string) ([]float32, error)) ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	shapes := c.ReadoutTensors()
	vals := map[string][]float32{}
	for name, dims := range shapes {
		v, err := read(name)
		if err != nil {
			return nil, fmt.Errorf("graphbuild: readout: %w", err)
		}
		n := 1
		for _, x := range dims {
			n *= x
		}
		if len(v) != n {
			return nil, fmt.Errorf("graphbuild: readout: tensor %s has %d values, want %v", name, len(v), dims)
		}
		vals[name] = v
	}
	d, heads := int64(c.Width), int64(c.Heads)
	dh := d / heads
	var s any = int64(c.Class + c.GridH*c.GridW)
	if c.Dynamic {
		s = "tokens"
	}
	g := newGraph("readout_" + c.Kind)
	g.inputs = []valueInfo{{name: ReadoutInput, elem: tFloat, dims: []any{"batch", s, d}}}
	if c.Dynamic && c.Kind == ReadoutNACLIP {
		g.inputs = append(g.inputs, valueInfo{name: ReadoutBias, elem: tFloat, dims: []any{s, s}})
		g.names[ReadoutBias] = true
	}
	g.outputs = []valueInfo{{name: ReadoutOutput, elem: tFloat, dims: []any{"batch", s, d}}}
	g.names[ReadoutInput], g.names[ReadoutOutput] = true, true
	if c.Dino != nil {
		return c.dinoGraph(g, vals)
	}
	var rope *peRope
	if c.Rope != nil {
		r := newRope(g, c.GridH, c.GridW, c.Class, int(dh), c.Rope.RefGrid, c.Rope.GridOffset)
		rope = &r
	}
	w := func(name string, dims ...int64) string {
		v := vals[c.Prefix+name]
		return g.weight(c.Prefix+name, dims, func() ([]float32, error) { return v, nil })
	}
	wT := func(name string) string {
		v := vals[c.Prefix+name]
		return g.weight(c.Prefix+name+".T", []int64{d, d}, func() ([]float32, error) { return transpose(v, int(d), int(d)), nil })
	}
	linear := func(x, name string) string {
		y := g.op("MatMul", "", x, wT(name+".weight"))
		return g.op("Add", "", y, w(name+".bias", d))
	}
	h := g.op("LayerNormalization", "", ReadoutInput, w("layer_norm1.weight", d), w("layer_norm1.bias", d))
	g.last().with(intAttr("axis", -1), floatAttr("epsilon", float32(c.Eps)))
	if c.Kind == ReadoutMaskCLIP {
		o := linear(h, "self_attn.v_proj")
		return c.finish(g, o, vals, w, wT)
	}
	if c.Kind == ReadoutPEARL {
		return c.pearlGraph(g, h, vals, w, wT, rope)
	}
	return c.attentionGraph(g, h, s, vals, w, wT, rope)
}

// attentionGraph adds ClearCLIP's or NACLIP's attention on h =
// layer_norm1(x) [B, S, d] (its a the layer's q or k, turned by rope when
// it is not nil) to g, then out_proj (finish), and writes the graph.
func (c ReadoutConfig) attentionGraph(g *graph, h string, s any, vals map[string][]float32, w func(string, ...int64) string, wT func(string) string, rope *peRope) ([]byte, error) {
	d, heads := int64(c.Width), int64(c.Heads)
	dh := d / heads
	proj := "self_attn.q_proj"
	if c.Kind == ReadoutNACLIP {
		proj = "self_attn.k_proj"
	}
	// One MatMul for both projections, [d, 2d]: the attention's a (q or k,
	// scaled by d_h^-¼ so that a aᵀ carries the softmax's d_h^-½) beside v.
	root := float32(math.Pow(float64(dh), -0.25))
	aw, ab := vals[c.Prefix+proj+".weight"], vals[c.Prefix+proj+".bias"]
	vw, vb := vals[c.Prefix+"self_attn.v_proj.weight"], vals[c.Prefix+"self_attn.v_proj.bias"]
	packed := g.weight(c.Prefix+proj+"+v_proj.weight.T", []int64{d, 2 * d}, func() ([]float32, error) {
		out := make([]float32, d*2*d)
		for o := range d {
			for i := range d {
				out[i*2*d+o] = root * aw[o*d+i]
				out[i*2*d+d+o] = vw[o*d+i]
			}
		}
		return out, nil
	})
	packedBias := g.weight(c.Prefix+proj+"+v_proj.bias", []int64{2 * d}, func() ([]float32, error) {
		out := make([]float32, 2*d)
		for i := range d {
			out[i], out[d+i] = root*ab[i], vb[i]
		}
		return out, nil
	})
	av := g.op("Add", "", g.op("MatMul", "", h, packed), packedBias)
	aName, v := g.tmp("a"), g.tmp("v")
	g.nodes = append(g.nodes, &node{op: "Split", name: aName, in: []string{av, g.constInts("av_sizes", []int64{2}, d, d)},
		out: []string{aName, v}, attrs: []attr{intAttr("axis", -1)}})
	if rope != nil {
		aName = rope.apply(g, aName, heads) // linear: the d_h^-¼ commutes
	}
	{
		split := g.constInts("heads_shape", []int64{4}, 0, 0, heads, dh)
		perHead := func(x string) string { // [B, S, d] → [B, H, S, d_h]
			r := g.op("Reshape", "", x, split)
			t := g.op("Transpose", "", r)
			g.last().with(intsAttr("perm", 0, 2, 1, 3))
			return t
		}
		a := perHead(aName)
		at := g.op("Transpose", "", a)
		g.last().with(intsAttr("perm", 0, 1, 3, 2))
		logits := g.op("MatMul", "", a, at)
		switch {
		case c.Kind == ReadoutNACLIP && c.Dynamic:
			logits = g.op("Add", "", logits, ReadoutBias)
		case c.Kind == ReadoutNACLIP:
			bias := NACLIPBias(c.Class, c.GridH, c.GridW, NACLIPSigma)
			n := s.(int64)
			logits = g.op("Add", "", logits, g.weight("naclip_bias", []int64{n, n}, func() ([]float32, error) { return bias, nil }))
		}
		p := g.op("Softmax", "", logits)
		g.last().with(intAttr("axis", -1))
		oh := g.op("MatMul", "", p, perHead(v))
		ot := g.op("Transpose", "", oh)
		g.last().with(intsAttr("perm", 0, 2, 1, 3))
		o := g.op("Reshape", "", ot, g.constInts("merge_shape", []int64{3}, 0, 0, d))
		return c.finish(g, o, vals, w, wT)
	}
}

// finish adds out_proj (and post_layernorm when c has one) on the
// attention output o and writes the graph.
func (c ReadoutConfig) finish(g *graph, o string, vals map[string][]float32, w func(string, ...int64) string, wT func(string) string) ([]byte, error) {
	d := int64(c.Width)
	y := g.op("MatMul", "", o, wT("self_attn.out_proj.weight"))
	if c.PostLayerNorm == "" {
		g.op("Add", ReadoutOutput, y, w("self_attn.out_proj.bias", d))
	} else {
		y = g.op("Add", "", y, w("self_attn.out_proj.bias", d))
		post := func(name string) string {
			v := vals[c.PostLayerNorm+name]
			return g.weight(c.PostLayerNorm+name, []int64{d}, func() ([]float32, error) { return v, nil })
		}
		g.op("LayerNormalization", ReadoutOutput, y, post(".weight"), post(".bias"))
		g.last().with(intAttr("axis", -1), floatAttr("epsilon", float32(c.PostEps)))
	}
	var buf bytes.Buffer
	// ONNX Runtime's contrib domain for PE-Core's RotaryEmbedding.
	if err := writeModel(&buf, g, map[string]int64{"": 17, msDomain: 1}, producer, ""); err != nil {
		return nil, fmt.Errorf("graphbuild: readout: %w", err)
	}
	return buf.Bytes(), nil
}
