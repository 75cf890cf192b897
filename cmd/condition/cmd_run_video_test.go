package main

import (
	"encoding/json"
	"image"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestRunVideoFlags: --fps and --frames reach the job: a 3 s video at 10
// frames per second gives 6 items at --fps 2 and its 3 key frames (one
// every 10) with --frames keyframes, each named VIDEO#t=SECONDS.
func TestRunVideoFlags(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	videotest.Make(t, in, "v.mp4", videotest.Frames(30, 64, 48), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "10", "-sc_threshold", "0")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--fps", "2"}, []string{"0.000000", "0.500000", "1.000000", "1.500000", "2.000000", "2.500000"}},
		{[]string{"--frames", "keyframes"}, []string{"0.000000", "1.000000", "2.000000"}},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, errs := runCLI(t, append([]string{"run", "--images", in, "--out", out, "-p", "a yellow square", "--quiet"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", c.args, code, errs)
		}
		b, err := os.ReadFile(filepath.Join(out, "manifest.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e struct {
				Path, Video, Status string
				Time                *float64
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatal(err)
			}
			if e.Status != "ok" || e.Video != "v.mp4" || e.Time == nil {
				t.Fatalf("%v: entry %s", c.args, l)
			}
			got = append(got, strings.TrimPrefix(e.Path, "v.mp4#t="))
		}
		sort.Strings(got) // the manifest is in the order items finish
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%v: frames at %v, want %v", c.args, got, c.want)
		}
	}
}

// TestRuntimeNamesFFmpeg: condition runtime says where ffmpeg is.
func TestRuntimeNamesFFmpeg(t *testing.T) {
	ff := videotest.Need(t)
	code, out, errs := runCLI(t, "runtime")
	if code != 0 {
		t.Skipf("no ONNX Runtime here: exit %d\n%s", code, errs)
	}
	if !strings.Contains(out, "ffmpeg: "+ff) {
		t.Fatalf("runtime does not name %s:\n%s", ff, out)
	}
	code, out, _ = runCLI(t, "runtime", "--json")
	var r struct {
		FFmpeg struct {
			Found  bool
			FFmpeg string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !r.FFmpeg.Found || r.FFmpeg.FFmpeg != ff {
		t.Fatalf("runtime --json: exit %d, ffmpeg %+v\n%s", code, r.FFmpeg, out)
	}
}

// TestRunVideoScene: --frames scene keeps the first frame and the frame of
// a cut (at 1 s, from a green square on grey to a blue triangle on beige);
// a threshold outside (0, 1) is a usage error naming --frames.
func TestRunVideoScene(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	a := scenes.Scene{Background: scenes.Background{Kind: scenes.Plain, A: [3]float64{128, 128, 128}},
		Objects: []scenes.Object{{Colour: "green", Shape: "square", RGB: [3]float64{30, 170, 50}, X: 0.3, Y: 0.6, R: 0.15}}}.Render(64)
	b := scenes.Scene{Background: scenes.Background{Kind: scenes.Plain, A: [3]float64{200, 190, 150}},
		Objects: []scenes.Object{{Colour: "blue", Shape: "triangle", RGB: [3]float64{30, 70, 225}, X: 0.5, Y: 0.5, R: 0.25}}}.Render(64)
	var frames []image.Image
	for k := range 20 {
		frames = append(frames, map[bool]image.Image{true: a, false: b}[k < 10])
	}
	videotest.Make(t, in, "cut.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := runCLI(t, "run", "--images", in, "--out", out, "-p", "a blue triangle", "--quiet", "--frames", "scene")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(manifestBytes(t, out))), "\n") {
		var e struct{ Path string }
		json.Unmarshal([]byte(l), &e)
		got = append(got, e.Path)
	}
	sort.Strings(got)
	if strings.Join(got, " ") != "cut.mp4#t=0.000000 cut.mp4#t=1.000000" {
		t.Fatalf("frames %v, want those at 0 and 1 s", got)
	}
	code, _, errs = runCLI(t, "run", "--images", in, "--out", out, "-p", "x", "--frames", "scene:1.5")
	if code != 2 || !strings.Contains(errs, "--frames") || !strings.Contains(errs, "between 0 and 1") {
		t.Fatalf("--frames scene:1.5: exit %d\n%s", code, errs)
	}
}

// manifestBytes reads the manifest of the job at out.
func manifestBytes(t *testing.T, out string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
