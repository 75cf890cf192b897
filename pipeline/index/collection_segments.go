package index

import (
	"context"
	"fmt"
	"slices"

	"github.com/conditionhq/condition/internal/weaviate"
)

// segmentPage is how many frames of a video one read of a collection
// returns.
var segmentPage = 1000

// segments groups the frames among hits into runs as Index.segments does
// over parts: every frame of each video among the hits is read from the
// collection (its objects whose video property is that video, in time
// order, with their image embeddings) and scored with q (normalised),
// as the hits are, logit_scale·cos + logit_bias. Nil without the video
// property or without frames among the hits.
func (c *Collection) segments(ctx context.Context, q []float32, hits []Hit) ([]Segment, error) {
	if !c.frames {
		return nil, nil
	}
	isHit := map[string]bool{}
	var videos []string
	for _, h := range hits {
		if h.Video == "" {
			continue
		}
		isHit[h.ID] = true
		if !slices.Contains(videos, h.Video) {
			videos = append(videos, h.Video)
		}
	}
	cons := ""
	if c.replication > 1 {
		cons = c.consistency
	}
	var out []Segment
	for _, v := range videos {
		var fs []Hit
		var times []float64
		var scores []float32
		err := c.c.Ordered(ctx, c.t.Collection, cons, "video", v, "time", segmentPage, c.hitProps(), func(s weaviate.Stored) error {
			cos, err := c.cosine(s, q)
			if err != nil {
				return err
			}
			h, err := c.objectHit(s, float32(c.meta.LogitScale*cos+c.meta.LogitBias))
			if err != nil {
				return err
			}
			if h.Time == nil {
				return fmt.Errorf("index: collection %s: object %s (%s) of video %s has no time", c.t, s.ID, h.Path, v)
			}
			fs, times, scores = append(fs, h), append(times, *h.Time), append(scores, h.Score)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("index: collection %s: the frames of %s: %w", c.t, v, err)
		}
		out = append(out, videoRuns(v, times, scores,
			func(i int) bool { return isHit[fs[i].ID] },
			func(i int) Hit { return fs[i] })...)
	}
	sortSegments(out)
	return out, nil
}

// patches reads the patches [P·D] of each of hits (objects of the
// collection) by id.
func (c *Collection) patches(ctx context.Context, hits []Hit) ([][]float32, error) {
	cons := ""
	if c.replication > 1 {
		cons = c.consistency
	}
	out := make([][]float32, len(hits))
	for i, h := range hits {
		s, err := c.c.Get(ctx, c.t.Collection, h.ID, cons)
		if err != nil {
			return nil, fmt.Errorf("index: collection %s: object %s (%s): %w", c.t, h.ID, h.Path, err)
		}
		if s == nil {
			return nil, fmt.Errorf("index: collection %s: object %s (%s) is gone", c.t, h.ID, h.Path)
		}
		if out[i], err = c.flatPatches(*s, h); err != nil {
			return nil, err
		}
	}
	return out, nil
}
