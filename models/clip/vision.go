package clip

import (
	"context"
	"fmt"

	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// Graph input and output names of a CLIP vision tower export.
const (
	pixelValuesName        = "pixel_values"
	visionHiddenOutputName = "last_hidden_state"
	imageEmbedsOutputName  = "image_embeds"
)

// VisionOptions controls OpenVision, NewVision and NewVisionFile.
type VisionOptions struct {
	// Threads is ONNX Runtime's intra-op thread count (0: ONNX Runtime's default).
	Threads int
	// NoSpinning keeps ONNX Runtime's threads from spinning between runs
	// (for pipelines that share the cores with other stages).
	NoSpinning bool
	// NoPrepack makes the session without packing its weights first
	// (ort.SessionOptions.NoPrepack): a faster start, slightly slower runs.
	NoPrepack bool
	// NoArena turns ONNX Runtime's CPU memory arena off (buffers are
	// allocated per run instead of kept in a growing pool).
	NoArena bool
	// PinThreads pins ONNX Runtime's intra-op pool threads (Threads − 1 of
	// them; the calling thread is not one) to one logical processor each.
	PinThreads bool
	// PatchSize, when positive, gives the patch grid of each image
	// (config.json's vision_config.patch_size; OpenVision sets it). Without
	// it the grid is inferred from the number of patch tokens.
	PatchSize int
	// Width and ProjectionDim, when positive, are the widths of
	// last_hidden_state and image_embeds (config.json's
	// vision_config.hidden_size and projection_dim; OpenVision sets them).
	// Only a float16 or bfloat16 graph whose outputs have dynamic widths
	// needs them: its outputs are allocated before each run (and, when the
	// graph does not fix the number of tokens, PatchSize too).
	Width, ProjectionDim int
	// NoClassToken says every row of last_hidden_state is a patch (SigLIP);
	// CLIP's first row is a class token. OpenVision sets it from the
	// model's family.
	NoClassToken bool
	// Registers is the number of rows after the class token and before the
	// patches (TIPSv2's register tokens; 0 for CLIP). OpenVision sets it
	// from config.json's vision_config.num_register_tokens.
	Registers int
	// PooledIsEmbeds takes the graph's pooler_output as image_embeds when it
	// has no image_embeds: SigLIP's pooled output (the attention-pooling
	// head's) is its joint-space embedding (CLIP's is not). OpenVision sets
	// it from the model's family.
	PooledIsEmbeds bool
	// Readout is how the patches' vectors are read (see Readout):
	// "" or ReadoutRaw for last_hidden_state as it is; another readout
	// needs the graph's readout_input output (the last encoder layer's
	// input; graphs built from safetensors have it) and the last layer's
	// weights, which only OpenVision reads (from the model's
	// model.safetensors). Encodings then carry Readout.
	Readout Readout
}

// VisionEncoder runs a CLIP vision tower exported to ONNX (onnx/vision_model.onnx)
// with ONNX Runtime. pixel_values must be a float32 or float16 tensor [batch,
// 3, H, W] and the outputs float32, float16 or bfloat16 (as in the hub's
// `_fp16` exports): Encode takes and returns float32 whatever the graph's
// types, rounding pixel values to float16 (to nearest even) for a float16
// input. Encode may be called from several goroutines. Close it when done.
type VisionEncoder struct {
	name      string
	input     string
	sess      *ort.Session
	inType    ort.ElementType // float32 or float16
	inShape   []int64         // the graph's pixel_values shape; -1 for dynamic dimensions
	hasEmbeds bool
	embedsOut string // image_embeds, or pooler_output (PooledIsEmbeds)
	cls       int    // class-token rows before the patches: 1 (CLIP) or 0
	patch     int
	// The element types of last_hidden_state and image_embeds, and their
	// sizes when known (0 otherwise): float16 and bfloat16 outputs are
	// allocated before each run.
	hiddenType, embedsType ort.ElementType
	tokens, width, dim     int
	// The readout: its session, and readout_input's element type (nil and
	// 0 for the raw readout).
	readout     *readoutSession
	readoutType ort.ElementType
	// naflexIO says the graph takes SigLIP 2 NaFlex's patch sequences;
	// naflex is the model's position table (OpenVision reads it).
	naflexIO bool
	naflex   *naflexPositions
	// defaulted, when not empty, says which config.json gave no
	// vision_config and the defaults taken (OpenVision sets it): a patch
	// count the graph does not match is explained by it.
	defaulted string
}

// VisionEncoding is one image's output.
type VisionEncoding struct {
	// States is last_hidden_state [Tokens, Width], row-major. CLIP: [1+P,
	// Width], row 0 the class token, rows 1..P the patches row by row,
	// before post_layernorm (Hugging Face CLIPVisionModel semantics).
	// TIPSv2 (Registers R): [1+R+P, Width], the class token, the R
	// registers, then the patches, after the final layernorm (its patch
	// rows are the graph's patch_embeds).
	// SigLIP (NoClassToken): [P, Width], every row a patch, after
	// post_layernorm.
	States        []float32
	Tokens, Width int // 1+P (or P) and d_v
	// Embeds is image_embeds [Dim] in the joint space (not normalised):
	// CLIP's visual_projection(post_layernorm(class token)), or SigLIP's
	// pooler_output (the attention-pooling head's). Nil when the graph has
	// neither.
	Embeds []float32
	// Readout is the readout's hidden states [Tokens, Width], every row
	// recomputed from the last layer's input, in the space of States:
	// before post_layernorm for CLIP, after it for SigLIP (NoClassToken).
	// Nil for the raw readout.
	Readout []float32
}

// OpenVision creates the vision encoder of a model's
// onnx/vision_model.onnx (or the variant the model was opened with), taking
// PatchSize, Width and ProjectionDim from its config.json where opts leaves
// them at zero. A model on disk has its graph opened by path, so that a
// graph keeping its weights in external data (such as
// onnx/vision_model.onnx_data) finds them beside it.
func OpenVision(m *models.Model, opts VisionOptions) (*VisionEncoder, error) {
	c := m.Config()
	if opts.PatchSize == 0 {
		opts.PatchSize = c.VisionConfig.PatchSize
	}
	if opts.Width == 0 {
		opts.Width = c.VisionConfig.HiddenSize
	}
	if opts.ProjectionDim == 0 {
		opts.ProjectionDim = c.ProjectionDim
	}
	if f := m.Family(); !f.ClassToken() {
		opts.NoClassToken = true
		opts.PooledIsEmbeds = f.Sigmoid()
	}
	if pe := c.VisionConfig.PECore; pe != nil && !pe.ClassToken {
		opts.NoClassToken = true // PE-Core bigG: every row a patch
	}
	if m.Family() == models.Tipsv2 && opts.Registers == 0 {
		opts.Registers = c.VisionConfig.NumRegisterTokens
	}
	if opts.Readout == ReadoutRaw {
		opts.Readout = ""
	}
	if opts.Readout != "" && !opts.Readout.known() {
		return nil, fmt.Errorf("clip: readout %q: want one of %s", opts.Readout, readoutNames())
	}
	if err := CheckReadoutFamily(m, opts.Readout); err != nil {
		return nil, err
	}
	if opts.Readout != "" && opts.Readout != ReadoutMaskCLIP && m.Family() == models.Tipsv2 {
		return nil, fmt.Errorf("clip: readout %s: model %s is TIPSv2, which takes readout %s (its raw patch tokens, trained for dense patch–text alignment) or %s (the value attention its authors evaluate zero-shot segmentation with); its DINOv2 blocks are not recomputed by the attention readouts",
			opts.Readout, m.Name(), ReadoutRaw, ReadoutMaskCLIP)
	}
	e, err := openVisionOf(m, opts)
	if err != nil {
		return nil, err
	}
	if c.VisionDefaulted() {
		e.defaulted = fmt.Sprintf("%s: no vision_config given; the defaults (image_size %d, patch_size %d) do not match %s; give the model's vision_config",
			m.Path("config.json"), c.VisionConfig.ImageSize, c.VisionConfig.PatchSize, e.name)
	}
	return e, nil
}

// openVisionOf opens the vision graph of model m (and its readout) with
// opts completed from its config.json.
func openVisionOf(m *models.Model, opts VisionOptions) (*VisionEncoder, error) {
	c := m.Config()
	if c.NaFlex() {
		pos, err := readNaFlexPositions(m)
		if err != nil {
			return nil, err
		}
		e, err := openModelGraph(m, models.VisionModelFile, opts, openVision)
		if err != nil {
			return nil, err
		}
		if opts.Readout != "" {
			// One graph for every grid, run on each image's own rows.
			if e.readout, err = openReadout(m, opts.Readout, 0, 0, 0, opts); err != nil {
				e.Close()
				return nil, err
			}
		}
		if e.naflex = pos; int(e.inShape[2]) != c.VisionConfig.NumChannels*c.VisionConfig.PatchSize*c.VisionConfig.PatchSize {
			e.Close()
			return nil, fmt.Errorf("clip: vision: %s takes patches of %d values; config.json's %d channels of %d×%d pixels are %d",
				e.name, e.inShape[2], c.VisionConfig.NumChannels, c.VisionConfig.PatchSize, c.VisionConfig.PatchSize,
				c.VisionConfig.NumChannels*c.VisionConfig.PatchSize*c.VisionConfig.PatchSize)
		}
		return e, nil
	}
	if opts.Readout == "" {
		return openModelGraph(m, models.VisionModelFile, opts, openVision)
	}
	g, err := readoutGraph(m)
	if err != nil {
		return nil, err
	}
	e, err := openGraph(g, opts, openVision)
	if err != nil {
		return nil, err
	}
	_, h, w := e.InputSize()
	if h == 0 || w == 0 {
		h, w = c.VisionConfig.ImageSize, c.VisionConfig.ImageSize
	}
	if e.patch <= 0 || h < e.patch || w < e.patch {
		e.Close()
		return nil, fmt.Errorf("clip: readout %s: %s: the patch grid is unknown (image %dx%d, patch %d)", opts.Readout, e.name, h, w, e.patch)
	}
	if e.readout, err = openReadout(m, opts.Readout, e.cls, h/e.patch, w/e.patch, opts); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// NewVision creates a vision encoder over an ONNX graph held in memory;
// name (the file's path) is used in errors. The graph must hold all its
// weights (no external data); see NewVisionFile.
func NewVision(graph []byte, name string, opts VisionOptions) (*VisionEncoder, error) {
	if err := noReadout(opts); err != nil {
		return nil, err
	}
	return openGraph(ort.GraphBytes(graph, name), opts, openVision)
}

// NewVisionFile creates a vision encoder over the ONNX graph in the file
// path, which ONNX Runtime reads itself: external data files beside it are
// found.
func NewVisionFile(path string, opts VisionOptions) (*VisionEncoder, error) {
	if err := noReadout(opts); err != nil {
		return nil, err
	}
	return openGraph(ort.GraphFile(path), opts, openVision)
}

// noReadout refuses a readout other than raw where no model's weights are
// at hand.
func noReadout(opts VisionOptions) error {
	if opts.Readout != "" && opts.Readout != ReadoutRaw {
		return fmt.Errorf("clip: readout %s needs the model's last vision layer weights: open the encoder with OpenVision", opts.Readout)
	}
	return nil
}

// openVision creates the encoder from the graph's inputs and outputs.
func openVision(g ort.Graph, opts VisionOptions, ins, outs []ort.IOInfo) (*VisionEncoder, error) {
	name := g.Name()
	if opts.Registers < 0 {
		return nil, fmt.Errorf("clip: vision: %s: %d register tokens, expected 0 or more", name, opts.Registers)
	}
	e := &VisionEncoder{name: name, patch: opts.PatchSize, cls: 1 + opts.Registers}
	if opts.NoClassToken {
		e.cls = 0
	}
	var in *ort.IOInfo
	for i := range ins {
		if ins[i].Name == pixelValuesName {
			in = &ins[i]
		}
	}
	if in == nil && len(ins) == 1 {
		in = &ins[0] // one input under another name: it can only be the pixels
	}
	if in != nil && len(ins) == 3 && hasInputs(ins, naflexMaskName, naflexPositionsName) {
		// SigLIP 2 NaFlex: pixel_values [batch, patches, C·p²].
		if !in.Tensor || in.Type != ort.ElementFloat32 || len(in.Shape) != 3 || in.Shape[2] <= 0 {
			return nil, fmt.Errorf("clip: vision: %s: input %s is %s%v, expected a float32 tensor [batch, patches, channels·patch²]", name, in.Name, in.TypeName(), in.Shape)
		}
		e.input, e.inType, e.inShape = in.Name, in.Type, in.Shape
		e.naflexIO = true
	}
	if in == nil {
		return nil, fmt.Errorf("clip: vision: %s: the graph has no %s input (inputs: %s)", name, pixelValuesName, ort.ListIO(ins))
	}
	switch {
	case e.naflexIO:
	case len(ins) != 1:
		return nil, fmt.Errorf("clip: vision: %s: the graph has %d inputs (%s); a CLIP vision graph takes %s only (SigLIP 2 NaFlex's: %s, %s and %s)",
			name, len(ins), ort.ListIO(ins), pixelValuesName, pixelValuesName, naflexMaskName, naflexPositionsName)
	case !in.Tensor || (in.Type != ort.ElementFloat32 && in.Type != ort.ElementFloat16):
		return nil, fmt.Errorf("clip: vision: %s: input %s is %s, expected a float32 or float16 tensor [batch, 3, height, width]", name, in.Name, in.TypeName())
	case len(in.Shape) != 4:
		return nil, fmt.Errorf("clip: vision: %s: input %s has shape %v, expected [batch, 3, height, width]", name, in.Name, in.Shape)
	default:
		e.input, e.inType, e.inShape = in.Name, in.Type, in.Shape
	}
	outNames := []string{visionHiddenOutputName}
	e.embedsOut = embedsName(outs, imageEmbedsOutputName, opts.PooledIsEmbeds)
	var haveHidden bool
	for _, o := range outs {
		switch o.Name {
		case visionHiddenOutputName:
			haveHidden = true
			e.hiddenType = o.Type
			e.tokens = o.Dim(1)
			e.width = o.DimOr(2, opts.Width)
		case e.embedsOut:
			e.hasEmbeds = true
			outNames = append(outNames, e.embedsOut)
			e.embedsType = o.Type
			e.dim = o.DimOr(1, opts.ProjectionDim)
		case graphbuild.ReadoutInput:
			if opts.Readout == "" || opts.Readout == ReadoutRaw {
				continue
			}
			e.readoutType = o.Type
		default:
			continue
		}
		if !o.Tensor || !o.Type.IsFloat() {
			return nil, fmt.Errorf("clip: vision: %s: output %s is %s, expected a float32, float16 or bfloat16 tensor", name, o.Name, o.TypeName())
		}
		if !o.Type.NeedsShape() {
			continue
		}
		if (o.Name == visionHiddenOutputName && e.width <= 0) || (o.Name == e.embedsOut && e.dim <= 0) {
			return nil, &ort.UndeclaredSizeError{Err: fmt.Errorf("clip: vision: %s: output %s is %s%v, and the graph does not fix its width, which a %s output needs "+
				"(give VisionOptions.Width for %s and ProjectionDim for %s; OpenVision reads them from config.json)",
				name, o.Name, o.Type, o.Shape, o.Type, visionHiddenOutputName, imageEmbedsOutputName)}
		}
		if o.Name == visionHiddenOutputName && e.tokens <= 0 && e.patch <= 0 {
			return nil, &ort.UndeclaredSizeError{Err: fmt.Errorf("clip: vision: %s: output %s is %s%v, and the graph does not fix its number of tokens, which a %s output needs "+
				"(give VisionOptions.PatchSize; OpenVision reads it from config.json)", name, o.Name, o.Type, o.Shape, o.Type)}
		}
	}
	if !haveHidden {
		return nil, fmt.Errorf("clip: vision: %s: the graph has no %s output (outputs: %s): it gives pooled embeddings only, "+
			"and patch states need %s; use a full export with %s and %s as outputs "+
			"(models.Model.Expose adds it to a model): %w",
			name, visionHiddenOutputName, ort.ListIO(outs), visionHiddenOutputName, visionHiddenOutputName, imageEmbedsOutputName, ErrMissingOutput)
	}
	if opts.Readout != "" && opts.Readout != ReadoutRaw {
		if e.readoutType == 0 {
			return nil, fmt.Errorf("clip: vision: %s: readout %s: the graph has no %s output (outputs: %s), the last encoder layer's input it recomputes from; "+
				"graphs built from safetensors have it: %w", name, opts.Readout, graphbuild.ReadoutInput, ort.ListIO(outs), ErrMissingOutput)
		}
		outNames = append(outNames, graphbuild.ReadoutInput)
	}
	var err error
	inNames := []string{e.input}
	if e.naflexIO {
		inNames = append(inNames, naflexMaskName, naflexPositionsName)
	}
	e.sess, err = g.NewSession(inNames, outNames, ort.SessionOptions{Threads: opts.Threads, NoSpinning: opts.NoSpinning, NoArena: opts.NoArena, PinThreads: opts.PinThreads, NoPrepack: opts.NoPrepack})
	if err != nil {
		return nil, fmt.Errorf("clip: vision: %w", err)
	}
	return e, nil
}

// InputSize returns the image size the graph fixes (0 for a dynamic
// dimension; height and width 0 for a NaFlex tower, which takes each
// image's own).
func (e *VisionEncoder) InputSize() (channels, height, width int) {
	if e.naflexIO {
		return 3, 0, 0
	}
	d := func(v int64) int {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	return d(e.inShape[1]), d(e.inShape[2]), d(e.inShape[3])
}

// PatchSize returns the side of a patch in pixels (0 when unknown: then the
// caller infers the grid from the number of tokens).
func (e *VisionEncoder) PatchSize() int { return e.patch }

// HasEmbeds reports whether the graph outputs image_embeds.
func (e *VisionEncoder) HasEmbeds() bool { return e.hasEmbeds }

// ClassTokens returns the rows of last_hidden_state before the patches: 1
// for CLIP's class token, 1+R for TIPSv2's class token and R registers, 0
// when every row is a patch (SigLIP).
func (e *VisionEncoder) ClassTokens() int { return e.cls }

// Close releases the ONNX Runtime session. It is safe to call more than once.
func (e *VisionEncoder) Close() error {
	if e == nil || e.sess == nil {
		return nil
	}
	rerr := e.readout.close()
	if err := e.sess.Close(); err != nil {
		return fmt.Errorf("clip: vision: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("clip: vision: %w", rerr)
	}
	return nil
}

// Encode runs n images in one batch: pixels holds pixel_values [n, 3, height,
// width] row-major (as the preprocessor makes them). It returns one Encoding
// per image, in order.
func (e *VisionEncoder) Encode(ctx context.Context, pixels []float32, n, height, width int) ([]VisionEncoding, error) {
	if e.naflexIO {
		return nil, fmt.Errorf("clip: vision: %s is SigLIP 2 NaFlex's, which takes patch sequences (EncodePatches)", e.name)
	}
	if n == 0 {
		return nil, nil
	}
	c, gh, gw := e.InputSize()
	if c == 0 {
		c = 3
	}
	if n < 0 || height <= 0 || width <= 0 {
		return nil, fmt.Errorf("clip: vision: encode: bad batch shape [%d %d %d %d]", n, c, height, width)
	}
	if (gh > 0 && height != gh) || (gw > 0 && width != gw) {
		return nil, fmt.Errorf("clip: vision: encode: images are %dx%d, %s takes %dx%d", height, width, e.name, gh, gw)
	}
	if len(pixels) != n*c*height*width {
		return nil, fmt.Errorf("clip: vision: encode: %d pixel values for a batch of [%d %d %d %d] (%d values)", len(pixels), n, c, height, width, n*c*height*width)
	}
	shape := []int{n, c, height, width}
	in := tensorio.F32(shape, pixels)
	if e.inType == ort.ElementFloat16 {
		half := make([]uint16, len(pixels))
		for i, v := range pixels {
			half[i] = tensorio.Float32ToF16(v)
		}
		in = tensorio.Tensor{DType: tensorio.DTypeF16, Shape: shape, Data: half}
	}
	// With the patch size known, the number of tokens is known before the
	// run: the class token and a patch per patch×patch square (a remainder
	// smaller than a patch is dropped, as a convolution of that stride does).
	patches := 0
	if e.patch > 0 {
		if patches = (height / e.patch) * (width / e.patch); patches == 0 {
			return nil, fmt.Errorf("clip: vision: encode: a %dx%d image is smaller than one %d-pixel patch", height, width, e.patch)
		}
	}
	var alloc []ort.Output
	if e.hiddenType.NeedsShape() || (e.hasEmbeds && e.embedsType.NeedsShape()) || (e.readout != nil && e.readoutType.NeedsShape()) {
		tokens := e.tokens
		if tokens <= 0 {
			// Used only for a float16 or bfloat16 last_hidden_state, for
			// which openEncoder made sure of a patch size.
			tokens = e.cls + patches
		}
		alloc = []ort.Output{ort.OutputFor(e.hiddenType, n, tokens, e.width)}
		if e.hasEmbeds {
			alloc = append(alloc, ort.OutputFor(e.embedsType, n, e.dim))
		}
		if e.readout != nil {
			alloc = append(alloc, ort.OutputFor(e.readoutType, n, tokens, e.width))
		}
	}
	out, err := e.sess.Run(ctx, []tensorio.Tensor{in}, alloc...)
	if err != nil {
		return nil, fmt.Errorf("clip: vision: encode %d images: %w", n, err)
	}
	hidden, err := out[0].Float32()
	if err != nil || len(out[0].Shape) != 3 || out[0].Shape[0] != n || out[0].Shape[1] < e.cls+1 {
		rows := fmt.Sprintf("%d+patches", e.cls)
		if e.cls == 0 {
			rows = "patches"
		}
		return nil, fmt.Errorf("clip: vision: %s: %s is %s%v, expected [%d %s width] floats", e.name, visionHiddenOutputName, out[0].DType, out[0].Shape, n, rows)
	}
	tokens, width2 := out[0].Shape[1], out[0].Shape[2]
	if e.patch > 0 && patches != tokens-e.cls {
		err := fmt.Errorf("clip: vision: %s: %d patch tokens, but a %dx%d image in %d-pixel patches has %dx%d = %d", e.name, tokens-e.cls, height, width, e.patch, height/e.patch, width/e.patch, patches)
		if e.defaulted != "" {
			err = fmt.Errorf("%w: %s", err, e.defaulted)
		}
		return nil, err
	}
	var embeds []float32
	dim := 0
	if e.hasEmbeds {
		if embeds, dim, err = e.embedsOf(out[1], n); err != nil {
			return nil, err
		}
	}
	var readout []float32
	if e.readout != nil {
		o := out[len(out)-1]
		x, err := o.Float32()
		if err != nil || len(o.Shape) != 3 || o.Shape[0] != n || o.Shape[1] != tokens || o.Shape[2] != width2 {
			return nil, fmt.Errorf("clip: vision: %s: %s is %s%v, expected [%d %d %d] floats", e.name, graphbuild.ReadoutInput, o.DType, o.Shape, n, tokens, width2)
		}
		if readout, err = e.readout.run(ctx, x, n, tokens, width2); err != nil {
			return nil, err
		}
	}
	res := make([]VisionEncoding, n)
	sz := tokens * width2
	for i := range res {
		r := &res[i]
		r.Tokens, r.Width = tokens, width2
		r.States = hidden[i*sz : (i+1)*sz : (i+1)*sz]
		if embeds != nil {
			r.Embeds = embeds[i*dim : (i+1)*dim : (i+1)*dim]
		}
		if readout != nil {
			r.Readout = readout[i*sz : (i+1)*sz : (i+1)*sz]
		}
	}
	return res, nil
}
