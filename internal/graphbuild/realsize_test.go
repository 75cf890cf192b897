package graphbuild

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestBuildRealSize builds the graphs of the model folder
// CONDITION_BENCH_MODEL names (one made by scripts/bench_models, CLIP or
// SigLIP by its config's model_type, with its torch.onnx.export graphs in
// onnx/; or TIPSv2, compared with torch alone: see realSizeTips), logs the
// build time, and compares the built graphs' outputs with
// the exported graphs' on the same inputs: within 1e-5 of the largest
// magnitude; with CONDITION_BENCH_GOLDEN, a folder
// scripts/graphbuild/torch_golden.py wrote for the model, on its inputs,
// and with torch's outputs too. A folder without onnx/ is compared with
// torch alone.
func TestBuildRealSize(t *testing.T) {
	dir := os.Getenv("CONDITION_BENCH_MODEL")
	if dir == "" {
		t.Skip("CONDITION_BENCH_MODEL names no model folder (make one with scripts/bench_models/make_clip.py or make_siglip.py)")
	}
	orttest.Load(t)
	var head struct {
		ModelType string `json:"model_type"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &head); err != nil {
		t.Fatal(err)
	}
	siglip := head.ModelType == "siglip"
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := t.TempDir()
	if o := os.Getenv("CONDITION_BUILD_OUT"); o != "" {
		out = o
	}
	opts := Options{QKV: os.Getenv("CONDITION_BUILD_QKV")}
	if head.ModelType == "tipsv2" {
		realSizeTips(t, dir, ck, out, opts)
		return
	}
	start := time.Now()
	var ws []Written
	var vocab, seq, image, eos int
	if siglip {
		cfg := readSiglipConfig(t, filepath.Join(dir, "config.json"))
		vocab, seq, image, eos = cfg.Text.VocabSize, cfg.Text.MaxPositions, cfg.Vision.ImageSize, 1
		ws, err = BuildSiglip(ck, cfg, out, opts)
	} else {
		cfg := readConfig(t, filepath.Join(dir, "config.json"))
		vocab, seq, image, eos = cfg.Text.VocabSize, cfg.Text.MaxPositions, cfg.Vision.ImageSize, cfg.Text.EosTokenID
		ws, err = BuildCLIP(ck, cfg, out, opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d graphs from %.1f MB in %.2f s", len(ws), float64(ck.Size())/1e6, time.Since(start).Seconds())

	rng := rand.New(rand.NewPCG(3, 4))
	const batch = 3
	ids := make([]int64, batch*seq)
	mask := make([]int64, batch*seq)
	for b := 0; b < batch; b++ {
		n := []int{7, 20, seq}[b]
		for i := 0; i < seq; i++ {
			id := int64(eos)
			switch {
			case i == 0 && !siglip:
				id = int64(eos - 1)
			case i < n-1 && siglip:
				id = int64(3 + rng.IntN(vocab-3)) // past <pad>, </s>, <unk>
			case i < n-1:
				id = int64(rng.IntN(vocab - 2))
			}
			ids[b*seq+i] = id
			if i < n {
				mask[b*seq+i] = 1
			}
		}
	}
	px := make([]float32, batch*3*image*image)
	for i := range px {
		px[i] = float32(rng.NormFloat64())
	}
	type io struct {
		graph   string
		ins     []string
		in      []tensorio.Tensor
		outs    []string
		goldens []string
	}
	cases := []io{
		{TextModelFile, []string{"input_ids", "attention_mask"}, []tensorio.Tensor{tensorio.I64([]int{batch, seq}, ids), tensorio.I64([]int{batch, seq}, mask)},
			[]string{"last_hidden_state", "text_embeds"}, []string{"text_last_hidden_state", "text_embeds"}},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{tensorio.F32([]int{batch, 3, image, image}, px)},
			[]string{"last_hidden_state", "image_embeds"}, []string{"vision_last_hidden_state", "image_embeds"}},
	}
	if siglip {
		cases[0].ins, cases[0].in = cases[0].ins[:1], cases[0].in[:1]
		cases[0].outs, cases[0].goldens = []string{"last_hidden_state", "pooler_output"}, []string{"text_last_hidden_state", "text_pooler_output"}
		cases[1].outs, cases[1].goldens = []string{"last_hidden_state", "pooler_output"}, []string{"vision_last_hidden_state", "vision_pooler_output"}
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
		cases[0].in = []tensorio.Tensor{npy("input_ids")}
		if !siglip {
			cases[0].in = append(cases[0].in, npy("attention_mask"))
		}
		cases[1].in = []tensorio.Tensor{npy("pixel_values")}
	}
	_, err = os.Stat(filepath.Join(dir, filepath.FromSlash(TextModelFile)))
	exported := err == nil
	if !exported && golden == "" {
		t.Fatalf("%s has no exported graphs and CONDITION_BENCH_GOLDEN names no torch outputs: nothing to compare with", dir)
	}
	for _, c := range cases {
		got := run(t, filepath.Join(out, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
		var want [][]float32
		if exported {
			want = run(t, filepath.Join(dir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
		}
		for i := range c.outs {
			if want != nil {
				if d := relDiff(want[i], got[i]); !(d <= 1e-5) {
					t.Errorf("%s: %s differs from the exported graph's by %.3g of its largest magnitude", c.graph, c.outs[i], d)
				} else {
					t.Logf("%s: %s within %.2g of the exported graph's", c.graph, c.outs[i], d)
				}
			}
			if golden == "" {
				continue
			}
			torch := floats(t, npy(c.goldens[i]))
			d, de := relDiff(torch, got[i]), "no exported graph"
			if want != nil {
				de = fmt.Sprintf("the exported graph: %.2g", relDiff(torch, want[i]))
			}
			if !(d <= 1e-5) {
				t.Errorf("%s: %s differs from torch's by %.3g of its largest magnitude (%s)", c.graph, c.outs[i], d, de)
			} else {
				t.Logf("%s: %s within %.2g of torch's (%s)", c.graph, c.outs[i], d, de)
			}
		}
	}
}
