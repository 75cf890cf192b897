package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

// TestPrecisionInt8: Open with PrecisionInt8 makes the model's int8
// variant once (checked against float32, kept in this program's cache) and
// runs it; its embeddings stay close to float32's; a second Open reuses
// it; New refuses int8 for a model opened with its float32 graphs.
func TestPrecisionInt8(t *testing.T) {
	openTiny(t) // loads ONNX Runtime, or skips
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	open := func(p Precision) *Engine {
		t.Helper()
		eng, err := Open(ctx, enginetest.TinyDir(), Options{Precision: p, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	before := open(PrecisionFP32)
	if o, ok := before.Int8Outlook(); ok != hasVNNI() || o.Made {
		t.Errorf("before the int8 variant is made: outlook %+v, %v (VNNI %v)", o, ok, hasVNNI())
	}
	i8 := open(PrecisionInt8)
	if _, ok := i8.Int8Outlook(); ok {
		t.Error("an int8 engine has an int8 outlook")
	}
	if v := i8.Model().Variant(); v != models.VariantOptimizedInt8 || i8.Options().Precision != PrecisionInt8 {
		t.Fatalf("variant %q, precision %q", v, i8.Options().Precision)
	}
	made := strings.Count(logs.String(), "making the int8 variant")
	if made != 1 || !strings.Contains(logs.String(), "int8 check against the float32 graph") {
		t.Errorf("logs of the first open:\n%s", logs.String())
	}
	f32 := open(PrecisionFP32)
	if f32.Options().Precision != PrecisionFP32 || f32.Model().Variant() == models.VariantOptimizedInt8 {
		t.Errorf("fp32 engine: precision %q, variant %q", f32.Options().Precision, f32.Model().Variant())
	}
	// The outlook of a float32 engine on a VNNI CPU is the check's: both
	// graphs' cosines (as logged) and the vision graph's two times.
	if o, ok := f32.Int8Outlook(); ok != hasVNNI() {
		t.Errorf("outlook of the fp32 engine: ok %v, VNNI %v", ok, hasVNNI())
	} else if ok && (!o.Made || !(o.MinCosine > 0.99 && o.MinCosine <= 1) || o.VisionMs[0] <= 0 || o.VisionMs[1] <= 0 ||
		math.Abs(o.VisionSpeedup-o.VisionMs[0]/o.VisionMs[1]) > 1e-9 || o.Probes != "8 images" ||
		!strings.Contains(logs.String(), fmt.Sprintf("min_cosine=%v", o.MinCosine))) {
		t.Errorf("outlook of the fp32 engine after the int8 variant was made: %+v\n%s", o, logs.String())
	}
	img := image.NewRGBA(image.Rect(0, 0, 48, 40))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 11)
	}
	a, err := i8.EncodeImages(ctx, []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f32.EncodeImages(ctx, []image.Image{img})
	if err != nil {
		t.Fatal(err)
	}
	if c := Cosine(a[0].Embeds, b[0].Embeds); c < 0.99 {
		t.Errorf("int8 image_embeds' cosine to float32's: %v", c)
	}
	// The image's int8 outputs are its own: the same bits beside a
	// brighter image, and as the second of a batch.
	other := image.NewRGBA(img.Bounds())
	for i := range other.Pix {
		other.Pix[i] = 255 - uint8(i%7)
	}
	for _, batch := range [][]image.Image{{img, other}, {other, img}} {
		got, err := i8.EncodeImages(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		g := got[0]
		if batch[0] != image.Image(img) {
			g = got[1]
		}
		if !sameBits(g.Embeds, a[0].Embeds) || !sameBits(g.States, a[0].States) {
			t.Errorf("int8: the image's outputs change beside another image (first in the batch: %v)", batch[0] == image.Image(img))
		}
	}
	open(PrecisionInt8)
	if n := strings.Count(logs.String(), "making the int8 variant"); n != 1 {
		t.Errorf("the int8 variant was made %d times, want once", n)
	}
	// A variant whose stamp names no scheme was made by the per-call
	// scheme, before schemes were recorded: it is made again, and said.
	stamp, err := i8.Model().VariantPath(models.VariantOptimizedInt8, models.VisionModelFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(stamp + ".json")
	if err != nil {
		t.Fatal(err)
	}
	scheme := `"scheme": "` + models.Int8SchemePerRow + `"`
	old := strings.Replace(string(raw), scheme, `"notes": []`, 1)
	if old == string(raw) {
		t.Fatalf("%s: no %s", stamp, scheme)
	}
	if err := os.WriteFile(stamp+".json", []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	open(PrecisionInt8)
	if n := strings.Count(logs.String(), "making the int8 variant"); n != 2 || !strings.Contains(logs.String(), "earlier quantization scheme") {
		t.Errorf("an int8 variant of the per-call scheme in the cache: made %d times in all, logs:\n%s", n, logs.String())
	}
	if raw, _ = os.ReadFile(stamp + ".json"); !bytes.Contains(raw, []byte(`"scheme": "`+models.Int8SchemePerRow+`"`)) {
		t.Errorf("the variant made again: %s", raw)
	}
	m, err := models.Open(enginetest.TinyDir(), models.Options{Variant: models.VariantPlain})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, m, Options{Precision: PrecisionInt8}); err == nil || !strings.Contains(err.Error(), models.VariantOptimizedInt8) {
		t.Errorf("New with int8 on the float32 graphs: %v", err)
	}
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
