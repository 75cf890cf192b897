package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

const tinyNaFlexDir = "../../testdata/tinynaflex"

func naflexGolden(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyNaFlexDir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestEmbedNaFlex runs the tiny SigLIP 2 NaFlex (testdata/tinynaflex, its
// graphs built from model.safetensors on first use) end to end on three
// images of other aspects (2:1, 1:3, and one smaller than the patch
// budget, upscaled) and three prompts: each image keeps its own patch grid
// (3x6, 8x3, 4x5 of a 24-patch budget), and the ids, grids, masks, pooled
// embeddings, each image's own patch states and joint-space patches and
// the logits equal the references' (generate.py: Siglip2ImageProcessor
// transcribed, the tokenizers library, torch): cosines ≥ 0.99999, logits
// within 1e-4; the padding rows are zeros.
func TestEmbedNaFlex(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out := filepath.Join(t.TempDir(), "emb.safetensors")
	args := []string{"embed", "--model", tinyNaFlexDir, "--threads", "1", "--out", out, "--json", "--batch", "2"}
	for _, p := range []string{"a red square", "two blue circles on a wall", "cat"} {
		args = append(args, "--prompt", p)
	}
	for _, im := range []string{"wide.png", "tall.png", "small.png"} {
		args = append(args, filepath.Join(tinyNaFlexDir, "golden", "images", im))
	}
	code, stdout, stderr := embedCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res embedResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	wantGrids := [][2]int{{3, 6}, {8, 3}, {4, 5}}
	if res.Family != "SigLIP 2" || len(res.Images) != 3 {
		t.Fatalf("family %q, %d images", res.Family, len(res.Images))
	}
	for i, im := range res.Images {
		if im.Grid != wantGrids[i] {
			t.Errorf("image %d: grid %v, want %v (Siglip2ImageProcessor's)", i, im.Grid, wantGrids[i])
		}
	}
	ts, meta, err := tensorio.ReadSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	if meta["grids"] != "[3,6,8,3,4,5]" || meta["grid"] != "" {
		t.Errorf("metadata grids %q, grid %q", meta["grids"], meta["grid"])
	}
	eqI64 := func(what string, got tensorio.Tensor, want tensorio.Tensor) {
		g, _ := got.Int64()
		w, _ := want.Int64()
		if len(g) != len(w) {
			t.Fatalf("%s: %v, want %v", what, g, w)
		}
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("%s: %v, want %v", what, g, w)
			}
		}
	}
	eqI64("input_ids (the tokenizers library's)", ts["input_ids"], naflexGolden(t, "embed_input_ids"))
	eqI64("spatial_shapes", ts["spatial_shapes"], naflexGolden(t, "embed_spatial_shapes"))
	eqI64("patch_mask", ts["patch_mask"], naflexGolden(t, "embed_pixel_attention_mask"))

	// Each image's own rows; zeros after them.
	mask, _ := ts["patch_mask"].Int64()
	own := func(x []float64, d int) []float64 {
		var out []float64
		for i, m := range mask {
			if m == 1 {
				out = append(out, x[i*d:(i+1)*d]...)
			} else {
				for _, v := range x[i*d : (i+1)*d] {
					if v != 0 {
						t.Fatalf("padding row %d is not zeros", i)
					}
				}
			}
		}
		return out
	}
	ownGolden := func(x []float64, d int) []float64 {
		var out []float64
		for i, m := range mask {
			if m == 1 {
				out = append(out, x[i*d:(i+1)*d]...)
			}
		}
		return out
	}
	for _, c := range []struct {
		got, golden string
		d           int
		rows        bool
	}{
		{"text_embeds", "embed_text_pooler_output", 24, false},
		{"image_embeds", "embed_pooler_output", 24, false},
		{"patch_states", "embed_last_hidden_state", 24, true},
		{"patch_embeds", "embed_patch_embeds", 24, true},
	} {
		got, want := asF64(t, ts[c.got]), asF64(t, naflexGolden(t, c.golden))
		if c.rows {
			got, want = own(got, c.d), ownGolden(want, c.d)
		}
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("%s: %d values (shape %v), torch's own rows %d", c.got, len(got), ts[c.got].Shape, len(want))
		}
		if cos := minCosine(got, want, c.d); !(cos >= 0.99999) {
			t.Errorf("%s: smallest cosine with torch's %.7f, want ≥ 0.99999", c.got, cos)
		} else {
			t.Logf("%s: smallest cosine with torch's %.8f over %d rows", c.got, cos, len(got)/c.d)
		}
	}
	near(t, "logits_per_image", ts["logits_per_image"].Data.([]float32), naflexGolden(t, "embed_logits_per_image").Data.([]float32), 1e-4)
}

