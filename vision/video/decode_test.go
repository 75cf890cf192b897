package video

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// decodeAll decodes path with o and returns its frames.
func decodeAll(t *testing.T, path string, o Options) ([]Frame, Info) {
	t.Helper()
	var fs []Frame
	info, err := DecodeFile(context.Background(), path, o, func(f Frame) error { fs = append(fs, f); return nil })
	if err != nil {
		t.Fatalf("DecodeFile %s: %v", path, err)
	}
	return fs, info
}

// expected returns the indices (among all frames) the sampling o keeps,
// from ffprobe's frames, by the definition: for every k ≥ 0, the first
// frame at or after k/F seconds (each frame once); every frame; or the
// key frames.
func expected(fts []videotest.FrameTime, tb [2]int64, o Options) []int {
	var idx []int
	switch o.Sampling {
	case SampleAll:
		for i := range fts {
			idx = append(idx, i)
		}
	case SampleKeyframes:
		for i, f := range fts {
			if f.Key {
				idx = append(idx, i)
			}
		}
	default:
		sec := func(i int) float64 { return float64(fts[i].PTS) * (float64(tb[0]) / float64(tb[1])) }
		last := sec(len(fts) - 1)
		seen := map[int]bool{}
		for k := 0; float64(k)/o.fps() <= last; k++ {
			for i := range fts {
				// k/F ≤ t, compared as ffmpeg's select does: floor(t·F) ≥ k.
				if math.Floor(sec(i)*o.fps()) >= float64(k) {
					if !seen[i] {
						idx = append(idx, i)
						seen[i] = true
					}
					break
				}
			}
		}
	}
	return idx
}

// reference is what ffprobe and ffmpeg say of a video: every frame's pts
// and key flag, the time base, and ffmpeg's PNG of every frame.
type reference struct {
	video string
	fts   []videotest.FrameTime
	tb    [2]int64
	refs  []image.Image
}

func newReference(t *testing.T, video string) *reference {
	t.Helper()
	r := &reference{video: video}
	r.fts, r.tb = videotest.Probe(t, video)
	r.refs = videotest.PNGs(t, video, "")
	if len(r.refs) != len(r.fts) {
		t.Fatalf("ffmpeg wrote %d PNGs, ffprobe shows %d frames", len(r.refs), len(r.fts))
	}
	return r
}

// checkExact decodes video with o and checks the frames' times against
// ffprobe's and their pixels against ffmpeg's own PNG of each frame.
func checkExact(t *testing.T, video string, o Options) { newReference(t, video).check(t, o) }

func (r *reference) check(t *testing.T, o Options) {
	t.Helper()
	video, fts, tb, refs := r.video, r.fts, r.tb, r.refs
	want := expected(fts, tb, o)
	got, _ := decodeAll(t, video, o)
	if len(got) != len(want) {
		t.Fatalf("%s %v fps %v: %d frames, want %d (of %d)", filepath.Base(video), o.Sampling, o.FPS, len(got), len(want), len(fts))
	}
	for k, f := range got {
		i := want[k]
		if f.PTS != fts[i].PTS || f.TimeBase != tb || f.Index != k {
			t.Fatalf("frame %d: pts %d tb %v index %d, want ffprobe's frame %d: pts %d tb %v", k, f.PTS, f.TimeBase, f.Index, i, fts[i].PTS, tb)
		}
		rgba, ok := refs[i].(*image.RGBA)
		if !ok {
			t.Fatalf("ffmpeg's PNG decodes to %T, want *image.RGBA", refs[i])
		}
		if rgba.Rect != f.Image.Rect || !bytes.Equal(rgba.Pix, f.Image.Pix) {
			t.Fatalf("frame %d (pts %d): pixels differ from ffmpeg's PNG (%v vs %v)", k, f.PTS, f.Image.Rect, rgba.Rect)
		}
	}
}

