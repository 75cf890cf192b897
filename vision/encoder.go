package vision

import (
	"context"
	"fmt"
	"strings"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/ort"
	"github.com/conditionhq/condition/tensorio"
)

// Graph input and output names of a CLIP vision tower export.
const (
	pixelValuesName        = "pixel_values"
	visionHiddenOutputName = "last_hidden_state"
	imageEmbedsOutputName  = "image_embeds"
)

// EncoderOptions controls NewEncoder.
type EncoderOptions struct {
	// Threads is ONNX Runtime's intra-op thread count (0: ONNX Runtime's default).
	Threads int
	// NoSpinning keeps ONNX Runtime's threads from spinning between runs
	// (for pipelines that share the cores with other stages).
	NoSpinning bool
	// PatchSize, when positive, gives the patch grid of each image
	// (config.json's vision_config.patch_size; OpenEncoder sets it). Without
	// it the grid is inferred from the number of patch tokens.
	PatchSize int
}

// Encoder runs a CLIP vision tower exported to ONNX (onnx/vision_model.onnx)
// with ONNX Runtime. pixel_values must be float32 [batch, 3, H, W]. Encode may
// be called from several goroutines. Close it when done.
type Encoder struct {
	name      string
	input     string
	sess      *ort.Session
	inShape   []int64 // the graph's pixel_values shape; -1 for dynamic dimensions
	hasEmbeds bool
	patch     int
}

// Encoding is one image's output.
type Encoding struct {
	// States is last_hidden_state [1+P, Width], row-major: row 0 is the class
	// token, rows 1..P the patches in Grid order. These are the encoder's
	// outputs before post_layernorm (Hugging Face CLIPVisionModel semantics).
	States        []float32
	Tokens, Width int // 1+P and d_v
	Grid          Grid
	// Embeds is image_embeds [Dim]: visual_projection(post_layernorm(class
	// token)), in CLIP's joint space (not normalised). Nil when the graph has
	// no image_embeds output.
	Embeds []float32
}

// OpenEncoder creates the encoder of a model's onnx/vision_model.onnx.
func OpenEncoder(m *models.Model, opts EncoderOptions) (*Encoder, error) {
	b, err := m.ReadFile(models.VisionModelFile)
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	if opts.PatchSize == 0 {
		opts.PatchSize = m.Config().VisionConfig.PatchSize
	}
	return NewEncoder(b, m.Path(models.VisionModelFile), opts)
}

// NewEncoder creates an encoder over an ONNX graph held in memory; name (the
// file's path) is used in errors.
func NewEncoder(graph []byte, name string, opts EncoderOptions) (*Encoder, error) {
	ins, outs, err := ort.Inspect(graph, name)
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	e := &Encoder{name: name, patch: opts.PatchSize}
	var in *ort.IOInfo
	for i := range ins {
		if ins[i].Name == pixelValuesName {
			in = &ins[i]
		}
	}
	if in == nil && len(ins) == 1 {
		in = &ins[0] // one input under another name: it can only be the pixels
	}
	if in == nil {
		return nil, fmt.Errorf("vision: %s: the graph has no %s input (inputs: %s)", name, pixelValuesName, listIOInfo(ins))
	}
	if len(ins) != 1 {
		return nil, fmt.Errorf("vision: %s: the graph has %d inputs (%s); a CLIP vision graph takes %s only", name, len(ins), listIOInfo(ins), pixelValuesName)
	}
	if !in.Tensor || in.Type != ort.ElementFloat32 {
		return nil, fmt.Errorf("vision: %s: input %s is %s, expected a float32 tensor [batch, 3, height, width]", name, in.Name, describeIOInfo(*in))
	}
	if len(in.Shape) != 4 {
		return nil, fmt.Errorf("vision: %s: input %s has shape %v, expected [batch, 3, height, width]", name, in.Name, in.Shape)
	}
	e.input, e.inShape = in.Name, in.Shape
	outNames := []string{visionHiddenOutputName}
	var haveHidden bool
	for _, o := range outs {
		switch o.Name {
		case visionHiddenOutputName:
			haveHidden = true
		case imageEmbedsOutputName:
			e.hasEmbeds = true
			outNames = append(outNames, imageEmbedsOutputName)
		default:
			continue
		}
		if !o.Tensor || o.Type != ort.ElementFloat32 {
			return nil, fmt.Errorf("vision: %s: output %s is %s, expected a float32 tensor", name, o.Name, describeIOInfo(o))
		}
	}
	if !haveHidden {
		return nil, fmt.Errorf("vision: %s: the graph has no %s output (outputs: %s): it gives pooled embeddings only, "+
			"and patch states need %s; use a full export with %s and %s as outputs "+
			"(or run `condition models expose` on the model to add it)",
			name, visionHiddenOutputName, listIOInfo(outs), visionHiddenOutputName, visionHiddenOutputName, imageEmbedsOutputName)
	}
	e.sess, err = ort.NewSession(graph, name, []string{e.input}, outNames, ort.SessionOptions{Threads: opts.Threads, NoSpinning: opts.NoSpinning})
	if err != nil {
		return nil, fmt.Errorf("vision: %w", err)
	}
	return e, nil
}

