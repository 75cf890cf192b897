package main

import (
	"bytes"
	"fmt"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/scenes"
)

// writeSceneJPEGs writes n JPEGs of drawn scenes (textured backgrounds,
// noise, sizes from 160 to 300 pixels: activations whose ranges differ from
// one image to the next) to dir as 000.jpg, 001.jpg, ...
func writeSceneJPEGs(t *testing.T, dir string, n int) {
	t.Helper()
	g := scenes.NewGenerator(48)
	g.Variety = true
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, g.Scene(i).Render(160+i*37%141), &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.jpg", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunSameBytesWhateverTheBatch: an image's outputs are its own, at
// float32 and at int8: the same 40 JPEGs at --batch 8, at --batch 8
// without the first image (every batch shifted by one), at --batch 3, at
// --batch 5 with two workers and two encoder streams, and killed at
// --batch 8 then resumed write byte-identical files for every
// image. With activations quantized with one scale per call, int8 kept the
// bytes of a few images only.
func TestRunSameBytesWhateverTheBatch(t *testing.T) {
	rt := orttest.Load(t)
	// A cache of its own (the int8 variant is made here), with the
	// runtime found where it was.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("ONNXRUNTIME_SHARED_LIBRARY_PATH", rt.Path)
	tmp := t.TempDir()
	all, shifted := filepath.Join(tmp, "all"), filepath.Join(tmp, "shifted")
	writeSceneJPEGs(t, all, 40)
	if err := os.CopyFS(shifted, os.DirFS(all)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(shifted, "000.jpg")); err != nil {
		t.Fatal(err)
	}
	for _, prec := range []string{"fp32", "int8"} {
		t.Run(prec, func(t *testing.T) {
			args := func(in, out, batch string, more ...string) []string {
				return append([]string{"run", "--images", in, "--out", out, "--prompt", "a red circle", "--batch", batch,
					"--precision", prec, "--quiet"}, more...)
			}
			dir := filepath.Join(tmp, prec)
			ref := filepath.Join(dir, "b8")
			if out, err := program(args(all, ref, "8")...).CombinedOutput(); err != nil {
				t.Fatalf("--batch 8: %v\n%s", err, out)
			}
			want := outputs(t, ref)
			if len(want) != 40 {
				t.Fatalf("--batch 8 wrote %d files, want 40", len(want))
			}
			runs := map[string]string{} // each run's output folder, by what differs
			for _, r := range []struct {
				name, in, batch string
				more            []string
			}{
				{"--batch 8 without the first image", shifted, "8", nil},
				{"--batch 3", all, "3", nil},
				{"--batch 5, 2 workers, 2 streams", all, "5", []string{"--workers", "2", "--streams", "2"}},
			} {
				out := filepath.Join(dir, "b"+r.batch+filepath.Base(r.in))
				if b, err := program(args(r.in, out, r.batch, r.more...)...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", r.name, err, b)
				}
				runs[r.name] = out
			}
			killed := filepath.Join(dir, "killed")
			killAfter(t, program(args(all, killed, "8")...), filepath.Join(killed, "manifest.jsonl"), 9)
			if n := manifestLines(filepath.Join(killed, "manifest.jsonl")); n >= 40 {
				t.Fatalf("the job finished (%d manifest lines) before it was killed; nothing tests the resume", n)
			}
			if out, err := program(args(all, killed, "8", "--resume")...).CombinedOutput(); err != nil {
				t.Fatalf("resumed: %v\n%s", err, out)
			}
			runs["killed at --batch 8, then resumed"] = killed
			for name, out := range runs {
				got := outputs(t, out)
				same := 0
				for f, b := range want {
					if g, ok := got[f]; ok && bytes.Equal(g, b) {
						same++
					} else if strings.HasPrefix(f, "000.") && strings.Contains(name, "without") {
						same++ // not in that folder
					}
				}
				if same != len(want) {
					t.Errorf("%s: %d of %d images' outputs equal --batch 8's byte for byte", name, same, len(want))
				}
			}
		})
	}
}
