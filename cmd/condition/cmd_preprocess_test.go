package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

const imagesDir = "../../testdata/images"

func preprocessCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainContext(context.Background(), append([]string{"preprocess"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func needImages(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(imagesDir, "cases.json")); err != nil {
		t.Skipf("testdata/images absent (%v): run testdata/images/generate.py", err)
	}
}

// TestPreprocessCLI writes pixel_values with --preprocessor and with
// --model DIR and compares them with the reference from Pillow +
// CLIPImageProcessor's steps (testdata/images/generate.py), bit for bit.
func TestPreprocessCLI(t *testing.T) {
	needImages(t)
	dir := t.TempDir()
	cfg := filepath.Join(imagesDir, "configs", "small.json")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	modelDir := filepath.Join(dir, "model")
	if err := os.Mkdir(modelDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(modelDir, "preprocessor_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := tensorio.ReadNPY(filepath.Join(imagesDir, "golden", "png_exif6_20x12__small.pv.npy"))
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(imagesDir, "src", "png_exif6_20x12.png")
	for _, src := range [][]string{{"--preprocessor", cfg}, {"--model", modelDir}} {
		out := filepath.Join(dir, "pv.npy")
		code, stdout, stderr := preprocessCLI(t, append(src, "--out", out, "--json", img)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", src, code, stderr)
		}
		var res struct {
			Shape         []int
			Width, Height int
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("stdout %q: %v", stdout, err)
		}
		if res.Width != 12 || res.Height != 20 {
			t.Errorf("orientation 6 not applied: upright %dx%d", res.Width, res.Height)
		}
		got, err := tensorio.ReadNPY(out)
		if err != nil {
			t.Fatal(err)
		}
		if got.DType != tensorio.DTypeF32 || len(got.Shape) != 4 || got.Shape[0] != 1 || got.Shape[1] != 3 || got.Shape[2] != 16 || got.Shape[3] != 16 {
			t.Fatalf("%s %v, want F32 [1 3 16 16]", got.DType, got.Shape)
		}
		g, w := got.Data.([]float32), want.Data.([]float32)
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("%v: value %d is %v, Pillow reference %v", src, i, g[i], w[i])
			}
		}
	}
	// --no-exif-orientation keeps the stored 20x12.
	out := filepath.Join(dir, "raw.npy")
	code, stdout, stderr := preprocessCLI(t, "--preprocessor", cfg, "--out", out, "--no-exif-orientation", img)
	if code != 0 || !strings.Contains(stdout, "(20x12 upright)") {
		t.Errorf("--no-exif-orientation: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestPreprocessCLIErrors(t *testing.T) {
	needImages(t)
	dir := t.TempDir()
	cfg := filepath.Join(imagesDir, "configs", "small.json")
	img := filepath.Join(imagesDir, "src", "png_rgb_61x47.png")
	out := filepath.Join(dir, "x.npy")
	corrupt := filepath.Join(dir, "corrupt.png")
	good, _ := os.ReadFile(img)
	if err := os.WriteFile(corrupt, good[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCfg := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badCfg, []byte(`{"crop_size": {"shortest_edge": 3}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"no image", []string{"--preprocessor", cfg, "--out", out}, 2, []string{"want one IMAGE"}},
		{"no out", []string{"--preprocessor", cfg, img}, 2, []string{"--out F.npy is required"}},
		{"both sources", []string{"--preprocessor", cfg, "--model", dir, "--out", out, img}, 2, []string{"not both"}},
		{"bad flag", []string{"--frobnicate", img}, 2, []string{"frobnicate"}},
		{"corrupt", []string{"--preprocessor", cfg, "--out", out, corrupt}, 1, []string{corrupt, "corrupt png image (61x47)"}},
		{"not an image", []string{"--preprocessor", cfg, "--out", out, text}, 1, []string{text, "unsupported image format"}},
		{"missing", []string{"--preprocessor", cfg, "--out", out, filepath.Join(dir, "nope.jpg")}, 1, []string{"nope.jpg"}},
		{"over the limit", []string{"--preprocessor", cfg, "--out", out, "--max-pixels", "1000", img}, 1, []string{img, "61x47 (2867 pixels), over the limit of 1000 pixels"}},
		{"bad config", []string{"--preprocessor", badCfg, "--out", out, img}, 1, []string{badCfg, "crop_size must have height and width"}},
		{"model without config", []string{"--model", dir, "--out", out, img}, 1, []string{"preprocessor_config.json", dir}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := preprocessCLI(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr)
			}
			for _, s := range tt.contains {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q does not mention %q", stderr, s)
				}
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s behind (%v)", out, err)
	}
}

// TestPreprocessDecodeFast: with --decode fast a 600×400 JPEG and a
// 16-pixel config draft to 1/8 (both sides ≥ 32), and the pixel_values equal
// those of Pillow's draft("RGB", (40, 40)) of the same file (scale 8 too),
// stored losslessly by testdata/images/draft.py. Builds without libjpeg
// refuse the flag, naming the build tag.
func TestPreprocessDecodeFast(t *testing.T) {
	needImages(t)
	dir := t.TempDir()
	cfg := filepath.Join(imagesDir, "configs", "small.json")
	jpg := filepath.Join(imagesDir, "draft", "src", "jpeg_420_600x400.jpg")
	pillow := filepath.Join(imagesDir, "draft", "golden", "jpeg_420_600x400__d40.png")
	fast := filepath.Join(dir, "fast.npy")
	code, stdout, stderr := preprocessCLI(t, "--preprocessor", cfg, "--decode", "fast", "--out", fast, jpg)
	if !vision.CanDraft() {
		if code != 2 || !strings.Contains(stderr, "libturbojpeg0") {
			t.Errorf("--decode fast without libjpeg: exit %d, stderr %q", code, stderr)
		}
		return
	}
	if code != 0 || !strings.Contains(stdout, "(600x400 upright, decoded at 1/8: 75x50)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	ref := filepath.Join(dir, "pillow.npy")
	if code, _, stderr := preprocessCLI(t, "--preprocessor", cfg, "--out", ref, pillow); code != 0 {
		t.Fatalf("Pillow's drafted pixels: exit %d: %s", code, stderr)
	}
	a, err := os.ReadFile(fast)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("--decode fast's pixel_values differ from those of Pillow's drafted image")
	}
}

// TestPreprocessOpenCLIPFolder: a folder in OpenCLIP's layout (no
// preprocessor_config.json) preprocesses as OpenCLIP's transform does: the
// 44x40 golden, whose torchvision crop starts a pixel right of a floored
// one, within 1e-5 of the transcription's pixel_values.
func TestPreprocessOpenCLIPFolder(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "tinyopenclip")
	out := filepath.Join(t.TempDir(), "odd.npy")
	if code, _, stderr := preprocessCLI(t, "--model", dir, filepath.Join(dir, "golden", "odd.png"), "--out", out); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	got, err := tensorio.ReadNPY(out)
	if err != nil {
		t.Fatal(err)
	}
	all, err := tensorio.ReadNPY(filepath.Join(dir, "golden", "pixel_values.npy"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := got.Float32()
	w, _ := all.Float32()
	w = w[2*len(g):] // odd.png is the third image
	if len(w) != len(g) {
		t.Fatalf("%d values, the golden image has %d", len(g), len(w))
	}
	for i := range g {
		if d := g[i] - w[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("pixel_values[%d] = %v, OpenCLIP's transform %v", i, g[i], w[i])
		}
	}
}
