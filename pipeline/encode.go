package pipeline

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"
	"sync"

	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
)

// TextEncoding is one prompt through the text encoder.
type TextEncoding struct {
	Text   string
	IDs    []int64     // BOS … EOS [T], no padding
	Tokens []string    // the tokens of IDs, as the vocabulary spells them
	Words  []text.Word // the prompt's words over Tokens
	// Content is the texts of the words that carry content, in order:
	// those that get a heatmap of their own (Attention.Overlays), neither
	// special tokens nor stop words ("a", "the", "of", ...). A prompt
	// without any has nothing to map.
	Content []string
	// Truncated says the prompt was cut to the model's context.
	Truncated bool
	// States is last_hidden_state [Padded, Width] (after the final layer
	// norm): rows 0..T-1 are the prompt's tokens, the rest padding.
	States        []float32
	Mask          []int64 // attention_mask [Padded]: 1 for the T tokens, 0 for padding
	Padded, Width int
	// Embeds is text_embeds [d_p], in CLIP's joint space, not normalised;
	// nil when the graph has none.
	Embeds []float32
}

// T returns the prompt's number of tokens, BOS to EOS.
func (t *TextEncoding) T() int { return len(t.IDs) }

// ImageEncoding is one image through the vision encoder. Its slices are
// read, never changed, by the engine's methods, and are to be left as they
// are once it has been attended: SigLIP's patches through the pooling head
// are computed once and kept with the encoding (and its copies).
type ImageEncoding struct {
	Grid vision.Grid // the patch grid, P = Grid.H × Grid.W
	// States is last_hidden_state: CLIP's [1+P, Width] (before
	// post_layernorm), row 0 the class token, then the patches row by row;
	// SigLIP's [P, Width] (after post_layernorm), every row a patch.
	States []float32
	Width  int
	// Embeds is image_embeds [d_p] in the joint space, not normalised
	// (SigLIP's pooler_output, its pooling head's); nil when the graph has
	// none.
	Embeds []float32
	// Readout is the patch rows as the engine's readout reads them
	// (Options.Readout), [P, Width] in the space of States' rows (CLIP's
	// before post_layernorm, SigLIP's after it), the vectors the joint
	// space takes in place of States' patch rows; nil for the raw readout
	// (States' own).
	Readout []float32

	// head keeps the patches through SigLIP's pooling head once computed
	// (headRows), shared by copies of the encoding; nil for CLIP's and for
	// encodings made outside the engine.
	head *headMemo
}

// headMemo is an image's patches through the pooling head, [P, d_v],
// computed once for Attend, JointPatches and Similarity alike.
type headMemo struct {
	once sync.Once
	rows []float32
	err  error
}

// Patches returns the patch rows of States, [P, Width]: its last P rows.
func (im *ImageEncoding) Patches() []float32 {
	return im.States[max(0, len(im.States)-im.P()*im.Width):]
}

// jointRows returns the patch rows the joint space takes, [P, Width]:
// Readout when the engine's readout made one, else Patches.
func (im *ImageEncoding) jointRows() []float32 {
	if im.Readout != nil {
		return im.Readout
	}
	return im.Patches()
}

// P returns the number of patches.
func (im *ImageEncoding) P() int { return im.Grid.Patches() }

// EncodeTexts tokenizes the prompts, padded to the model's context, and runs
// them through the text encoder in one batch. An empty prompt, or one longer
// than the context without Options.Truncate, is an error naming it (prompts
// are numbered from 0).
func (e *Engine) EncodeTexts(ctx context.Context, prompts []string) ([]TextEncoding, error) {
	return e.encodeTexts(ctx, prompts, e.tok)
}

// TextOptions overrides the engine's Options for one call.
type TextOptions struct {
	// Truncate cuts prompts longer than the model's context instead of
	// refusing them.
	Truncate bool
}

// encodeTextsWith is EncodeTexts with the truncation of opts.
func (e *Engine) encodeTextsWith(ctx context.Context, opts TextOptions, prompts []string) ([]TextEncoding, error) {
	tok := e.strict
	if opts.Truncate {
		tok = e.trunc
	}
	return e.encodeTexts(ctx, prompts, tok)
}