// TestPreprocessNaFlex: preprocess with a SigLIP 2 NaFlex processor writes
// the patches, the mask and the spatial shape as Siglip2ImageProcessor's
// transcription makes them (generate.py's embed_* goldens): equal.
func TestPreprocessNaFlex(t *testing.T) {
	out := filepath.Join(t.TempDir(), "px.npy")
	code, stdout, stderr := embedCLI(t, "preprocess", "--model", tinyNaFlexDir, "--out", out, "--json",
		filepath.Join(tinyNaFlexDir, "golden", "images", "tall.png"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res struct {
		Shape []int `json:"shape"`
		Grid  []int `json:"grid"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Grid) != 2 || res.Grid[0] != 8 || res.Grid[1] != 3 || len(res.Shape) != 3 || res.Shape[1] != 24 || res.Shape[2] != 48 {
		t.Fatalf("--json %s (%v)", stdout, err)
	}
	px, err := tensorio.ReadNPY(out)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := px.Float32()
	want, _ := naflexGolden(t, "embed_pixel_values").Float32()
	want = want[24*48 : 2*24*48]
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pixel_values[%d] = %g, the processor's %g", i, got[i], want[i])
		}
	}
	mask, err := tensorio.ReadNPY(filepath.Join(filepath.Dir(out), "px.pixel_attention_mask.npy"))
	if err != nil {
		t.Fatal(err)
	}
	m := mask.Data.([]int32)
	wm, _ := naflexGolden(t, "embed_pixel_attention_mask").Int64()
	for i := range m {
		if int64(m[i]) != wm[24+i] {
			t.Fatalf("mask %v, want %v", m, wm[24:48])
		}
	}
	shapes, err := tensorio.ReadNPY(filepath.Join(filepath.Dir(out), "px.spatial_shapes.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := shapes.Int64(); len(s) != 2 || s[0] != 8 || s[1] != 3 {
		t.Errorf("spatial_shapes %v, want [8 3]", s)
	}
}

// TestEmbedNaFlexReadouts: the dense readouts on SigLIP 2 NaFlex recompute
// the last layer on each image's own rows (NACLIP's neighbourhood on its
// own grid): each image's patch_embeds equal torch's float64 readouts
// (generate.py's readout_goldens) at a cosine ≥ 0.99999, and differ from
// the raw ones.
func TestEmbedNaFlexReadouts(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var imgs []string
	for _, im := range []string{"wide.png", "tall.png", "small.png"} {
		imgs = append(imgs, filepath.Join(tinyNaFlexDir, "golden", "images", im))
	}
	raw := asF64(t, naflexGolden(t, "embed_patch_embeds"))
	for _, kind := range []string{"clearclip", "naclip", "maskclip"} {
		out := filepath.Join(t.TempDir(), kind+".safetensors")
		code, _, stderr := embedCLI(t, append([]string{"embed", "--model", tinyNaFlexDir, "--threads", "1", "--readout", kind, "--out", out}, imgs...)...)
		if code != 0 {
			t.Fatalf("--readout %s: exit %d\n%s", kind, code, stderr)
		}
		ts, meta, err := tensorio.ReadSafetensors(out)
		if err != nil {
			t.Fatal(err)
		}
		if meta["readout"] != kind {
			t.Errorf("%s: metadata readout %q", kind, meta["readout"])
		}
		mask, _ := ts["patch_mask"].Int64()
		got, want := asF64(t, ts["patch_embeds"]), asF64(t, naflexGolden(t, "embed_readout_"+kind+"_patch_embeds"))
		var g, w, r []float64
		for i, m := range mask {
			if m == 1 {
				g, w, r = append(g, got[i*24:(i+1)*24]...), append(w, want[i*24:(i+1)*24]...), append(r, raw[i*24:(i+1)*24]...)
			}
		}
		if len(g) != 62*24 {
			t.Fatalf("%s: %d own rows, want 62", kind, len(g)/24)
		}
		if cos := minCosine(g, w, 24); !(cos >= 0.99999) {
			t.Errorf("%s: smallest cosine with torch's %.7f, want ≥ 0.99999", kind, cos)
		} else {
			t.Logf("%s: smallest cosine with torch's %.8f over 62 rows", kind, cos)
		}
		if cos := minCosine(g, r, 24); cos > 0.9999 {
			t.Errorf("%s: its patch_embeds are raw's (smallest cosine %.6f)", kind, cos)
		}
	}
}

// TestEmbedNaFlexInt8: the int8 variant of a SigLIP 2 NaFlex model is made
// and checked on probe images cut on their own grids (clip.Probes.Grids),
// and gives the float32 towers' embeddings within int8's error (cosine ≥
// 0.99 on every image).
func TestEmbedNaFlexInt8(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var imgs []string
	for _, im := range []string{"wide.png", "tall.png", "small.png"} {
		imgs = append(imgs, filepath.Join(tinyNaFlexDir, "golden", "images", im))
	}
	embeds := func(precision string) []float64 {
		out := filepath.Join(t.TempDir(), precision+".safetensors")
		code, _, stderr := embedCLI(t, append([]string{"embed", "--model", tinyNaFlexDir, "--threads", "1", "--precision", precision, "--out", out}, imgs...)...)
		if code != 0 {
			t.Fatalf("--precision %s: exit %d\n%s", precision, code, stderr)
		}
		ts, _, err := tensorio.ReadSafetensors(out)
		if err != nil {
			t.Fatal(err)
		}
		return asF64(t, ts["image_embeds"])
	}
	f32, i8 := embeds("fp32"), embeds("int8")
	cos := minCosine(f32, i8, 24)
	t.Logf("int8 against fp32: smallest image_embeds cosine %.5f", cos)
	if !(cos >= 0.99) || cos == 1 {
		t.Errorf("int8 image_embeds: smallest cosine with fp32's %.6f, want ≥ 0.99 and not 1 (an int8 graph)", cos)
	}
}
