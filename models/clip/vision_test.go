package clip_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/tensorio"
)

// encoderTol is the largest difference allowed between ONNX Runtime and torch.
const encoderTol = 1e-4

// fp16EncoderTol is the largest difference allowed between the float16 graph
// (testdata/tinyclip/make_variants.py: float16 pixel values, weights,
// activations and outputs) and torch's float32 outputs. The outputs reach
// 5.6, where one float16 ulp is 2^-8 ≈ 0.004; measured worst 0.0047 (ONNX
// Runtime 1.30, x86-64), logged with -v.
const fp16EncoderTol = 2e-2

func closeToTorch(t *testing.T, what string, got, want []float32) {
	t.Helper()
	closeWithin(t, what, got, want, encoderTol)
}

// checkVision encodes the golden pixel values, checks the batch and one
// image alone against torch within encoderTol, and returns the batch's
// encodings.
func checkVision(t *testing.T, e *clip.VisionEncoder) []clip.VisionEncoding {
	t.Helper()
	return checkVisionWithin(t, e, encoderTol)
}

func checkVisionWithin(t *testing.T, e *clip.VisionEncoder, tol float64) []clip.VisionEncoding {
	t.Helper()
	px := readGolden(t, "vision_pixel_values")
	hs := readGolden(t, "vision_last_hidden_state")
	em := readGolden(t, "image_embeds")
	n, h, w := px.Shape[0], px.Shape[2], px.Shape[3]
	got, err := e.Encode(context.Background(), px.Data.([]float32), n, h, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d encodings for %d images", len(got), n)
	}
	tok, d, p := hs.Shape[1], hs.Shape[2], em.Shape[1]
	hv, ev := hs.Data.([]float32), em.Data.([]float32)
	for i, g := range got {
		if g.Tokens != tok || g.Width != d {
			t.Fatalf("image %d: tokens %d width %d, want %d %d", i, g.Tokens, g.Width, tok, d)
		}
		closeWithin(t, "vision last_hidden_state", g.States, hv[i*tok*d:(i+1)*tok*d], tol)
		closeWithin(t, "image_embeds", g.Embeds, ev[i*p:(i+1)*p], tol)
	}
	// One image alone gives the same as in the batch.
	one, err := e.Encode(context.Background(), px.Data.([]float32)[2*3*h*w:], 1, h, w)
	if err != nil {
		t.Fatal(err)
	}
	closeWithin(t, "image_embeds[2] alone", one[0].Embeds, ev[2*p:3*p], tol)
	return got
}

