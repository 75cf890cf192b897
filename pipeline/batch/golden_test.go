package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/xattn"
)

// jobGoldenDir holds the float64 torch reference made by
// testdata/tinyclip/make_job_golden.py.
var jobGoldenDir = filepath.Join(tinyModel, "golden", "job")

// jobGoldenAbs and jobGoldenRel bound |job - torch| <= abs + rel·|torch|
// for every output tensor. The encoders run in float32 ONNX Runtime (equal
// to torch's float32 within 2e-6 on this model, README "Exactness") and the
// attention in float32; the reference is float64 throughout. The joint rows
// are unit vectors, so a cosine is off by ~1e-7..1e-6, a score (times
// exp(logit_scale) ≈ 14.3) by ~1e-5 at most, and a probability p by that
// much relative. The worst errors seen here: 1.4e-6 on patch_features (|x| <
// 4.2), 7.8e-7 on scores, 6.9e-7 on the attention maps and 4.4e-7 on the
// conditioned rows; 1e-5 + 1e-5·|torch| leaves ~7x headroom for other CPUs
// and ONNX Runtime builds, while the bugs this test is meant to catch (no
// post_layernorm, rows not normalised, scale logit_scale instead of its
// exp, a transposed map) move some values by 0.3 and more. (A wrong
// projection fails on shapes here: the tiny model's d_t 32 ≠ d_v 24.)
const jobGoldenAbs, jobGoldenRel = 1e-5, 1e-5

// TestRunMatchesTorch runs the job over the two golden images with the two
// golden prompts for each direction (both, which projects the patches once
// for both layers; image to text alone, patches as queries only; text to
// image alone, patches as keys and values only) and compares every tensor
// it writes with torch's float64 computation of the joint-space attention.
func TestRunMatchesTorch(t *testing.T) {
	images := []string{"square", "wide"}
	golden := map[string]map[string]tensorio.Tensor{}
	var prompts []string
	for _, name := range images {
		ts, meta, err := tensorio.ReadSafetensors(filepath.Join(jobGoldenDir, name+".safetensors"))
		if err != nil {
			t.Fatalf("%v (make it with /usr/bin/python3 testdata/tinyclip/make_job_golden.py)", err)
		}
		if err := json.Unmarshal([]byte(meta["prompts"]), &prompts); err != nil || len(prompts) == 0 {
			t.Fatalf("%s: metadata prompts %q: %v", name, meta["prompts"], err)
		}
		golden[name] = ts
	}
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range images {
		b := mustRead(t, filepath.Join(tinyModel, "golden", "images", name+".png"))
		if err := os.WriteFile(filepath.Join(in, name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	i2t := []string{"conditioned_patches", "image_to_text"}
	t2i := []string{"conditioned_tokens", "text_to_image"}
	for _, c := range []struct {
		name      string
		dir       xattn.Direction
		perHead   bool
		has, lack []string
	}{
		{"both", xattn.Both, false, append(slices.Clone(i2t), t2i...), nil},
		{"both/per-head", xattn.Both, true, append(slices.Clone(i2t), t2i...), nil},
		{"image-to-text", xattn.ImageToText, false, i2t, t2i},
		{"text-to-image", xattn.TextToImage, true, t2i, i2t},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			sum, err := Run(context.Background(), Config{
				Engine: tinyEngine(t, m, pipeline.Options{Direction: c.dir, Readout: pipeline.ReadoutRaw}), Inputs: []string{in}, Prompts: prompts, Out: out, // torch ran the raw readout
				PerHead: c.perHead, Batch: 2, Version: "test",
			})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Done != 2 || sum.Failed != 0 {
				t.Fatalf("summary %+v", sum)
			}
			for _, name := range images {
				got, _, err := tensorio.ReadSafetensors(filepath.Join(out, name+".png.safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				want := golden[name]
				for _, n := range []string{"patch_features", "image_embeds", "scores"} {
					compareGolden(t, name, n, got[n], want[n])
				}
				for k := range prompts {
					pre := fmt.Sprintf("prompt.%d.", k)
					gotIDs, err1 := got[pre+"input_ids"].Int64()
					wantIDs, err2 := want[pre+"input_ids"].Int64()
					if err1 != nil || err2 != nil || !slices.Equal(gotIDs, wantIDs) {
						t.Errorf("%s: %sinput_ids %v, want %v (%v, %v)", name, pre, gotIDs, wantIDs, err1, err2)
					}
					for _, n := range c.has {
						compareGolden(t, name, pre+n, got[pre+n], want[pre+n])
					}
					for _, n := range c.lack {
						if _, ok := got[pre+n]; ok {
							t.Errorf("%s: direction %v wrote %s%s", name, c.dir, pre, n)
						}
					}
					if !c.perHead {
						continue
					}
					for _, n := range c.has {
						if n == "conditioned_patches" || n == "conditioned_tokens" {
							continue
						}
						checkOneHead(t, name, pre+n, got[pre+n+"_heads"], got[pre+n])
					}
				}
			}
		})
	}
}

// compareGolden fails unless got (float32, from the job) has want's shape
// (float64, from torch) and every element within jobGoldenAbs and
// jobGoldenRel; it logs the worst
// error either way.
func compareGolden(t *testing.T, image, name string, got, want tensorio.Tensor) {
	t.Helper()
	if want.Data == nil {
		t.Fatalf("golden %s of %s missing: rerun make_job_golden.py", name, image)
	}
	if got.Data == nil {
		t.Errorf("%s: no %s in the job's output", image, name)
		return
	}
	if !slices.Equal(got.Shape, want.Shape) {
		t.Errorf("%s: %s shape %v, torch's %v", image, name, got.Shape, want.Shape)
		return
	}
	g, ok1 := got.Data.([]float32)
	w, ok2 := want.Data.([]float64)
	if !ok1 || !ok2 {
		t.Fatalf("%s: %s dtypes %s (want F32) and golden %s (want F64)", image, name, got.DType, want.DType)
	}
	worst, at, bad := 0.0, 0, 0
	for i := range w {
		d := math.Abs(float64(g[i]) - w[i])
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
		if !(d <= jobGoldenAbs+jobGoldenRel*math.Abs(w[i])) {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %s: %d of %d elements off by more than %g + %g·|torch|; worst %.3g at %d (%v, torch %v)",
			image, name, bad, len(w), jobGoldenAbs, jobGoldenRel, worst, at, g[at], w[at])
		return
	}
	t.Logf("%s: %s: max |job - torch| %.2g", image, name, worst)
}

// checkOneHead checks that the per-head map [1, rows, cols] of a one-head
// layer is the head mean [rows, cols], bit for bit.
func checkOneHead(t *testing.T, image, name string, heads, mean tensorio.Tensor) {
	t.Helper()
	if heads.Data == nil {
		t.Errorf("%s: no %s_heads with PerHead", image, name)
		return
	}
	if len(heads.Shape) != 3 || heads.Shape[0] != 1 || !slices.Equal(heads.Shape[1:], mean.Shape) {
		t.Errorf("%s: %s_heads shape %v, want [1 %v]", image, name, heads.Shape, mean.Shape)
		return
	}
	h, ok1 := heads.Data.([]float32)
	m, ok2 := mean.Data.([]float32)
	if !ok1 || !ok2 || !slices.Equal(h, m) {
		t.Errorf("%s: %s_heads differs from the head mean %s of a one-head layer", image, name, name)
	}
}
