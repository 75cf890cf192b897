package graphbuild

import (
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestBuildTinyCLIPMatchesTorch builds testdata/tinyclip's graphs from its
// model.safetensors in every q, k, v form, runs them in ONNX Runtime on the
// golden inputs and compares each output with torch's (golden/*.npy, from
// generate.py): within 1e-5 of its largest magnitude. The committed
// torch.onnx.export graphs run beside them on the same inputs, for scale.
func TestBuildTinyCLIPMatchesTorch(t *testing.T) {
	orttest.Load(t)
	cfg := readConfig(t, filepath.Join(tinyDir, "config.json"))
	ck, err := OpenCheckpoint(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()

	type io struct {
		graph   string
		ins     []string
		in      []tensorio.Tensor
		outs    []string
		golden  []string
		comment string
	}
	cases := []io{
		{TextModelFile, []string{"input_ids", "attention_mask"},
			[]tensorio.Tensor{readNPY(t, "text_input_ids"), readNPY(t, "text_attention_mask")},
			[]string{"last_hidden_state", "text_embeds"}, []string{"text_last_hidden_state", "text_embeds"}, "padded to 16"},
		{TextModelFile, []string{"input_ids", "attention_mask"},
			[]tensorio.Tensor{readNPY(t, "text_short_input_ids"), readNPY(t, "text_short_attention_mask")},
			[]string{"last_hidden_state", "text_embeds"}, []string{"text_short_last_hidden_state", "text_short_embeds"}, "padded to the longest"},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{readNPY(t, "vision_pixel_values")},
			[]string{"last_hidden_state", "image_embeds"}, []string{"vision_last_hidden_state", "image_embeds"}, ""},
		{VisionModelFile, []string{"pixel_values"}, []tensorio.Tensor{readNPY(t, "embed_pixel_values")},
			[]string{"image_embeds"}, []string{"embed_image_embeds"}, "preprocessed images"},
	}
	// The no-mask golden: a mask of ones gives torch's output without a mask.
	ids := readNPY(t, "text_input_ids")
	ones := make([]int64, ids.NumElements())
	for i := range ones {
		ones[i] = 1
	}
	cases = append(cases, io{TextModelFile, []string{"input_ids", "attention_mask"},
		[]tensorio.Tensor{ids, tensorio.I64(ids.Shape, ones)},
		[]string{"last_hidden_state", "text_embeds"}, []string{"text_nomask_last_hidden_state", "text_nomask_embeds"}, "mask of ones"})

	for _, qkv := range []string{QKVSeparate, QKVSplit, QKVPacked} {
		dir := t.TempDir()
		ws, err := BuildCLIP(ck, cfg, dir, Options{QKV: qkv})
		if err != nil {
			t.Fatalf("%s: %v", qkv, err)
		}
		for _, w := range ws {
			t.Logf("%s: %s: %d nodes, %d bytes", qkv, w.Graph, w.Nodes, w.Bytes)
		}
		for _, c := range cases {
			got := run(t, filepath.Join(dir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
			exported := run(t, filepath.Join(tinyDir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
			for i, g := range c.golden {
				want := floats(t, readNPY(t, g))
				d, de := relDiff(want, got[i]), relDiff(want, exported[i])
				if !(d <= 1e-5) {
					t.Errorf("%s %s (%s): %s differs from torch by %.3g of its largest magnitude (the export: %.3g)", qkv, c.graph, c.comment, c.outs[i], d, de)
				} else {
					t.Logf("%s %s (%s): %s within %.2g of torch (the export: %.2g)", qkv, c.graph, c.comment, c.outs[i], d, de)
				}
			}
		}
	}
}
