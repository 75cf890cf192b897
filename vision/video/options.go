package video

import (
	"fmt"
	"strconv"

	"github.com/conditionhq/condition/vision"
)

// Sampling is which frames a decode keeps.
type Sampling int

const (
	// SampleFPS keeps, at Options.FPS frames per second, the first frame
	// at or after each k/FPS seconds (see the package comment).
	SampleFPS Sampling = iota
	// SampleAll keeps every frame.
	SampleAll
	// SampleKeyframes keeps the key frames only, the frames ffprobe
	// marks key_frame=1 (ffmpeg's select=key; decoders that can skip
	// the others, as H.264's, do: -skip_frame nokey).
	SampleKeyframes
)

// DefaultFPS is the sampling rate when Options.FPS is 0.
const DefaultFPS = 1.0

// Options controls a decode.
type Options struct {
	Sampling Sampling
	FPS      float64 // SampleFPS's rate; 0 means DefaultFPS
	// MaxPixels refuses videos whose frames (upright) have more pixels,
	// from the header: 0 means vision.DefaultMaxPixels, negative no limit.
	MaxPixels int64
	// MaxSpool bounds the bytes of a stream that Decode writes to a
	// temporary file when it cannot be read from a pipe (see Decode): 0
	// means DefaultMaxSpool, negative never. TempDir is where ("" is
	// os.TempDir).
	MaxSpool int64
	TempDir  string
	// FFmpeg and FFprobe are the programs' paths or names; "" looks up
	// "ffmpeg" and "ffprobe" on PATH.
	FFmpeg, FFprobe string
}

func (o Options) limit() int64 {
	if o.MaxPixels == 0 {
		return vision.DefaultMaxPixels
	}
	return o.MaxPixels
}

func (o Options) fps() float64 {
	if o.FPS == 0 {
		return DefaultFPS
	}
	return o.FPS
}

// check refuses a rate that is not positive and finite.
func (o Options) check() error {
	if o.Sampling != SampleFPS {
		return nil
	}
	if f := o.fps(); !(f > 0) || f > 1e6 {
		return fmt.Errorf("video: sampling rate %v frames per second: want a positive number up to 1e6", o.FPS)
	}
	return nil
}

// filter returns ffmpeg's -vf chain for o: the sampling, then showinfo,
// which logs each kept frame's pts (the decode reads the times there).
func (o Options) filter() string {
	switch o.Sampling {
	case SampleAll:
		return "showinfo"
	case SampleKeyframes:
		// Decoders that honour -skip_frame nokey (H.264) pass key frames
		// only; others (VP9) pass all, and select keeps the key frames.
		return "select=key,showinfo"
	}
	f := strconv.FormatFloat(o.fps(), 'f', -1, 64)
	return "select='isnan(prev_t)+gt(floor(t*" + f + "),floor(prev_t*" + f + "))',showinfo"
}

// ParseSampling parses "all", "keyframes" (or "key"), or "fps" as the
// sampling modes.
func ParseSampling(s string) (Sampling, error) {
	switch s {
	case "fps", "":
		return SampleFPS, nil
	case "all":
		return SampleAll, nil
	case "keyframes", "key":
		return SampleKeyframes, nil
	}
	return 0, fmt.Errorf("video: sampling %q: want all, keyframes or fps", s)
}

// String returns the name ParseSampling takes.
func (s Sampling) String() string {
	switch s {
	case SampleAll:
		return "all"
	case SampleKeyframes:
		return "keyframes"
	}
	return "fps"
}
