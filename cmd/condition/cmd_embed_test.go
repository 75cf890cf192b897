package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/ort"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

const tinyclipDir = "../../testdata/tinyclip"

// tinyPrompts are the prompts of testdata/tinyclip/golden/prompts.json.
var tinyPrompts = []string{"a photo of a cat", "a red car", "Two DOGS playing, in the grass!", "zebra 42"}

func embedCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainContext(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func goldenF32(t *testing.T, name string) tensorio.Tensor {
	t.Helper()
	x, err := tensorio.ReadNPY(filepath.Join(tinyclipDir, "golden", name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, torch has %d", what, len(got), len(want))
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol || math.IsNaN(d) {
			t.Fatalf("%s[%d] = %g, torch %g (tolerance %g)", what, i, got[i], want[i], tol)
		}
	}
}

// TestEmbedEndToEnd runs tokenizer, preprocessing, both encoders and the
// similarity on the tiny model and compares with torch (generate.py).
func TestEmbedEndToEnd(t *testing.T) {
	orttest.Load(t)
	out := filepath.Join(t.TempDir(), "emb.safetensors")
	args := []string{"embed", "--model", tinyclipDir, "--threads", "1", "--out", out, "--json", "--batch", "1"}
	for _, p := range tinyPrompts {
		args = append(args, "--prompt", p)
	}
	args = append(args, filepath.Join(tinyclipDir, "golden", "images", "square.png"), filepath.Join(tinyclipDir, "golden", "images", "wide.png"))
	code, stdout, stderr := embedCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var res embedResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if len(res.Prompts) != 4 || len(res.Images) != 2 || res.Images[1].Grid != [2]int{4, 4} || res.Prompts[1].Tokens != 5 {
		t.Fatalf("result %+v", res)
	}
	const tol = 1e-4
	near(t, "logits_per_image (json)", flatten(res.LogitsPerImage), goldenF32(t, "embed_logits_per_image").Data.([]float32), tol)

	ts, meta, err := tensorio.ReadSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, shape := range map[string][]int{
		"text_embeds": {4, 16}, "token_states": {4, 16, 32}, "attention_mask": {4, 16}, "input_ids": {4, 16},
		"image_embeds": {2, 16}, "patch_states": {2, 17, 24}, "logits_per_image": {2, 4}, "cosine": {2, 4},
		"patch_embeds": {2, 16, 16},
	} {
		if got := ts[name].Shape; len(got) != len(shape) || !embedSameShape(got, shape) {
			t.Errorf("%s: shape %v, want %v", name, got, shape)
		}
	}
	near(t, "text_embeds", ts["text_embeds"].Data.([]float32), goldenF32(t, "text_embeds").Data.([]float32), tol)
	near(t, "token_states", ts["token_states"].Data.([]float32), goldenF32(t, "text_last_hidden_state").Data.([]float32), tol)
	near(t, "image_embeds", ts["image_embeds"].Data.([]float32), goldenF32(t, "embed_image_embeds").Data.([]float32), tol)
	near(t, "logits_per_image", ts["logits_per_image"].Data.([]float32), goldenF32(t, "embed_logits_per_image").Data.([]float32), tol)
	ids, _ := ts["input_ids"].Int64()
	wantIDs, _ := goldenF32(t, "text_input_ids").Int64()
	for i := range wantIDs {
		if ids[i] != wantIDs[i] {
			t.Fatalf("input_ids differ from generate.py's at %d: %v", i, ids)
		}
	}
	var prompts []string
	if err := json.Unmarshal([]byte(meta["prompts"]), &prompts); err != nil || len(prompts) != 4 || meta["grid"] != "4x4" || meta["model"] != tinyclipDir || meta["readout"] != "clearclip" {
		t.Errorf("metadata %v", meta)
	}
	// patch_embeds: unit rows, the joint space's patches under the readout
	// (clearclip, the default for a CLIP checkpoint).
	pe := ts["patch_embeds"].Data.([]float32)
	for r := 0; r+16 <= len(pe); r += 16 {
		n := 0.0
		for _, v := range pe[r : r+16] {
			n += float64(v) * float64(v)
		}
		if n < 0.9999 || n > 1.0001 {
			t.Fatalf("patch_embeds row %d has squared norm %g", r/16, n)
		}
	}
}

// TestEmbedReadouts: --readout raw and naclip change patch_embeds and not
// patch_states; an unknown readout is a usage error naming the readouts.
func TestEmbedReadouts(t *testing.T) {
	orttest.Load(t)
	img := filepath.Join(tinyclipDir, "golden", "images", "square.png")
	read := func(readout string) (map[string]tensorio.Tensor, map[string]string) {
		out := filepath.Join(t.TempDir(), "emb.safetensors")
		if code, _, stderr := embedCLI(t, "embed", "--model", tinyclipDir, "--threads", "1", "--out", out, "--readout", readout, img); code != 0 {
			t.Fatalf("--readout %s: exit %d\n%s", readout, code, stderr)
		}
		ts, meta, err := tensorio.ReadSafetensors(out)
		if err != nil {
			t.Fatal(err)
		}
		return ts, meta
	}
	raw, rawMeta := read("raw")
	na, naMeta := read("naclip")
	if rawMeta["readout"] != "raw" || naMeta["readout"] != "naclip" {
		t.Errorf("readout metadata %q and %q", rawMeta["readout"], naMeta["readout"])
	}
	if !slices.Equal(raw["patch_states"].Data.([]float32), na["patch_states"].Data.([]float32)) {
		t.Error("the readout changed patch_states")
	}
	if slices.Equal(raw["patch_embeds"].Data.([]float32), na["patch_embeds"].Data.([]float32)) {
		t.Error("naclip's patch_embeds equal raw's")
	}
	code, _, stderr := embedCLI(t, "embed", "--model", tinyclipDir, "--readout", "dense", img)
	if code != exitUsage || !strings.Contains(stderr, `"dense" for "--readout" flag: readout "dense": want one of clearclip, naclip, maskclip, raw`) {
		t.Errorf("--readout dense: exit %d, stderr %s", code, stderr)
	}
	// A model without the last layer's weights: the library's error says
	// readout raw, and the CLI adds its flag.
	noWeights := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "onnx/text_model.onnx", "onnx/vision_model.onnx"} {
		b, err := os.ReadFile(filepath.Join(tinyclipDir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(noWeights, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = embedCLI(t, "embed", "--model", noWeights, "--threads", "1", "--readout", "naclip", img)
	if code != exitFailed || !strings.Contains(stderr, "which the model does not have (readout raw reads the patch tokens without them)") ||
		!strings.Contains(stderr, "(give --readout raw to read the patch tokens as they are)") {
		t.Errorf("--readout naclip without model.safetensors: exit %d, stderr %s", code, stderr)
	}
}

func TestEmbedTextOnlyTable(t *testing.T) {
	orttest.Load(t)
	code, stdout, stderr := embedCLI(t, "embed", "--model", tinyclipDir, "-p", "a red car")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, `prompt 0: "a red car", 5 tokens, text_embeds [16]`) || strings.Contains(stdout, "logits_per_image") {
		t.Errorf("output:\n%s", stdout)
	}
}

func TestEmbedErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"embed", "--model", tinyclipDir}, exitUsage, "nothing to embed"},
		{[]string{"embed", "--model", tinyclipDir, "-p", "x", "--batch", "0"}, exitUsage, "--batch"},
		{[]string{"embed", "--model", tinyclipDir, "-p", "x", "--threads", "-1"}, exitUsage, "--threads"},
		{[]string{"embed", "--model", filepath.Join(tinyclipDir, "nope"), "-p", "x"}, exitUsage, "no folder"}, // neither a folder nor a hub id
	} {
		code, _, stderr := embedCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	orttest.Load(t)
	code, _, stderr := embedCLI(t, "embed", "--model", tinyclipDir, filepath.Join(tinyclipDir, "config.json"))
	if code != exitFailed || !strings.Contains(stderr, "config.json") {
		t.Errorf("a non-image: exit %d, %s", code, stderr)
	}
}

func TestRuntimeCommand(t *testing.T) {
	rt := orttest.Load(t)
	code, stdout, stderr := embedCLI(t, "runtime", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var r struct {
		Found   bool   `json:"found"`
		Version string `json:"version"`
		Path    string `json:"path"`
		JPEG    string `json:"jpeg_decoder"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || !r.Found || r.Version != rt.Version || r.Path != rt.Path || r.JPEG != vision.JPEGDecoder() {
		t.Fatalf("runtime --json: %v %+v\n%s", err, r, stdout)
	}
	code, stdout, _ = embedCLI(t, "runtime")
	if code != 0 || !strings.Contains(stdout, "onnxruntime "+rt.Version) || !strings.Contains(stdout, rt.Path) ||
		!strings.Contains(stdout, "jpeg:   "+vision.JPEGDecoder()) {
		t.Errorf("runtime: exit %d\n%s", code, stdout)
	}
	if code, _, _ := embedCLI(t, "runtime", "bogus"); code != exitUsage {
		t.Errorf("runtime bogus: exit %d, want %d", code, exitUsage)
	}
}

func embedSameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRuntimeInstallAlreadyInstalled checks that `runtime install` finds an
// install in the user cache and says so without downloading.
func TestRuntimeInstallAlreadyInstalled(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the fake install is an x86-64 ELF header; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := filepath.Join(cache, "condition", "onnxruntime", ort.InstallVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	hdr[16], hdr[18] = 3, 62 // ET_DYN, EM_X86_64
	if err := os.WriteFile(filepath.Join(dir, ort.InstalledLibName()), hdr, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"version": "` + ort.InstallVersion + `", "source": "npm", "url": "onnxruntime-node@` + ort.InstallVersion + `", "size": 64}`
	if err := os.WriteFile(filepath.Join(dir, ort.ManifestName), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// An unreachable release URL and no npm: any download attempt fails.
	code, stdout, stderr := embedCLI(t, "runtime", "install", "--no-npm", "--release-url", "http://127.0.0.1:1")
	if code != 0 || !strings.Contains(stdout, "already installed") || !strings.Contains(stdout, dir) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// TestEmbedRefusesEmptyAndLongPrompts: an empty prompt is a usage error and
// a prompt over the context length an error naming its length, unless
// --truncate asks for Hugging Face's truncation.
func TestEmbedRefusesEmptyAndLongPrompts(t *testing.T) {
	orttest.Load(t)
	long := strings.Repeat("red ", 80)
	var out, errb bytes.Buffer
	if code := mainContext(context.Background(), []string{"embed", "--prompt", " "}, nil, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "empty") {
		t.Fatalf("empty prompt: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := mainContext(context.Background(), []string{"embed", "--prompt", long}, nil, &out, &errb); code != exitFailed || !strings.Contains(errb.String(), "82 tokens") {
		t.Fatalf("long prompt: exit %d: %s", code, errb.String())
	}
	errb.Reset()
	if code := mainContext(context.Background(), []string{"embed", "--truncate", "--prompt", long}, nil, &out, &errb); code != exitOK {
		t.Fatalf("long prompt with --truncate: exit %d: %s", code, errb.String())
	}
}
