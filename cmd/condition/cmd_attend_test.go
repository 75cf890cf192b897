package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

func TestAttendJSONAndHeatmap(t *testing.T) {
	orttest.Load(t)
	heat := filepath.Join(t.TempDir(), "h.png")
	var out, errb bytes.Buffer
	code := mainContext(context.Background(), []string{"attend", "--model", "../../testdata/tinyclip", "--prompt", "a red circle",
		"--heatmap", heat, "--json", "../../testdata/images/src/png_224x224.png"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r attendReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	p := r.Grid[0] * r.Grid[1]
	if p != 16 || len(r.TextToImage) != len(r.Tokens)*p || len(r.ImageToText) != p*len(r.Tokens) {
		t.Fatalf("grid %v, %d tokens, maps %d and %d", r.Grid, len(r.Tokens), len(r.TextToImage), len(r.ImageToText))
	}
	// "a" is a stop word: the words listed are the content words.
	if len(r.Words) != 2 || r.Words[0].Word != "red" || r.Words[1].Word != "circle" || len(r.Words[0].Patches) != 3 {
		t.Fatalf("words %+v", r.Words)
	}
	if len(r.Regions) != 9 {
		t.Fatalf("%d regions", len(r.Regions))
	}
	// The top patch printed for a word is the argmax of its row of the
	// token–patch cosines (the joint space's scale).
	if r.Scale != "cosine" || len(r.Similarity) != len(r.Tokens)*p {
		t.Fatalf("scale %q, %d similarities", r.Scale, len(r.Similarity))
	}
	red := make([]float32, p)
	span := r.Words[0].Tokens
	for tok := span[0]; tok < span[1]; tok++ {
		for j := range p {
			red[j] += r.Similarity[tok*p+j] / float32(span[1]-span[0])
		}
	}
	best, arg := float32(-1), 0
	for j, v := range red {
		if v > best {
			best, arg = v, j
		}
	}
	if got := r.Words[0].Patches[0]; math.Abs(float64(got.Weight-best)) > 1e-6 || got.Name != string(rune('0'+arg/4))+","+string(rune('0'+arg%4)) {
		t.Fatalf("top patch of red %+v, argmax %d (%v)", got, arg, best)
	}
	f, err := os.Open(heat)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != 3*224 {
		t.Fatalf("heatmap: %v %v", err, img.Bounds())
	}
	if code := mainContext(context.Background(), []string{"attend", "--model", "../../testdata/tinyclip", "x.png"}, nil, &out, &errb); code != exitUsage {
		t.Fatalf("no prompt: exit %d", code)
	}
}

// TestAttendWindowsJSON: --windows on a 3:1 image gives a grid three times
// as wide as high, maps of that many cells, "windows": true, and a heatmap.
func TestAttendWindowsJSON(t *testing.T) {
	orttest.Load(t)
	dir := t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, 192, 64))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*5 + i/768)
	}
	p := filepath.Join(dir, "wide.png")
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	heat := filepath.Join(dir, "h.png")
	code, stdout, stderr := runCLI(t, "attend", p, "-p", "a red circle", "--windows", "--json", "--heatmap", heat)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r attendReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Windows || r.Grid[1] != 3*r.Grid[0] || len(r.TextToImage) != len(r.Tokens)*r.Grid[0]*r.Grid[1] {
		t.Errorf("windows %v, grid %v, %d map values for %d tokens", r.Windows, r.Grid, len(r.TextToImage), len(r.Tokens))
	}
	if _, err := os.Stat(heat); err != nil {
		t.Error(err)
	}
}

// TestAttendPromptWithNothingToMap: a prompt of stop words only has no map
// to print or draw: a usage error naming it, before any work, not an empty
// report and a heatmap silently not written.
func TestAttendPromptWithNothingToMap(t *testing.T) {
	orttest.Load(t)
	img := filepath.Join("..", "..", "testdata", "scenes", "images", "scene_004.png")
	heatmap := filepath.Join(t.TempDir(), "h.png")
	code, out, errs := runCLI(t, "attend", img, "-p", "a red star", "-p", "a the of", "--heatmap", heatmap)
	if code != exitUsage || !strings.Contains(errs, `--prompt 1 "a the of" has no word to map`) || out != "" {
		t.Errorf("exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := runCLI(t, "attend", img, "-p", "a red star", "--heatmap", heatmap); code != exitOK || !strings.Contains(out, "heatmap: "+heatmap) {
		t.Errorf("a prompt with words to map: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestAttendMissingInputs: a missing image, or a --model that is neither a
// folder nor a hub id, is a usage error (exit 2) naming it, before the model
// is loaded.
func TestAttendMissingInputs(t *testing.T) {
	img := filepath.Join("..", "..", "testdata", "scenes", "images", "scene_004.png")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"attend", filepath.Join(t.TempDir(), "gone.png"), "-p", "red"}, "gone.png: no such file"},
		{[]string{"attend", img, "--model", filepath.Join(t.TempDir(), "nomodel"), "-p", "red"}, "--model: models: no folder"},
		{[]string{"classify", filepath.Join(t.TempDir(), "gone.png"), "-l", "red"}, "gone.png: no such file"},
	} {
		if code, _, errs := runCLI(t, c.args...); code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d\n%s", c.args, code, errs)
		}
	}
}
