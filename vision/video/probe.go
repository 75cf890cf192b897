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
		TimeBase    string `json:"time_base"`
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
	Packets []struct {
		Stream int    `json:"stream_index"`
		PTS    *int64 `json:"pts"`
		DTS    *int64 `json:"dts"`
		Flags  string `json:"flags"`
	} `json:"packets"`
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
	po, err := runProbe(ctx, p, path, src, in, false)
	if err != nil {
		return Info{}, err
	}
	return pickStream(po, path, o)
}

// probeSeek is probe for a file decoded at a rate (SampleFPS), which also
// lists the file's packets (reading no pixels) and plans the decode from
// key frames when that decodes fewer frames (see planSeek): the plan is
// nil when it does not.
func probeSeek(ctx context.Context, p Programs, path, src string, o Options) (Info, *seekPlan, error) {
	po, err := runProbe(ctx, p, path, src, nil, true)
	if err != nil {
		return Info{}, nil, err
	}
	info, err := pickStream(po, path, o)
	if err != nil {
		return Info{}, nil, err
	}
	tbs := map[int][2]int64{}
	for _, s := range po.Streams {
		if n, d, ok := strings.Cut(s.TimeBase, "/"); ok {
			a, err1 := strconv.ParseInt(n, 10, 64)
			b, err2 := strconv.ParseInt(d, 10, 64)
			if err1 == nil && err2 == nil {
				tbs[s.Index] = [2]int64{a, b}
			}
		}
	}
	pk := make([]packet, len(po.Packets))
	for i, q := range po.Packets {
		pk[i] = packet{stream: q.Stream, hasPTS: q.PTS != nil, hasDTS: q.DTS != nil,
			key: strings.Contains(q.Flags, "K"), drop: strings.Contains(q.Flags, "D")}
		if q.PTS != nil {
			pk[i].pts = *q.PTS
		}
		if q.DTS != nil {
			pk[i].dts = *q.DTS
		}
	}
	if plan, ok := planSeek(pk, info.Stream, tbs, o.fps(), seekGap); ok {
		return info, &plan, nil
	}
	return info, nil, nil
}

// runProbe runs ffprobe on src for its streams and format, and its
// packets' timestamps and flags when packets is set.
func runProbe(ctx context.Context, p Programs, path, src string, in io.Reader, packets bool) (probeOut, error) {
	args := []string{"-v", "error", "-print_format", "json=c=1", "-show_streams", "-show_format"}
	if packets {
		args = append(args, "-show_entries", "packet=stream_index,pts,dts,flags")
	}
	cmd := exec.CommandContext(ctx, p.FFprobe, append(args, "-i", src)...)
	ownGroup(cmd)
	cmd.Stdin = in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return probeOut{}, ctx.Err()
		}
		return probeOut{}, fmt.Errorf("video: %q: ffprobe: %s", path, firstLine(stderr.String(), err.Error()))
	}
	var po probeOut
	if err := json.Unmarshal(out, &po); err != nil {
		return probeOut{}, fmt.Errorf("video: %q: ffprobe's output: %w", path, err)
	}
	return po, nil
}

// pickStream describes po's first video stream that is not a cover
// picture, checked against o's pixel limit.
func pickStream(po probeOut, path string, o Options) (Info, error) {
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