func (e *Engine) encodeTexts(ctx context.Context, prompts []string, tok *text.Tokenizer) ([]TextEncoding, error) {
	if len(prompts) == 0 {
		return nil, nil
	}
	out := make([]TextEncoding, len(prompts))
	ids := make([][]int64, len(prompts))
	masks := make([][]int64, len(prompts))
	for i, p := range prompts {
		if strings.TrimSpace(p) == "" {
			return nil, &PromptError{Index: i, Text: p, Err: errors.New("empty")}
		}
		full, err := tok.Encode(p)
		if err != nil {
			return nil, &PromptError{Index: i, Text: p, Err: err}
		}
		var trunc bool
		if ids[i], masks[i], trunc, err = tok.Fit(full, e.ctxLen); err != nil {
			return nil, &PromptError{Index: i, Text: p, Err: err}
		}
		t := 0
		for _, v := range masks[i] {
			t += int(v)
		}
		row := make([]int, t)
		for k := range row {
			row[k] = int(ids[i][k])
		}
		r := &out[i]
		r.Text, r.IDs, r.Truncated = p, ids[i][:t:t], trunc
		if r.Tokens, err = tok.Tokens(row); err == nil {
			r.Words, err = tok.Words(row)
		}
		r.Content = contentWords(r.Words)
		if err != nil {
			return nil, &PromptError{Index: i, Text: p, Err: err}
		}
	}
	encs, err := e.tenc.Encode(ctx, ids, masks)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	for i, enc := range encs {
		r := &out[i]
		r.States, r.Mask, r.Padded, r.Width, r.Embeds = enc.States, enc.Mask, enc.T, enc.Width, enc.Embeds
	}
	return out, nil
}

// PromptError is a prompt the engine cannot take.
type PromptError struct {
	Index int    // from 0, in the order given
	Text  string // the prompt
	Err   error
}

func (e *PromptError) Error() string {
	return fmt.Sprintf("pipeline: prompt %d (%s): %v", e.Index, quote(e.Text), e.Err)
}

func (e *PromptError) Unwrap() error { return e.Err }

// Preprocess writes img's pixel_values [3, H, W] (H, W from InputSize) into
// dst, which must hold 3·H·W values. For SigLIP 2 NaFlex (InputSize 0×0)
// it writes the image's patches and grid instead, packed as
// vision.Preprocessor.ApplyNaFlexPacked does: dst holds
// Preprocessor().NaFlex.PackedLen() values.
func (e *Engine) Preprocess(dst []float32, img image.Image) error {
	if e.naflex != nil {
		if _, err := e.pre.ApplyNaFlexPacked(dst, img); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		return nil
	}
	b := img.Bounds()
	if h, w := e.pre.OutputSize(b.Dx(), b.Dy()); h != e.inH || w != e.inW {
		return fmt.Errorf("pipeline: preprocessing a %dx%d image gives %d×%d pixels, the vision model takes %d×%d", b.Dx(), b.Dy(), h, w, e.inH, e.inW)
	}
	if len(dst) != 3*e.inH*e.inW {
		return fmt.Errorf("pipeline: preprocess: %d values for [3 %d %d]", len(dst), e.inH, e.inW)
	}
	if _, _, err := e.pre.ApplyInto(dst, img); err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	return nil
}

// EncodeImages preprocesses the images and runs them through the vision
// encoder, Options.Batch at a time.
func (e *Engine) EncodeImages(ctx context.Context, imgs []image.Image) ([]ImageEncoding, error) {
	per := e.per
	out := make([]ImageEncoding, 0, len(imgs))
	var buf []float32
	for start := 0; start < len(imgs); start += e.opts.Batch {
		end := min(start+e.opts.Batch, len(imgs))
		buf = grow(buf, (end-start)*per)
		for i, img := range imgs[start:end] {
			if err := e.Preprocess(buf[i*per:(i+1)*per], img); err != nil {
				return nil, fmt.Errorf("%w (image %d)", err, start+i)
			}
		}
		encs, err := e.EncodePixels(ctx, buf, end-start)
		if err != nil {
			return nil, err
		}
		out = append(out, encs...)
	}
	return out, nil
}

