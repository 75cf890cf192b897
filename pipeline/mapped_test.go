package pipeline

import (
	"context"
	"image"
	"image/color"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

// TestMappedGraphs: an engine over the graphs' mapped copies, with and
// without pre-packing, encodes prompts and images exactly as one over the
// graph files as they are.
func TestMappedGraphs(t *testing.T) {
	orttest.Load(t)
	ctx := context.Background()
	cache := t.TempDir()
	open := func() *models.Model {
		m, err := models.Open(enginetest.TinyDir(), models.Options{Variant: models.VariantPlain, DerivedCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	img.Set(3, 4, color.RGBA{255, 0, 0, 255})
	encode := func(eng *Engine) ([]float32, []float32) {
		te, err := eng.EncodeTexts(ctx, []string{"a red circle", "two blue squares"})
		if err != nil {
			t.Fatal(err)
		}
		ie, err := eng.EncodeImages(ctx, []image.Image{img})
		if err != nil {
			t.Fatal(err)
		}
		return append(slices.Clone(te[1].States), te[1].Embeds...), append(slices.Clone(ie[0].States), ie[0].Embeds...)
	}
	wantT, wantI := encode(tinyEngine(t, open(), Options{KeepGraphs: true}))
	for _, noPrepack := range []bool{false, true} {
		m := open()
		mapped, err := m.MapGraphs(0)
		if err != nil || len(mapped) != 2 {
			t.Fatalf("mapped %v, %v", mapped, err)
		}
		if p := m.Path(models.VisionModelFile); !strings.HasSuffix(p, models.MappedSuffix) {
			t.Fatalf("the model serves %s, not its mapped copy", p)
		}
		gotT, gotI := encode(tinyEngine(t, m, Options{NoPrepack: noPrepack}))
		// Mapping changes nothing; without pre-packing ONNX Runtime's
		// matrix kernels may sum in another order, within float32 rounding.
		if !noPrepack && (!slices.Equal(gotT, wantT) || !slices.Equal(gotI, wantI)) {
			t.Errorf("the mapped graphs' encodings differ from the originals'")
		}
		if eT, eI := relErr(gotT, wantT), relErr(gotI, wantI); eT > 1e-6 || eI > 1e-6 {
			t.Errorf("no pre-packing %v: relative difference text %.2g, image %.2g", noPrepack, eT, eI)
		} else {
			t.Logf("no pre-packing %v: relative difference text %.2g, image %.2g", noPrepack, eT, eI)
		}
	}
}
