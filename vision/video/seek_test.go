package video

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/vision/video/videotest"
)

// seekPlanOf probes video as a decode at o's rate does and returns its
// plan (nil: decoded in order).
func seekPlanOf(t *testing.T, video string, o Options) *seekPlan {
	t.Helper()
	p, err := Find(o)
	if err != nil {
		t.Fatal(err)
	}
	_, plan, err := probeSeek(context.Background(), p, video, video, o)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestVideoSeekExact decodes generated 10 frames/s videos at a rate from
// key frames and checks every frame against ffprobe's pts and ffmpeg's
// PNG of it, and against the decode of every frame in order (NoSeek),
// byte for byte: H.264 with B-frames and a key frame every second (the
// samples on key frames), with key frames one frame after each sample
// (each sample just before a key frame, decoded from the one before),
// with an audio track, and VP9; an open GOP's are decoded in order.
func TestVideoSeekExact(t *testing.T) {
	dir := t.TempDir()
	frames := videotest.Frames(100, 96, 64)
	x264 := []string{"-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "3"}
	cases := []struct {
		name  string
		video string
		fps   float64
		seeks int // 1: a plan of several runs is expected, 0: none
	}{
		{"on-key", videotest.Make(t, dir, "k.mp4", frames, 10, append(x264, "-g", "10")...), 0.5, 1},
		// Key frames at frames 1, 11, 21, ...: the samples at 0, 4 and 8 s
		// (frames 0, 40, 80) come just before the key frames 41 and 81,
		// and are decoded from 31 and 71.
		{"before-key", videotest.Make(t, dir, "b.mp4", frames, 10, append(x264, "-g", "1000", "-force_key_frames", "expr:eq(mod(n,10),1)")...), 0.25, 1},
		{"open-gop", videotest.Make(t, dir, "o.mp4", frames, 10, append(x264, "-g", "10", "-x264-params", "open-gop=1")...), 0.5, 0},
		{"vp9", videotest.Make(t, dir, "v.webm", frames, 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-g", "10"), 0.5, 1},
	}
	withAudio := filepath.Join(dir, "a.mp4")
	videotest.Run(t, "-i", cases[0].video, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=10",
		"-map", "0:v", "-map", "1:a", "-c:v", "copy", "-c:a", "aac", withAudio)
	cases = append(cases, struct {
		name  string
		video string
		fps   float64
		seeks int
	}{"audio", withAudio, 0.5, 1})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{FPS: c.fps}
			plan := seekPlanOf(t, c.video, o)
			if (plan != nil) != (c.seeks == 1) {
				t.Fatalf("plan %+v: want seeking %v", plan, c.seeks)
			}
			if plan != nil {
				t.Logf("%d runs for %d samples: %+v", len(plan.runs), len(plan.samples), plan.runs)
			}
			newReference(t, c.video).check(t, o)
			got, _ := decodeAll(t, c.video, o)
			in, _ := decodeAll(t, c.video, Options{FPS: c.fps, NoSeek: true})
			if len(got) != len(in) {
				t.Fatalf("%d frames seeking, %d in order", len(got), len(in))
			}
			for i := range got {
				if got[i].PTS != in[i].PTS || got[i].Index != in[i].Index || !bytes.Equal(got[i].Image.Pix, in[i].Image.Pix) {
					t.Fatalf("frame %d (pts %d): differs from the frame decoded in order (pts %d)", i, got[i].PTS, in[i].PTS)
				}
			}
		})
	}
}

// TestPlanSeek checks the plan of a 30 frames/s stream (time base 1/30)
// with a key frame every 2 s, sampled at 1 frame a second: the samples
// at 0, 1 and 2 s, ...; a run from each key frame to the sample after it,
// since jumping from the sample at 1 s to the key frame at 2 s skips 29
// frames.
func TestPlanSeek(t *testing.T) {
	mk := func(n, gop int) []packet {
		var pk []packet
		for i := range n {
			pk = append(pk, packet{stream: 0, pts: int64(i), dts: int64(i), hasPTS: true, hasDTS: true, key: i%gop == 0})
			if i%5 == 0 { // an audio packet (time base 1/1000) 200 ms ahead of the video
				pk = append(pk, packet{stream: 1, pts: int64(i*1000/30 + 200), dts: int64(i*1000/30 + 200), hasPTS: true, hasDTS: true})
			}
		}
		return pk
	}
	tbs := map[int][2]int64{0: {1, 30}, 1: {1, 1000}}
	plan, ok := planSeek(mk(180, 60), 0, tbs, 1, seekGap)
	if !ok {
		t.Fatal("no plan for key frames 2 s apart")
	}
	want := []int64{0, 30, 60, 90, 120, 150}
	if len(plan.samples) != len(want) {
		t.Fatalf("samples %v, want %v", plan.samples, want)
	}
	for i := range want {
		if plan.samples[i] != want[i] {
			t.Fatalf("samples %v, want %v", plan.samples, want)
		}
	}
	if len(plan.runs) != 3 || plan.runs[0].in != 0 || plan.runs[1].in != 2e6 || plan.runs[2].in != 4e6 || plan.runs[0].dur != 2e6 {
		t.Fatalf("runs %+v: want 3 from 0, 2 and 4 s, each 2 s long", plan.runs)
	}
	// The first run ends past its last sample (frame 30, 1 s) and past
	// the audio packet read before it (after frame 25, at 1.033 s).
	if r := plan.runs[0]; r.out <= 1033000 || r.out > 1100000 {
		t.Fatalf("run 0 ends at %d µs: want past the audio packet at 1.033 s", r.out)
	}
	// Key frames 10 s apart: a run per GOP, which skips the 29 frames
	// after its last sample; at 2 frames a second, 14 (fewer than
	// seekGap): in order.
	if plan, ok := planSeek(mk(900, 300), 0, tbs, 1, seekGap); !ok || len(plan.runs) != 3 || plan.runs[1].in != 10e6 || len(plan.samples) != 30 {
		t.Fatalf("key frames 10 s apart at 1 frame a second: runs %+v, %d samples; want 3 runs, 30 samples", plan.runs, len(plan.samples))
	}
	if plan, ok := planSeek(mk(900, 300), 0, tbs, 2, seekGap); ok {
		t.Fatalf("key frames 10 s apart at 2 frames a second: runs %+v, want decoding in order", plan.runs)
	}
	list := concatList("/v/it's.mp4", plan)
	if !strings.Contains(list, `file 'file:/v/it'\''s.mp4'`) || !strings.Contains(list, "inpoint 2.000000\n") || !strings.Contains(list, "duration 2.000000\n") {
		t.Fatalf("concat list:\n%s", list)
	}
}

// TestVideoSeekMissFallsBack: when a planned sample does not come from the
// key frames (here the plan's third sample moved to a pts no frame has),
// the decode goes on in order after the frames already given: the same
// frames, indexes and pixels as a decode in order, no error.
func TestVideoSeekMissFallsBack(t *testing.T) {
	dir := t.TempDir()
	video := videotest.Make(t, dir, "k.mp4", videotest.Frames(100, 96, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-bf", "3", "-g", "10")
	o := Options{FPS: 0.5}
	moved := false
	planned = func(p *seekPlan) {
		if len(p.samples) > 3 {
			p.samples[2]++
			moved = true
		}
	}
	defer func() { planned = nil }()
	got, _ := decodeAll(t, video, o)
	if !moved {
		t.Fatal("no seek plan of more than 3 samples to change")
	}
	planned = nil
	in, _ := decodeAll(t, video, Options{FPS: 0.5, NoSeek: true})
	if len(got) != len(in) {
		t.Fatalf("%d frames after the miss, %d in order", len(got), len(in))
	}
	for i := range got {
		if got[i].PTS != in[i].PTS || got[i].Index != in[i].Index || !bytes.Equal(got[i].Image.Pix, in[i].Image.Pix) {
			t.Fatalf("frame %d (pts %d, index %d): differs from the frame decoded in order (pts %d, index %d)", i, got[i].PTS, got[i].Index, in[i].PTS, in[i].Index)
		}
	}
}
