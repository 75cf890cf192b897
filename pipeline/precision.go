package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// Precision is the arithmetic of the encoders' weight products.
type Precision string

const (
	// PrecisionFP32 runs the model's graphs as they are (or their fused
	// float32 variant, when made).
	PrecisionFP32 Precision = "fp32"
	// PrecisionInt8 runs the int8 variant of both graphs (weight MatMuls
	// in int8, activations quantized at run time per row, so that an
	// image's outputs do not depend on its batch-mates), made on first use
	// and kept in this program's cache: 8-bit weights on CPUs with VNNI,
	// whose u8×s8 products accumulate in 32 bits, 7-bit ones elsewhere,
	// where 8-bit products can saturate 16-bit sums. Layers downstream of
	// layer norms with outlier channels stay float32 (see
	// clip.DefaultOutlierRatio).
	PrecisionInt8 Precision = "int8"
)

// precisions are the precisions an engine runs at.
var precisions = []Precision{PrecisionFP32, PrecisionInt8}

// ParsePrecision returns the precision named s ("" is PrecisionFP32); its
// error names them all.
func ParsePrecision(s string) (Precision, error) {
	p := Precision(s)
	if p == "" {
		p = PrecisionFP32
	}
	if err := p.check(); err != nil {
		return "", err
	}
	return p, nil
}

// check refuses a precision that is not one of precisions (nor "", which
// is PrecisionFP32).
func (p Precision) check() error {
	if p == "" || slices.Contains(precisions, p) {
		return nil
	}
	names := make([]string, len(precisions))
	for i, q := range precisions {
		names[i] = string(q)
	}
	return fmt.Errorf("precision %q: want one of %s", string(p), strings.Join(names, ", "))
}

// hasVNNI reports whether this CPU multiplies u8×s8 into 32-bit sums.
func hasVNNI() bool { return clip.Int8WeightBits() == 8 }

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
	if errors.Is(err, models.ErrStaleScheme) {
		log.Info("the int8 variant in this program's cache was made by an earlier quantization scheme; making it again", "scheme", models.Int8SchemePerRow, "why", err)
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
	log.Info("making the int8 variant of the model (once; kept in this program's cache)", "model", src.Name(), "weight_bits", clip.Int8WeightBits())
	res, again, err := clip.OptimizeInt8(ctx, src, probes, clip.OptimizeOptions{Threads: threads},
		func(r *clip.Optimized, write func(io.Writer) error) (string, error) {
			return src.SaveVariant(r.Variant, r.Graph, r, write)
		})
	for _, g := range again {
		log.Info("a graph failed the check with 8-bit weights; made with 7-bit ones", "model", src.Name(), "graph", g)
	}
	for _, r := range res {
		if q := r.Quant; q != nil && q.Unsupported > 0 {
			log.Info("int8: MatMuls whose weights the scheme cannot take, kept in float32", "graph", r.Graph, "count", q.Unsupported, "kept", q.Kept)
		}
		if q := r.Quant; q != nil && (q.Outliers > 0 || q.Split > 0) {
			log.Info("int8: layer norms with outlier channels: their outlier channels multiplied in float32 beside the int8 products they feed, the products downstream kept in float32", "graph", r.Graph,
				"split", q.Split, "float32", q.Outliers, "int8", q.MatMuls)
		}
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
