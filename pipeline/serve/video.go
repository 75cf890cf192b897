package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"net/http"
	"strings"
	"sync"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// A video in a request (/v1/attend's "video", a data:video/... input of
// /v1/embeddings) is decoded by FFmpeg from the request's bytes (an MP4
// whose header is at its end through a temporary file; see video.Decode)
// into its sampled frames, "fps" and "frames" as the CLI's --fps and
// --frames; each frame is then an image of the request. The frames of one
// request are bounded by Options.MaxVideoFrames, its bytes by
// MaxBodyBytes.

// defaultMaxVideoFrames is Options.MaxVideoFrames's default.
const defaultMaxVideoFrames = 32

// sampling is how a request's videos are sampled: its "fps" (0: 1) and
// "frames" fields.
func (s *Server) sampling(fps float64, frames string) (video.Options, error) {
	mode, scene, err := video.ParseFrames(frames)
	if err != nil {
		return video.Options{}, badRequest("invalid_field", `"frames" %q: want fps, all, keyframes or scene[:THRESHOLD], a threshold between 0 and 1`, frames)
	}
	if fps < 0 || fps > 1e6 || fps != fps {
		return video.Options{}, badRequest("invalid_field", `"fps" is %v: want a positive number of frames per second (0: 1)`, fps)
	}
	return video.Options{Sampling: mode, FPS: fps, Scene: scene, MaxPixels: s.eng.Options().MaxPixels}, nil
}

// videoFrame is one sampled frame of a request's video, preprocessed.
type videoFrame struct {
	time   float64
	px     []float32       // the encoder's input
	img    image.Image     // the frame itself, when kept (heatmaps)
	bounds image.Rectangle // the frame's, upright
}

// videoFrames decodes a request's video (name names it in errors) into its
// sampled frames, each preprocessed (and kept whole when keep is set),
// refusing more than limit frames.
func (s *Server) videoFrames(ctx context.Context, data []byte, name string, vo video.Options, limit int, keep bool) ([]videoFrame, error) {
	var out []videoFrame
	errMany := errors.New("too many frames")
	_, err := video.Decode(ctx, bytes.NewReader(data), name, vo, func(f video.Frame) error {
		if len(out) == limit {
			return errMany
		}
		px := make([]float32, s.eng.Preprocessor().BufferLen(s.eng.InputSize()))
		if err := s.eng.Preprocess(px, f.Image); err != nil {
			return err
		}
		vf := videoFrame{time: f.Time, px: px, bounds: f.Image.Bounds()}
		if keep {
			vf.img = f.Image
		}
		out = append(out, vf)
		return nil
	})
	var tl *vision.TooLargeError
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, errMany):
		return nil, badRequest("too_many_frames", "%s: the request's videos give more than %d frames at this sampling, the server's limit per request; sample fewer: a lower \"fps\", or \"frames\": \"keyframes\" or \"scene\"", name, s.opts.MaxVideoFrames)
	case errors.Is(err, video.ErrNoFFmpeg):
		return nil, &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "no_ffmpeg",
			Message: "this server cannot decode videos: FFmpeg is not installed on it (" + video.InstallHint + ")"}
	case errors.As(err, &tl), ctx.Err() != nil:
		return nil, s.apiErr(err)
	}
	return nil, badRequest("invalid_video", "%s cannot be decoded: %s", name, strings.TrimPrefix(err.Error(), "video: "))
}

// encodeFrames encodes the frames with other requests' images, all queued
// at once.
func (s *Server) encodeFrames(ctx context.Context, frames []videoFrame) ([]pipeline.ImageEncoding, error) {
	on := s.expect(len(frames))
	defer on.done()
	encs := make([]pipeline.ImageEncoding, len(frames))
	errs := make([]error, len(frames))
	var wg sync.WaitGroup
	for j := range frames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			on.arrived()
			encs[j], errs[j] = s.images.submit(ctx, frames[j].px)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, s.apiErr(err)
		}
	}
	return encs, nil
}

// attendFrame is one sampled frame of an attended video.
type attendFrame struct {
	Time    float64        `json:"time"` // presentation time in seconds
	Prompts []attendPrompt `json:"prompts"`
}

