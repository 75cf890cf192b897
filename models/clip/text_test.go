package clip_test

import (
	"context"
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

// tol is the largest difference allowed between ONNX Runtime and torch.
const tol = 1e-4

// fp16Tol is the largest difference allowed between the float16 graph
// (testdata/tinyclip/make_variants.py) and torch's float32 outputs: weights,
// activations and outputs rounded to float16 (11-bit significands) through
// two layers. The outputs reach 3.1, where one float16 ulp is 2^-9 ≈ 0.002;
// measured worst 0.0029 (ONNX Runtime 1.30, x86-64), logged with -v.
const fp16Tol = 1e-2

// rows splits an int64 [N, T] tensor into N rows.
func rows(t *testing.T, x tensorio.Tensor) [][]int64 {
	t.Helper()
	v, err := x.Int64()
	if err != nil {
		t.Fatal(err)
	}
	n, w := x.Shape[0], x.Shape[1]
	out := make([][]int64, n)
	for i := range out {
		out[i] = v[i*w : (i+1)*w]
	}
	return out
}

func closeTo(t *testing.T, what string, got, want []float32) {
	t.Helper()
	closeWithin(t, what, got, want, tol)
}

func newEncoder(t *testing.T, file string) *clip.TextEncoder {
	t.Helper()
	orttest.Load(t)
	p := filepath.Join(tinyclip, "onnx", file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	e, err := clip.NewText(b, p, clip.TextOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// checkAgainstTorch encodes the golden ids (and masks, unless noMask) and
// compares every prompt's states and embeds with torch's.
func checkAgainstTorch(t *testing.T, e *clip.TextEncoder, prefix string, useMask bool, goldenPrefix string) {
	t.Helper()
	checkWithin(t, e, prefix, useMask, goldenPrefix, tol)
}

func checkWithin(t *testing.T, e *clip.TextEncoder, prefix string, useMask bool, goldenPrefix string, tol float64) {
	t.Helper()
	ids := rows(t, readGolden(t, prefix+"input_ids"))
	var masks [][]int64
	if useMask {
		masks = rows(t, readGolden(t, prefix+"attention_mask"))
	}
	hs := readGolden(t, goldenPrefix+"last_hidden_state")
	em := readGolden(t, goldenPrefix+"embeds")
	got, err := e.Encode(context.Background(), ids, masks)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("%d encodings for %d prompts", len(got), len(ids))
	}
	T, d, p := hs.Shape[1], hs.Shape[2], em.Shape[1]
	hv, ev := hs.Data.([]float32), em.Data.([]float32)
	for i, g := range got {
		if g.T != T || g.Width != d || len(g.Mask) != T {
			t.Fatalf("prompt %d: T=%d width=%d mask %d, want %d %d", i, g.T, g.Width, len(g.Mask), T, d)
		}
		if useMask {
			for j := range g.Mask {
				if g.Mask[j] != masks[i][j] {
					t.Fatalf("prompt %d: mask %v, want %v", i, g.Mask, masks[i])
				}
			}
		}
		closeWithin(t, goldenPrefix+"last_hidden_state["+string(rune('0'+i))+"]", g.States, hv[i*T*d:(i+1)*T*d], tol)
		closeWithin(t, goldenPrefix+"embeds["+string(rune('0'+i))+"]", g.Embeds, ev[i*p:(i+1)*p], tol)
	}
}

func TestTextEncoderMatchesTorch(t *testing.T) {
	e := newEncoder(t, "text_model.onnx")
	if e.IDsType() != "int64" || !e.HasAttentionMask() || !e.HasEmbeds() {
		t.Fatalf("graph read as ids %s, mask %v, embeds %v", e.IDsType(), e.HasAttentionMask(), e.HasEmbeds())
	}
	t.Run("padded", func(t *testing.T) { checkAgainstTorch(t, e, "text_", true, "text_") })
	t.Run("dynamic length", func(t *testing.T) { checkAgainstTorch(t, e, "text_short_", true, "text_short_") })
	// No masks means all ones: the same as a graph without attention_mask.
	t.Run("nil masks", func(t *testing.T) { checkAgainstTorch(t, e, "text_", false, "text_nomask_") })
}

func TestTextEncoderInt32IDs(t *testing.T) {
	e := newEncoder(t, filepath.Join("variants", "text_model_int32.onnx"))
	if e.IDsType() != "int32" {
		t.Fatalf("input_ids read as %s, want int32", e.IDsType())
	}
	checkAgainstTorch(t, e, "text_", true, "text_")
}

func TestTextEncoderNoAttentionMask(t *testing.T) {
	e := newEncoder(t, filepath.Join("variants", "text_model_nomask.onnx"))
	if e.HasAttentionMask() {
		t.Fatal("the graph has no attention_mask, the encoder says it has")
	}
	// The mask is returned as given but not fed; torch ran without it.
	checkAgainstTorch(t, e, "text_", true, "text_nomask_")
}

// TestEncoderFloat16 runs the float16 export (float16 weights, activations
// and outputs, as the hub's _fp16 graphs) from its file and from memory: the
// encoder returns float32 close to torch's float32 outputs.
func TestTextEncoderFloat16(t *testing.T) {
	orttest.Load(t)
	p := filepath.Join(tinyclip, "onnx", "variants", "text_model_fp16.onnx")
	fromFile, err := clip.NewTextFile(p, clip.TextOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fromFile.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fromBytes, err := clip.NewText(b, p, clip.TextOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fromBytes.Close()
	for _, c := range []struct {
		name string
		e    *clip.TextEncoder
	}{{"file", fromFile}, {"bytes", fromBytes}} {
		t.Run(c.name, func(t *testing.T) {
			t.Run("padded", func(t *testing.T) { checkWithin(t, c.e, "text_", true, "text_", fp16Tol) })
			t.Run("dynamic length", func(t *testing.T) { checkWithin(t, c.e, "text_short_", true, "text_short_", fp16Tol) })
		})
	}
	// The float16 graph is not the float32 one: its outputs differ from
	// torch's by more than the float32 tolerance (else this test proves nothing).
	got, err := fromFile.Encode(context.Background(), rows(t, readGolden(t, "text_input_ids")), rows(t, readGolden(t, "text_attention_mask")))
	if err != nil {
		t.Fatal(err)
	}
	want := readGolden(t, "text_last_hidden_state").Data.([]float32)
	wantEm := readGolden(t, "text_embeds").Data.([]float32)
	worst, worstEm := 0.0, 0.0
	for i, g := range got {
		n, d := len(g.States), len(g.Embeds)
		for j, v := range g.States {
			worst = math.Max(worst, math.Abs(float64(v-want[i*n+j])))
		}
		for j, v := range g.Embeds {
			worstEm = math.Max(worstEm, math.Abs(float64(v-wantEm[i*d+j])))
		}
	}
	t.Logf("float16 graph, all prompts: max |ort - torch| %.2g (last_hidden_state), %.2g (text_embeds); tolerance %g", worst, worstEm, fp16Tol)
	if worst <= tol {
		t.Errorf("float16 graph within %g of torch everywhere: is it really float16?", tol)
	}
}

// TestOpenEncoderVariant opens the fp16 variant the way --variant fp16 does,
// from a model directory.
func TestOpenTextEncoderVariant(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	copyFile(t, filepath.Join(tinyclip, models.ConfigFile), filepath.Join(dir, models.ConfigFile))
	copyFile(t, filepath.Join(tinyclip, "onnx", "variants", "text_model_fp16.onnx"), filepath.Join(dir, "onnx", "text_model_fp16.onnx"))
	m, err := models.Open(dir, models.Options{Variant: "fp16"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := clip.OpenText(m, clip.TextOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	checkWithin(t, e, "text_", true, "text_", fp16Tol)
}

func TestOpenTextEncoder(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(tinyclip, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := clip.OpenText(m, clip.TextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstTorch(t, e, "text_", true, "text_")
	long := make([]int64, m.Config().TextConfig.MaxPositionEmbeddings+1)
	if _, err := e.Encode(context.Background(), [][]int64{long}, nil); err == nil || !strings.Contains(err.Error(), "at most 16") {
		t.Errorf("17 ids for a 16-position model: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.Encode(context.Background(), [][]int64{{1, 2}}, nil); err == nil {
		t.Error("Encode after Close: no error")
	}
}

func TestTextEncoderBadInput(t *testing.T) {
	e := newEncoder(t, "text_model.onnx")
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		ids   [][]int64
		masks [][]int64
		want  string
	}{
		{"ragged", [][]int64{{560, 1, 561}, {560, 561}}, nil, "prompt 1 has 2 token ids, prompt 0 has 3"},
		{"mask length", [][]int64{{560, 1, 561}}, [][]int64{{1, 1}}, "mask of 2"},
		{"mask count", [][]int64{{560, 561}}, [][]int64{{1, 1}, {1, 1}}, "2 masks for 1 prompts"},
		{"mask value", [][]int64{{560, 561}}, [][]int64{{1, 2}}, "mask value 2"},
		{"negative id", [][]int64{{560, -3, 561}}, nil, "token id -3"},
		{"empty prompt", [][]int64{{}}, nil, "no token ids"},
	} {
		if _, err := e.Encode(ctx, c.ids, c.masks); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if r, err := e.Encode(ctx, nil, nil); err != nil || r != nil {
		t.Errorf("no prompts: %v, %v", r, err)
	}
}

func TestTextEncoderRejectsGraphs(t *testing.T) {
	orttest.Load(t)
	for _, c := range []struct {
		file  string
		wants []string
	}{
		{filepath.Join("pooled_only", "text_model.onnx"), []string{"pooled_only", "no last_hidden_state output", "text_embeds", "full export", "Expose"}},
		{filepath.Join("bad", "text_float_ids.onnx"), []string{"text_float_ids.onnx", "input input_ids is float32", "int64 or int32"}},
		{"vision_model.onnx", []string{"vision_model.onnx", "unexpected input pixel_values"}},
	} {
		p := filepath.Join(tinyclip, "onnx", c.file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := clip.NewText(b, p, clip.TextOptions{})
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

// BenchmarkEncoderTiny measures prompts/s of the tinyclip model (16 tokens,
// batch of 4) on one ONNX Runtime thread: mostly per-run overhead.
func BenchmarkTextEncoderTiny(b *testing.B) {
	orttest.Load(b)
	m, err := models.Open(tinyclip, models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := clip.OpenText(m, clip.TextOptions{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	x, err := tensorio.ReadNPY(filepath.Join(tinyclip, "golden", "text_input_ids.npy"))
	if err != nil {
		b.Fatal(err)
	}
	v, _ := x.Int64()
	ids := make([][]int64, x.Shape[0])
	for i := range ids {
		ids[i] = v[i*x.Shape[1] : (i+1)*x.Shape[1]]
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := e.Encode(ctx, ids, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "prompts/s")
}
