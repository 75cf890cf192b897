package main

import (
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestAttendVideo: attend of a generated video at --fps 2 prints one line
// per sampled frame (7 in 3.5 s), with --json each word's peak and cell:
// "circle" peaks on the circle on the frames that show it, higher there
// than on any other frame; --heatmap writes a strip of 6 frames' sheets.
// An image with --fps is a usage error.
func TestAttendVideo(t *testing.T) {
	videotest.Need(t)
	orttest.Load(t)
	dir := t.TempDir()
	ss := circleClip(t, dir, "v.mp4")
	clip := filepath.Join(dir, "v.mp4")
	strip := filepath.Join(dir, "strip.png")
	code, stdout, errs := runCLI(t, "attend", clip, "-p", "a red circle", "--fps", "2", "--json", "--heatmap", strip)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7 (one per frame):\n%s", len(lines), stdout)
	}
	var onCircle, offCircle float32 = math.MaxFloat32, -math.MaxFloat32
	for i, l := range lines {
		var fw frameWords
		if err := json.Unmarshal([]byte(l), &fw); err != nil {
			t.Fatal(err)
		}
		if fw.Video != "v.mp4" || fw.Time != float64(i)/2 || len(fw.Words) != 2 || fw.Words[1].Word != "circle" {
			t.Fatalf("line %d: %s", i, l)
		}
		w := fw.Words[1]
		if i < 2 || i > 4 {
			offCircle = max(offCircle, w.Peak)
			continue
		}
		onCircle = min(onCircle, w.Peak)
		grid := 8 // the built-in model's patch grid
		if cov := ss[i].Coverage(64, grid); cov[1][w.Cell[0]*grid+w.Cell[1]] < 0.25 {
			t.Errorf("frame at %.1f s: circle peaks at %v, off the circle", fw.Time, w.Cell)
		}
	}
	if onCircle <= offCircle {
		t.Errorf("circle's peak is %.3f at least on the frames with the circle, up to %.3f on the others", onCircle, offCircle)
	}
	f, err := os.Open(strip)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 3*pipeline.HeatmapPanel || b.Dy()%6 != 0 || b.Dy()/6 <= pipeline.HeatmapPanel || b.Dy()/6 > 2*pipeline.HeatmapPanel {
		t.Errorf("strip %v: want 6 sheets of 3 panels one under the other", b)
	}
	code, stdout, errs = runCLI(t, "attend", clip, "-p", "a red circle", "--fps", "2", "--no-heatmap")
	if code != 0 || strings.Count(stdout, "\n") != 9 || !strings.Contains(stdout, "    1.500  ") {
		t.Errorf("table: exit %d\n%s\n%s", code, stdout, errs)
	}
	t.Logf("%s", stdout)
	if code, _, errs := runCLI(t, "attend", "../../testdata/scenes/images/scene_000.png", "-p", "a red circle", "--fps", "2"); code != 2 || !strings.Contains(errs, "--fps") {
		t.Errorf("an image with --fps: exit %d: %s", code, errs)
	}
}
