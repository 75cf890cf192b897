package clip

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/conditionhq/condition/internal/aaresize"
	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// SigLIP 2 NaFlex's vision graph inputs besides pixel_values
// (graphbuild.BuildSiglip).
const (
	naflexMaskName      = "pixel_attention_mask"
	naflexPositionsName = "position_embeddings"
	naflexTableName     = "vision_model.embeddings.position_embedding.weight"
)

// naflexPositions resizes a NaFlex model's position table to each image's
// patch grid, as Siglip2VisionEmbeddings does (aaresize.PositionEmbeddings,
// equal to torch's), keeping each grid's result: the resize depends on the
// grid alone. Safe for concurrent use.
type naflexPositions struct {
	table   []float32 // [side·side, d]
	side, d int
	mu      sync.Mutex
	byGrid  map[[3]int][]float32 // (h, w, patches) → [patches, d]
}

// naflexGridsKept bounds the grids whose positions are kept (a grid's are
// patches·d floats: 768 KB at B/16's 256 patches of 768).
const naflexGridsKept = 64

// readNaFlexPositions reads m's position table from its model.safetensors.
func readNaFlexPositions(m *models.Model) (*naflexPositions, error) {
	v := m.Config().VisionConfig
	side := int(math.Sqrt(float64(v.NumPatches)))
	ts, err := m.ReadWeights(naflexTableName)
	if err != nil {
		return nil, fmt.Errorf("clip: vision: SigLIP 2 NaFlex resizes its position table per image: %w", err)
	}
	t := ts[naflexTableName]
	table, err := t.Float32()
	if err != nil || len(t.Shape) != 2 || t.Shape[0] != side*side || t.Shape[1] != v.HiddenSize {
		return nil, fmt.Errorf("clip: vision: %s of %s is %s%v, expected [%d %d] floats (vision_config.num_patches, hidden_size)",
			naflexTableName, m.Name(), t.DType, t.Shape, side*side, v.HiddenSize)
	}
	return &naflexPositions{table: table, side: side, d: v.HiddenSize, byGrid: map[[3]int][]float32{}}, nil
}

// get returns the positions [patches, d] of an h×w grid padded to patches
// rows. The slice is shared: the caller copies it.
func (p *naflexPositions) get(h, w, patches int) ([]float32, error) {
	k := [3]int{h, w, patches}
	p.mu.Lock()
	v, ok := p.byGrid[k]
	p.mu.Unlock()
	if ok {
		return v, nil
	}
	v = make([]float32, patches*p.d)
	if err := aaresize.PositionEmbeddings(v, p.table, p.side, p.d, h, w, patches); err != nil {
		return nil, fmt.Errorf("clip: vision: positions for a %dx%d grid in %d patches: %w", h, w, patches, err)
	}
	p.mu.Lock()
	if len(p.byGrid) >= naflexGridsKept {
		clear(p.byGrid)
	}
	p.byGrid[k] = v
	p.mu.Unlock()
	return v, nil
}

// NaFlex reports whether the encoder runs a SigLIP 2 NaFlex tower, which
// takes images as patch sequences (EncodePatches) instead of pixel grids.
func (e *VisionEncoder) NaFlex() bool { return e.naflexIO }

