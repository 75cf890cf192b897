package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestClassify: the built-in model puts the shape a scene holds first
// (scene_004 holds a circle and a star, scene_001 a star), the softmax
// probabilities of each image sum to 1, best first; a missing label or
// image is a usage error.
func TestClassify(t *testing.T) {
	orttest.Load(t)
	dir := filepath.Join("..", "..", "testdata", "scenes", "images")
	code, out, errs := runCLI(t, "classify", filepath.Join(dir, "scene_004.png"), filepath.Join(dir, "scene_001.png"),
		"-l", "square", "-l", "circle", "-l", "star", "--template", "a {}", "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d JSON lines, want 2:\n%s", len(lines), out)
	}
	for i, want := range [][]string{{"circle", "star"}, {"star"}} {
		var r classifyReport
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for j, l := range r.Labels {
			sum += float64(l.Prob)
			if j > 0 && l.Prob > r.Labels[j-1].Prob {
				t.Errorf("%s: labels not best first: %+v", r.Image, r.Labels)
			}
			if l.Prompt != "a "+l.Label {
				t.Errorf("%s: label %q became %q", r.Image, l.Label, l.Prompt)
			}
		}
		if r.Scores != "softmax" || len(r.Labels) != 3 || math.Abs(sum-1) > 1e-5 || !strings.Contains(strings.Join(want, " "), r.Labels[0].Label) {
			t.Errorf("%s: %+v (sum %v), want one of %v first", r.Image, r, sum, want)
		}
	}
	for _, args := range [][]string{{"classify", filepath.Join(dir, "scene_004.png")}, {"classify", "-l", "star"}} {
		if code, _, errs := runCLI(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d\n%s", args, code, errs)
		}
	}
}
