package video

import (
	"fmt"
	"strconv"
	"strings"

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
	// SampleScene keeps the first frame and every frame whose picture
	// differs from the frame decoded before it by more than
	// Options.Scene: ffmpeg's scene score (select's scene variable, in
	// [0, 1]).
	SampleScene
)

// DefaultFPS is the sampling rate when Options.FPS is 0.
const DefaultFPS = 1.0

// DefaultScene is SampleScene's threshold when Options.Scene is 0.
const DefaultScene = 0.3

// Options controls a decode.
type Options struct {
	Sampling Sampling
	FPS      float64 // SampleFPS's rate; 0 means DefaultFPS
	// Scene is SampleScene's threshold on ffmpeg's scene score, in
	// (0, 1); 0 means DefaultScene.
	Scene float64
	// MaxPixels refuses videos whose frames (upright) have more pixels,
	// from the header: 0 means vision.DefaultMaxPixels, negative no limit.
	MaxPixels int64
	// MaxSpool bounds the bytes of a stream that Decode writes to a
	// temporary file when it cannot be read from a pipe (see Decode): 0
	// means DefaultMaxSpool, negative never. TempDir is where ("" is
	// os.TempDir).
	MaxSpool int64
	TempDir  string
	// NoSeek decodes every frame in order at a rate (SampleFPS). By
	// default a file (not a stream) is decoded from the key frame before
	// each sampled frame where that skips frames (ffprobe lists its
	// packets first): the same frames, pixels and times.
	NoSeek bool
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

func (o Options) scene() float64 {
	if o.Scene == 0 {
		return DefaultScene
	}
	return o.Scene
}

// check refuses a rate that is not positive and finite, and a scene
// threshold outside (0, 1).
func (o Options) check() error {
	switch o.Sampling {
	case SampleFPS:
		if f := o.fps(); !(f > 0) || f > 1e6 {
			return fmt.Errorf("video: sampling rate %v frames per second: want a positive number up to 1e6", o.FPS)
		}
	case SampleScene:
		if s := o.scene(); !(s > 0 && s < 1) {
			return fmt.Errorf("video: scene threshold %v: want a number between 0 and 1", o.Scene)
		}
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
	case SampleScene:
		t := strconv.FormatFloat(o.scene(), 'f', -1, 64)
		return "select='isnan(prev_t)+gt(scene," + t + ")',showinfo"
	}
	f := strconv.FormatFloat(o.fps(), 'f', -1, 64)
	return "select='isnan(prev_t)+gt(floor(t*" + f + "),floor(prev_t*" + f + "))',showinfo"
}

// ParseSampling parses "all", "keyframes" (or "key"), "scene" or "fps"
// as the sampling modes.
func ParseSampling(s string) (Sampling, error) {
	switch s {
	case "fps", "":
		return SampleFPS, nil
	case "all":
		return SampleAll, nil
	case "keyframes", "key":
		return SampleKeyframes, nil
	case "scene":
		return SampleScene, nil
	}
	return 0, fmt.Errorf("video: sampling %q: want all, keyframes, scene[:THRESHOLD] or fps", s)
}

// ParseFrames parses a sampling as ParseSampling does, or
// "scene:THRESHOLD": the mode and the scene threshold (0 when not
// given; a given one is a number in (0, 1)).
func ParseFrames(s string) (Sampling, float64, error) {
	mode, arg, ok := strings.Cut(s, ":")
	if !ok || mode != "scene" {
		m, err := ParseSampling(s)
		return m, 0, err
	}
	t, err := strconv.ParseFloat(arg, 64)
	if err != nil || !(t > 0 && t < 1) {
		return 0, 0, fmt.Errorf("video: scene threshold %q: want a number between 0 and 1 (scene:0.3)", arg)
	}
	return SampleScene, t, nil
}

// String returns the name ParseSampling takes.
func (s Sampling) String() string {
	switch s {
	case SampleAll:
		return "all"
	case SampleKeyframes:
		return "keyframes"
	case SampleScene:
		return "scene"
	}
	return "fps"
}
