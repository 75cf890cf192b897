package batch

import (
	"image"
	"io"

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
//
// A video in a folder is decoded from its file; a tar shard's video member
// and a video object in a store are streamed to ffmpeg's standard input as
// they are read (see video.Decode: an MP4 whose header follows its data is
// spooled to a temporary file first).

// frameItem is the item of frame f of the video item it.
func frameItem(it Item, f video.Frame) Item {
	return Item{
		Path:       it.Path,
		Rel:        it.Rel + "#t=" + video.Seconds(f.Time),
		Unit:       it.ShardKey(), // a video's frames go to one shard: it is decoded once
		Member:     it.Member,
		MemberName: it.MemberName,
		Caption:    it.Caption,
		Video:      it.Rel,
		Time:       f.Time,
		Frame:      f.Image,
	}
}

// isVideoItem reports whether it is a video file or object to decode into
// frames (a tar shard's video members are decoded by the shard's walk).
func isVideoItem(it Item) bool {
	return !it.Member && it.Err == nil && it.Video == "" && video.IsName(it.Rel)
}

// isVideoInput reports whether the listed item it is a video whose items
// are its frames: a file, an object or a tar shard's member.
func isVideoInput(it Item) bool {
	return it.Err == nil && it.Video == "" && video.IsName(it.Rel)
}

// video emits the sampled frames of the video item it, in presentation
// order, then, if the decode failed, it as a failed item. A walk that only
// lists emits it alone (a count ahead ends: its frames are not known
// before decoding), and a video outside this shard is not decoded.
func (w *walker) video(it Item) error {
	if w.counting {
		return errUncounted
	}
	if w.listOnly || !w.decodes(it) {
		return w.fn(it)
	}
	if it.Obj == nil {
		return w.decoded(it, func(fn func(video.Frame) error) error {
			_, err := video.DecodeFile(w.ctx, it.Path, w.videoOpts, fn)
			return err
		})
	}
	return w.decoded(it, func(fn func(video.Frame) error) error {
		r, err := w.stores.OpenExisting(w.ctx, *it.Obj)
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = video.Decode(w.ctx, r, it.Path, w.videoOpts, fn)
		return err
	})
}

// decodes reports whether the walk decodes the video item it: it is in
// this process's shard.
func (w *walker) decodes(it Item) bool { return w.takes == nil || w.takes(it.ShardKey()) }

// streamVideo emits the frames of the video item it read from r (a tar
// shard's member), as video does.
func (w *walker) streamVideo(it Item, r io.Reader) error {
	return w.decoded(it, func(fn func(video.Frame) error) error {
		_, err := video.Decode(w.ctx, r, it.Path+"/"+it.MemberName, w.videoOpts, fn)
		return err
	})
}

// decoded runs decode, emitting each frame it gives as an item of the
// video item it, then it as a failed item if the decode failed.
func (w *walker) decoded(it Item, decode func(func(video.Frame) error) error) error {
	var emitErr error
	err := decode(func(f video.Frame) error {
		emitErr = w.fn(frameItem(it, f))
		return emitErr
	})
	switch {
	case emitErr != nil:
		return emitErr
	case w.ctx.Err() != nil:
		return w.ctx.Err()
	case err != nil:
		return w.fn(Item{Path: it.Path, Rel: it.Rel, Unit: it.ShardKey(), Video: it.Rel, Member: it.Member, MemberName: it.MemberName, Err: err})
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
