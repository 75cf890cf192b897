package clip_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/clip"
	"github.com/conditionhq/condition/tensorio"
)

var tinyNaFlexDir = filepath.Join("..", "..", "testdata", "tinynaflex")

// TestEncodePatchesNaFlex opens testdata/tinynaflex (SigLIP 2 NaFlex, its
// graphs built from model.safetensors on open) and encodes the five golden
// images, patch sequences of grids 4x4, 2x7, 1x3, 6x4 and 5x1 in 24
// patches, in one batch and one at a time: each image's own patch rows and
// its pooled embedding equal torch's (generate.py) within 1e-4 of
// max(1, |torch|);
// the positions are resized here from the checkpoint's table.
func TestEncodePatchesNaFlex(t *testing.T) {
	orttest.Load(t)
	m, err := models.Open(tinyNaFlexDir, models.Options{DerivedCache: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := clip.OpenVision(m, clip.VisionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.NaFlex() {
		t.Fatal("NaFlex() is false")
	}
	if c, h, w := e.InputSize(); c != 3 || h != 0 || w != 0 {
		t.Errorf("InputSize %d %d %d, want 3 0 0 (each image its own)", c, h, w)
	}
	golden := func(name string) tensorio.Tensor {
		x, err := tensorio.ReadNPY(filepath.Join(tinyNaFlexDir, "golden", name+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	px, _ := golden("vision_pixel_values").Float32()
	shapes, _ := golden("vision_spatial_shapes").Int64()
	lhs, _ := golden("vision_last_hidden_state").Float32()
	pooled, _ := golden("vision_pooler_output").Float32()
	const n, patches, per, d = 5, 24, 48, 24
	grids := make([][2]int, n)
	for i := range grids {
		grids[i] = [2]int{int(shapes[2*i]), int(shapes[2*i+1])}
	}
	check := func(what string, encs []clip.VisionEncoding, first int) {
		for k, enc := range encs {
			i := first + k
			p := grids[i][0] * grids[i][1]
			if enc.Tokens != p || enc.Width != d || len(enc.States) != p*d || len(enc.Embeds) != d {
				t.Fatalf("%s: image %d: %d tokens of %d, %d states, %d embeds; want %d of %d", what, i, enc.Tokens, enc.Width, len(enc.States), len(enc.Embeds), p, d)
			}
			siglipGraphClose(t, what+": last_hidden_state", enc.States, lhs[i*patches*d:(i*patches+p)*d])
			siglipGraphClose(t, what+": pooler_output", enc.Embeds, pooled[i*d:(i+1)*d])
		}
	}
	ctx := context.Background()
	encs, err := e.EncodePatches(ctx, px, grids, patches)
	if err != nil {
		t.Fatal(err)
	}
	check("batch of 5", encs, 0)
	for i := range grids {
		one, err := e.EncodePatches(ctx, px[i*patches*per:(i+1)*patches*per], grids[i:i+1], patches)
		if err != nil {
			t.Fatal(err)
		}
		check("alone", one, i)
	}

	// Bad input: a grid over the budget, pixels of another size, pixel
	// grids given to a patch tower.
	if _, err := e.EncodePatches(ctx, px[:patches*per], [][2]int{{5, 5}}, patches); err == nil || !strings.Contains(err.Error(), "5x5 patch grid, expected one of at most 24 patches") {
		t.Errorf("grid over the budget: %v", err)
	}
	if _, err := e.EncodePatches(ctx, px[:patches*per-1], grids[:1], patches); err == nil || !strings.Contains(err.Error(), "pixel values for 1 images") {
		t.Errorf("short pixels: %v", err)
	}
	if _, err := e.Encode(ctx, make([]float32, 3*32*32), 1, 32, 32); err == nil || !strings.Contains(err.Error(), "takes patch sequences") {
		t.Errorf("Encode on a NaFlex tower: %v", err)
	}
}
