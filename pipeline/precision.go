package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"io"
	"log/slog"

	"golang.org/x/sys/cpu"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/text"
	"github.com/conditionhq/condition/vision"
)

// Precision is the arithmetic of the encoders' weight products.
type Precision string

const (
	// PrecisionFP32 runs the model's graphs as they are (or their fused
	// float32 variant, when made).
	PrecisionFP32 Precision = "fp32"
	// PrecisionInt8 runs the int8 variant of both graphs (weight MatMuls
	// in int8, activations quantized at run time), made on first use and
	// kept in this program's cache: 8-bit weights on CPUs with VNNI, whose
	// u8×s8 products accumulate in 32 bits, 7-bit ones elsewhere, where
	// 8-bit products can saturate 16-bit sums.
	PrecisionInt8 Precision = "int8"
)

// ParsePrecision reads "fp32" (or "") and "int8".
func ParsePrecision(s string) (Precision, error) {
	switch Precision(s) {
	case "", PrecisionFP32:
		return PrecisionFP32, nil
	case PrecisionInt8:
		return PrecisionInt8, nil
	}
	return "", fmt.Errorf("precision %q: want fp32 or int8", s)
}

// hasVNNI reports whether this CPU multiplies u8×s8 into 32-bit sums.
func hasVNNI() bool { return cpu.X86.HasAVX512VNNI || cpu.X86.HasAVXVNNI }

// Int8WeightBits is the width Open gives the int8 variant's weights on
// this CPU: 8 bits where it has VNNI (AVX-512 VNNI or AVX-VNNI), whose
// u8×s8 products add up in 32 bits, else 7, where ONNX Runtime's 8-bit
// products can saturate 16-bit sums. A graph that fails the check with 8
// bits is made with 7.
func Int8WeightBits() int {
	if hasVNNI() {
		return 8
	}
	return 7
}

