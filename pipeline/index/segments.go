package index

import (
	"cmp"
	"slices"
)

// Segment is a run of consecutive sampled frames of one video that a
// search found: every frame of the run scores at or above its video's cut
// (segmentCut: within the top quarter of the range between the worst and
// the best score of that video's frames in the index), the frames just
// before and after it do not, and at least one of its frames is among the
// search's hits.
type Segment struct {
	Video string `json:"video"`
	// Start and End are the times in seconds of the run's first and last
	// frames (equal for a run of one frame).
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	Frames int     `json:"frames"` // the run's sampled frames
	// Best is the run's best-scoring frame (its Time, Score and, with
	// SearchOptions.Words, its Words and Attention).
	Best Hit `json:"best"`
}

// segmentCut is the fraction of a video's score range, below its best
// frame's score, that a frame of a segment may score.
const segmentCut = 0.25

// frameRef is one sampled frame of a video in the index.
type frameRef struct {
	time      float64
	part, row int32
}

// addFrame records that row is the frame of video at time t.
func (p *indexPart) addFrame(row int, video string, t float64) {
	if p.vid == nil {
		p.vid = make([]int32, p.meta.Rows)
		for i := range p.vid {
			p.vid[i] = -1
		}
		p.times = make([]float64, p.meta.Rows)
	}
	k := slices.Index(p.videos, video)
	if k < 0 {
		k = len(p.videos)
		p.videos = append(p.videos, video)
	}
	p.vid[row], p.times[row] = int32(k), t
}

// frameOf returns the video and time of row, ok false for an image.
func (p *indexPart) frameOf(row int) (video string, t float64, ok bool) {
	if p.vid == nil || p.vid[row] < 0 {
		return "", 0, false
	}
	return p.videos[p.vid[row]], p.times[row], true
}

// videoFrames gathers every video's frames across parts, in time order;
// nil when no part holds a frame.
func videoFrames(parts []*indexPart) map[string][]frameRef {
	var out map[string][]frameRef
	for pi, p := range parts {
		for r, k := range p.vid {
			if k < 0 {
				continue
			}
			if out == nil {
				out = map[string][]frameRef{}
			}
			v := p.videos[k]
			out[v] = append(out[v], frameRef{p.times[r], int32(pi), int32(r)})
		}
	}
	for _, fs := range out {
		slices.SortFunc(fs, func(a, b frameRef) int { return cmp.Compare(a.time, b.time) })
	}
	return out
}

// rowScore is row's logit with q (the scaled query of searchVector).
func (p *indexPart) rowScore(row int, q []float32) float32 {
	t := topK{k: 1}
	p.score(&t, 0, row, row+1, q)
	if len(t.h) == 0 {
		return 0
	}
	return t.h[0].score
}

// segments groups the frames among hits into runs (see Segment), best
// run first; nil without videos among the hits.
func (x *Index) segments(q []float32, hits []Hit) []Segment {
	if x.frames == nil {
		return nil
	}
	type key struct{ part, row int32 }
	partOf := map[string]int32{}
	for i, p := range x.parts {
		partOf[p.name] = int32(i)
	}
	isHit := map[key]bool{}
	var videos []string
	for _, h := range hits {
		if h.Video == "" {
			continue
		}
		isHit[key{partOf[h.Part], int32(h.Row)}] = true
		if !slices.Contains(videos, h.Video) {
			videos = append(videos, h.Video)
		}
	}
	var out []Segment
	for _, v := range videos {
		fs := x.frames[v]
		times := make([]float64, len(fs))
		scores := make([]float32, len(fs))
		for i, f := range fs {
			times[i] = f.time
			scores[i] = x.parts[f.part].rowScore(int(f.row), q) + float32(x.meta.LogitBias)
		}
		out = append(out, videoRuns(v, times, scores,
			func(i int) bool { return isHit[key{fs[i].part, fs[i].row}] },
			func(i int) Hit { return x.frameHit(fs[i], scores[i]) })...)
	}
	sortSegments(out)
	return out
}

// videoRuns returns the segments of video v, whose sampled frames, in
// time order, have times and scores: the runs of frames at or above the
// video's cut with a hit (isHit) among them, each with its best frame's
// Hit (hit), in time order.
func videoRuns(v string, times []float64, scores []float32, isHit func(i int) bool, hit func(i int) Hit) []Segment {
	if len(scores) == 0 {
		return nil
	}
	hi := slices.Max(scores)
	cut := hi - segmentCut*(hi-slices.Min(scores))
	var out []Segment
	for a := 0; a < len(scores); {
		if scores[a] < cut {
			a++
			continue
		}
		b, best, found := a, a, false
		for ; b < len(scores) && scores[b] >= cut; b++ {
			if scores[b] > scores[best] {
				best = b
			}
			found = found || isHit(b)
		}
		if found {
			out = append(out, Segment{Video: v, Start: times[a], End: times[b-1], Frames: b - a, Best: hit(best)})
		}
		a = b
	}
	return out
}

// sortSegments orders segments by their best frame's score, best first.
func sortSegments(out []Segment) {
	slices.SortStableFunc(out, func(a, b Segment) int { return cmp.Compare(b.Best.Score, a.Best.Score) })
}

// frameHit is the hit of frame f scoring score.
func (x *Index) frameHit(f frameRef, score float32) Hit {
	p := x.parts[f.part]
	return p.hit(int(f.row), score)
}
