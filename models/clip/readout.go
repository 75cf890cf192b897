package clip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/conditionhq/condition/internal/graphbuild"
	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// Readout is how a vision tower's patch vectors are read
// (VisionOptions.Readout): ReadoutRaw is last_hidden_state's patch rows as
// the tower gives them; the others recompute the last encoder layer's
// attention from its input (readout_input) without the residual and the
// MLP, the training-free dense readouts of the segmentation literature:
//
//	clearclip  softmax(q qᵀ · d_h^-½) v, then out_proj        (ClearCLIP, ECCV 2024)
//	naclip     softmax(k kᵀ · d_h^-½ + G) v, then out_proj    (NACLIP, WACV 2025; G a Gaussian of
//	           the patch grid distance, σ = 5 patches, zero for the class token)
//	maskclip   v, then out_proj                              (MaskCLIP, ECCV 2022)
//	pearl      softmax((q s)(k R)ᵀ + 0.08 (k_c k_cᵀ) s) v,    (PEARL, CVPR 2026; CLIP and MetaCLIP 2
//	           then out_proj                                 only: see readout_pearl.go)
//
// with q, k, v the last layer's own projections of its layer_norm1 (for
// PE-Core, q and k of the patch rows then turned by the block's 2-D RoPE,
// as the block turns them). TIPSv2
// takes raw and maskclip, the latter in the form its authors evaluate
// zero-shot segmentation with: the last DINOv2 block with its attention
// replaced by the value path, its layer scales, residuals and MLP kept,
// then the final layernorm. The
// class token and image_embeds are never changed. For the SigLIP family,
// whose last_hidden_state is after post_layernorm and has no class token,
// every row is a patch and the readout ends with post_layernorm too: its
// rows stand in for last_hidden_state's, which the pooling head's value
// path takes to the joint space.
type Readout string

// The readouts (see Readout).
const (
	ReadoutRaw       Readout = graphbuild.ReadoutRaw
	ReadoutClearCLIP Readout = graphbuild.ReadoutClearCLIP
	ReadoutNACLIP    Readout = graphbuild.ReadoutNACLIP
	ReadoutMaskCLIP  Readout = graphbuild.ReadoutMaskCLIP
	ReadoutPEARL     Readout = graphbuild.ReadoutPEARL
)

// readouts are the readouts a CLIP vision tower takes.
var readouts = []Readout{ReadoutClearCLIP, ReadoutNACLIP, ReadoutMaskCLIP, ReadoutRaw, ReadoutPEARL}

// Readouts returns the readouts CLIP's vision tower takes.
func Readouts() []Readout { return append([]Readout(nil), readouts...) }