// EncodeImageData decodes, preprocesses and encodes images given as files'
// bytes, Options.Batch at a time. Errors name the image by its index.
func (e *Engine) EncodeImageData(ctx context.Context, data [][]byte) ([]ImageEncoding, error) {
	imgs := make([]image.Image, len(data))
	for i, d := range data {
		img, err := e.DecodeImage(d)
		if err != nil {
			return nil, fmt.Errorf("pipeline: image %d: %w", i, err)
		}
		imgs[i] = img
	}
	return e.EncodeImages(ctx, imgs)
}

// EncodePixels runs n preprocessed images, pixels [n, 3, H, W] (see
// Preprocess; for SigLIP 2 NaFlex, n packed buffers), through the vision
// encoder in one batch. The encodings' States share one buffer per call.
func (e *Engine) EncodePixels(ctx context.Context, pixels []float32, n int) ([]ImageEncoding, error) {
	if n == 0 {
		return nil, nil
	}
	if e.naflex != nil {
		return e.encodePacked(ctx, pixels, n)
	}
	if per := 3 * e.inH * e.inW; n < 0 || len(pixels) < n*per {
		return nil, fmt.Errorf("pipeline: encode pixels: %d values for %d images of [3 %d %d] (%d values)", len(pixels), n, e.inH, e.inW, max(n, 0)*per)
	}
	encs, err := e.venc.Encode(ctx, pixels[:n*3*e.inH*e.inW], n, e.inH, e.inW)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	var grid vision.Grid
	if p := e.venc.PatchSize(); p > 0 {
		grid, err = vision.GridFor(e.inH, e.inW, p)
	} else {
		grid, err = vision.InferGrid(encs[0].Tokens-e.cls, e.inH, e.inW)
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	out := make([]ImageEncoding, n)
	for i, enc := range encs {
		out[i] = ImageEncoding{Grid: grid, States: enc.States, Width: enc.Width, Embeds: enc.Embeds}
		if enc.Readout != nil {
			out[i].Readout = enc.Readout[e.cls*enc.Width:]
		}
		if e.patchHead != nil {
			out[i].head = new(headMemo)
		}
	}
	return out, nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// encodePacked runs n SigLIP 2 NaFlex images packed by Preprocess: each
// image's patches [MaxNumPatches, PatchDim] and grid. Every encoding has
// its image's own grid.
func (e *Engine) encodePacked(ctx context.Context, pixels []float32, n int) ([]ImageEncoding, error) {
	nf := e.naflex
	if n < 0 || len(pixels) < n*e.per {
		return nil, fmt.Errorf("pipeline: encode pixels: %d values for %d packed SigLIP 2 NaFlex images of %d values", len(pixels), n, e.per)
	}
	m, dim := nf.MaxNumPatches, nf.PatchDim()
	patches := make([]float32, n*m*dim)
	grids := make([][2]int, n)
	gs := make([]vision.Grid, n)
	for i := range n {
		buf := pixels[i*e.per : (i+1)*e.per]
		g, err := vision.PackedGrid(buf, m)
		if err != nil {
			return nil, fmt.Errorf("pipeline: encode pixels: image %d: %w", i, err)
		}
		copy(patches[i*m*dim:], buf[:m*dim])
		grids[i], gs[i] = [2]int{g.H, g.W}, g
	}
	encs, err := e.venc.EncodePatches(ctx, patches, grids, m)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	out := make([]ImageEncoding, n)
	for i, enc := range encs {
		out[i] = ImageEncoding{Grid: gs[i], States: enc.States, Width: enc.Width, Embeds: enc.Embeds, Readout: enc.Readout}
		if e.patchHead != nil {
			out[i].head = new(headMemo)
		}
	}
	return out, nil
}
