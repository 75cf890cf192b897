package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestBenchVideo runs `video` on a small synthetic video with the built-in
// model: 3 s at 10 frames/s sampled at 2 frames/s is 6 frames (t = 0, 0.5,
// …, 2.5) and 30 in all; ffmpeg's CPU is counted (the children's) and its
// share of the job lies in (0, 1). The timings themselves are not checked.
func TestBenchVideo(t *testing.T) {
	videotest.Need(t)
	orttest.Load(t)
	code, out, errs := runCLI(t, "video", "--width", "64", "--height", "48", "--seconds", "3", "--rate", "10", "--gop", "5", "--fps", "2",
		"--batch", "4", "--rounds", "1", "--threads", "1", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var res videoBenchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := res.Median
	if res.Width != 64 || res.Height != 48 || len(res.Rounds) != 1 || res.GOP != 5 {
		t.Errorf("video %dx%d, %d rounds, key frame every %d; want 64x48, 1, 5", res.Width, res.Height, len(res.Rounds), res.GOP)
	}
	if m.DecodeFPS.Frames != 6 || m.DecodeFPSOrder.Frames != 6 || m.DecodeAll.Frames != 30 || m.JobFramesOK != 6 || m.JobFramesFailed != 0 {
		t.Errorf("frames: --fps %d, all %d, job %d done %d failed; want 6, 30, 6, 0", m.DecodeFPS.Frames, m.DecodeAll.Frames, m.JobFramesOK, m.JobFramesFailed)
	}
	if m.JobPerSec <= 0 || m.EncoderPerSec <= 0 || m.JobOverEncoder <= 0 {
		t.Errorf("rates: job %v, encoder %v, ratio %v", m.JobPerSec, m.EncoderPerSec, m.JobOverEncoder)
	}
	if !(m.FFmpegShare > 0 && m.FFmpegShare < 1) || m.JobFFmpegCPUms <= 0 || m.JobFFmpegCPUms >= m.JobCPUms {
		t.Errorf("ffmpeg's share %v (%v of %v ms/frame): want ffmpeg's CPU counted, less than the job's", m.FFmpegShare, m.JobFFmpegCPUms, m.JobCPUms)
	}
}

// TestSyntheticVideoGOP makes the synthetic video with --gop 4 and with
// the default (2 s): ffprobe finds a key frame every 4 frames, and every
// 20 at 10 frames a second.
func TestSyntheticVideoGOP(t *testing.T) {
	ff := videotest.Need(t)
	for _, c := range []struct{ gop, want int }{{4, 4}, {0, 20}} {
		path := filepath.Join(t.TempDir(), "s.mp4")
		o := videoBenchOptions{width: 32, height: 32, seconds: 5, rate: 10, gop: c.gop}
		if err := makeSyntheticVideo(context.Background(), ff, path, o); err != nil {
			t.Fatal(err)
		}
		fts, _ := videotest.Probe(t, path)
		var keys []int
		for i, f := range fts {
			if f.Key {
				keys = append(keys, i)
			}
		}
		if len(fts) != 50 || len(keys) != (50+c.want-1)/c.want {
			t.Fatalf("--gop %d: %d frames, key frames at %v; want 50, every %d", c.gop, len(fts), keys, c.want)
		}
		for i, k := range keys {
			if k != i*c.want {
				t.Fatalf("--gop %d: key frames at %v, want every %d", c.gop, keys, c.want)
			}
		}
	}
}