// ParseReadout returns the readout named s, or an error naming them all.
func ParseReadout(s string) (Readout, error) {
	for _, r := range readouts {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("readout %q: want one of %s", s, readoutNames())
}

// readoutNames lists the readouts' names, comma-separated.
func readoutNames() string {
	names := make([]string, len(readouts))
	for i, r := range readouts {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// known reports whether r is one of Readouts.
func (r Readout) known() bool { return slices.Contains(readouts, r) }

// ErrReadoutWeights is wrapped by the error of a readout other than raw on
// a model without the last vision layer's weights (model.safetensors).
var ErrReadoutWeights = errors.New("needs the last vision layer's weights")

// readoutSession runs the readout graph of the last layer:
// readout_input [n, S, d] → readout_hidden_state [n, S, d]. A dynamic one
// (SigLIP 2 NaFlex) takes any S, one image's own rows at a time
// (runGrid).
type readoutSession struct {
	kind    Readout
	sess    *ort.Session
	dynamic bool
}

// postNormHidden reports whether family f's vision last_hidden_state is
// after the tower's post_layernorm (SigLIP's), so that a readout standing
// in for it ends with that norm.
func postNormHidden(f models.Family) bool { return f.Sigmoid() }

// postLayerNorm is the prefix of the vision tower's final layer norm;
// tipsFinalNorm is TIPSv2's.
const (
	postLayerNorm = "vision_model.post_layernorm"
	tipsFinalNorm = "vision_model.layernorm"
)

// openReadout builds readout kind's graph over model m's last vision layer
// (its weights from m's model.safetensors; post_layernorm's too for a
// family whose last_hidden_state is after it) for a gh×gw patch grid with
// cls class rows (gh, gw 0: for any grid, run by runGrid), and opens it.
func openReadout(m *models.Model, kind Readout, cls, gh, gw int, opts VisionOptions) (*readoutSession, error) {
	v := m.Config().VisionConfig
	if v.NumHiddenLayers <= 0 || v.NumAttentionHeads <= 0 {
		return nil, fmt.Errorf("clip: readout %s: config.json of %s gives %d layers and %d heads", kind, m.Name(), v.NumHiddenLayers, v.NumAttentionHeads)
	}
	c := graphbuild.ReadoutConfig{
		Kind: string(kind), Width: v.HiddenSize, Heads: v.NumAttentionHeads, Eps: v.LayerNormEps,
		Class: cls, GridH: gh, GridW: gw, Dynamic: gh == 0 && gw == 0,
		Prefix: fmt.Sprintf("vision_model.encoder.layers.%d.", v.NumHiddenLayers-1),
	}
	if postNormHidden(m.Family()) {
		c.PostLayerNorm, c.PostEps = postLayerNorm, v.LayerNormEps
	}
	if pe := v.PECore; pe != nil {
		// q and k turned by the block's RoPE before the readout's attention.
		c.Rope = &graphbuild.ReadoutRope{RefGrid: pe.RopeRefGrid, GridOffset: pe.RopeGridOffset}
	}
	if m.Family() == models.Tipsv2 {
		// A DINOv2 block, recomputed with its value path, layer scales,
		// residuals and MLP, then the final layernorm (graphbuild.DinoBlock).
		c.Prefix = fmt.Sprintf("vision_model.encoder.layer.%d.", v.NumHiddenLayers-1)
		c.Dino = &graphbuild.DinoBlock{Inter: v.IntermediateSize, SwiGLU: v.UseSwiGLUFFN, Act: v.HiddenAct,
			Norm: tipsFinalNorm, NormEps: v.LayerNormEps}
	}
	if !m.Has(models.WeightsFile) {
		return nil, fmt.Errorf("clip: readout %s of %s: %w in %s, which the model does not have (readout raw reads the patch tokens without them)", kind, m.Name(), ErrReadoutWeights, models.WeightsFile)
	}
	var names []string
	for n := range c.ReadoutTensors() {
		names = append(names, n)
	}
	ts, err := m.ReadWeights(names...)
	if err != nil {
		return nil, fmt.Errorf("clip: readout %s: %w", kind, err)
	}
	graph, err := graphbuild.ReadoutGraph(c, func(name string) ([]float32, error) {
		t := ts[name]
		f, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	if models.IsInt8Variant(m.Variant()) {
		// Beside an int8 tower, the readout's MatMuls in int8 too, at the
		// tower's weight width (7 bits: exact where 8 can saturate).
		if graph, err = quantizeReadout(graph, m.Variant() == models.VariantOptimizedInt8PerCall); err != nil {
			return nil, fmt.Errorf("clip: readout %s: int8: %w", kind, err)
		}
	}
	ins := []string{graphbuild.ReadoutInput}
	if c.Dynamic && kind == ReadoutNACLIP {
		ins = append(ins, graphbuild.ReadoutBias)
	}
	sess, err := ort.GraphBytes(graph, "readout "+string(kind)).NewSession(ins, []string{graphbuild.ReadoutOutput},
		ort.SessionOptions{Threads: opts.Threads, NoSpinning: opts.NoSpinning, NoArena: opts.NoArena, PinThreads: opts.PinThreads})
	if err != nil {
		return nil, fmt.Errorf("clip: readout %s: %w", kind, err)
	}
	return &readoutSession{kind: kind, sess: sess, dynamic: c.Dynamic}, nil
}

// quantizeReadout returns the readout graph with its weight MatMuls in
// int8 (onnxgraph.Quantize, out_proj's too: it is the graph's output),
// 8-bit weights on CPUs with VNNI, 7-bit elsewhere, activations per row
// (per call beside the per-call variant; per row beside the static one,
// whose calibration does not cover the readout's graph).
func quantizeReadout(graph []byte, perCall bool) ([]byte, error) {
	gm, err := onnxgraph.Parse(graph)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	q := onnxgraph.QuantOptions{FullRange: hasVNNI(), QuantizeLast: true, PerRow: !perCall}
	if !perCall {
		q.OutlierRatio = DefaultOutlierRatio
	}
	if _, err := onnxgraph.Quantize(gm, q, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// run recomputes x [n, tokens, width] (the last layer's input) into the
// readout's hidden states, [n, tokens, width].
func (r *readoutSession) run(ctx context.Context, x []float32, n, tokens, width int) ([]float32, error) {
	out, err := r.sess.Run(ctx, []tensorio.Tensor{tensorio.F32([]int{n, tokens, width}, x)})
	if err != nil {
		return nil, fmt.Errorf("clip: readout %s: %w", r.kind, err)
	}
	y, err := out[0].Float32()
	if err != nil || len(y) != n*tokens*width {
		return nil, fmt.Errorf("clip: readout %s: output %s%v, want [%d %d %d] floats", r.kind, out[0].DType, out[0].Shape, n, tokens, width)
	}
	return y, nil
}

// runGrid recomputes one image's own rows x [h·w, width] (a patch grid of
// h×w, no class rows) with a dynamic session: NACLIP's neighbourhood is
// that grid's.
func (r *readoutSession) runGrid(ctx context.Context, x []float32, h, w, width int) ([]float32, error) {
	p := h * w
	ins := []tensorio.Tensor{tensorio.F32([]int{1, p, width}, x)}
	if r.kind == ReadoutNACLIP {
		ins = append(ins, tensorio.F32([]int{p, p}, graphbuild.NACLIPBias(0, h, w, graphbuild.NACLIPSigma)))
	}
	out, err := r.sess.Run(ctx, ins)
	if err != nil {
		return nil, fmt.Errorf("clip: readout %s: %w", r.kind, err)
	}
	y, err := out[0].Float32()
	if err != nil || len(y) != p*width {
		return nil, fmt.Errorf("clip: readout %s: output %s%v, want [1 %d %d] floats", r.kind, out[0].DType, out[0].Shape, p, width)
	}
	return y, nil
}

func (r *readoutSession) close() error {
	if r == nil || r.sess == nil {
		return nil
	}
	err := r.sess.Close()
	r.sess = nil
	return err
}

// readoutGraph returns m's vision graph with the readout_input output a
// readout recomputes from: the graph as it is when it has one (graphs built
// from safetensors), else a copy rewritten in memory whose added output is
// the last encoder layer's input, found by the graph's structure
// (onnxgraph.FindLayerInput from the encoder's output: last_hidden_state,
// or for a family whose last_hidden_state is after post_layernorm, that
// norm's input). Graphs keeping their weights in external data are not
// rewritten.
func readoutGraph(m *models.Model) (ort.Graph, error) {
	g, err := ort.ModelGraph(m, models.VisionModelFile)
	if err != nil {
		return g, fmt.Errorf("clip: %w", err)
	}
	_, outs, err := g.Inspect()
	if err != nil {
		return g, fmt.Errorf("clip: %w", err)
	}
	hidden := ""
	for _, o := range outs {
		switch o.Name {
		case graphbuild.ReadoutInput:
			return g, nil
		case visionHiddenOutputName:
			hidden = o.Name
		}
	}
	fail := func(err error) error {
		why := fmt.Sprintf("%s has no %s output, and its last encoder layer's input could not be found to add one", m.Path(models.VisionModelFile), graphbuild.ReadoutInput)
		if m.Has(models.WeightsFile) {
			why += fmt.Sprintf(" (condition models build %s builds graphs that have it from %s)", m.Name(), models.WeightsFile)
		} else {
			why += fmt.Sprintf("; nor has the model a %s to build graphs that have it from", models.WeightsFile)
		}
		return fmt.Errorf("clip: vision: %s: %w", why, err)
	}
	// A graph keeping its weights in external data (a mapped copy, or a
	// graph over 2 GiB) is rewritten once into a file beside it, where
	// ONNX Runtime finds its data: the graph itself is small.
	beside := ""
	if src := g.Path(); src != "" && externalData(src) {
		beside = strings.TrimSuffix(src, ".onnx") + ".readout.onnx"
		if fresh(beside, src) {
			return ort.GraphFile(beside), nil
		}
		if m.Repo() != "" && strings.HasPrefix(src, m.Dir()+string(os.PathSeparator)) {
			// Nothing is written into the Hugging Face cache.
			return g, fail(fmt.Errorf("%s keeps its weights in external data in the Hugging Face cache, where its rewrite is not written", src))
		}
	}
	b, err := m.ReadFile(models.VisionModelFile)
	if err != nil {
		return g, fmt.Errorf("clip: %w", err)
	}
	gm, err := onnxgraph.Parse(b)
	if err != nil {
		return g, fail(err)
	}
	switch {
	case postNormHidden(m.Family()):
		if hidden == "" {
			return g, fail(fmt.Errorf("the graph has no %s output, whose post_layernorm's input is the encoder's output", visionHiddenOutputName))
		}
		if hidden, err = onnxgraph.NormInput(gm.Graph, hidden); err != nil {
			return g, fail(err)
		}
	case hidden == "":
		w, err := onnxgraph.FindHidden(gm.Graph, imageEmbedsOutputName)
		if err != nil {
			return g, fail(err)
		}
		hidden = w.Hidden
	}
	var buf bytes.Buffer
	if err := onnxgraph.ExposeLayerInput(gm, hidden, graphbuild.ReadoutInput, &buf); err != nil {
		return g, fail(err)
	}
	if beside != "" {
		err := tensorio.WriteFileAtomic(beside, func(w io.Writer) error {
			_, err := w.Write(buf.Bytes())
			return err
		})
		if err != nil {
			return g, fmt.Errorf("clip: vision: %s keeps its weights in external data, so its copy with %s is written beside it: %w", g.Path(), graphbuild.ReadoutInput, err)
		}
		return ort.GraphFile(beside), nil
	}
	return ort.GraphBytes(buf.Bytes(), m.Path(models.VisionModelFile)+" (with "+graphbuild.ReadoutInput+")"), nil
}

// externalData reports whether the graph file path keeps initializers in
// external data files.
func externalData(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	ext, err := onnxgraph.ExternalDataFiles(f, fi.Size())
	return err == nil && len(ext) > 0
}

// fresh reports whether the file p exists and is not older than src.
func fresh(p, src string) bool {
	a, err := os.Stat(p)
	if err != nil {
		return false
	}
	b, err := os.Stat(src)
	return err == nil && !a.ModTime().Before(b.ModTime())
}
