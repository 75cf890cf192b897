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
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestQueryVideoSegments: query over the index of a generated video
// prints, after the hits (frames, with their video and time), the segment
// of the frames that show the object (1 to 2 s, sampled at 2 a second),
// its best frame's sheet drawn over the frame itself; the table lists it.
func TestQueryVideoSegments(t *testing.T) {
	videotest.Need(t)
	orttest.Load(t)
	in := t.TempDir()
	circleClip(t, in, "v.mp4")
	out := filepath.Join(t.TempDir(), "out")
	if code, _, errs := runCLI(t, "run", "--images", in, "-p", "x", "--index", "--fps", "2", "--out", out, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	heat := filepath.Join(t.TempDir(), "heat")
	code, stdout, errs := runCLI(t, "query", out, "-p", "a red circle", "--top", "3", "--json", "--heatmap-dir", heat)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var hits, segs []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if _, ok := m["segment"]; ok {
			segs = append(segs, m)
		} else {
			hits = append(hits, m)
		}
	}
	if len(hits) != 3 || len(segs) == 0 {
		t.Fatalf("%d hits and %d segments, want 3 and at least 1:\n%s", len(hits), len(segs), stdout)
	}
	for _, h := range hits {
		if h["video"] != "v.mp4" || h["time"] == nil {
			t.Errorf("hit %v: want v.mp4 and a time", h["path"])
		}
	}
	s := segs[0]
	start, end := s["start"].(float64), s["end"].(float64)
	if s["video"] != "v.mp4" || s["segment"] != 1.0 || math.Abs(start-1) > 0.5 || math.Abs(end-2) > 0.5 {
		t.Errorf("segment %v %v-%v s (rank %v), want v.mp4 1-2 s within 0.5 s", s["video"], start, end, s["segment"])
	}
	f, err := os.Open(s["heatmap"].(string))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("%s: %v", s["heatmap"], err)
	}
	if strings.Contains(errs, "plain panel") {
		t.Errorf("a sheet over a plain panel (the frame should be read from the video):\n%s", errs)
	}
	code, stdout, errs = runCLI(t, "query", out, "-p", "a red circle", "--top", "3")
	if code != 0 || !strings.Contains(stdout, "segments:") || !strings.Contains(stdout, "v.mp4  ") {
		t.Errorf("table: exit %d\n%s\n%s", code, stdout, errs)
	}
	t.Logf("%s", stdout)
}