// EncodePatches runs n = len(grids) images of a SigLIP 2 NaFlex tower in
// one batch: pixels holds pixel_values [n, patches, C·p²] as
// Siglip2ImageProcessor lays each image out (its grid's patches row-major,
// each patch's pixels channel-last, zero rows after them), and grids[i] is
// image i's patch grid (rows, columns; spatial_shapes), rows·columns ≤
// patches. The mask and the positions are made here. Each encoding's
// States are the image's own patch rows [rows·columns, Width], after
// post_layernorm; Embeds its pooler_output.
func (e *VisionEncoder) EncodePatches(ctx context.Context, pixels []float32, grids [][2]int, patches int) ([]VisionEncoding, error) {
	switch {
	case !e.naflexIO:
		return nil, fmt.Errorf("clip: vision: %s takes pixel grids (Encode), not patch sequences", e.name)
	case e.naflex == nil:
		return nil, fmt.Errorf("clip: vision: %s: SigLIP 2 NaFlex's positions come from the model's position table: open the encoder with OpenVision", e.name)
	}
	n := len(grids)
	if n == 0 {
		return nil, nil
	}
	per := int(e.inShape[2])
	if patches <= 0 || len(pixels) != n*patches*per {
		return nil, fmt.Errorf("clip: vision: encode: %d pixel values for %d images of [%d %d] patches", len(pixels), n, patches, per)
	}
	d := e.naflex.d
	mask := make([]int64, n*patches)
	pos := make([]float32, n*patches*d)
	for i, g := range grids {
		h, w := g[0], g[1]
		if h <= 0 || w <= 0 || h*w > patches {
			return nil, fmt.Errorf("clip: vision: encode: image %d has a %dx%d patch grid, expected one of at most %d patches", i, h, w, patches)
		}
		for j := 0; j < h*w; j++ {
			mask[i*patches+j] = 1
		}
		v, err := e.naflex.get(h, w, patches)
		if err != nil {
			return nil, err
		}
		copy(pos[i*patches*d:], v)
	}
	ins := []tensorio.Tensor{
		tensorio.F32([]int{n, patches, per}, pixels),
		tensorio.I64([]int{n, patches}, mask),
		tensorio.F32([]int{n, patches, d}, pos),
	}
	var alloc []ort.Output
	if e.hiddenType.NeedsShape() || (e.hasEmbeds && e.embedsType.NeedsShape()) || (e.readout != nil && e.readoutType.NeedsShape()) {
		alloc = []ort.Output{ort.OutputFor(e.hiddenType, n, patches, e.width)}
		if e.hasEmbeds {
			alloc = append(alloc, ort.OutputFor(e.embedsType, n, e.dim))
		}
		if e.readout != nil {
			alloc = append(alloc, ort.OutputFor(e.readoutType, n, patches, e.width))
		}
	}
	out, err := e.sess.Run(ctx, ins, alloc...)
	if err != nil {
		return nil, fmt.Errorf("clip: vision: encode %d images: %w", n, err)
	}
	hidden, err := out[0].Float32()
	if err != nil || len(out[0].Shape) != 3 || out[0].Shape[0] != n || out[0].Shape[1] != patches {
		return nil, fmt.Errorf("clip: vision: %s: %s is %s%v, expected [%d %d width] floats", e.name, visionHiddenOutputName, out[0].DType, out[0].Shape, n, patches)
	}
	width := out[0].Shape[2]
	var embeds []float32
	dim := 0
	if e.hasEmbeds {
		if embeds, dim, err = e.embedsOf(out[1], n); err != nil {
			return nil, err
		}
	}
	var x []float32
	if e.readout != nil {
		o := out[len(out)-1]
		if x, err = o.Float32(); err != nil || len(o.Shape) != 3 || o.Shape[0] != n || o.Shape[1] != patches || o.Shape[2] != width {
			return nil, fmt.Errorf("clip: vision: %s: %s is %s%v, expected [%d %d %d] floats", e.name, graphbuild.ReadoutInput, o.DType, o.Shape, n, patches, width)
		}
	}
	res := make([]VisionEncoding, n)
	for i, g := range grids {
		r := &res[i]
		p := g[0] * g[1]
		r.Tokens, r.Width = p, width
		r.States = hidden[i*patches*width : (i*patches+p)*width : (i*patches+p)*width]
		if embeds != nil {
			r.Embeds = embeds[i*dim : (i+1)*dim : (i+1)*dim]
		}
		if x != nil {
			// The image's own rows: the padding is out of the attention,
			// as the tower's mask keeps it out.
			if r.Readout, err = e.readout.runGrid(ctx, x[i*patches*width:(i*patches+p)*width], g[0], g[1], width); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// hasInputs reports whether ins has inputs of all the names.
func hasInputs(ins []ort.IOInfo, names ...string) bool {
	for _, n := range names {
		found := false
		for _, in := range ins {
			found = found || in.Name == n
		}
		if !found {
			return false
		}
	}
	return true
}

// embedsOf checks the pooled output o of n images, [n, dim], and returns
// its values and dim.
func (e *VisionEncoder) embedsOf(o tensorio.Tensor, n int) ([]float32, int, error) {
	v, err := o.Float32()
	if err != nil || len(o.Shape) != 2 || o.Shape[0] != n {
		return nil, 0, fmt.Errorf("clip: vision: %s: %s is %s%v, expected [%d dim] floats", e.name, e.embedsOut, o.DType, o.Shape, n)
	}
	return v, o.Shape[1], nil
}
