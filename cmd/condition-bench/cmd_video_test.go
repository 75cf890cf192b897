package main

import (
	"encoding/json"
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
	code, out, errs := runCLI(t, "video", "--width", "64", "--height", "48", "--seconds", "3", "--rate", "10", "--fps", "2",
		"--batch", "4", "--rounds", "1", "--threads", "1", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var res videoBenchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := res.Median
	if res.Width != 64 || res.Height != 48 || len(res.Rounds) != 1 {
		t.Errorf("video %dx%d, %d rounds; want 64x48, 1", res.Width, res.Height, len(res.Rounds))
	}
	if m.DecodeFPS.Frames != 6 || m.DecodeAll.Frames != 30 || m.JobFramesOK != 6 || m.JobFramesFailed != 0 {
		t.Errorf("frames: --fps %d, all %d, job %d done %d failed; want 6, 30, 6, 0", m.DecodeFPS.Frames, m.DecodeAll.Frames, m.JobFramesOK, m.JobFramesFailed)
	}
	if m.JobPerSec <= 0 || m.EncoderPerSec <= 0 || m.JobOverEncoder <= 0 {
		t.Errorf("rates: job %v, encoder %v, ratio %v", m.JobPerSec, m.EncoderPerSec, m.JobOverEncoder)
	}
	if !(m.FFmpegShare > 0 && m.FFmpegShare < 1) || m.JobFFmpegCPUms <= 0 || m.JobFFmpegCPUms >= m.JobCPUms {
		t.Errorf("ffmpeg's share %v (%v of %v ms/frame): want ffmpeg's CPU counted, less than the job's", m.FFmpegShare, m.JobFFmpegCPUms, m.JobCPUms)
	}
}