// openInt8 opens ref's int8 variant, making it first when this program's
// cache does not hold it: the model's own graphs are rewritten (fused, then
// quantized: 8-bit weights with VNNI, 7-bit without) and each is checked
// against its original on probe inputs before it is kept.
func openInt8(ctx context.Context, ref string, mo models.Options, threads int, log *slog.Logger) (*models.Model, error) {
	if mo.Variant != "" && mo.Variant != models.VariantOptimizedInt8 {
		return nil, fmt.Errorf("pipeline: precision int8 runs the variant %s; the model options ask for %s", models.VariantOptimizedInt8, mo.Variant)
	}
	mo.Variant = models.VariantOptimizedInt8
	m, err := models.OpenContext(ctx, ref, mo)
	if !errors.Is(err, models.ErrNoVariant) {
		return m, err
	}
	plain := mo
	plain.Variant = models.VariantPlain
	src, err := models.OpenContext(ctx, ref, plain)
	if err != nil {
		return nil, err
	}
	probes, err := OptimizeProbes(src, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: int8 variant of %s: %w", src.Name(), err)
	}
	log.Info("making the int8 variant of the model (once; kept in this program's cache)", "model", src.Name(), "weight_bits", Int8WeightBits())
	res, again, err := OptimizeInt8(ctx, src, probes, clip.OptimizeOptions{Threads: threads},
		func(r *clip.Optimized, write func(io.Writer) error) (string, error) {
			return src.SaveVariant(r.Variant, r.Graph, r, write)
		})
	for _, g := range again {
		log.Info("a graph failed the check with 8-bit weights; made with 7-bit ones", "model", src.Name(), "graph", g)
	}
	for _, r := range res {
		for _, c := range r.Checks {
			log.Info("int8 check against the float32 graph", "graph", r.Graph, "output", c.Output, "min_cosine", c.MinCosine, "mean_cosine", c.MeanCosine, "passed", r.Passed)
		}
		if r.Timing != nil {
			log.Info("int8 check: the faster of two runs of the probes", "graph", r.Graph, "probes", r.Probes, "float32_ms", r.Timing.OriginalMs, "int8_ms", r.Timing.RewrittenMs, "speedup", r.Timing.Speedup())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pipeline: int8 variant of %s: %w", src.Name(), err)
	}
	return models.OpenContext(ctx, ref, mo)
}

// OptimizeInt8 rewrites m's graphs to int8 (clip.Optimize with opts.Int8
// set) at the weight width this CPU gets (Int8WeightBits): with VNNI 8
// bits first, then 7 for each graph that fails the check with 8 (the
// built-in text graph: last_hidden_state's smallest cosine 0.9876 at 8
// bits, 0.9949 at 7); the others keep their 8 bits. opts.Int8FullRange and
// opts.Graphs are set here. It returns each graph's last result, the graphs
// made again with 7 bits, and the last try's error. save is clip.Optimize's:
// it sees only graphs that passed their check.
func OptimizeInt8(ctx context.Context, m *models.Model, p clip.Probes, opts clip.OptimizeOptions,
	save func(*clip.Optimized, func(io.Writer) error) (string, error)) (res []clip.Optimized, again []string, err error) {
	opts.Int8, opts.Int8FullRange, opts.Graphs = true, hasVNNI(), nil
	res, err = clip.Optimize(ctx, m, p, opts, save)
	if !opts.Int8FullRange || !errors.Is(err, clip.ErrCheckFailed) {
		return res, nil, err
	}
	for _, r := range res {
		if r.Error != "" {
			again = append(again, r.Graph)
		}
	}
	opts.Int8FullRange, opts.Graphs = false, again
	redone, err := clip.Optimize(ctx, m, p, opts, save)
	for _, r := range redone {
		for i := range res {
			if res[i].Graph == r.Graph {
				res[i] = r
			}
		}
	}
	return res, again, err
}

// OptimizeProbes makes the inputs a rewritten graph of m is checked on
// against its original (clip.Optimize): imgs preprocessed as m does
// (nil: eight drawn scenes of shapes on gradients, 256² pixels), and
// prompts tokenized and padded to one length, the longest prompt's (SigLIP:
// the context length, as the engine pads them) (nil: a few everyday ones).
func OptimizeProbes(m *models.Model, imgs []image.Image, prompts []string) (clip.Probes, error) {
	var p clip.Probes
	pre, err := vision.LoadPreprocessor(m.FS())
	if err != nil {
		return p, err
	}
	tok, err := text.LoadTokenizer(m.FS())
	if err != nil {
		return p, err
	}
	if n := m.Config().TextConfig.MaxPositionEmbeddings; n > 0 {
		tok = tok.ForModel(n)
	}
	if imgs == nil {
		imgs = probeScenes(8, 256)
	}
	if prompts == nil {
		prompts = []string{"a photo of a dog", "a red circle next to a blue square", "two cats sleeping on a sofa in the afternoon sun",
			"a diagram", "a yellow star", "a green cross above a white triangle"}
	}
	for _, img := range imgs {
		px, h, w, err := pre.Apply(img)
		if err != nil {
			return p, err
		}
		if p.N > 0 && (h != p.Height || w != p.Wd) {
			return p, fmt.Errorf("probe images preprocess to %dx%d and %dx%d", p.Height, p.Wd, h, w)
		}
		p.Pixels = append(p.Pixels, px...)
		p.N, p.Height, p.Wd = p.N+1, h, w
	}
	n := 0
	for _, s := range prompts {
		ids, _ := tok.Encode(s)
		n = max(n, len(ids))
	}
	n = min(n, tok.ContextLength())
	if m.Family().Sigmoid() {
		// SigLIP reads the last of its padded positions: its graphs take
		// the whole context (64), as the engine feeds them.
		n = tok.ContextLength()
	}
	ids, mask, err := tok.EncodeBatch(prompts, n)
	if err != nil {
		return p, err
	}
	for i := range prompts {
		p.IDs = append(p.IDs, ids[i*n:(i+1)*n])
		p.Masks = append(p.Masks, mask[i*n:(i+1)*n])
	}
	return p, nil
}

// probeScenes draws n images of side pixels: a gradient and two shapes of
// varied colours, sizes and places.
func probeScenes(n, side int) []image.Image {
	out := make([]image.Image, n)
	colours := []color.RGBA{{220, 40, 40, 255}, {40, 90, 220, 255}, {240, 210, 40, 255}, {40, 170, 70, 255}, {250, 250, 250, 255}, {20, 20, 20, 255}}
	for i := range out {
		img := image.NewRGBA(image.Rect(0, 0, side, side))
		for y := range side {
			for x := range side {
				img.SetRGBA(x, y, color.RGBA{uint8(40 + (x*(i+1))%120), uint8(60 + y*100/side), uint8(90 + (i*37)%100), 255})
			}
		}
		for k := range 2 {
			c := colours[(i*2+k)%len(colours)]
			s := side/5 + (i*13+k*29)%(side/4)
			x0, y0 := (i*41+k*97)%(side-s), (i*67+k*53)%(side-s)
			if k == 0 {
				draw.Draw(img, image.Rect(x0, y0, x0+s, y0+s), &image.Uniform{c}, image.Point{}, draw.Src)
				continue
			}
			r := s / 2
			for y := -r; y < r; y++ {
				for x := -r; x < r; x++ {
					if x*x+y*y < r*r {
						img.SetRGBA(x0+r+x, y0+r+y, c)
					}
				}
			}
		}
		out[i] = img
	}
	return out
}

// Int8Outlook is what running an engine's model at PrecisionInt8 would
// change, from the check made with its int8 variant (see Engine.Int8Outlook).
type Int8Outlook struct {
	// Made: this program's cache holds the int8 variant of both graphs,
	// and the figures below are from the check it passed when it was made.
	Made bool
	// VisionSpeedup is the float32 vision graph's time over the int8
	// one's on the check's probe images (0 when not measured).
	VisionSpeedup float64
	// VisionMs is the two times (float32, int8) in milliseconds, and
	// Probes what they ran on.
	VisionMs [2]float64
	Probes   string
	// MinCosine is the smallest cosine to float32 over the rows of every
	// output the check compared, both graphs.
	MinCosine float64
}

// Int8Outlook says what PrecisionInt8 would do for an engine that runs at
// float32 on a CPU with VNNI (whose 8-bit products make int8 worth it);
// ok is false otherwise. Without the int8 variant in the cache, Made is
// false and the figures are zero.
func (e *Engine) Int8Outlook() (o Int8Outlook, ok bool) {
	if e.opts.Precision != PrecisionFP32 || !hasVNNI() {
		return o, false
	}
	o.MinCosine = 1
	for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
		raw, found := e.m.VariantReport(models.VariantOptimizedInt8, g)
		var r clip.Optimized
		if !found || json.Unmarshal(raw, &r) != nil || !r.Passed {
			return Int8Outlook{}, true
		}
		for _, c := range r.Checks {
			o.MinCosine = min(o.MinCosine, c.MinCosine)
		}
		if g == models.VisionModelFile && r.Timing != nil {
			o.VisionSpeedup = r.Timing.Speedup()
			o.VisionMs = [2]float64{r.Timing.OriginalMs, r.Timing.RewrittenMs}
			o.Probes = r.Probes
		}
	}
	o.Made = true
	return o, true
}
