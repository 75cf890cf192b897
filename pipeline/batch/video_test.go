package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestVideoFramesEqualTheirPNGs runs the job on a folder with a video and
// on ffmpeg's own PNGs of the frames it samples: every output array of a
// frame is byte for byte the PNG's. A truncated video gives its frames,
// then a failed item; an audio-only file a failed item.
func TestVideoFramesEqualTheirPNGs(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	frames := videotest.Frames(30, 96, 64)
	clip := videotest.Make(t, in, "clip.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "10", "-movflags", "+faststart")
	data := mustRead(t, clip)
	os.WriteFile(filepath.Join(in, "cut.mp4"), data[:len(data)*6/10], 0o644)
	videotest.Run(t, "-f", "lavfi", "-i", "sine=duration=1", "-c:a", "aac", filepath.Join(in, "sound.m4v"))

	m := openTiny(t)
	eng := tinyEngine(t, m, pipeline.Options{})
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a yellow square"}, Out: out,
		Video: video.Options{FPS: 2}, Batch: 2, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	es := readManifest(t, sum.Manifest)
	fts, tb := videotest.Probe(t, clip)
	pngs := t.TempDir()
	videotest.PNGs(t, clip, pngs)
	var clipFrames, cutFrames, failed int
	var fromPNG []string
	byPNG := map[string]Entry{}
	for _, e := range es {
		switch {
		case e.Status == StatusError:
			failed++
			if e.Path != "cut.mp4" && e.Path != "sound.m4v" || !strings.Contains(e.Error, e.Path) {
				t.Errorf("failed entry %+v: want cut.mp4 or sound.m4v, its error naming it", e)
			}
		case strings.HasPrefix(e.Path, "cut.mp4#t="):
			cutFrames++
		case strings.HasPrefix(e.Path, "clip.mp4#t="):
			clipFrames++
			if e.Video != "clip.mp4" || e.Time == nil || e.Path != "clip.mp4#t="+video.Seconds(*e.Time) {
				t.Fatalf("frame entry %+v", e)
			}
			i := frameAt(fts, tb, *e.Time)
			if i < 0 {
				t.Fatalf("%s: no frame of ffprobe's at %v", e.Path, *e.Time)
			}
			name := fmt.Sprintf("%05d.png", i+1)
			fromPNG = append(fromPNG, filepath.Join(pngs, name))
			byPNG[name] = e
		default:
			t.Errorf("entry %+v", e)
		}
	}
	// 2 frames a second over 0–2.9 s: t = 0, 0.5, ..., 2.5.
	if clipFrames != 6 || failed != 2 || cutFrames == 0 || sum.Done != clipFrames+cutFrames {
		t.Fatalf("clip frames %d, cut frames %d, failed %d, summary %+v", clipFrames, cutFrames, failed, sum)
	}
	out2 := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Config{Engine: eng, Inputs: fromPNG, Prompts: []string{"a yellow square"}, Out: out2, Batch: 3, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	for name, e := range byPNG {
		a, ma, err := tensorio.ReadSafetensors(filepath.Join(out, e.Outputs[0]))
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := tensorio.ReadSafetensors(filepath.Join(out2, name+".safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) || len(a) < 4 {
			t.Fatalf("%s: %d tensors, its PNG's %d", e.Path, len(a), len(b))
		}
		for k, ta := range a {
			ba, _ := tensorio.AppendLE(nil, ta)
			bb, _ := tensorio.AppendLE(nil, b[k])
			if !bytes.Equal(ba, bb) {
				t.Fatalf("%s: %s differs from its PNG's (%s)", e.Path, k, name)
			}
		}
		if ma["video"] != "clip.mp4" || ma["time"] != video.Seconds(*e.Time) {
			t.Errorf("%s metadata video %q time %q", e.Path, ma["video"], ma["time"])
		}
	}
}

// frameAt returns the index of the frame at time sec, or -1.
func frameAt(fts []videotest.FrameTime, tb [2]int64, sec float64) int {
	for i, f := range fts {
		if float64(f.PTS)*(float64(tb[0])/float64(tb[1])) == sec {
			return i
		}
	}
	return -1
}

// TestVideoResumePerFrame: a second run with --resume skips every frame
// done.
func TestVideoResumePerFrame(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	videotest.Make(t, in, "a.webm", videotest.Frames(20, 64, 64), 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8")
	out := filepath.Join(t.TempDir(), "out")
	cfg := Config{Engine: tinyEngine(t, openTiny(t), pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out,
		Video: video.Options{Sampling: video.SampleAll}}
	sum, err := Run(context.Background(), cfg)
	if err != nil || sum.Done != 20 {
		t.Fatalf("first run: %+v %v", sum, err)
	}
	os.Remove(filepath.Join(out, "a.webm#t=0.500000.safetensors"))
	cfg.Resume = true
	sum, err = Run(context.Background(), cfg)
	if err != nil || sum.Done != 1 || sum.Skipped != 19 {
		t.Fatalf("resume: %+v %v", sum, err)
	}
}

// TestVideoIndexRows: the collection index's rows of a video's frames
// carry the video and the time, as the manifest does.
func TestVideoIndexRows(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	videotest.Make(t, in, "a.mkv", videotest.Frames(25, 64, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	out := filepath.Join(t.TempDir(), "out")
	cfg := Config{Engine: tinyEngine(t, openTiny(t), pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out, Index: true}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	metas, _ := filepath.Glob(filepath.Join(out, "index", "*", index.MetaFile))
	if len(metas) != 1 {
		t.Fatalf("index parts: %v", metas)
	}
	var m index.Meta
	if err := json.Unmarshal(mustRead(t, metas[0]), &m); err != nil {
		t.Fatal(err)
	}
	var times []string
	for _, it := range m.Items {
		if it.Video != "a.mkv" || it.Time == nil || it.Path != "a.mkv#t="+video.Seconds(*it.Time) {
			t.Fatalf("index item %+v", it)
		}
		times = append(times, video.Seconds(*it.Time))
	}
	sort.Strings(times)
	if got := strings.Join(times, " "); got != "0.000000 1.000000 2.000000" {
		t.Fatalf("index rows at %s, want 0, 1 and 2 s", got)
	}
}

// TestVideoShardsVerify: a shards-layout job over a video and an image is
// proved complete against its inputs (a video is held by its frames), and
// a video with no row is missing.
func TestVideoShardsVerify(t *testing.T) {
	videotest.Need(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 2)
	videotest.Make(t, in, "v.mp4", videotest.Frames(20, 64, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	out := filepath.Join(t.TempDir(), "out")
	cfg := Config{Engine: tinyEngine(t, openTiny(t), pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out, Layout: "shards", ShardSize: 3}
	sum, err := Run(context.Background(), cfg)
	if err != nil || sum.Done != 4 {
		t.Fatalf("%+v %v: want 2 images and 2 frames done", sum, err)
	}
	metas, _ := filepath.Glob(filepath.Join(out, "metadata", "*.parquet"))
	var frames []string
	for _, m := range metas {
		b := mustRead(t, m)
		rows, err := parquet.Read[shardRow](bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			switch {
			case strings.HasPrefix(r.Key, "v.mp4#t="):
				if r.Video != "v.mp4" || r.Time == nil || r.Key != "v.mp4#t="+video.Seconds(*r.Time) || r.Unit != "v.mp4" {
					t.Errorf("frame row %+v", r)
				}
				frames = append(frames, r.Key)
			case r.Video != "" || r.Time != nil:
				t.Errorf("image row %+v has a video or time", r)
			}
		}
	}
	if len(frames) != 2 {
		t.Fatalf("frame rows %v, want 2", frames)
	}
	rep, err := VerifyShards(context.Background(), out, []string{in}, nil)
	if err != nil || !rep.Complete() || len(rep.Missing)+len(rep.Unexpected) != 0 {
		t.Fatalf("verify: %v, %+v", err, rep)
	}
	videotest.Make(t, in, "w.webm", videotest.Frames(5, 64, 64), 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8")
	rep, err = VerifyShards(context.Background(), out, []string{in}, nil)
	if err != nil || fmt.Sprint(rep.Missing) != "[w.webm]" || len(rep.Unexpected) != 0 {
		t.Fatalf("verify with a video no shard holds: %v, missing %v, unexpected %v", err, rep.Missing, rep.Unexpected)
	}
}

// TestVideoWithoutFFmpeg: where ffmpeg cannot be found, each video is one
// failed entry whose error names it and the install command; the images
// are done.
func TestVideoWithoutFFmpeg(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 2)
	os.WriteFile(filepath.Join(in, "x.mp4"), []byte("not looked at"), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, openTiny(t), pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out,
		Video: video.Options{FFmpeg: filepath.Join(in, "no-such-ffmpeg")}})
	if err != nil || sum.Done != 2 || sum.Failed != 1 {
		t.Fatalf("%+v %v", sum, err)
	}
	for _, e := range readManifest(t, sum.Manifest) {
		if e.Status == StatusError && (e.Path != "x.mp4" || e.Video != "x.mp4" || !strings.Contains(e.Error, "x.mp4") || !strings.Contains(e.Error, video.InstallHint)) {
			t.Errorf("failed entry %+v", e)
		}
	}
}
