package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/vecscenes"
	"github.com/conditionhq/condition/tensorio"
)

var root = filepath.Join("..", "..")

// written runs evaldata and reads back its scenes' coverage and the shape of
// its pixels.npy.
func written(t *testing.T, args ...string) ([][][]float64, []int) {
	t.Helper()
	out := t.TempDir()
	if err := run(append(args, "-out", out)); err != nil {
		t.Fatal(err)
	}
	px, err := tensorio.ReadNPY(filepath.Join(out, "pixels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "scenes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var covs [][][]float64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct {
			Coverage [][]float64 `json:"coverage"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		covs = append(covs, r.Coverage)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return covs, px.Shape
}

// TestCoverage: the coverage evaldata writes is the one cmd/internal/eval
// measures with (vecscenes.Scene.Coverage): the whole image's for tinysiglip's
// SiglipImageProcessor (32×32, patch 8: a 4×4 grid), the centre crop's for the
// built-in CLIP (64×64 crop, patch 8: an 8×8 grid). The two differ on scenes
// that are not square, so writing the other one fails.
func TestCoverage(t *testing.T) {
	const n, seed = 12, 2002
	g := vecscenes.Generator{Seed: seed, Objects: 2}
	for _, c := range []struct {
		name, config string
		side, grid   int
		want         func(s vecscenes.Scene) [][]float64
		other        func(s vecscenes.Scene) [][]float64
	}{
		{"SigLIP", filepath.Join(root, "testdata", "tinysiglip", "preprocessor_config.json"), 32, 4,
			func(s vecscenes.Scene) [][]float64 { return s.StretchCoverage(4) },
			func(s vecscenes.Scene) [][]float64 { return s.CropCoverage(32, 4) }},
		{"CLIP", filepath.Join(root, "models", "embedded", "model", "preprocessor_config.json"), 64, 8,
			func(s vecscenes.Scene) [][]float64 { return s.CropCoverage(64, 8) },
			func(s vecscenes.Scene) [][]float64 { return s.StretchCoverage(8) }},
	} {
		covs, shape := written(t, "-seed", "2002", "-objects", "2", "-n", "12", "-patch", "8", "-preprocessor", c.config)
		if want := []int{n, 3, c.side, c.side}; !slices.Equal(shape, want) {
			t.Errorf("%s: pixels.npy %v, want %v", c.name, shape, want)
		}
		if len(covs) != n {
			t.Fatalf("%s: %d scenes in scenes.jsonl, want %d", c.name, len(covs), n)
		}
		differ := 0
		for i, got := range covs {
			s := g.Scene(i)
			if want := c.want(s); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: scene %d (%dx%d): coverage %v, want %v", c.name, i, s.W, s.H, got, want)
			}
			if !reflect.DeepEqual(got, c.other(s)) {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("%s: the coverage of all %d scenes is also the other preprocessing's: the test cannot tell them apart", c.name, n)
		}
	}
}

// TestRefused: preprocessing the coverage cannot follow is an error naming
// the file, before anything is written.
func TestRefused(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "preprocessor_config.json")
	if err := os.WriteFile(config, []byte(`{"image_processor_type": "SiglipImageProcessor", "size": {"height": 32, "width": 48}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	err := run([]string{"-n", "2", "-preprocessor", config, "-out", out})
	if err == nil || !strings.Contains(err.Error(), config) || !strings.Contains(err.Error(), "32x48") {
		t.Errorf("a 32x48 resize: error %v, want one naming %s and the size", err, config)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Errorf("%s written for a refused preprocessing", out)
	}
}
