package video

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/vision/video/videotest"
)

// BenchmarkDecode decodes a 20 s 1280×720 30 fps H.264 video (ffmpeg's
// testsrc2, a key frame every 2 s) with each sampling; frames/s is frames
// kept per second of wall time. BenchmarkDecode/ffmpeg-null is ffmpeg
// decoding every frame with no output, the floor for sampling by rate.
func BenchmarkDecode(b *testing.B) {
	videotest.Need(b)
	v := filepath.Join(b.TempDir(), "bench.mp4")
	videotest.Run(b, "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-t", "20", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "60", v)
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"fps1", Options{}},
		{"fps5", Options{FPS: 5}},
		{"keyframes", Options{Sampling: SampleKeyframes}},
		{"scene", Options{Sampling: SampleScene}},
		{"all", Options{Sampling: SampleAll}},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				if _, err := DecodeFile(context.Background(), v, c.o, func(Frame) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "frames/s")
		})
	}
	b.Run("ffmpeg-null", func(b *testing.B) {
		for b.Loop() {
			videotest.Run(b, "-i", v, "-f", "null", "-")
		}
		b.ReportMetric(600/(b.Elapsed().Seconds()/float64(b.N)), "frames/s")
	})
}

// BenchmarkDecodeStream decodes the video of BenchmarkDecode at 1 frame a
// second from memory as a stream (an io.Reader, as a tar member or an
// object arrives): as ffmpeg writes it by default (moov after mdat:
// spooled to a temporary file first), and with -movflags +faststart
// (streamed through the pipe); file is DecodeFile on the same file.
func BenchmarkDecodeStream(b *testing.B) {
	videotest.Need(b)
	dir := b.TempDir()
	last := filepath.Join(dir, "last.mp4")
	videotest.Run(b, "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-t", "20", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "60", last)
	first := filepath.Join(dir, "first.mp4")
	videotest.Run(b, "-i", last, "-c", "copy", "-movflags", "+faststart", first)
	for _, c := range []struct{ name, path string }{{"file", last}, {"spooled", last}, {"streamed", first}} {
		data, err := os.ReadFile(c.path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			n := 0
			fn := func(Frame) error { n++; return nil }
			for b.Loop() {
				var err error
				if c.name == "file" {
					_, err = DecodeFile(context.Background(), c.path, Options{}, fn)
				} else {
					_, err = Decode(context.Background(), struct{ io.Reader }{bytes.NewReader(data)}, c.name, Options{TempDir: dir}, fn)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "frames/s")
			b.ReportMetric(float64(len(data))/1e6, "MB")
		})
	}
}
