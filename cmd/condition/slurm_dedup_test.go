package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/slurmtest"
)

// TestSlurmDedup runs the dedup script of docs/scale-out.md, verbatim, as
// a job array of 4 shares over a job's index (the scenes and three byte
// copies of them), and merges the parts: groups.jsonl, keep.txt,
// drop.txt and the pictures are byte for byte those of condition dedup
// over the whole index.
func TestSlurmDedup(t *testing.T) {
	c := slurmtest.Start(t)
	root := moduleRoot(t)
	script := docBlockUnder(t, filepath.Join(root, "docs", "scale-out.md"), "### Near-duplicates over a job array")
	dir := t.TempDir()
	bin := buildCondition(t, root, dir)
	scriptPath := filepath.Join(dir, "condition-dedup.sbatch")
	if err := os.WriteFile(scriptPath, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images")
	if err := os.CopyFS(images, os.DirFS(filepath.Join(root, "testdata", "scenes", "images"))); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(images)
	for _, e := range ents[:3] {
		b, _ := os.ReadFile(filepath.Join(images, e.Name()))
		os.WriteFile(filepath.Join(images, "copy-"+e.Name()), b, 0o644)
	}
	out, parts := filepath.Join(dir, "features"), filepath.Join(dir, "parts")
	runBin(t, bin, "run", "--images", images, "-p", "x", "--index", "--shard-size", "8", "--out", out)
	args := []string{"--threshold", "0.9", "--block-rows", "2"}
	id, err := c.Submit([]string{"CONDITION=" + bin, "INDEX=" + out, "PARTS=" + parts},
		append([]string{"--chdir=" + dir, "--array=0-3", "--cpus-per-task=1", scriptPath}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Wait(id, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checkTasks(t, tasks, map[string]string{"0": "0:0", "1": "0:0", "2": "0:0", "3": "0:0"})
	var dirs []string
	for i := range 4 {
		d := filepath.Join(parts, fmt.Sprintf("part-%d", i))
		var p struct{ Share, Shares int }
		b, err := os.ReadFile(filepath.Join(d, "dedup-part.json"))
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || p.Share != i || p.Shares != 4 {
			t.Errorf("task %d's part: share %d of %d (%v), want %d of 4", i, p.Share, p.Shares, err, i)
		}
		dirs = append(dirs, d)
	}
	merged, whole := filepath.Join(dir, "merged"), filepath.Join(dir, "whole")
	runBin(t, bin, append([]string{"merge", "--out", merged}, dirs...)...)
	runBin(t, bin, append([]string{"dedup", out, "--out", whole}, args...)...)
	for _, f := range []string{"groups.jsonl", "keep.txt", "drop.txt", "nn-histogram.json", "nn-histogram.png", "groups.png", "near-threshold.png"} {
		a, err1 := os.ReadFile(filepath.Join(whole, f))
		b, err2 := os.ReadFile(filepath.Join(merged, f))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: merged parts %q (%v), whole search %q (%v)", f, b, err2, a, err1)
		}
	}
	if drop, _ := os.ReadFile(filepath.Join(whole, "drop.txt")); bytes.Count(drop, []byte("\n")) < 3 {
		t.Errorf("drop.txt %q: want at least the 3 byte copies", drop)
	}
}

// runBin runs the built program and fails the test on a non-zero exit.
func runBin(t *testing.T, bin string, args ...string) {
	t.Helper()
	if b, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("condition %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// docBlockUnder returns the first sh block after the heading line in the
// page doc.
func docBlockUnder(t *testing.T, doc, heading string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	h := slices.Index(lines, heading)
	if h < 0 {
		t.Fatalf("%s: no heading %q", doc, heading)
	}
	start := h + 1
	for start < len(lines) && lines[start] != "```sh" {
		start++
	}
	for end := start + 1; end < len(lines); end++ {
		if lines[end] == "```" {
			return strings.Join(lines[start+1:end], "\n") + "\n"
		}
	}
	t.Fatalf("%s: no whole sh block under %q", doc, heading)
	return ""
}
