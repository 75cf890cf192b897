package video

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Frame is one sampled frame.
type Frame struct {
	// Image is the frame upright, opaque RGBA (alpha 255): the RGB
	// ffmpeg's rgb24 conversion gives, as a PNG it writes decodes to.
	Image *image.RGBA
	// PTS is the frame's presentation timestamp in units of TimeBase
	// (num/den seconds): the pts ffprobe -show_frames shows for it.
	PTS      int64
	TimeBase [2]int64
	// Time is PTS × TimeBase in seconds, as ffmpeg computes a frame's t.
	Time  float64
	Index int // the frame's place among the sampled frames, from 0
}

// Seconds formats a time in seconds as ffprobe prints pts_time: six
// decimals.
func Seconds(t float64) string { return strconv.FormatFloat(t, 'f', 6, 64) }

// DecodeFile decodes the video at path, calling fn with each sampled frame
// in presentation order; fn's error stops the decode and is returned.
// The file is probed first (see Probe); frames decoded before a decoding
// error (a truncated or corrupt file) reach fn, then the error, naming the
// file, is returned. fn may keep a frame's Image. Cancelling ctx stops
// FFmpeg's process group.
func DecodeFile(ctx context.Context, path string, o Options, fn func(Frame) error) (Info, error) {
	if err := o.check(); err != nil {
		return Info{}, err
	}
	p, err := Find(o)
	if err != nil {
		return Info{}, fmt.Errorf("video: %q: %w", path, err)
	}
	return decodeFile(ctx, p, path, path, o, fn)
}

// decodeFile probes and decodes the file at src (name in errors): at a
// rate, from key frames where that decodes fewer frames (see planSeek).
func decodeFile(ctx context.Context, p Programs, name, src string, o Options, fn func(Frame) error) (Info, error) {
	if o.Sampling != SampleFPS || o.NoSeek {
		info, err := probe(ctx, p, name, src, nil, o)
		if err != nil {
			return Info{}, err
		}
		return info, run(ctx, p, name, src, nil, info, o, nil, fn)
	}
	info, plan, err := probeSeek(ctx, p, name, src, o)
	if err != nil {
		return Info{}, err
	}
	if plan != nil && planned != nil {
		planned(plan)
	}
	given, last := 0, int64(0) // the frames fn was given, the last one's pts
	err = run(ctx, p, name, src, nil, info, o, plan, func(f Frame) error {
		given, last = given+1, f.PTS
		return fn(f)
	})
	if !errors.Is(err, errSeekMiss) {
		return info, err
	}
	// A sampled frame did not come from the key frames (the packet list
	// misled the plan): decode the rest in order, after the frames given.
	return info, run(ctx, p, name, src, nil, info, o, nil, func(f Frame) error {
		if given > 0 && f.PTS <= last {
			return nil
		}
		f.Index, given = given, given+1
		return fn(f)
	})
}

// planned, when set (by tests), may change a decode's seek plan.
var planned func(*seekPlan)

// errSeekMiss is the error of a decode from key frames that did not give
// a sampled frame; the decode then goes on in order.
var errSeekMiss = errors.New("seeking to key frames: a sampled frame did not come")

// started, when set (by tests), is called with ffmpeg's pid once it runs.
var started func(pid int)

// probeBytes is how much of a stream Decode reads for ffprobe.
const probeBytes = 8 << 20

// Decode is DecodeFile for a stream read from r (name names it in
// errors): ffprobe reads its first 8 MiB, then ffmpeg the whole stream
// from its standard input, as it arrives. An MP4 or MOV whose header
// (moov) follows its data, or lies past those 8 MiB, cannot be read from
// a pipe: it is written to a temporary file in o.TempDir (at most
// o.MaxSpool bytes, DefaultMaxSpool by default; a larger one is refused
// with ErrHeaderLast), decoded from there and removed.
func Decode(ctx context.Context, r io.Reader, name string, o Options, fn func(Frame) error) (Info, error) {
	if err := o.check(); err != nil {
		return Info{}, err
	}
	p, err := Find(o)
	if err != nil {
		return Info{}, fmt.Errorf("video: %q: %w", name, err)
	}
	head, err := io.ReadAll(io.LimitReader(r, probeBytes))
	if err != nil {
		return Info{}, fmt.Errorf("video: %q: %w", name, err)
	}
	if headerLast(head) {
		return spooled(ctx, p, io.MultiReader(bytes.NewReader(head), r), name, o, fn)
	}
	info, err := probe(ctx, p, name, "pipe:0", bytes.NewReader(head), o)
	if err != nil {
		return Info{}, err
	}
	return info, run(ctx, p, name, "pipe:0", io.MultiReader(bytes.NewReader(head), r), info, o, nil, fn)
}

