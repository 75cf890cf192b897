package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/tensorio"
)

// TestOutWritesTheFormatItsExtensionNames: embed --out F.npz writes an npz
// holding the arrays F.safetensors holds, preprocess --out F.safetensors a
// safetensors file holding the pixel_values F.npy holds; an extension
// neither writes is a usage error naming the ones they do, before any work.
func TestOutWritesTheFormatItsExtensionNames(t *testing.T) {
	orttest.Load(t)
	img := filepath.Join("..", "..", "testdata", "scenes", "images", "scene_001.png")
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	for _, f := range []string{"e.safetensors", "e.npz"} {
		if code, _, errs := runCLI(t, "embed", "--prompt", "a red circle", img, "--out", out(f)); code != exitOK {
			t.Fatalf("embed --out %s: exit %d\n%s", f, code, errs)
		}
	}
	st, _, err := tensorio.ReadSafetensors(out("e.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	npz, err := tensorio.ReadNPZ(out("e.npz"))
	if err != nil {
		t.Fatalf("embed --out e.npz: %v", err)
	}
	if len(npz) != len(st) || len(st) < 5 {
		t.Errorf("npz holds %d arrays, safetensors %d", len(npz), len(st))
	}
	for name, a := range st {
		b, ok := npz[name]
		if !ok || b.DType != a.DType || !slices.Equal(b.Shape, a.Shape) {
			t.Errorf("%s: npz %v %v, safetensors %v %v", name, b.DType, b.Shape, a.DType, a.Shape)
		}
	}
	for _, f := range []string{"x.npy", "x.safetensors"} {
		if code, _, errs := runCLI(t, "preprocess", "--out", out(f), img); code != exitOK {
			t.Fatalf("preprocess --out %s: exit %d\n%s", f, code, errs)
		}
	}
	npy, err := tensorio.ReadNPY(out("x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	px, _, err := tensorio.ReadSafetensors(out("x.safetensors"))
	if err != nil {
		t.Fatalf("preprocess --out x.safetensors: %v", err)
	}
	a, _ := npy.Float32()
	b, err := px["pixel_values"].Float32()
	if err != nil || !slices.Equal(px["pixel_values"].Shape, npy.Shape) || len(a) != len(b) {
		t.Fatalf("pixel_values: %v %v, the npy %v", px["pixel_values"].Shape, err, npy.Shape)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("pixel_values[%d]: %g in the safetensors file, %g in the npy", i, b[i], a[i])
		}
	}
	for _, c := range [][]string{
		{"embed", "--prompt", "x", img, "--out", out("e.npy")},
		{"embed", "--prompt", "x", img, "--out", out("e.json")},
		{"preprocess", "--out", out("x.npz"), img},
	} {
		code, _, errs := runCLI(t, c...)
		if code != exitUsage || !strings.Contains(errs, "want .") {
			t.Errorf("%v: exit %d\n%s", c, code, errs)
		}
	}
}

// TestRunInputsWithOneName: two inputs that would write under one name in
// the output (files or folders with the same last name) are a usage error
// naming both, before any work, not one of them failing in the job.
func TestRunInputsWithOneName(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/x.png", "b/x.png", "c/photos/y.png", "d/photos/y.png"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte("not read"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	for _, pair := range [][2]string{{"a/x.png", "b/x.png"}, {"c/photos", "d/photos"}} {
		code, _, errs := runCLI(t, "run", "--images", filepath.Join(dir, pair[0]), "--images", filepath.Join(dir, pair[1]), "-p", "red", "--out", out)
		if code != exitUsage || !strings.Contains(errs, "would both write under") {
			t.Errorf("%v: exit %d\n%s", pair, code, errs)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output folder was made: %v", err)
	}
}
