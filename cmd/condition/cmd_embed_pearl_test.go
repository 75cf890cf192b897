package main

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestEmbedPEARL: --readout pearl changes patch_embeds (from raw's and
// ClearCLIP's) and not patch_states, and is recorded in the metadata; a
// SigLIP 2 model refuses it, naming the families that take it; an unknown
// readout's usage error lists it.
func TestEmbedPEARL(t *testing.T) {
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
	raw, _ := read("raw")
	clear, _ := read("clearclip")
	pearl, meta := read("pearl")
	if meta["readout"] != "pearl" {
		t.Errorf("readout metadata %q, want pearl", meta["readout"])
	}
	if !slices.Equal(raw["patch_states"].Data.([]float32), pearl["patch_states"].Data.([]float32)) {
		t.Error("the readout changed patch_states")
	}
	for name, other := range map[string]map[string]tensorio.Tensor{"raw": raw, "clearclip": clear} {
		if slices.Equal(other["patch_embeds"].Data.([]float32), pearl["patch_embeds"].Data.([]float32)) {
			t.Errorf("pearl's patch_embeds equal %s's", name)
		}
	}
	code, _, stderr := embedCLI(t, "embed", "--model", tinyNaFlexDir, "--threads", "1", "--readout", "pearl",
		filepath.Join(tinyclipDir, "golden", "images", "square.png"))
	if code == 0 || !strings.Contains(stderr, "readout pearl") || !strings.Contains(stderr, "CLIP and MetaCLIP 2") {
		t.Errorf("SigLIP 2 with --readout pearl: exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = embedCLI(t, "embed", "--model", tinyclipDir, "--readout", "dense", img)
	if code != exitUsage || !strings.Contains(stderr, "pearl") {
		t.Errorf("--readout dense: exit %d, stderr %s", code, stderr)
	}
}

// TestEmbedMetaCLIP2PEARL: embed --readout pearl on the tiny MetaCLIP 2
// gives patch_embeds equal to the torch float64 transcription
// (scripts/pyclip/pearl_reference.py, on generate.py's pixel values) to a
// cosine of 0.99999 per patch and within 5e-5.
func TestEmbedMetaCLIP2PEARL(t *testing.T) {
	orttest.Load(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out := filepath.Join(t.TempDir(), "emb.safetensors")
	code, _, stderr := embedCLI(t, "embed", "--model", tinyMetaCLIP2Dir, "--threads", "1", "--out", out, "--readout", "pearl",
		filepath.Join(tinyMetaCLIP2Dir, "golden", "images", "wide.png"), filepath.Join(tinyMetaCLIP2Dir, "golden", "images", "tall.png"))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	ts, meta, err := tensorio.ReadSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	if meta["readout"] != "pearl" {
		t.Errorf("readout metadata %q, want pearl", meta["readout"])
	}
	got, want := asF64(t, ts["patch_embeds"]), asF64(t, metaclip2Golden(t, "readout_pearl_patch_embeds"))
	if len(got) != len(want) {
		t.Fatalf("patch_embeds: %d values, torch has %d", len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		worst = max(worst, math.Abs(got[i]-want[i]))
	}
	cos := minCosine(got, want, 16)
	t.Logf("max |diff| %.2e, smallest cosine %.9f", worst, cos)
	if !(cos >= 0.99999) || !(worst <= 5e-5) {
		t.Errorf("patch_embeds against torch's: max |diff| %.2e (want ≤ 5e-5), smallest cosine %.7f (want ≥ 0.99999)", worst, cos)
	}
}
