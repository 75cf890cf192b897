package apicheck

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// goBlock is the README's first Go block, the library example.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestREADMEExample builds and runs the README's library example as a
// program of its own, so that it never stops compiling or starts printing
// something else: where each word of "a yellow circle and a red star"
// peaks (yellow and circle on the circle, red and star on the star, as the
// heatmap shows), the best label, and the sheet written as a PNG.
func TestREADMEExample(t *testing.T) {
	orttest.Load(t)
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := goBlock.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block")
	}
	// The block starts at its imports: a package clause makes it a program.
	dir, err := os.MkdirTemp(".", "readme-example-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), append([]byte("package main\n\n"), m[1]...), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "testdata", "scenes", "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	scene, err := os.ReadFile(filepath.Join(root, "testdata", "scenes", "images", "scene_004.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "testdata", "scenes", "images", "scene_004.png"), scene, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(work, "example")
	build := exec.Command(goCommand(t), "build", "-o", exe, "./"+filepath.Base(dir))
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README's example does not build: %v\n%s", err, out)
	}
	run := exec.Command(exe)
	run.Dir = work
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("the README's example fails: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	cells := map[string][2]int{}
	var best string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		f := strings.Fields(line)
		switch len(f) {
		case 4:
			var rc [2]int
			for i := range 2 {
				if _, err := fmt.Sscan(f[1+i], &rc[i]); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
			}
			cells[f[0]] = rc
		case 2:
			best = f[0]
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if len(cells) != 4 {
		t.Fatalf("words %v, want yellow, circle, red and star", cells)
	}
	// The circle is in the lower half of scene_004, the star in the upper.
	if cells["yellow"][0] < 4 || cells["circle"][0] < 4 || cells["red"][0] >= 4 || cells["star"][0] >= 4 {
		t.Errorf("peak cells %v: want yellow and circle on the circle (lower half), red and star on the star (upper half)", cells)
	}
	if best != "circle" {
		t.Errorf("best label %q, want circle (printed:\n%s)", best, stdout.String())
	}
	f, err := os.Open(filepath.Join(work, "where.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cfg, err := png.DecodeConfig(f); err != nil || cfg.Height < 224 || cfg.Width != 5*224 {
		t.Errorf("where.png: %dx%d, %v; want a sheet of the image and one 224-pixel panel for each of the 4 words", cfg.Width, cfg.Height, err)
	}
}