// InputSize returns the image size the graph fixes (0 for a dynamic dimension).
func (e *Encoder) InputSize() (channels, height, width int) {
	d := func(v int64) int {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	return d(e.inShape[1]), d(e.inShape[2]), d(e.inShape[3])
}

// HasEmbeds reports whether the graph outputs image_embeds.
func (e *Encoder) HasEmbeds() bool { return e.hasEmbeds }

// Close releases the ONNX Runtime session. It is safe to call more than once.
func (e *Encoder) Close() error {
	if e == nil || e.sess == nil {
		return nil
	}
	if err := e.sess.Close(); err != nil {
		return fmt.Errorf("vision: %w", err)
	}
	return nil
}

// Encode runs n images in one batch: pixels holds pixel_values [n, 3, height,
// width] row-major (as the preprocessor makes them). It returns one Encoding
// per image, in order.
func (e *Encoder) Encode(ctx context.Context, pixels []float32, n, height, width int) ([]Encoding, error) {
	if n == 0 {
		return nil, nil
	}
	c, gh, gw := e.InputSize()
	if c == 0 {
		c = 3
	}
	if n < 0 || height <= 0 || width <= 0 {
		return nil, fmt.Errorf("vision: encode: bad batch shape [%d %d %d %d]", n, c, height, width)
	}
	if (gh > 0 && height != gh) || (gw > 0 && width != gw) {
		return nil, fmt.Errorf("vision: encode: images are %dx%d, %s takes %dx%d", height, width, e.name, gh, gw)
	}
	if len(pixels) != n*c*height*width {
		return nil, fmt.Errorf("vision: encode: %d pixel values for a batch of [%d %d %d %d] (%d values)", len(pixels), n, c, height, width, n*c*height*width)
	}
	out, err := e.sess.Run(ctx, []tensorio.Tensor{tensorio.F32([]int{n, c, height, width}, pixels)})
	if err != nil {
		return nil, fmt.Errorf("vision: encode %d images: %w", n, err)
	}
	hidden, ok := out[0].Data.([]float32)
	if !ok || len(out[0].Shape) != 3 || out[0].Shape[0] != n || out[0].Shape[1] < 2 {
		return nil, fmt.Errorf("vision: %s: %s has shape %v, expected [%d 1+patches width]", e.name, visionHiddenOutputName, out[0].Shape, n)
	}
	tokens, width2 := out[0].Shape[1], out[0].Shape[2]
	var grid Grid
	if e.patch > 0 {
		grid, err = GridFor(height, width, e.patch)
		if err != nil {
			return nil, err
		}
		if grid.Patches() != tokens-1 {
			return nil, fmt.Errorf("vision: %s: %d patch tokens, but a %dx%d image in %d-pixel patches has %s = %d", e.name, tokens-1, height, width, e.patch, grid, grid.Patches())
		}
	} else if grid, err = InferGrid(tokens-1, height, width); err != nil {
		return nil, err
	}
	var embeds []float32
	dim := 0
	if e.hasEmbeds {
		embeds, ok = out[1].Data.([]float32)
		if !ok || len(out[1].Shape) != 2 || out[1].Shape[0] != n {
			return nil, fmt.Errorf("vision: %s: %s has shape %v, expected [%d dim]", e.name, imageEmbedsOutputName, out[1].Shape, n)
		}
		dim = out[1].Shape[1]
	}
	res := make([]Encoding, n)
	sz := tokens * width2
	for i := range res {
		r := &res[i]
		r.Tokens, r.Width, r.Grid = tokens, width2, grid
		r.States = hidden[i*sz : (i+1)*sz : (i+1)*sz]
		if embeds != nil {
			r.Embeds = embeds[i*dim : (i+1)*dim : (i+1)*dim]
		}
	}
	return res, nil
}

func describeIOInfo(i ort.IOInfo) string {
	if !i.Tensor {
		return "not a tensor"
	}
	return i.Type.String()
}

func listIOInfo(infos []ort.IOInfo) string {
	s := make([]string, len(infos))
	for i, x := range infos {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}
