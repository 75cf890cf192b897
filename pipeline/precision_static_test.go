package pipeline

import (
	"context"
	"image"
	"io"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

// TestPrecisionInt8Static: the static int8 variant (one calibrated scale
// per MatMul input, what `models optimize --int8-scheme static` makes) of
// the tiny model, opened by its name, runs at int8, and an image's outputs
// are its own: the same bits alone, beside a brighter image, first or
// second in the batch.
func TestPrecisionInt8Static(t *testing.T) {
	openTiny(t) // loads ONNX Runtime, or skips
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	src, err := models.Open(enginetest.TinyDir(), models.Options{Variant: models.VariantPlain})
	if err != nil {
		t.Fatal(err)
	}
	probes, err := OptimizeProbes(src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The check's limit is lowered: this test is about what the graphs
	// compute, not how close they stay to float32.
	res, _, err := clip.OptimizeInt8(ctx, src, probes, clip.OptimizeOptions{Int8Static: true, MinCosine: 0.5},
		func(r *clip.Optimized, write func(io.Writer) error) (string, error) {
			return src.SaveVariant(r.Variant, r.Graph, r, write)
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Variant != models.VariantOptimizedInt8Static || r.Quant == nil || !strings.Contains(r.Quant.Form, "static") ||
			r.Quant.MatMuls == 0 || r.Quant.Ops["ReduceMax"] != 0 || r.Calibration == "" {
			t.Fatalf("%s: variant %s, calibrated on %q, %v", r.Graph, r.Variant, r.Calibration, r.Quant)
		}
	}
	eng, err := Open(ctx, enginetest.TinyDir(), Options{Model: models.Options{Variant: models.VariantOptimizedInt8Static}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if eng.Options().Precision != PrecisionInt8 || eng.Model().Variant() != models.VariantOptimizedInt8Static {
		t.Fatalf("precision %q, variant %q", eng.Options().Precision, eng.Model().Variant())
	}
	img := image.NewRGBA(image.Rect(0, 0, 48, 40))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 11)
	}
	other := image.NewRGBA(img.Bounds())
	for i := range other.Pix {
		other.Pix[i] = 255 - uint8(i%7)
	}
	alone, err := eng.EncodeImages(ctx, []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]image.Image{{img, other}, {other, img}} {
		got, err := eng.EncodeImages(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		g := got[0]
		if batch[0] != image.Image(img) {
			g = got[1]
		}
		if !sameBits(g.Embeds, alone[0].Embeds) || !sameBits(g.States, alone[0].States) {
			t.Errorf("static int8: the image's outputs change beside another image (first in the batch: %v)", batch[0] == image.Image(img))
		}
	}
}
