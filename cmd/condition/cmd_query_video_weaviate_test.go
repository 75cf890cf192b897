package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestQueryVideoSegmentsWeaviate: `query weaviate://...` over a job of a
// generated video prints the segments `query` prints over the same job's
// file index (video, start, end, frames, best frame), each with its best
// frame's sheet.
func TestQueryVideoSegmentsWeaviate(t *testing.T) {
	videotest.Need(t)
	orttest.Load(t)
	node := weaviatetest.Start(t)
	in := t.TempDir()
	circleClip(t, in, "v.mp4")
	out := filepath.Join(t.TempDir(), "out")
	url := "weaviate://" + node.Host() + "/Clip"
	for _, args := range [][]string{
		{"--index", "--index-dtype", "float32", "--out", out},
		{"--index", url, "--out", filepath.Join(t.TempDir(), "wout")},
	} {
		args = append([]string{"run", "--images", in, "-p", "x", "--fps", "2", "--quiet"}, args...)
		if code, _, errs := runCLI(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
	}
	segments := func(where string) []querySegment {
		t.Helper()
		code, stdout, errs := runCLI(t, "query", where, "-p", "a red circle", "--top", "3", "--json", "--heatmap-dir", t.TempDir())
		if code != 0 {
			t.Fatalf("query %s: exit %d: %s", where, code, errs)
		}
		var segs []querySegment
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var s querySegment
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			if s.SegmentRank > 0 {
				segs = append(segs, s)
			}
		}
		return segs
	}
	want, got := segments(out), segments(url)
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d segments from %s, %d from the file index", len(got), url, len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.Video != w.Video || g.Start != w.Start || g.End != w.End || g.Frames != w.Frames || g.Best.Path != w.Best.Path || g.Heatmap == "" {
			t.Errorf("segment %d: %s %v-%v s (%d frames, best %s, sheet %q); the file index: %s %v-%v s (%d frames, best %s)",
				i+1, g.Video, g.Start, g.End, g.Frames, g.Best.Path, g.Heatmap, w.Video, w.Start, w.End, w.Frames, w.Best.Path)
		}
		t.Logf("segment %d: %s %.2f-%.2f s (%d frames), best %s", i+1, g.Video, g.Start, g.End, g.Frames, g.Best.Path)
	}
}
