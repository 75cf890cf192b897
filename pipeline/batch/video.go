package batch

import (
	"image"

	"github.com/conditionhq/condition/vision"
	"github.com/conditionhq/condition/vision/video"
)

// A video input is decoded by the walk (vision/video, FFmpeg found at run
// time) into one item per sampled frame, named VIDEO#t=SECONDS: the video's
// relative path and the frame's presentation time in seconds with six
// decimals, as ffprobe prints pts_time. Each frame then goes through the
// job as an image does (its pixels hashed for --resume, so resume is per
// frame). A video that cannot be decoded is one failed item named as the
// video; frames decoded before a decoding error are items all the same.

// frameItem is the item of frame f of the video item it.
func frameItem(it Item, f video.Frame) Item {
	return Item{
		Path:  it.Path,
		Rel:   it.Rel + "#t=" + video.Seconds(f.Time),
		Unit:  it.Rel, // a video's frames go to one shard: it is decoded once
		Video: it.Rel,
		Time:  f.Time,
		Frame: f.Image,
	}
}

// isVideoItem reports whether it is a local video file to decode into
// frames.
func isVideoItem(it Item) bool {
	return !it.Member && it.Obj == nil && it.Err == nil && it.Video == "" && video.IsName(it.Rel)
}

// video emits the sampled frames of the video item it, in presentation
// order, then, if the decode failed, it as a failed item. A walk that only
// lists emits it alone (a count ahead ends: its frames are not known
// before decoding), and a video outside this shard is not decoded.
func (w *walker) video(it Item) error {
	if w.counting {
		return errUncounted
	}
	if w.listOnly || (w.takes != nil && !w.takes(it.Rel)) {
		return w.fn(it)
	}
	var emitErr error
	_, err := video.DecodeFile(w.ctx, it.Path, w.videoOpts, func(f video.Frame) error {
		emitErr = w.fn(frameItem(it, f))
		return emitErr
	})
	switch {
	case emitErr != nil:
		return emitErr
	case w.ctx.Err() != nil:
		return w.ctx.Err()
	case err != nil:
		return w.fn(Item{Path: it.Path, Rel: it.Rel, Unit: it.Rel, Video: it.Rel, Err: err})
	}
	return nil
}

// frameImage takes w's frame from its item, when w is a video's frame:
// the image and its size as decoded (nil otherwise). A frame is never
// over the pixel limit: its video was refused from its header.
func frameImage(w *work) (image.Image, vision.Info, error) {
	f := w.it.Frame
	if f == nil {
		return nil, vision.Info{}, nil
	}
	w.it.Frame = nil
	return f, vision.Info{Format: "video", Width: f.Rect.Dx(), Height: f.Rect.Dy(), Scale: 1}, nil
}
