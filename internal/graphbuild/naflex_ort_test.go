package graphbuild

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/aaresize"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

var tinyNaFlexDir = filepath.Join("..", "..", "testdata", "tinynaflex")

// TestBuildTinyNaFlexMatchesTorch builds testdata/tinynaflex's graphs (SigLIP
// 2 NaFlex) from its model.safetensors in every q, k, v form, runs them in
// ONNX Runtime on the golden inputs (five images whose patch grids are the
// position grid's own, wider, smaller, the whole budget and one column,
// each padded to 24 patches) with the positions resized in Go
// (internal/aaresize, equal to torch's bit for bit), and compares
// each output with torch's (golden/*.npy, from generate.py over
// scripts/pysiglip/naflex.py): within 1e-5 of its largest magnitude, the
// padding rows of last_hidden_state included. The pooled output depends on
// the mask: the same images unmasked give other values.
func TestBuildTinyNaFlexMatchesTorch(t *testing.T) {
	orttest.Load(t)
	cfg := readSiglipConfig(t, filepath.Join(tinyNaFlexDir, "config.json"))
	if cfg.ModelType != "siglip2" || cfg.Vision.NumPatches != 16 {
		t.Fatalf("config %+v", cfg)
	}
	ck, err := OpenCheckpoint(tinyNaFlexDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	npy := func(name string) tensorio.Tensor { return readNPYIn(t, tinyNaFlexDir, name) }

	// The positions as the engine computes them, from the checkpoint's
	// table: torch's, bit for bit.
	table, err := ck.Float32("vision_model.embeddings.position_embedding.weight")
	if err != nil {
		t.Fatal(err)
	}
	shapes, _ := npy("vision_spatial_shapes").Int64()
	pos := make([]float32, 5*24*24)
	for i := 0; i < 5; i++ {
		if err := aaresize.PositionEmbeddings(pos[i*24*24:(i+1)*24*24], table, 4, 24, int(shapes[2*i]), int(shapes[2*i+1]), 24); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range floats(t, npy("vision_position_embeddings")) {
		if pos[i] != want {
			t.Fatalf("position_embeddings[%d] = %g, torch %g", i, pos[i], want)
		}
	}

	visionIns := []string{"pixel_values", "pixel_attention_mask", "position_embeddings"}
	vin := []tensorio.Tensor{npy("vision_pixel_values"), npy("vision_pixel_attention_mask"), tensorio.F32([]int{5, 24, 24}, pos)}
	cases := []struct {
		graph  string
		ins    []string
		in     []tensorio.Tensor
		outs   []string
		golden []string
	}{
		{TextModelFile, []string{"input_ids"}, []tensorio.Tensor{npy("text_input_ids")},
			[]string{"last_hidden_state", "pooler_output"}, []string{"text_last_hidden_state", "text_pooler_output"}},
		{VisionModelFile, visionIns, vin, []string{"last_hidden_state", "pooler_output", ReadoutInput},
			[]string{"vision_last_hidden_state", "vision_pooler_output", "vision_layer_input"}},
	}
	for _, qkv := range []string{QKVSeparate, QKVSplit, QKVPacked} {
		dir := t.TempDir()
		ws, err := BuildSiglip(ck, cfg, dir, Options{QKV: qkv})
		if err != nil {
			t.Fatalf("%s: %v", qkv, err)
		}
		for _, w := range ws {
			t.Logf("%s: %s: %d nodes, %d bytes", qkv, w.Graph, w.Nodes, w.Bytes)
		}
		if io := ioOf(t, filepath.Join(dir, filepath.FromSlash(VisionModelFile))); !strings.Contains(io, "input pixel_values type 1 [batch_size patches 48]") ||
			!strings.Contains(io, "input position_embeddings type 1 [batch_size patches 24]") {
			t.Errorf("%s: vision graph interface\n%s", qkv, io)
		}
		for _, c := range cases {
			got := run(t, filepath.Join(dir, filepath.FromSlash(c.graph)), c.ins, c.in, c.outs)
			for i, g := range c.golden {
				if d := relDiff(floats(t, npy(g)), got[i]); !(d <= 1e-5) {
					t.Errorf("%s %s: %s differs from torch by %.3g of its largest magnitude", qkv, c.graph, c.outs[i], d)
				} else {
					t.Logf("%s %s: %s within %.2g of torch", qkv, c.graph, c.outs[i], d)
				}
			}
		}
		// Unmasked, the pooled output is another: the mask is used.
		ones := make([]int64, 5*24)
		for i := range ones {
			ones[i] = 1
		}
		got := run(t, filepath.Join(dir, filepath.FromSlash(VisionModelFile)), visionIns,
			[]tensorio.Tensor{vin[0], tensorio.I64([]int{5, 24}, ones), vin[2]}, []string{"pooler_output"})
		if d := relDiff(floats(t, npy("vision_pooler_output")), got[0]); d < 1e-3 {
			t.Errorf("%s: without the mask pooler_output is within %.3g of the masked one", qkv, d)
		}
	}
}