// attendVideoResponse is /v1/attend's answer for a video: attend's
// answer per sampled frame.
type attendVideoResponse struct {
	Model   string        `json:"model"`
	Readout string        `json:"readout,omitempty"`
	Grid    [2]int        `json:"grid"`       // patch rows, columns
	Size    [2]int        `json:"frame_size"` // width, height, upright
	Crop    [4]int        `json:"crop"`       // x0, y0, x1, y1: the part of each frame the model sees
	Frames  []attendFrame `json:"frames"`
}

// attendVideo answers /v1/attend for a request with a video.
func (s *Server) attendVideo(w http.ResponseWriter, r *http.Request, req *imageRequest, opts pipeline.AttendOptions) error {
	if req.Windows {
		return badRequest("invalid_field", `"windows" is for images; a video's frames are attended as the model sees them`)
	}
	vo, err := s.sampling(req.FPS, req.Frames)
	if err != nil {
		return err
	}
	ctx := r.Context()
	frames, err := s.videoFrames(ctx, req.VideoData, "the video", vo, s.opts.MaxVideoFrames, req.Heatmaps)
	if err != nil {
		return err
	}
	if len(frames) == 0 {
		return badRequest("invalid_video", "the video has no frame to attend")
	}
	encs, err := s.encodeFrames(ctx, frames)
	if err != nil {
		return err
	}
	ps, err := s.prompts(ctx, req.Prompts, req.Truncate)
	if err != nil {
		return s.apiErr(err)
	}
	res := attendVideoResponse{Model: s.eng.Model().Name(), Readout: readoutName(s.eng), Frames: []attendFrame{}}
	for j := range frames {
		atts, err := s.eng.Attend(ctx, &encs[j], ps, opts)
		if err != nil {
			return s.apiErr(err)
		}
		var base image.Image
		if img := frames[j].img; img != nil {
			base = s.eng.HeatmapBase(img)
		}
		aps, err := s.attendPrompts(atts, encs[j].Grid, base, req)
		if err != nil {
			return err
		}
		b := frames[j].bounds
		crop := s.eng.CropRegion(b).Sub(b.Min)
		res.Grid, res.Size = [2]int{encs[j].Grid.H, encs[j].Grid.W}, [2]int{b.Dx(), b.Dy()}
		res.Crop = [4]int{crop.Min.X, crop.Min.Y, crop.Max.X, crop.Max.Y}
		res.Frames = append(res.Frames, attendFrame{Time: frames[j].time, Prompts: aps})
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// frameVec is a video frame's embedding in an embeddings answer.
type frameVec struct {
	time float64
	vec  []float32
}

// embedVideos decodes and encodes the videos of an embeddings request
// (the inputs at), all their frames together bounded by MaxVideoFrames,
// and returns each one's frames by input index, and their tokens.
func (s *Server) embedVideos(ctx context.Context, req *embeddingsRequest, videos [][]byte, at []int) (map[int][]frameVec, int, error) {
	if len(videos) == 0 {
		return nil, 0, nil
	}
	vo, err := s.sampling(req.FPS, req.Frames)
	if err != nil {
		return nil, 0, err
	}
	var all []videoFrame
	var ends []int
	for j, b := range videos {
		fs, err := s.videoFrames(ctx, b, fmt.Sprintf("input %d", at[j]), vo, s.opts.MaxVideoFrames-len(all), false)
		if err != nil {
			return nil, 0, err
		}
		all = append(all, fs...)
		ends = append(ends, len(all))
	}
	encs, err := s.encodeFrames(ctx, all)
	if err != nil {
		return nil, 0, err
	}
	out := map[int][]frameVec{}
	tokens, k := 0, 0
	for j, end := range ends {
		out[at[j]] = []frameVec{}
		for ; k < end; k++ {
			if encs[k].Embeds == nil {
				return nil, 0, &apiError{Status: http.StatusNotImplemented, Type: typeServer, Code: "no_embeddings", Message: "the model's vision graph gives no image_embeds"}
			}
			out[at[j]] = append(out[at[j]], frameVec{time: all[k].time, vec: encs[k].Embeds})
			tokens += 1 + encs[k].P()
		}
	}
	return out, tokens, nil
}
