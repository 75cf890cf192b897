package graphbuild

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestBuildRealSize builds the graphs of the model folder
// CONDITION_BENCH_MODEL names (one made by scripts/bench_models, with its
// torch.onnx.export graphs in onnx/), logs the build time, and compares the
// built graphs' outputs with the exported graphs' on the same inputs:
// within 1e-5 of the largest magnitude; with CONDITION_BENCH_GOLDEN, a
// folder scripts/graphbuild/torch_golden.py wrote for the model, on its
// inputs, and with torch's outputs too.
func TestBuildRealSize(t *testing.T) {
	dir := os.Getenv("CONDITION_BENCH_MODEL")
	if dir == "" {
		t.Skip("CONDITION_BENCH_MODEL names no model folder (make one with scripts/bench_models/make_clip.py)")
	}
	orttest.Load(t)
	cfg := readConfig(t, filepath.Join(dir, "config.json"))
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := t.TempDir()
	if o := os.Getenv("CONDITION_BUILD_OUT"); o != "" {
		out = o
	}
	start := time.Now()
	ws, err := BuildCLIP(ck, cfg, out, Options{QKV: os.Getenv("CONDITION_BUILD_QKV")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d graphs from %.1f MB in %.2f s", len(ws), float64(ck.Size())/1e6, time.Since(start).Seconds())

	rng := rand.New(rand.NewPCG(3, 4))
	const batch, T = 3, 77
	ids := make([]int64, batch*T)
	mask := make([]int64, batch*T)
	for b := 0; b < batch; b++ {
		n := []int{7, 20, T}[b]
		for i := 0; i < T; i++ {
			id := int64(cfg.Text.EosTokenID)
			switch {
			case i == 0:
				id = int64(cfg.Text.EosTokenID - 1)
			case i < n-1:
				id = int64(rng.IntN(cfg.Text.VocabSize - 2))
			}
			ids[b*T+i] = id
			if i < n {
				mask[b*T+i] = 1
			}
		}
	}
	s := cfg.Vision.ImageSize
	px := make([]float32, batch*3*s*s)
	for i := range px {
		px[i] = float32(rng.NormFloat64())
	}
	cases := []struct {
		graph string
		ins   []string
		in    []tensorio.Tensor
		outs  []string
	}{
		{TextModelFile, []string{"input_ids", "attention_mask"}, []tensorio.Tensor{tensorio.I64([]int{batch, T}, ids), tensorio.I64([]int{batch, T}, mask)},
			[]string{"last_hidden_state", "text_embeds"}},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{tensorio.F32([]int{batch, 3, s, s}, px)},
			[]string{"last_hidden_state", "image_embeds"}},
	}
	// torch's outputs, when scripts/graphbuild/torch_golden.py made them
	// for this model: its inputs replace the drawn ones.
	golden := os.Getenv("CONDITION_BENCH_GOLDEN")
	npy := func(name string) tensorio.Tensor {
		x, err := tensorio.ReadNPY(filepath.Join(golden, name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	if golden != "" {
		cases[0].in = []tensorio.Tensor{npy("input_ids"), npy("attention_mask")}
		cases[1].in = []tensorio.Tensor{npy("pixel_values")}
	}
	goldens := [][]string{{"text_last_hidden_state", "text_embeds"}, {"vision_last_hidden_state", "image_embeds"}}
	for k, c := range cases {
		got := run(t, filepath.Join(out, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
		want := run(t, filepath.Join(dir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
		for i := range want {
			if d := relDiff(want[i], got[i]); !(d <= 1e-5) {
				t.Errorf("%s: %s differs from the exported graph's by %.3g of its largest magnitude", c.graph, c.outs[i], d)
			} else {
				t.Logf("%s: %s within %.2g of the exported graph's", c.graph, c.outs[i], d)
			}
			if golden == "" {
				continue
			}
			torch := floats(t, npy(goldens[k][i]))
			d, de := relDiff(torch, got[i]), relDiff(torch, want[i])
			if !(d <= 1e-5) {
				t.Errorf("%s: %s differs from torch's by %.3g of its largest magnitude (the exported graph: %.3g)", c.graph, c.outs[i], d, de)
			} else {
				t.Logf("%s: %s within %.2g of torch's (the exported graph: %.2g)", c.graph, c.outs[i], d, de)
			}
		}
	}
}