func TestVisionEncoderMatchesTorch(t *testing.T) {
	orttest.Load(t)
	p := filepath.Join(tinyclip, "onnx", "vision_model.onnx")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// No patch size: the grid is inferred from 16 patch tokens of a square image.
	e, err := clip.NewVision(b, p, clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c, h, w := e.InputSize(); c != 3 || h != 32 || w != 32 || !e.HasEmbeds() {
		t.Fatalf("input %dx%dx%d, embeds %v", c, h, w, e.HasEmbeds())
	}
	checkVision(t, e)
}

func TestOpenVisionEncoder(t *testing.T) {
	orttest.Load(t)
	e := openModelEncoder(t, tinyclip, models.Options{}, clip.VisionOptions{})
	checkVision(t, e)
	ctx := context.Background()
	px := make([]float32, 2*3*32*32)
	for _, c := range []struct {
		name    string
		px      []float32
		n, h, w int
		want    string
	}{
		{"short buffer", px[:100], 2, 32, 32, "100 pixel values"},
		{"wrong size", make([]float32, 3*16*16), 1, 16, 16, "takes 32x32"},
		{"bad shape", px, 2, 0, 32, "bad batch shape"},
	} {
		if _, err := e.Encode(ctx, c.px, c.n, c.h, c.w); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.Encode(ctx, px, 2, 32, 32); err == nil {
		t.Error("Encode after Close: no error")
	}
}

func TestVisionEncoderRejectsGraphs(t *testing.T) {
	orttest.Load(t)
	for _, c := range []struct {
		file  string
		wants []string
	}{
		{filepath.Join("pooled_only", "vision_model.onnx"), []string{"pooled_only", "no last_hidden_state output", "image_embeds", "full export", "Expose"}},
		{filepath.Join("bad", "vision_uint8.onnx"), []string{"vision_uint8.onnx", "input pixel_values is uint8", "expected a float32 or float16 tensor"}},
		{"text_model.onnx", []string{"text_model.onnx", "no pixel_values input", "input_ids"}},
	} {
		p := filepath.Join(tinyclip, "onnx", c.file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := clip.NewVision(b, p, clip.VisionOptions{})
		if err == nil {
			e.Close()
			t.Errorf("%s: no error", c.file)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.file, err, w)
			}
		}
	}
}

// encodeGolden encodes the golden pixel values.
func encodeGolden(t *testing.T, e *clip.VisionEncoder) []clip.VisionEncoding {
	t.Helper()
	px := readGolden(t, "vision_pixel_values")
	got, err := e.Encode(context.Background(), px.Data.([]float32), px.Shape[0], px.Shape[2], px.Shape[3])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// maxDiff returns the largest |got - torch| over all images, for states and embeds.
func maxDiff(t *testing.T, got []clip.VisionEncoding) (states, embeds float64) {
	t.Helper()
	hv := readGolden(t, "vision_last_hidden_state").Data.([]float32)
	ev := readGolden(t, "image_embeds").Data.([]float32)
	for i, g := range got {
		n, d := len(g.States), len(g.Embeds)
		for j, v := range g.States {
			states = math.Max(states, math.Abs(float64(v-hv[i*n+j])))
		}
		for j, v := range g.Embeds {
			embeds = math.Max(embeds, math.Abs(float64(v-ev[i*d+j])))
		}
	}
	return states, embeds
}

// TestEncoderFloat16 runs the float16 export (float16 pixel_values, weights
// and outputs, as the hub's _fp16 graphs) from its file and from memory: the
// encoder takes and returns float32, close to torch's float32 outputs.
func TestVisionEncoderFloat16(t *testing.T) {
	orttest.Load(t)
	p := filepath.Join(tinyclip, "onnx", "variants", "vision_model_fp16.onnx")
	fromFile, err := clip.NewVisionFile(p, clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fromFile.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fromBytes, err := clip.NewVision(b, p, clip.VisionOptions{Threads: 1, PatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer fromBytes.Close()
	t.Run("file", func(t *testing.T) { checkVisionWithin(t, fromFile, fp16EncoderTol) })
	t.Run("bytes", func(t *testing.T) { checkVisionWithin(t, fromBytes, fp16EncoderTol) })
	states, embeds := maxDiff(t, encodeGolden(t, fromFile))
	t.Logf("float16 graph, all images: max |ort - torch| %.2g (last_hidden_state), %.2g (image_embeds); tolerance %g", states, embeds, fp16EncoderTol)
	// The float16 graph is not the float32 one (else this test proves nothing).
	if states <= encoderTol {
		t.Errorf("float16 graph within %g of torch everywhere: is it really float16?", encoderTol)
	}
}

// TestOpenEncoderVariant opens the fp16 variant the way --variant fp16 does,
// from a model directory: the sizes of its float16 outputs, which the graph
// leaves open, come from config.json (the number of tokens from the patch
// size), not from ONNX Runtime's shape inference.
func TestOpenVisionEncoderVariant(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	copyFile(t, filepath.Join(tinyclip, models.ConfigFile), filepath.Join(dir, models.ConfigFile))
	copyFile(t, filepath.Join(tinyclip, "onnx", "variants", "vision_model_fp16.onnx"), filepath.Join(dir, "onnx", "vision_model_fp16.onnx"))
	e := openModelEncoder(t, dir, models.Options{Variant: "fp16"}, clip.VisionOptions{Threads: 1})
	checkVisionWithin(t, e, fp16EncoderTol)
}

// TestEncoderBFloat16Outputs runs the float32 graph with its outputs cast to
// bfloat16 (8-bit significands): each output is torch's rounded to bfloat16,
// so within 2^-8 of its magnitude (plus the float32 tolerance).
func TestVisionEncoderBFloat16Outputs(t *testing.T) {
	orttest.Load(t)
	e, err := clip.NewVisionFile(filepath.Join(tinyclip, "onnx", "variants", "vision_model_bf16out.onnx"), clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := encodeGolden(t, e)
	hv := readGolden(t, "vision_last_hidden_state").Data.([]float32)
	ev := readGolden(t, "image_embeds").Data.([]float32)
	exact := 0
	for i, g := range got {
		for _, c := range []struct {
			what      string
			got, want []float32
		}{
			{"last_hidden_state", g.States, hv[i*len(g.States) : (i+1)*len(g.States)]},
			{"image_embeds", g.Embeds, ev[i*len(g.Embeds) : (i+1)*len(g.Embeds)]},
		} {
			if len(c.got) != len(c.want) {
				t.Fatalf("image %d %s: %d values, torch has %d", i, c.what, len(c.got), len(c.want))
			}
			for j, w := range c.want {
				d := math.Abs(float64(c.got[j] - w))
				if lim := math.Abs(float64(w))/256 + encoderTol; d > lim || math.IsNaN(d) {
					t.Fatalf("image %d %s[%d] = %g, torch %g: off by %g, more than %g", i, c.what, j, c.got[j], w, d, lim)
				}
				if d < encoderTol {
					exact++
				}
			}
		}
	}
	if exact == len(hv)+len(ev) {
		t.Error("bfloat16 outputs all within the float32 tolerance: were they rounded at all?")
	}
}

// TestEncoderFloat16Input opens a graph that takes float16 pixel_values and
// gives float32 outputs (testdata/tinyclip/generate.py's
// onnx/bad/vision_float16.onnx, once refused): it is accepted now.
func TestVisionEncoderFloat16Input(t *testing.T) {
	orttest.Load(t)
	e, err := clip.NewVisionFile(filepath.Join(tinyclip, "onnx", "bad", "vision_float16.onnx"), clip.VisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c, h, w := e.InputSize(); c != 3 || h != 32 || w != 32 {
		t.Errorf("input %dx%dx%d, want 3x32x32", c, h, w)
	}
}

// TestEncoderExternalData opens a model whose vision graph keeps its weights
// in onnx/vision_model.onnx_data: the outputs equal the plain graph's exactly.
func TestVisionEncoderExternalData(t *testing.T) {
	orttest.Load(t)
	plain, err := clip.NewVisionFile(filepath.Join(tinyclip, "onnx", "vision_model.onnx"), clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	want := encodeGolden(t, plain)
	dir := filepath.Join(tinyclip, "external")
	same := func(t *testing.T, e *clip.VisionEncoder) {
		t.Helper()
		got := checkVision(t, e)
		for i := range want {
			if !equalFloats(got[i].States, want[i].States) || !equalFloats(got[i].Embeds, want[i].Embeds) {
				t.Fatalf("image %d: the external-data graph's outputs differ from the plain graph's", i)
			}
		}
	}
	t.Run("model directory", func(t *testing.T) {
		e := openModelEncoder(t, dir, models.Options{}, clip.VisionOptions{Threads: 1})
		same(t, e)
	})
	t.Run("file", func(t *testing.T) {
		e, err := clip.NewVisionFile(filepath.Join(dir, "onnx", "vision_model.onnx"), clip.VisionOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		same(t, e)
	})
	// The Hugging Face cache layout: the snapshot's files are relative links
	// into blobs/, the graph and its data to different blobs.
	t.Run("hub cache links", func(t *testing.T) {
		root := t.TempDir()
		snap := filepath.Join(root, "models--org--external", "snapshots", "0123456789abcdef0123456789abcdef01234567")
		for i, f := range []string{models.ConfigFile, "onnx/vision_model.onnx", "onnx/vision_model.onnx_data"} {
			blob := filepath.Join(root, "models--org--external", "blobs", fmt.Sprintf("blob%d", i))
			copyFile(t, filepath.Join(dir, filepath.FromSlash(f)), blob)
			link := filepath.Join(snap, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(filepath.Dir(link), blob)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(rel, link); err != nil {
				t.Skipf("no symbolic links here: %v", err)
			}
		}
		e := openModelEncoder(t, snap, models.Options{}, clip.VisionOptions{Threads: 1})
		same(t, e)
	})
}

// TestEncoderExternalDataMissing: a graph whose external data is not beside
// it, or that is given as bytes, fails with an error naming the graph and the
// data file.
func TestVisionEncoderExternalDataMissing(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	src := filepath.Join(tinyclip, "external")
	copyFile(t, filepath.Join(src, models.ConfigFile), filepath.Join(dir, models.ConfigFile))
	graph := filepath.Join(dir, "onnx", "vision_model.onnx")
	copyFile(t, filepath.Join(src, "onnx", "vision_model.onnx"), graph)
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := clip.OpenVision(m, clip.VisionOptions{})
	if err == nil {
		e.Close()
		t.Fatal("no error for a graph without its external data")
	}
	data := filepath.Join(dir, "onnx", "vision_model.onnx_data")
	for _, w := range []string{graph, data, "external data", "missing"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q does not wrap fs.ErrNotExist", err)
	}
	// From memory, external data cannot be found at all, even when present.
	p := filepath.Join(src, "onnx", "vision_model.onnx")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	e, err = clip.NewVision(b, p, clip.VisionOptions{})
	if err == nil {
		e.Close()
		t.Fatal("no error for an external-data graph given as bytes")
	}
	for _, w := range []string{p, "vision_model.onnx_data", "external data", "file on disk"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("bytes: error %q lacks %q", err, w)
		}
	}
}

func equalFloats(a, b []float32) bool {
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

// BenchmarkEncoderTiny measures images/s of the tiny model (32×32, batch
// of 3) on one ONNX Runtime thread: mostly per-run overhead.
func BenchmarkVisionEncoderTiny(b *testing.B) {
	orttest.Load(b)
	e := openModelEncoder(b, tinyclip, models.Options{}, clip.VisionOptions{Threads: 1})
	benchEncode(b, e)
}

// BenchmarkEncoderTinyFloat16 is BenchmarkEncoderTiny on the float16 export:
// the same graph plus the float32 → float16 conversion of the pixels and the
// float16 → float32 conversion of the outputs.
func BenchmarkVisionEncoderTinyFloat16(b *testing.B) {
	orttest.Load(b)
	e, err := clip.NewVisionFile(filepath.Join(tinyclip, "onnx", "variants", "vision_model_fp16.onnx"), clip.VisionOptions{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	benchEncode(b, e)
}

// benchEncode encodes the golden batch of 32×32 images b.N times and reports
// images/s.
func benchEncode(b *testing.B, e *clip.VisionEncoder) {
	px, err := tensorio.ReadNPY(filepath.Join(tinyclip, "golden", "vision_pixel_values.npy"))
	if err != nil {
		b.Fatal(err)
	}
	n := px.Shape[0]
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := e.Encode(ctx, px.Data.([]float32), n, 32, 32); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "images/s")
}

// openModelEncoder opens the model in dir and its vision encoder, closed
// when the test ends.
func openModelEncoder(t testing.TB, dir string, mo models.Options, eo clip.VisionOptions) *clip.VisionEncoder {
	t.Helper()
	m, err := models.Open(dir, mo)
	if err != nil {
		t.Fatal(err)
	}
	e, err := clip.OpenVision(m, eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
