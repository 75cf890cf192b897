package clip

import (
	"context"
	"fmt"
	"math"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// Graph input and output names of a CLIP text tower export.
const (
	inputIDsName      = "input_ids"
	attentionMaskName = "attention_mask"
	hiddenOutputName  = "last_hidden_state"
	embedsOutputName  = "text_embeds"
	// pooledOutputName is the pooled output of SigLIP exports, which is
	// their embedding in the joint space (the head's output).
	pooledOutputName = "pooler_output"
)

// TextOptions controls OpenText, NewText and NewTextFile.
type TextOptions struct {
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
	// MaxLength, when positive, is the longest sequence the model takes
	// (config.json's text_config.max_position_embeddings); longer input is
	// an error before the graph runs. OpenText sets it from the config.
	MaxLength int
	// Width and ProjectionDim, when positive, are the widths of
	// last_hidden_state and text_embeds (config.json's
	// text_config.hidden_size and projection_dim; OpenText sets them).
	// Only a float16 or bfloat16 graph whose outputs have dynamic widths
	// needs them: its outputs are allocated before each run.
	Width, ProjectionDim int
	// PooledIsEmbeds takes the graph's pooler_output as text_embeds when it
	// has no text_embeds: SigLIP's pooled output is its joint-space
	// embedding (CLIP's is not). OpenText sets it from the model's family.
	PooledIsEmbeds bool
}

// TextEncoder runs a CLIP text tower exported to ONNX (onnx/text_model.onnx) with
// ONNX Runtime. It reads input and output names and element types from the
// graph: input_ids may be int64 or int32, attention_mask may be absent, and
// the outputs may be float32, float16 or bfloat16 (as in the hub's `_fp16`
// exports); Encode returns float32 whatever the graph's output type. Encode
// may be called from several goroutines. Close it when done.
type TextEncoder struct {
	name      string
	sess      *ort.Session
	embedsOut string // text_embeds, or pooler_output (PooledIsEmbeds)
	idsType   ort.ElementType
	maskType  ort.ElementType // ElementUndefined when the graph has no attention_mask
	hasEmbeds bool
	maxLen    int
	// The element types of last_hidden_state and text_embeds, and their
	// widths (0 when dynamic and not given): float16 and bfloat16 outputs are
	// allocated before each run.
	hiddenType, embedsType ort.ElementType
	width, dim             int
}

// TextEncoding is one prompt's output.
type TextEncoding struct {
	// States is last_hidden_state [T, Width], row-major: one row per token,
	// after the final layer norm (Hugging Face CLIPTextModel semantics).
	States []float32
	// Mask is the attention mask [T]: 1 for tokens (BOS, words, EOS), 0 for padding.
	Mask     []int64
	T, Width int
	// Embeds is text_embeds [Dim]: text_projection of the state at the
	// first EOS, in CLIP's joint space (not normalised). Nil when the graph
	// has no text_embeds output.
	Embeds []float32
}

// OpenText creates the text encoder of a model's onnx/text_model.onnx (or
// the variant the model was opened with), taking MaxLength, Width and
// ProjectionDim from its config.json where opts leaves them at zero. A model
// on disk has its graph opened by path, so that a graph keeping its weights
// in external data (such as onnx/text_model.onnx_data) finds them beside it.
func OpenText(m *models.Model, opts TextOptions) (*TextEncoder, error) {
	c := m.Config()
	if opts.MaxLength == 0 {
		opts.MaxLength = c.TextConfig.MaxPositionEmbeddings
	}
	if opts.Width == 0 {
		opts.Width = c.TextConfig.HiddenSize
	}
	if opts.ProjectionDim == 0 {
		opts.ProjectionDim = c.ProjectionDim
	}
	if m.Family().Sigmoid() {
		opts.PooledIsEmbeds = true
	}
	return openModelGraph(m, models.TextModelFile, opts, openText)
}

// NewText creates a text encoder over an ONNX graph held in memory; name
// (the file's path) is used in errors. The graph must hold all its weights
// (no external data); see NewTextFile.
func NewText(graph []byte, name string, opts TextOptions) (*TextEncoder, error) {
	return openGraph(ort.GraphBytes(graph, name), opts, openText)
}

// NewTextFile creates a text encoder over the ONNX graph in the file path,
// which ONNX Runtime reads itself: external data files beside it are found.
func NewTextFile(path string, opts TextOptions) (*TextEncoder, error) {
	return openGraph(ort.GraphFile(path), opts, openText)
}

// openText creates the encoder from the graph's inputs and outputs.
func openText(g ort.Graph, opts TextOptions, ins, outs []ort.IOInfo) (*TextEncoder, error) {
	name := g.Name()
	e := &TextEncoder{name: name, maxLen: opts.MaxLength}
	inNames := []string{inputIDsName}
	var haveIDs bool
	for _, in := range ins {
		switch in.Name {
		case inputIDsName:
			haveIDs = true
			if !in.Tensor || (in.Type != ort.ElementInt64 && in.Type != ort.ElementInt32) {
				return nil, fmt.Errorf("clip: text: %s: input %s is %s, expected an int64 or int32 tensor", name, in.Name, in.TypeName())
			}
			e.idsType = in.Type
		case attentionMaskName:
			if !in.Tensor || (in.Type != ort.ElementInt64 && in.Type != ort.ElementInt32) {
				return nil, fmt.Errorf("clip: text: %s: input %s is %s, expected an int64 or int32 tensor", name, in.Name, in.TypeName())
			}
			e.maskType = in.Type
			inNames = append(inNames, attentionMaskName)
		default:
			return nil, fmt.Errorf("clip: text: %s: unexpected input %s (a CLIP text graph takes input_ids and, optionally, attention_mask)", name, in)
		}
	}
	if !haveIDs {
		return nil, fmt.Errorf("clip: text: %s: the graph has no input_ids input (inputs: %s)", name, ort.ListIO(ins))
	}
	outNames := []string{hiddenOutputName}
	e.embedsOut = embedsName(outs, embedsOutputName, opts.PooledIsEmbeds)
	var haveHidden bool
	for _, o := range outs {
		switch o.Name {
		case hiddenOutputName:
			haveHidden = true
			e.hiddenType = o.Type
			e.width = o.DimOr(2, opts.Width)
		case e.embedsOut:
			e.hasEmbeds = true
			outNames = append(outNames, e.embedsOut)
			e.embedsType = o.Type
			e.dim = o.DimOr(1, opts.ProjectionDim)
		default:
			continue
		}
		if !o.Tensor || !o.Type.IsFloat() {
			return nil, fmt.Errorf("clip: text: %s: output %s is %s, expected a float32, float16 or bfloat16 tensor", name, o.Name, o.TypeName())
		}
		if o.Type.NeedsShape() && ((o.Name == hiddenOutputName && e.width <= 0) || (o.Name == e.embedsOut && e.dim <= 0)) {
			return nil, &ort.UndeclaredSizeError{Err: fmt.Errorf("clip: text: %s: output %s is %s%v, and the graph does not fix its width, which a %s output needs "+
				"(give TextOptions.Width for %s and ProjectionDim for %s; OpenText reads them from config.json)",
				name, o.Name, o.Type, o.Shape, o.Type, hiddenOutputName, embedsOutputName)}
		}
	}
	if !haveHidden {
		return nil, fmt.Errorf("clip: text: %s: the graph has no %s output (outputs: %s): it gives pooled embeddings only, "+
			"and token states need %s; use a full export with %s and %s as outputs "+
			"(models.Model.Expose adds it to a model): %w",
			name, hiddenOutputName, ort.ListIO(outs), hiddenOutputName, hiddenOutputName, embedsOutputName, ErrMissingOutput)
	}
	var err error
	e.sess, err = g.NewSession(inNames, outNames, ort.SessionOptions{Threads: opts.Threads, NoSpinning: opts.NoSpinning, NoArena: opts.NoArena, PinThreads: opts.PinThreads, NoPrepack: opts.NoPrepack})
	if err != nil {
		return nil, fmt.Errorf("clip: text: %w", err)
	}
	return e, nil
}

// HasEmbeds reports whether the graph outputs text_embeds.
func (e *TextEncoder) HasEmbeds() bool { return e.hasEmbeds }

// HasAttentionMask reports whether the graph takes an attention_mask.
func (e *TextEncoder) HasAttentionMask() bool { return e.maskType != ort.ElementUndefined }

// IDsType returns the element type of the graph's input_ids ("int64" or "int32").
func (e *TextEncoder) IDsType() string { return e.idsType.String() }

// Close releases the ONNX Runtime session. It is safe to call more than once.
func (e *TextEncoder) Close() error {
	if e == nil || e.sess == nil {
		return nil
	}
	if err := e.sess.Close(); err != nil {
		return fmt.Errorf("clip: text: %w", err)
	}
	return nil
}

// Encode runs N prompts in one batch: ids [N][T] token ids (every prompt
// padded to the same length T, as the tokenizer's EncodeBatch does) and masks
// [N][T] (1 for tokens, 0 for padding; nil means all ones). It returns one
// TextEncoding per prompt, in order.
func (e *TextEncoder) Encode(ctx context.Context, ids [][]int64, masks [][]int64) ([]TextEncoding, error) {
	n := len(ids)
	if n == 0 {
		return nil, nil
	}
	t := len(ids[0])
	if t == 0 {
		return nil, fmt.Errorf("clip: text: encode: prompt 0 has no token ids")
	}
	if e.maxLen > 0 && t > e.maxLen {
		return nil, fmt.Errorf("clip: text: encode: %d token ids per prompt, the model takes at most %d", t, e.maxLen)
	}
	if masks != nil && len(masks) != n {
		return nil, fmt.Errorf("clip: text: encode: %d masks for %d prompts", len(masks), n)
	}
	flatIDs := make([]int64, 0, n*t)
	flatMask := make([]int64, 0, n*t)
	for i, row := range ids {
		if len(row) != t {
			return nil, fmt.Errorf("clip: text: encode: prompt %d has %d token ids, prompt 0 has %d (pad every prompt to one length)", i, len(row), t)
		}
		for _, id := range row {
			if id < 0 || (e.idsType == ort.ElementInt32 && id > math.MaxInt32) {
				return nil, fmt.Errorf("clip: text: encode: prompt %d: token id %d is out of range", i, id)
			}
		}
		flatIDs = append(flatIDs, row...)
		if masks == nil {
			for range row {
				flatMask = append(flatMask, 1)
			}
			continue
		}
		if len(masks[i]) != t {
			return nil, fmt.Errorf("clip: text: encode: prompt %d has %d token ids and a mask of %d", i, t, len(masks[i]))
		}
		for _, m := range masks[i] {
			if m != 0 && m != 1 {
				return nil, fmt.Errorf("clip: text: encode: prompt %d: mask value %d, expected 0 or 1", i, m)
			}
		}
		flatMask = append(flatMask, masks[i]...)
	}
	shape := []int{n, t}
	in := []tensorio.Tensor{idsTensor(e.idsType, shape, flatIDs)}
	if e.HasAttentionMask() {
		in = append(in, idsTensor(e.maskType, shape, flatMask))
	}
	var alloc []ort.Output
	if e.hiddenType.NeedsShape() || (e.hasEmbeds && e.embedsType.NeedsShape()) {
		alloc = []ort.Output{ort.OutputFor(e.hiddenType, n, t, e.width)}
		if e.hasEmbeds {
			alloc = append(alloc, ort.OutputFor(e.embedsType, n, e.dim))
		}
	}
	out, err := e.sess.Run(ctx, in, alloc...)
	if err != nil {
		return nil, fmt.Errorf("clip: text: encode %d prompts of %d tokens: %w", n, t, err)
	}
	hidden, err := out[0].Float32()
	if err != nil || len(out[0].Shape) != 3 || out[0].Shape[0] != n || out[0].Shape[1] != t {
		return nil, fmt.Errorf("clip: text: %s: %s is %s%v, expected [%d %d width] floats", e.name, hiddenOutputName, out[0].DType, out[0].Shape, n, t)
	}
	width := out[0].Shape[2]
	var embeds []float32
	dim := 0
	if e.hasEmbeds {
		embeds, err = out[1].Float32()
		if err != nil || len(out[1].Shape) != 2 || out[1].Shape[0] != n {
			return nil, fmt.Errorf("clip: text: %s: %s is %s%v, expected [%d dim] floats", e.name, e.embedsOut, out[1].DType, out[1].Shape, n)
		}
		dim = out[1].Shape[1]
	}
	res := make([]TextEncoding, n)
	for i := range res {
		r := &res[i]
		r.T, r.Width = t, width
		r.States = hidden[i*t*width : (i+1)*t*width : (i+1)*t*width]
		r.Mask = flatMask[i*t : (i+1)*t : (i+1)*t]
		if embeds != nil {
			r.Embeds = embeds[i*dim : (i+1)*dim : (i+1)*dim]
		}
	}
	return res, nil
}

// embedsName returns the output a graph's joint-space embedding is read
// from: want (text_embeds, image_embeds), or pooler_output when pooled says
// that is the embedding and the graph has no want.
func embedsName(outs []ort.IOInfo, want string, pooled bool) string {
	has := func(n string) bool {
		for _, o := range outs {
			if o.Name == n {
				return true
			}
		}
		return false
	}
	if pooled && !has(want) && has(pooledOutputName) {
		return pooledOutputName
	}
	return want
}

func idsTensor(t ort.ElementType, shape []int, v []int64) tensorio.Tensor {
	if t == ort.ElementInt32 {
		w := make([]int32, len(v))
		for i, x := range v {
			w[i] = int32(x)
		}
		return tensorio.Tensor{DType: tensorio.DTypeI32, Shape: shape, Data: w}
	}
	return tensorio.I64(shape, v)
}
