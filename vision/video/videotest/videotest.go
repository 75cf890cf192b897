// Package videotest makes tiny videos for tests with FFmpeg, from frames
// drawn in Go, and reads frames back the way ffmpeg writes them as PNG.
package videotest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Need skips t unless ffmpeg and ffprobe are on PATH, and returns
// ffmpeg's path.
func Need(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is not installed (apt-get install ffmpeg)")
	}
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe is not installed (apt-get install ffmpeg)")
	}
	return p
}

// Frames draws n frames of w×h: a colour gradient that shifts with the
// frame's number and a square that moves across, so that every frame
// differs from the others.
func Frames(n, w, h int) []image.Image {
	out := make([]image.Image, n)
	for k := range out {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.Set(x, y, color.RGBA{uint8(x*255/w + 7*k), uint8(y*255/h + 3*k), uint8(40 + 5*k), 255})
			}
		}
		s := min(w, h) / 4
		x0 := (k * 5) % (w - s)
		for y := h / 3; y < h/3+s; y++ {
			for x := x0; x < x0+s; x++ {
				img.Set(x, y, color.RGBA{250, 250, uint8(20 * k), 255})
			}
		}
		out[k] = img
	}
	return out
}

// Make writes frames as PNGs in a temporary folder and has ffmpeg encode
// them at rate frames per second into dir/name with the output options
// args (codec, pixel format, ...); it returns the video's path.
func Make(t testing.TB, dir, name string, frames []image.Image, rate int, args ...string) string {
	t.Helper()
	ff := Need(t)
	src := t.TempDir()
	for i, f := range frames {
		var b bytes.Buffer
		if err := png.Encode(&b, f); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("%04d.png", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, name)
	cmd := append([]string{"-v", "error", "-y", "-framerate", strconv.Itoa(rate), "-i", filepath.Join(src, "%04d.png")}, args...)
	cmd = append(cmd, out)
	if b, err := exec.Command(ff, cmd...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", cmd, err, b)
	}
	return out
}

// Run runs ffmpeg with args and fails t on an error.
func Run(t testing.TB, args ...string) {
	t.Helper()
	ff := Need(t)
	if b, err := exec.Command(ff, append([]string{"-v", "error", "-y"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, b)
	}
}

// PNG has ffmpeg write frame n (counting every decoded frame from 0) of
// video as an rgb24 PNG at path, and returns it decoded by image/png.
func PNG(t testing.TB, video string, n int, path string) image.Image {
	t.Helper()
	Run(t, "-i", video, "-vf", "select=eq(n\\,"+strconv.Itoa(n)+")", "-fps_mode", "passthrough", "-frames:v", "1", "-pix_fmt", "rgb24", path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// PNGs has ffmpeg write every frame of video as an rgb24 PNG (in the
// order it decodes them, none dropped or repeated) into dir (a temporary
// folder when ""), named from 00001.png, and returns them decoded by
// image/png.
func PNGs(t testing.TB, video, dir string) []image.Image {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	Run(t, "-i", video, "-fps_mode", "passthrough", "-pix_fmt", "rgb24", filepath.Join(dir, "%05d.png"))
	var out []image.Image
	for i := 1; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%05d.png", i)))
		if os.IsNotExist(err) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("frame %d of %s: %v", i, video, err)
		}
		out = append(out, img)
	}
}

// FrameTime is one frame as ffprobe -show_frames shows it.
type FrameTime struct {
	PTS int64
	Key bool
}

// Probe returns the pts and key flag of every frame of video's first
// video stream, and its time base, from ffprobe.
func Probe(t testing.TB, video string) ([]FrameTime, [2]int64) {
	t.Helper()
	Need(t)
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=time_base:frame=pts,key_frame",
		"-of", "json", video).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", video, err)
	}
	var r struct {
		Streams []struct {
			TimeBase string `json:"time_base"`
		} `json:"streams"`
		Frames []struct {
			PTS *int64 `json:"pts"`
			Key int    `json:"key_frame"`
		} `json:"frames"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Streams) != 1 {
		t.Fatalf("ffprobe %s: %v\n%s", video, err, out)
	}
	var tb [2]int64
	if _, err := fmt.Sscanf(r.Streams[0].TimeBase, "%d/%d", &tb[0], &tb[1]); err != nil {
		t.Fatalf("ffprobe time base %q: %v", r.Streams[0].TimeBase, err)
	}
	fts := make([]FrameTime, len(r.Frames))
	for i, f := range r.Frames {
		if f.PTS == nil {
			t.Fatalf("ffprobe %s: frame %d has no pts", video, i)
		}
		fts[i] = FrameTime{PTS: *f.PTS, Key: f.Key == 1}
	}
	return fts, tb
}