func TestVideoExactH264AndVP9(t *testing.T) {
	dir := t.TempDir()
	frames := videotest.Frames(30, 96, 64)
	vids := []string{
		videotest.Make(t, dir, "a.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "12"),
		videotest.Make(t, dir, "a.webm", frames, 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-g", "12"),
	}
	for _, v := range vids {
		ref := newReference(t, v)
		for _, o := range []Options{{}, {FPS: 2.5}, {FPS: 0.4}, {Sampling: SampleAll}, {Sampling: SampleKeyframes}} {
			t.Run(fmt.Sprintf("%s/%v/%v", filepath.Ext(v), o.Sampling, o.FPS), func(t *testing.T) { ref.check(t, o) })
		}
	}
}

func TestVideoVariableFrameRate(t *testing.T) {
	dir := t.TempDir()
	// Frame n at n²/100 s: the gaps grow from 10 ms to 390 ms.
	v := videotest.Make(t, dir, "vfr.mkv", videotest.Frames(20, 64, 64), 10,
		"-vf", "setpts=N*N/100/TB", "-fps_mode", "vfr", "-c:v", "libx264", "-pix_fmt", "yuv420p")
	fts, _ := videotest.Probe(t, v)
	if n := len(fts); n < 10 || fts[n-1].PTS-fts[n-2].PTS <= fts[2].PTS-fts[1].PTS {
		t.Fatalf("not a variable frame rate: %+v", fts)
	}
	ref := newReference(t, v)
	for _, o := range []Options{{}, {FPS: 4}, {Sampling: SampleAll}} {
		ref.check(t, o)
	}
}

func TestVideoRotated(t *testing.T) {
	dir := t.TempDir()
	a := videotest.Make(t, dir, "a.mp4", videotest.Frames(10, 96, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	r := filepath.Join(dir, "r.mp4")
	// FFmpeg 6 and later set the display matrix with -display_rotation;
	// 5.1 has only the rotate tag.
	if exec.Command(videotest.Need(t), "-v", "error", "-y", "-display_rotation", "90", "-i", a, "-c", "copy", r).Run() != nil {
		videotest.Run(t, "-i", a, "-c", "copy", "-metadata:s:v", "rotate=90", r)
	}
	fs, info := decodeAll(t, r, Options{Sampling: SampleAll})
	if info.Rotation%180 != 90 || info.Width != 64 || info.Height != 96 {
		t.Fatalf("info %+v: want a quarter turn, 64x96 upright", info)
	}
	if len(fs) != 10 || fs[0].Image.Rect.Dx() != 64 || fs[0].Image.Rect.Dy() != 96 {
		t.Fatalf("%d frames of %v, want 10 of 64x96", len(fs), fs[0].Image.Rect)
	}
	checkExact(t, r, Options{Sampling: SampleAll})
	// One frame as `ffmpeg -vf select=eq(n\,K) -pix_fmt rgb24 f.png` writes it.
	ref := videotest.PNG(t, r, 7, filepath.Join(dir, "7.png")).(*image.RGBA)
	if !bytes.Equal(ref.Pix, fs[7].Image.Pix) {
		t.Fatal("frame 7 differs from ffmpeg's select=eq(n,7) PNG")
	}
}

func TestVideoRefused(t *testing.T) {
	videotest.Need(t)
	dir := t.TempDir()
	audio := filepath.Join(dir, "audio.mp4")
	videotest.Run(t, "-f", "lavfi", "-i", "sine=duration=1", "-c:a", "aac", audio)
	empty := filepath.Join(dir, "empty.mp4")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v := videotest.Make(t, dir, "v.mp4", videotest.Frames(5, 96, 64), 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	nop := func(Frame) error { t.Error("a frame of a refused video"); return nil }
	for _, c := range []struct {
		path string
		o    Options
		want string
		is   func(error) bool
	}{
		{audio, Options{}, "no video stream", func(err error) bool { return errors.Is(err, ErrNoVideo) }},
		{empty, Options{}, "ffprobe", nil},
		{v, Options{MaxPixels: 96*64 - 1}, "96x64", func(err error) bool { var e *vision.TooLargeError; return errors.As(err, &e) }},
		{v, Options{FFmpeg: filepath.Join(dir, "no-ffmpeg")}, "apt-get install ffmpeg", func(err error) bool { return errors.Is(err, ErrNoFFmpeg) }},
		{v, Options{FPS: -1}, "sampling rate", nil},
	} {
		_, err := DecodeFile(context.Background(), c.path, c.o, nop)
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !c.is(err)) {
			t.Errorf("%s %+v: err %v, want one saying %q", filepath.Base(c.path), c.o, err, c.want)
		}
		if err != nil && c.o.FPS == 0 && !strings.Contains(err.Error(), filepath.Base(c.path)) {
			t.Errorf("%s: err %v does not name the file", c.path, err)
		}
	}
}

func TestVideoTruncated(t *testing.T) {
	dir := t.TempDir()
	frames := videotest.Frames(30, 96, 64)
	for _, v := range []string{
		videotest.Make(t, dir, "f.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart"),
		videotest.Make(t, dir, "f.webm", frames, 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8"),
	} {
		data, err := os.ReadFile(v)
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(dir, "cut"+filepath.Ext(v))
		if err := os.WriteFile(cut, data[:len(data)*6/10], 0o644); err != nil {
			t.Fatal(err)
		}
		var n int
		_, err = DecodeFile(context.Background(), cut, Options{Sampling: SampleAll}, func(Frame) error { n++; return nil })
		if err == nil || !strings.Contains(err.Error(), cut) {
			t.Errorf("%s: err %v, want one naming the file", cut, err)
		}
		if n == 0 || n >= 30 {
			t.Errorf("%s: %d frames before the error, want some, not all 30", cut, n)
		}
	}
}

func TestVideoStream(t *testing.T) {
	dir := t.TempDir()
	v := videotest.Make(t, dir, "s.webm", videotest.Frames(20, 96, 64), 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8")
	want, _ := decodeAll(t, v, Options{FPS: 3})
	f, err := os.Open(v)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Frame
	if _, err := Decode(context.Background(), f, "s.webm", Options{FPS: 3}, func(fr Frame) error { got = append(got, fr); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%d frames from the stream, %d from the file", len(got), len(want))
	}
	for i := range got {
		if got[i].PTS != want[i].PTS || !bytes.Equal(got[i].Image.Pix, want[i].Image.Pix) {
			t.Fatalf("frame %d differs between stream and file", i)
		}
	}
}

func TestVideoCancelKillsFFmpeg(t *testing.T) {
	dir := t.TempDir()
	v := videotest.Make(t, dir, "long.mp4", videotest.Frames(300, 96, 64), 30, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	var pid int
	started = func(p int) { pid = p }
	defer func() { started = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n int
	_, err := DecodeFile(ctx, v, Options{Sampling: SampleAll}, func(Frame) error {
		if n++; n == 1 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if pid == 0 || n >= 300 {
		t.Fatalf("pid %d, %d frames: ffmpeg did not run, or was not stopped", pid, n)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("ffmpeg's process group %d after cancel: %v, want ESRCH (gone)", pid, err)
	}
	// fn's error stops it too.
	stop := errors.New("enough")
	pid = 0
	_, err = DecodeFile(context.Background(), v, Options{Sampling: SampleAll}, func(Frame) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want fn's", err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("ffmpeg's process group %d after fn's error: %v, want ESRCH", pid, err)
	}
}

func TestNamesAndSampling(t *testing.T) {
	for name, want := range map[string]bool{"a.MP4": true, "b.mkv": true, "c.webm": true, "d.mov": true, "e.avi": true, "f.m4v": true, "g.jpg": false, "h.mp3": false} {
		if IsName(name) != want {
			t.Errorf("IsName(%q) = %v", name, !want)
		}
	}
	for s, want := range map[string]Sampling{"all": SampleAll, "keyframes": SampleKeyframes, "fps": SampleFPS, "scene": SampleScene} {
		if got, err := ParseSampling(s); err != nil || got != want || got.String() != s {
			t.Errorf("ParseSampling(%q) = %v, %v", s, got, err)
		}
	}
	for s, want := range map[string]float64{"scene": 0, "scene:0.45": 0.45} {
		if m, th, err := ParseFrames(s); err != nil || m != SampleScene || th != want {
			t.Errorf("ParseFrames(%q) = %v, %v, %v", s, m, th, err)
		}
	}
	for _, s := range []string{"scene:", "scene:1.5", "scene:0", "scene:x", "fps:2"} {
		if _, _, err := ParseFrames(s); err == nil {
			t.Errorf("ParseFrames(%q): no error", s)
		}
	}
	if m, _, err := ParseFrames("keyframes"); err != nil || m != SampleKeyframes {
		t.Errorf("ParseFrames(keyframes) = %v, %v", m, err)
	}
	if _, err := ParseSampling("some"); err == nil {
		t.Error("ParseSampling(some): no error")
	}
	if Seconds(1.0/3) != "0.333333" || Seconds(12) != "12.000000" {
		t.Errorf("Seconds: %s %s", Seconds(1.0/3), Seconds(12))
	}
}