// run runs ffmpeg on src (stdin when in is set) and hands fn its frames.
// With a plan, ffmpeg reads src's runs through the concat demuxer (its
// list on the standard input) and only the plan's samples reach fn.
func run(parent context.Context, p Programs, name, src string, in io.Reader, info Info, o Options, plan *seekPlan, fn func(Frame) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	args := []string{"-hide_banner", "-nostats", "-nostdin", "-loglevel", "level+info", "-copyts"}
	if o.Sampling == SampleKeyframes {
		args = append(args, "-skip_frame", "nokey")
	}
	var want []int64
	if plan != nil {
		abs, err := filepath.Abs(src)
		if err != nil {
			return fmt.Errorf("video: %q: %w", name, err)
		}
		in, src, want = strings.NewReader(concatList(abs, *plan)), "pipe:0", plan.samples
		// One decoding thread: a run decodes a few frames, which frame
		// threading spends more CPU on (14% more over a 1 s GOP's runs).
		args = append(args, "-threads", "1", "-f", "concat", "-safe", "0", "-protocol_whitelist", "file,pipe")
	}
	args = append(args, "-i", src, "-map", "0:"+strconv.Itoa(info.Stream), "-vf", o.filter(),
		"-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1")
	cmd := exec.CommandContext(ctx, p.FFmpeg, args...)
	ownGroup(cmd)
	cmd.Stdin = in
	// A stream being copied to ffmpeg's standard input is waited for at
	// most this long once ffmpeg has gone (killed, or done reading).
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("video: %q: %w", name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("video: %q: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("video: %q: start ffmpeg: %w", name, err)
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	lg := newLog()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); lg.read(stderr) }()
	ferr := frames(bufio.NewReaderSize(stdout, 1<<20), lg, info, want, fn)
	if ferr != nil {
		cancel() // stop ffmpeg: nothing reads its frames any more
	}
	io.Copy(io.Discard, stdout)
	go func() {
		for range lg.times { // times of frames no one will read
		}
	}()
	wg.Wait()
	werr := cmd.Wait()
	var stop fnError
	switch {
	case parent.Err() != nil:
		return parent.Err()
	case errors.As(ferr, &stop):
		return stop.err
	case lg.err != "":
		return fmt.Errorf("video: %q: ffmpeg: %s", name, lg.err)
	case ferr != nil:
		return fmt.Errorf("video: %q: %w", name, ferr)
	case werr != nil:
		return fmt.Errorf("video: %q: ffmpeg: %w", name, werr)
	}
	return nil
}

// fnError is the error of a decode's callback, which stopped it.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// frames reads ffmpeg's raw frames from r, each with its time from lg,
// and calls fn with each; with want (the pts of the frames to keep, in
// order), only with those, and every one of them must come.
func frames(r io.Reader, lg *ffLog, info Info, want []int64, fn func(Frame) error) error {
	w, h := info.Width, info.Height
	raw := make([]byte, w*h*3)
	kept := 0
	for i := 0; ; i++ {
		if _, err := io.ReadFull(r, raw); err != nil {
			if err == io.EOF {
				if want != nil && kept < len(want) {
					return fmt.Errorf("%w: ffmpeg ended before the frame at pts %d", errSeekMiss, want[kept])
				}
				return nil
			}
			return fmt.Errorf("frame %d: %w", i, err)
		}
		st, ok := <-lg.times
		if !ok {
			return errLogEnded
		}
		if st.err != nil {
			return st.err
		}
		if st.w != w || st.h != h {
			return fmt.Errorf("frame %d is %dx%d, the stream said %dx%d (a size change within a video is not supported)", i, st.w, st.h, w, h)
		}
		if want != nil {
			switch {
			case kept < len(want) && st.pts == want[kept]:
			case kept == len(want) || st.pts < want[kept]:
				continue // a run's key frame, or a frame past its last sample
			default:
				return fmt.Errorf("%w: the frame at pts %d did not come (pts %d came)", errSeekMiss, want[kept], st.pts)
			}
		}
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		rgbToRGBA(img.Pix, raw)
		f := Frame{Image: img, PTS: st.pts, TimeBase: st.tb, Index: kept}
		kept++
		f.Time = float64(st.pts) * (float64(st.tb[0]) / float64(st.tb[1]))
		if err := fn(f); err != nil {
			return fnError{err}
		}
	}
}

func rgbToRGBA(dst, src []byte) {
	for i, j := 0, 0; j+2 < len(src); i, j = i+4, j+3 {
		dst[i], dst[i+1], dst[i+2], dst[i+3] = src[j], src[j+1], src[j+2], 255
	}
}
