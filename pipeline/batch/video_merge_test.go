package batch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestMergeVideoJob: a job split in 3 shards over images and two videos,
// sampled at 2 frames/s, merges into one manifest with every frame, the
// videos counted as inputs found (not missing, their frames not unexpected,
// whatever the sampling); a video no shard reported is missing; with one
// shard's manifest gone, the merge says which shard and writes nothing.
func TestMergeVideoJob(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 4)
	videotest.Make(t, in, "v.mp4", videotest.Frames(20, 64, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	videotest.Make(t, in, "w.mp4", videotest.Frames(12, 64, 64), 4, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	out := filepath.Join(t.TempDir(), "out")
	eng := tinyEngine(t, openTiny(t), pipeline.Options{})
	done := 0
	for i := range 3 {
		sum, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"red"}, Out: out, Shard: Shard{Index: i, Count: 3}, Video: video.Options{FPS: 2}})
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		done += sum.Done
	}
	// 4 images, v.mp4's 4 frames (2 s at 2 frames/s), w.mp4's 6.
	if done != 14 {
		t.Fatalf("%d done over the shards, want 14", done)
	}
	rep, err := Merge(context.Background(), out, []string{in})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Out == "" || rep.Images != 14 || rep.OK != 14 || len(rep.Missing)+len(rep.Unexpected)+len(rep.MissingShards) != 0 {
		t.Fatalf("merge: %+v; want 14 ok, nothing missing or unexpected, the manifest written", rep)
	}
	b, err := os.ReadFile(rep.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"path":"v.mp4#t=1.000000"`, `"path":"w.mp4#t=2.000000"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("merged manifest lacks %s:\n%s", want, b)
		}
	}
	os.Remove(rep.Out)
	// A video no shard reported is missing (by its own name).
	videotest.Make(t, in, "x.mp4", videotest.Frames(4, 64, 64), 4, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	if rep, err = Merge(context.Background(), out, []string{in}); err != nil || rep.Out != "" || fmt.Sprint(rep.Missing) != "[x.mp4]" || len(rep.Unexpected) != 0 {
		t.Fatalf("merge with a new video: %v, %+v; want x.mp4 missing, nothing written", err, rep)
	}
	os.Remove(filepath.Join(in, "x.mp4"))
	os.Remove(filepath.Join(out, "manifest-1-of-3.jsonl"))
	rep, err = Merge(context.Background(), out, []string{in})
	if err != nil || rep.Out != "" || len(rep.MissingShards) != 1 || rep.MissingShards[0] != 1 {
		t.Fatalf("merge without shard 1: %v, %+v", err, rep)
	}
}
