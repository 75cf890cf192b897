package video

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/conditionhq/condition/vision/video/videotest"
)

// decodeStream decodes the bytes b as a stream with o.
func decodeStream(t *testing.T, b []byte, name string, o Options) ([]Frame, error) {
	t.Helper()
	var fs []Frame
	// Only an io.Reader: nothing of a file for ffmpeg to seek.
	r := struct{ io.Reader }{bytes.NewReader(b)}
	_, err := Decode(context.Background(), r, name, o, func(f Frame) error { fs = append(fs, f); return nil })
	return fs, err
}

// TestVideoStreamHeaderLast: an MP4 as ffmpeg writes it by default (moov
// after mdat) is decoded from a stream through a temporary file, which is
// removed, into the frames DecodeFile gives; one larger than the spool's
// limit, or with spooling off, is refused naming why. A faststart MP4 is
// read from the pipe, spooling nothing.
func TestVideoStreamHeaderLast(t *testing.T) {
	dir := t.TempDir()
	frames := videotest.Frames(25, 96, 64)
	last := videotest.Make(t, dir, "last.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p")
	first := videotest.Make(t, dir, "first.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart")
	webm := videotest.Make(t, dir, "w.webm", frames, 10, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8")
	for _, c := range []struct {
		path string
		want bool
	}{{last, true}, {first, false}, {webm, false}} {
		if got := headerLast(mustReadFile(t, c.path)); got != c.want {
			t.Errorf("headerLast(%s) = %v", c.path, got)
		}
	}
	want, _ := decodeAll(t, last, Options{Sampling: SampleAll})
	spool := t.TempDir()
	for _, v := range []string{last, first} {
		got, err := decodeStream(t, mustReadFile(t, v), "x.mp4", Options{Sampling: SampleAll, TempDir: spool})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if len(got) != len(want) || len(got) != 25 {
			t.Fatalf("%s: %d frames from the stream, %d from the file", v, len(got), len(want))
		}
		for i := range got {
			if got[i].PTS != want[i].PTS || !bytes.Equal(got[i].Image.Pix, want[i].Image.Pix) {
				t.Fatalf("%s: frame %d differs between stream and file", v, i)
			}
		}
		if left, _ := os.ReadDir(spool); len(left) != 0 {
			t.Fatalf("%s: %d files left in the spool folder", v, len(left))
		}
	}
	b := mustReadFile(t, last)
	for _, o := range []Options{{MaxSpool: int64(len(b)) - 1, TempDir: spool}, {MaxSpool: -1}} {
		_, err := decodeStream(t, b, "shard.tar/k.mp4", o)
		if !errors.Is(err, ErrHeaderLast) || !strings.Contains(err.Error(), "shard.tar/k.mp4") || !strings.Contains(err.Error(), "faststart") {
			t.Fatalf("MaxSpool %d: err %v, want ErrHeaderLast naming the stream and the way out", o.MaxSpool, err)
		}
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Fatalf("%d files left in the spool folder after a refusal", len(left))
	}
	// A limit of the file's own size is enough (1 frame a second over 2.4 s: 3).
	if got, err := decodeStream(t, b, "x.mp4", Options{MaxSpool: int64(len(b)), TempDir: spool}); err != nil || len(got) != 3 {
		t.Fatalf("spool limit at the file's size: %d frames, %v", len(got), err)
	}
}

// TestVideoStreamCancelKillsFFmpeg: cancelling a decode whose stream is
// still arriving stops ffmpeg's process group, and Decode returns.
func TestVideoStreamCancelKillsFFmpeg(t *testing.T) {
	// Raw frames in Matroska: 11.5 MB, more than the 8 MiB ffprobe reads,
	// so that ffmpeg runs while the stream is still arriving.
	v := t.TempDir() + "/raw.mkv"
	videotest.Run(t, "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-t", "10", "-c:v", "rawvideo", "-pix_fmt", "yuv420p", v)
	b := mustReadFile(t, v)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(b[:10<<20]) // the rest never comes
	}()
	var pid int
	started = func(p int) { pid = p }
	defer func() { started = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n int
	_, err := Decode(ctx, pr, "raw.mkv", Options{Sampling: SampleAll}, func(Frame) error {
		if n++; n == 2 {
			cancel()
		}
		return nil
	})
	pw.Close()
	if !errors.Is(err, context.Canceled) || pid == 0 {
		t.Fatalf("err %v, pid %d: want context.Canceled after ffmpeg ran", err, pid)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("ffmpeg's process group %d after cancel: %v, want ESRCH (gone)", pid, err)
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVideoScene: on a generated video at 10 frames a second with a cut at
// 2.0 s (a green square moving a little on grey, then a blue triangle on
// beige), scene sampling keeps the first frame and the cut's frame, at
// ffprobe's times and with ffmpeg's pixels, and no frame within a scene;
// a threshold over the cut's score keeps the first frame alone.
func TestVideoScene(t *testing.T) {
	var frames []image.Image
	for k := range 20 {
		frames = append(frames, drawn(color.RGBA{128, 128, 128, 255}, color.RGBA{30, 170, 50, 255}, 20+k, 30))
	}
	for k := range 15 {
		frames = append(frames, drawn(color.RGBA{200, 190, 150, 255}, color.RGBA{30, 70, 225, 255}, 24, 20-k/2))
	}
	v := videotest.Make(t, t.TempDir(), "cut.mp4", frames, 10, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "12")
	r := newReference(t, v)
	got, _ := decodeAll(t, v, Options{Sampling: SampleScene})
	want := []int{0, 20}
	if len(got) != len(want) {
		var ts []string
		for _, f := range got {
			ts = append(ts, Seconds(f.Time))
		}
		t.Fatalf("scene frames at %v, want the frames at 0 and 2 s", ts)
	}
	for k, f := range got {
		i := want[k]
		if f.PTS != r.fts[i].PTS || f.TimeBase != r.tb || !bytes.Equal(f.Image.Pix, r.refs[i].(*image.RGBA).Pix) {
			t.Fatalf("scene frame %d: pts %d, want ffprobe's frame %d (pts %d) with ffmpeg's pixels", k, f.PTS, i, r.fts[i].PTS)
		}
	}
	if Seconds(got[1].Time) != "2.000000" {
		t.Fatalf("the cut's frame at %s s, want 2", Seconds(got[1].Time))
	}
	if got, _ := decodeAll(t, v, Options{Sampling: SampleScene, Scene: 0.99}); len(got) != 1 || got[0].PTS != r.fts[0].PTS {
		t.Fatalf("threshold 0.99: %d frames, want the first alone", len(got))
	}
}

// drawn is a 64×64 picture: a square of 20 pixels of colour fg at x, y on
// bg.
func drawn(bg, fg color.RGBA, x, y int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, 64, 64))
	draw.Draw(img, img.Rect, image.NewUniform(bg), image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(x, y, x+20, y+20), image.NewUniform(fg), image.Point{}, draw.Src)
	return img
}
