package video

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"strings"

	"github.com/conditionhq/condition/vision"
)

// Info describes the video stream a decode reads, as ffprobe reports it.
type Info struct {
	Stream int    // the stream's index in the file
	Codec  string // "h264", "vp9", ...
	// Width and Height are the frames' size upright: the coded size, its
	// sides swapped when the display matrix turns it by 90° or 270°.
	Width, Height int
	// Rotation is the display matrix's rotation in degrees as ffprobe
	// prints it, in [0, 360): ffmpeg turns the frames upright by it.
	Rotation int
	Duration float64 // seconds; 0 when unknown (a stream)
	FPS      float64 // the average frame rate; 0 when unknown
}

// ErrNoVideo is wrapped by the error for a file with no video stream.
var ErrNoVideo = errors.New("no video stream")

type probeOut struct {
	Streams []struct {
		Index       int    `json:"index"`
		CodecType   string `json:"codec_type"`
		CodecName   string `json:"codec_name"`
		Width       int    `json:"width"`
		Height      int    `json:"height"`
		AvgRate     string `json:"avg_frame_rate"`
		Duration    string `json:"duration"`
		Disposition struct {
			AttachedPic int `json:"attached_pic"`
		} `json:"disposition"`
		Tags struct {
			Rotate string `json:"rotate"`
		} `json:"tags"`
		SideData []struct {
			Rotation *float64 `json:"rotation"`
		} `json:"side_data_list"`
	} `json:"streams"`
	Format struct {
		Duration string `json:"duration"`
	} `json:"format"`
}

// Probe reads the streams of the video at path with ffprobe and describes
// its first video stream (cover pictures are not video). It refuses a file
// without one (ErrNoVideo) and frames over o's pixel limit (a
// *vision.TooLargeError), from the header, before any frame is decoded.
func Probe(ctx context.Context, path string, o Options) (Info, error) {
	p, err := Find(o)
	if err != nil {
		return Info{}, fmt.Errorf("video: %q: %w", path, err)
	}
	return probe(ctx, p, path, path, nil, o)
}

// probe runs ffprobe on src (a path, or "pipe:0" for in, which ffprobe
// then reads on its standard input), then checks what it found against o;
// path names the video in errors.
func probe(ctx context.Context, p Programs, path, src string, in io.Reader, o Options) (Info, error) {
	cmd := exec.CommandContext(ctx, p.FFprobe, "-v", "error", "-print_format", "json", "-show_streams", "-show_format", "-i", src)
	ownGroup(cmd)
	cmd.Stdin = in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return Info{}, ctx.Err()
		}
		return Info{}, fmt.Errorf("video: %q: ffprobe: %s", path, firstLine(stderr.String(), err.Error()))
	}
	var po probeOut
	if err := json.Unmarshal(out, &po); err != nil {
		return Info{}, fmt.Errorf("video: %q: ffprobe's output: %w", path, err)
	}
	for _, s := range po.Streams {
		if s.CodecType != "video" || s.Disposition.AttachedPic != 0 {
			continue
		}
		info := Info{Stream: s.Index, Codec: s.CodecName, Width: s.Width, Height: s.Height, FPS: ratio(s.AvgRate)}
		info.Duration, _ = strconv.ParseFloat(orDefault(s.Duration, po.Format.Duration), 64)
		info.Rotation = rotation(s.Tags.Rotate)
		for _, sd := range s.SideData {
			if sd.Rotation != nil {
				info.Rotation = ((int(math.Round(*sd.Rotation)) % 360) + 360) % 360
			}
		}
		if info.Rotation == 90 || info.Rotation == 270 {
			info.Width, info.Height = info.Height, info.Width
		}
		if info.Width <= 0 || info.Height <= 0 {
			return Info{}, fmt.Errorf("video: %q: stream %d has no frame size (%dx%d)", path, s.Index, info.Width, info.Height)
		}
		if lim := o.limit(); lim > 0 && int64(info.Width)*int64(info.Height) > lim {
			return Info{}, fmt.Errorf("video: %q: %w", path, &vision.TooLargeError{Format: info.Codec + " video frame", Width: info.Width, Height: info.Height, Limit: lim})
		}
		return info, nil
	}
	return Info{}, fmt.Errorf("video: %q: %w (streams: %d)", path, ErrNoVideo, len(po.Streams))
}

func rotation(tag string) int {
	r, err := strconv.Atoi(tag)
	if err != nil {
		return 0
	}
	return ((r % 360) + 360) % 360
}

// ratio parses "num/den" as ffprobe prints rates; 0 when it is not one.
func ratio(s string) float64 {
	n, d, ok := strings.Cut(s, "/")
	if !ok {
		return 0
	}
	a, err1 := strconv.ParseFloat(n, 64)
	b, err2 := strconv.ParseFloat(d, 64)
	if err1 != nil || err2 != nil || b == 0 {
		return 0
	}
	return a / b
}

// firstLine returns the first non-empty line of s, else def.
func firstLine(s, def string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return def
}
