package index_test

import (
	"context"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/scenes"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// clipScene is one generated scene of a test video: its objects on a
// plain background.
func clipScene(bg [3]float64, objs ...scenes.Object) scenes.Scene {
	return scenes.Scene{Background: scenes.Background{Kind: scenes.Plain, A: bg}, Objects: objs}
}

// redCircleClip is a.mp4's scenes, two sampled frames a second: a green
// square alone (0 to 1.5 s), a red circle moving left to right beside it
// (2 to 4.5 s), then a cut to a blue triangle on another background (5 to
// 7.5 s). The circle is object 1 of its frames.
func redCircleClip() []scenes.Scene {
	grey, sand := [3]float64{128, 128, 128}, [3]float64{200, 190, 150}
	square := scenes.Object{Colour: "green", Shape: "square", RGB: [3]float64{30, 170, 50}, X: 0.25, Y: 0.75, R: 0.15}
	var out []scenes.Scene
	for range 4 {
		out = append(out, clipScene(grey, square))
	}
	for k := range 6 {
		circle := scenes.Object{Colour: "red", Shape: "circle", RGB: [3]float64{220, 30, 30}, X: 0.3 + 0.08*float64(k), Y: 0.3, R: 0.2}
		out = append(out, clipScene(grey, square, circle))
	}
	for range 6 {
		out = append(out, clipScene(sand, scenes.Object{Colour: "blue", Shape: "triangle", RGB: [3]float64{30, 70, 225}, X: 0.5, Y: 0.5, R: 0.25}))
	}
	return out
}

// makeClip encodes scenes as an H.264 video at 4 frames a second, each
// scene two frames (so that sampling at 2 a second keeps one of each).
func makeClip(t testing.TB, dir, name string, ss []scenes.Scene) string {
	var frames []image.Image
	for _, s := range ss {
		img := s.Render(64)
		frames = append(frames, img, img)
	}
	return videotest.Make(t, dir, name, frames, 4, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "12", "-movflags", "+faststart")
}

// TestSearchVideoSegments indexes two generated videos (sampled at 2
// frames a second) with the built-in model and searches for the object
// one of them shows from 2 to 4.5 s: that video's segment comes first,
// its start and end within one sample interval (0.5 s) of the truth, and
// the word "circle" peaks on a cell the circle covers at least a quarter
// of on at least 90% of its frames.
func TestSearchVideoSegments(t *testing.T) {
	videotest.Need(t)
	ctx := context.Background()
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	clip := redCircleClip()
	makeClip(t, in, "a.mp4", clip)
	other := []scenes.Scene{
		clipScene([3]float64{60, 60, 60}, scenes.Object{Colour: "yellow", Shape: "star", RGB: [3]float64{245, 220, 30}, X: 0.5, Y: 0.5, R: 0.3}),
		clipScene([3]float64{60, 60, 60}, scenes.Object{Colour: "purple", Shape: "cross", RGB: [3]float64{140, 50, 185}, X: 0.4, Y: 0.6, R: 0.3}),
	}
	makeClip(t, in, "b.mp4", append(append(other, other...), other...))
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := batch.Run(ctx, batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"x"}, Out: out, Index: true,
		Video: video.Options{FPS: 2}, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	x, err := index.Open(ctx, out, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	res, err := x.Search(ctx, eng, "a red circle", index.SearchOptions{Top: x.Rows(), Words: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) == 0 {
		t.Fatal("no segments")
	}
	seg := res.Segments[0]
	t.Logf("segments: %d; first %s %.2f-%.2f s (%d frames), best at %.2f s score %.3f", len(res.Segments), seg.Video, seg.Start, seg.End, seg.Frames, *seg.Best.Time, seg.Best.Score)
	if seg.Video != "a.mp4" {
		t.Fatalf("first segment is of %s, want a.mp4", seg.Video)
	}
	if math.Abs(seg.Start-2) > 0.5 || math.Abs(seg.End-4.5) > 0.5 {
		t.Errorf("segment %.2f-%.2f s, want 2-4.5 s within 0.5 s", seg.Start, seg.End)
	}
	if seg.Best.Video != "a.mp4" || seg.Best.Time == nil || *seg.Best.Time < seg.Start || *seg.Best.Time > seg.End || len(seg.Best.Words) != 2 {
		t.Errorf("best frame %+v: want a frame of a.mp4 inside the segment with the words red and circle", seg.Best)
	}
	pngs, unread, err := x.Sheets(ctx, eng, []index.Hit{seg.Best})
	if err != nil || unread[0] != nil || pngs[0] == nil {
		t.Errorf("the best frame's sheet: %v, %v (want it drawn over the frame read from the video)", err, unread[0])
	}
	grid := x.Grid()
	var frames, inside int
	for _, h := range res.Hits {
		if h.Video != "a.mp4" || *h.Time < seg.Start || *h.Time > seg.End {
			continue
		}
		frames++
		k := int(math.Round(*h.Time * 2))
		if !strings.HasPrefix(h.Path, "a.mp4#t=") || k < 4 || k > 9 {
			continue // a frame without the circle: counted as a miss
		}
		cov := clip[k].Coverage(64, grid.W)
		w := h.Words[1]
		if w.Word != "circle" {
			t.Fatalf("word %q, want circle", w.Word)
		}
		if cov[1][w.Cell[0]*grid.W+w.Cell[1]] >= 0.25 {
			inside++
		}
	}
	if frames != seg.Frames || float64(inside) < 0.9*float64(frames) {
		t.Errorf("the peak of circle is on the circle on %d of the segment's %d frames (%d hits in it); want at least 90%%", inside, seg.Frames, frames)
	}
	t.Logf("circle's peak on the circle on %d of %d frames", inside, frames)
}
