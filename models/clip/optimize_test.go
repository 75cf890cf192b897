package clip_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/onnxgraph"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
)

// TestOptimizeWritesTheRewrites: Optimize, which maps the graphs and
// writes each rewrite to a temporary file, hands save byte for byte what
// Fuse (and Quantize, for int8) write of the graphs parsed in memory, and
// leaves nothing in its TempDir (by default, the folder of the variants in
// this program's cache).
func TestOptimizeWritesTheRewrites(t *testing.T) {
	orttest.Load(t)
	derived := t.TempDir()
	m, err := models.Open(tinyclip, models.Options{DerivedCache: derived, Variant: models.VariantPlain})
	if err != nil {
		t.Fatal(err)
	}
	px := readGolden(t, "vision_pixel_values")
	pixels, err := px.Float32()
	if err != nil {
		t.Fatal(err)
	}
	probes := clip.Probes{Pixels: pixels, N: px.Shape[0], Height: px.Shape[2], Wd: px.Shape[3],
		IDs: rows(t, readGolden(t, "text_input_ids")), Masks: rows(t, readGolden(t, "text_attention_mask"))}
	for _, c := range []struct {
		name  string
		temp  bool // a TempDir of its own, else the derived cache's folder
		opts  clip.OptimizeOptions
		fuse  onnxgraph.FuseOptions
		quant *onnxgraph.QuantOptions
	}{
		{"float32", true, clip.OptimizeOptions{}, onnxgraph.FuseOptions{NoSkipLayerNorm: true}, nil},
		{"int8", false, clip.OptimizeOptions{Int8: true, Int8FullRange: true},
			onnxgraph.FuseOptions{SplitQKV: true, NoSkipLayerNorm: true}, &onnxgraph.QuantOptions{FullRange: true, PerRow: true, OutlierRatio: clip.DefaultOutlierRatio}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := derived
			opts := c.opts
			if c.temp {
				tmp = t.TempDir()
				opts.TempDir = tmp
			}
			// The tiny model's int8 outputs are not what this test is about.
			opts.MinCosine, opts.Tolerance = -1, 1
			saved := map[string][]byte{}
			res, err := clip.Optimize(context.Background(), m, probes, opts, func(o *clip.Optimized, write func(io.Writer) error) (string, error) {
				var b bytes.Buffer
				if err := write(&b); err != nil {
					return "", err
				}
				saved[o.Graph] = b.Bytes()
				return o.Graph, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 2 || len(saved) != 2 {
				t.Fatalf("%d results, %d graphs saved", len(res), len(saved))
			}
			for _, g := range []string{models.TextModelFile, models.VisionModelFile} {
				raw, err := m.ReadFile(g)
				if err != nil {
					t.Fatal(err)
				}
				want := rewriteInMemory(t, raw, c.fuse, c.quant)
				if !bytes.Equal(saved[g], want) {
					t.Errorf("%s: saved %d bytes, the rewrite in memory is %d bytes and differs", g, len(saved[g]), len(want))
				}
			}
			err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					t.Errorf("left in %s: %s", tmp, p)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// rewriteInMemory fuses (and quantizes, with quant) the graph raw with
// every step's input and output held in memory.
func rewriteInMemory(t *testing.T, raw []byte, fuse onnxgraph.FuseOptions, quant *onnxgraph.QuantOptions) []byte {
	t.Helper()
	gm, err := onnxgraph.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var fused bytes.Buffer
	if _, err := onnxgraph.Fuse(gm, fuse, &fused); err != nil {
		t.Fatal(err)
	}
	if quant == nil {
		return fused.Bytes()
	}
	fm, err := onnxgraph.Parse(fused.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var q bytes.Buffer
	if _, err := onnxgraph.Quantize(fm, *quant, &q); err != nil {
		t.Fatal(err)
	}
	return q.Bytes()
}
