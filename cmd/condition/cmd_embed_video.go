package main

import (
	"context"
	"errors"
	"fmt"
	"image"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/vision/video"
)

// embedInput is one input of embed: an image file, or a video whose
// sampled frames are embedded.
type embedInput struct {
	path  string
	video bool
}

// embedded is what embed encoded, in input order: per image or frame its
// encoding, its name (an image's path; a frame's VIDEO#t=SECONDS) and,
// for a frame, its video and time.
type embedded struct {
	encs   []pipeline.ImageEncoding
	names  []string
	videos []string
	times  []*float64
	failed []error // images and videos that could not be read or decoded
}

func (d *embedded) add(enc pipeline.ImageEncoding, name, vid string, t *float64) {
	d.encs, d.names, d.videos, d.times = append(d.encs, enc), append(d.names, name), append(d.videos, vid), append(d.times, t)
}

// embedAll encodes the inputs in order: each run of images on the encoder
// streams of opts (as run does), each video's sampled frames (vo) in
// batches of opts.Batch as they are decoded. With nothing encoded and
// something failed, it is an error.
func embedAll(ctx context.Context, eng *pipeline.Engine, ins []embedInput, vo video.Options, opts pipeline.StreamOptions) (*embedded, error) {
	d := &embedded{}
	for i := 0; i < len(ins); {
		if ins[i].video {
			if err := embedVideo(ctx, eng, ins[i].path, vo, opts.Batch, d); err != nil {
				return nil, err
			}
			i++
			continue
		}
		var paths []string
		for ; i < len(ins) && !ins[i].video; i++ {
			paths = append(paths, ins[i].path)
		}
		encs, done, failed, err := embedImages(ctx, eng, paths, opts)
		if err != nil {
			return nil, err
		}
		for k := range encs {
			d.add(encs[k], done[k], "", nil)
		}
		d.failed = append(d.failed, failed...)
	}
	if len(d.encs) == 0 && len(d.failed) > 0 {
		return nil, fmt.Errorf("embed: no image could be embedded: %w", errors.Join(d.failed...))
	}
	return d, nil
}

// embedVideo decodes the video at path and encodes its sampled frames in
// batches of batch, adding each to d; a video that cannot be decoded (or
// is cut short) adds its error to d.failed, after the frames decoded
// before it.
func embedVideo(ctx context.Context, eng *pipeline.Engine, path string, vo video.Options, batch int, d *embedded) error {
	var imgs []image.Image
	var times []float64
	var encErr error
	flush := func() error {
		if len(imgs) == 0 {
			return nil
		}
		encs, err := eng.EncodeImages(ctx, imgs)
		if err != nil {
			encErr = fmt.Errorf("embed: %s: %w", shown(path), err)
			return encErr
		}
		for k := range encs {
			t := times[k]
			d.add(encs[k], path+"#t="+video.Seconds(t), path, &t)
		}
		imgs, times = imgs[:0], times[:0]
		return nil
	}
	_, err := video.DecodeFile(ctx, path, vo, func(f video.Frame) error {
		imgs, times = append(imgs, f.Image), append(times, f.Time)
		if len(imgs) < batch {
			return nil
		}
		return flush()
	})
	switch {
	case encErr != nil:
		return encErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if ferr := flush(); ferr != nil {
		return ferr
	}
	if err != nil {
		d.failed = append(d.failed, err)
	}
	return nil
}
