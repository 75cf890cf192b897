package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/tensorio"
)

// TestTipsOffGrid opens copies of testdata/tinytips whose
// preprocessor_config.json resizes to pixel sizes off the position
// table's 4x4 patch grid (24x20: a 6x5 grid, upscaled and not square;
// 12x8: 3x2, downscaled; 24x20 with config.json's interpolate_offset 0.1,
// resized by DINOv2's scale factors) and compares the engine's outputs on the two
// PNGs with torch's (testdata/tinytips/generate_offgrid.py: the table
// resized by F.interpolate, bilinear, antialiased, as transformers'
// Tipsv2VisionEmbeddings resizes it): pixel_values, last_hidden_state row
// by row, image_embeds and the joint-space patches at cosine ≥ 0.99999,
// and the states within 1e-5 (with and without the offset, torch's
// image_embeds differ by up to 0.023).
// Both sizes use one folder and one derived cache in turn, so the second
// open finds graphs built for the other size and must build its own.
func TestTipsOffGrid(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	src := filepath.Join("..", "testdata", "tinytips")
	dir := t.TempDir()
	for _, f := range []string{"model.safetensors", "tokenizer.model", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var data [][]byte
	for _, f := range []string{"wide.png", "tall.png"} {
		b, err := os.ReadFile(filepath.Join(src, "golden", "images", f))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	config, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sz := range []struct {
		set  string
		h, w int
	}{{"24x20", 24, 20}, {"12x8", 12, 8}, {"offset_24x20", 24, 20}} {
		t.Run(sz.set, func(t *testing.T) {
			cfg := config
			if strings.HasPrefix(sz.set, "offset_") {
				cfg = bytes.Replace(config, []byte(`"interpolate_offset": 0.0`), []byte(`"interpolate_offset": 0.1`), 1)
				if bytes.Equal(cfg, config) {
					t.Fatal("config.json has no interpolate_offset 0.0 to change")
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
				t.Fatal(err)
			}
			pre := fmt.Sprintf(`{"image_processor_type": "Tipsv2ImageProcessor", "do_resize": true, "size": {"height": %d, "width": %d}, "resample": 2, "do_rescale": true, "rescale_factor": 0.00392156862745098, "do_normalize": false}`, sz.h, sz.w)
			if err := os.WriteFile(filepath.Join(dir, models.PreprocessorFile), []byte(pre), 0o644); err != nil {
				t.Fatal(err)
			}
			golden := func(name string) []float32 {
				x, err := tensorio.ReadNPY(filepath.Join(src, "golden", fmt.Sprintf("offgrid_%s_%s.npy", sz.set, name)))
				if err != nil {
					t.Fatal(err)
				}
				return x.Data.([]float32)
			}
			m, err := models.Open(dir, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			eng := tinyEngine(t, m, Options{Threads: 1})
			gh, gw := sz.h/4, sz.w/4
			if h, w := eng.InputSize(); h != sz.h || w != sz.w {
				t.Fatalf("input size %dx%d, want %dx%d", h, w, sz.h, sz.w)
			}
			imgs, err := eng.EncodeImageData(context.Background(), data)
			if err != nil {
				t.Fatal(err)
			}
			wantPx, wantStates := golden("pixel_values"), golden("vision_last_hidden_state")
			wantEmb, wantPatches := golden("image_embeds"), golden("patch_embeds")
			rows, per := 3+gh*gw, 3*sz.h*sz.w
			px := make([]float32, per)
			for i, img := range imgs {
				if img.Grid.H != gh || img.Grid.W != gw || len(img.States) != rows*32 {
					t.Fatalf("image %d: grid %dx%d, %d state values; want %dx%d and %d rows of 32", i, img.Grid.H, img.Grid.W, len(img.States), gh, gw, rows)
				}
				im, err := png.Decode(bytes.NewReader(data[i]))
				if err != nil {
					t.Fatal(err)
				}
				if err := eng.Preprocess(px, im); err != nil {
					t.Fatal(err)
				}
				if d := maxAbsDiff(px, wantPx[i*per:(i+1)*per]); d > 1e-6 {
					t.Errorf("image %d: pixel_values differ from torch's by up to %g", i, d)
				}
				worst := 1.0
				for r := range rows {
					worst = min(worst, cosine64(img.States[r*32:(r+1)*32], wantStates[(i*rows+r)*32:(i*rows+r+1)*32]))
				}
				worst = min(worst, cosine64(img.Embeds, wantEmb[i*32:(i+1)*32]))
				joint, err := eng.JointPatches(&imgs[i])
				if err != nil {
					t.Fatal(err)
				}
				for p := range gh * gw {
					worst = min(worst, cosine64(joint[p*32:(p+1)*32], wantPatches[(i*gh*gw+p)*32:(i*gh*gw+p+1)*32]))
				}
				diff := maxAbsDiff(img.States, wantStates[i*rows*32:(i+1)*rows*32])
				t.Logf("image %d: smallest cosine with torch's (states, image_embeds, joint patches) %.8f; largest |Δ| of the states %.3g", i, worst, diff)
				if worst < 0.99999 || diff > 1e-5 {
					t.Errorf("image %d: smallest cosine %.8f with torch's, largest |Δ| of the states %.3g; want ≥ 0.99999 and ≤ 1e-5", i, worst, diff)
				}
			}
		})
	}
}

// cosine64 is the cosine of a and b, summed in float64.
func cosine64(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}
