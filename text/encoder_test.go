package text_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/ort/orttest"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/text"
)

// tiny is the tiny random CLIP made by testdata/tinyclip/generate.py; its
// golden outputs come from torch.
var tiny = filepath.Join("..", "testdata", "tinyclip")

// tol is the largest difference allowed between ONNX Runtime and torch.
const tol = 1e-4

func readNPY(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tiny, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

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
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, torch has %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if testing.Verbose() && strings.HasSuffix(what, "[0]") {
		t.Logf("%s: max abs difference %.2g", what, worst)
	}
	if worst > tol || math.IsNaN(worst) {
		t.Fatalf("%s: |ort - torch| = %g at %d (ort %g, torch %g), tolerance %g", what, worst, at, got[at], want[at], tol)
	}
}

func newEncoder(t *testing.T, file string) *text.Encoder {
	t.Helper()
	orttest.Load(t)
	p := filepath.Join(tiny, "onnx", file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	e, err := text.NewEncoder(b, p, text.EncoderOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// checkAgainstTorch encodes the golden ids (and masks, unless noMask) and
// compares every prompt's states and embeds with torch's.
func checkAgainstTorch(t *testing.T, e *text.Encoder, prefix string, useMask bool, goldenPrefix string) {
	t.Helper()
	ids := rows(t, readNPY(t, prefix+"input_ids"))
	var masks [][]int64
	if useMask {
		masks = rows(t, readNPY(t, prefix+"attention_mask"))
	}
	hs := readNPY(t, goldenPrefix+"last_hidden_state")
	em := readNPY(t, goldenPrefix+"embeds")
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
		closeTo(t, goldenPrefix+"last_hidden_state["+string(rune('0'+i))+"]", g.States, hv[i*T*d:(i+1)*T*d])
		closeTo(t, goldenPrefix+"embeds["+string(rune('0'+i))+"]", g.Embeds, ev[i*p:(i+1)*p])
	}
}

func TestEncoderMatchesTorch(t *testing.T) {
	e := newEncoder(t, "text_model.onnx")
	if e.IDsType() != "int64" || !e.HasAttentionMask() || !e.HasEmbeds() {
		t.Fatalf("graph read as ids %s, mask %v, embeds %v", e.IDsType(), e.HasAttentionMask(), e.HasEmbeds())
	}
	t.Run("padded", func(t *testing.T) { checkAgainstTorch(t, e, "text_", true, "text_") })
	t.Run("dynamic length", func(t *testing.T) { checkAgainstTorch(t, e, "text_short_", true, "text_short_") })
	// No masks means all ones: the same as a graph without attention_mask.
	t.Run("nil masks", func(t *testing.T) { checkAgainstTorch(t, e, "text_", false, "text_nomask_") })
}

func TestEncoderInt32IDs(t *testing.T) {
	e := newEncoder(t, filepath.Join("variants", "text_model_int32.onnx"))
	if e.IDsType() != "int32" {
		t.Fatalf("input_ids read as %s, want int32", e.IDsType())
	}
	checkAgainstTorch(t, e, "text_", true, "text_")
}

func TestEncoderNoAttentionMask(t *testing.T) {
	e := newEncoder(t, filepath.Join("variants", "text_model_nomask.onnx"))
	if e.HasAttentionMask() {
		t.Fatal("the graph has no attention_mask, the encoder says it has")
	}
	// The mask is returned as given but not fed; torch ran without it.
	checkAgainstTorch(t, e, "text_", true, "text_nomask_")
}

func TestOpenEncoder(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(tiny, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := text.OpenEncoder(m, text.EncoderOptions{})
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

func TestEncoderBadInput(t *testing.T) {
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

func TestEncoderRejectsGraphs(t *testing.T) {
	orttest.Load(t)
	for _, c := range []struct {
		file  string
		wants []string
	}{
		{filepath.Join("pooled_only", "text_model.onnx"), []string{"pooled_only", "no last_hidden_state output", "text_embeds", "full export", "condition models expose"}},
		{filepath.Join("bad", "text_float_ids.onnx"), []string{"text_float_ids.onnx", "input input_ids is float32", "int64 or int32"}},
		{"vision_model.onnx", []string{"vision_model.onnx", "unexpected input pixel_values"}},
	} {
		p := filepath.Join(tiny, "onnx", c.file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e, err := text.NewEncoder(b, p, text.EncoderOptions{})
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

// BenchmarkEncoderTiny measures prompts/s of the tiny model (16 tokens,
// batch of 4) on one ONNX Runtime thread: mostly per-run overhead.
func BenchmarkEncoderTiny(b *testing.B) {
	orttest.Load(b)
	m, err := models.Open(tiny, models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := text.OpenEncoder(m, text.EncoderOptions{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	x, err := tensorio.ReadNPY(filepath.Join(tiny, "golden", "text_input_ids.npy"))
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
