package batch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/vision"
)

// A job's collection in Weaviate (Config.Collection): each image that
// encodes is one object (its normalised image embedding, its joint-space
// patches on its grid, for SigLIP 2 NaFlex its own, and where it was read;
// a video's frame also its video and time; see package index), written by the collector in batches of
// CollectionConfig.Batch before the image's manifest entry: an entry is ok
// only once its batch was written, and an object the batch refused is an
// error entry naming why (--resume does it again). Object ids come from
// each image's source and tar member, so a retried batch, a resumed job or
// a job array's task run twice replaces objects instead of adding them (a
// video's frames: from its source, member and the frame's time).

// CollectionConfig is a job's collection in Weaviate.
type CollectionConfig struct {
	URL string // weaviate://HOST:PORT/Name
	// APIKey is Weaviate's API key ("": anonymous access).
	APIKey string
	// Replication is the replication factor of the collection when the
	// job creates it (0: 1); an existing collection keeps its own.
	Replication int
	// Consistency is the writes' consistency level: ONE, QUORUM (the
	// default) or ALL.
	Consistency string
	// Batch is how many objects one write sends, at most (default 64).
	Batch int
	// Muvera makes a collection created with MUVERA-encoded patches.
	Muvera bool
	// VectorIndex, EFConstruction and MaxConnections make a collection
	// created search its image embeddings with that index: see
	// index.CollectionOptions. An existing collection made otherwise is
	// refused when they name other settings.
	VectorIndex                    string
	EFConstruction, MaxConnections int
	// Quantization and RescoreLimit compress the image embeddings in the
	// index of a collection created: see index.CollectionOptions.
	Quantization string
	RescoreLimit int
	// Retries is how many times a batch whose write failed as a whole (a
	// node down, a timeout) is sent again, with exponential backoff from
	// one second, before its images fail (default 8).
	Retries int
}

// collSink writes a job's images into its collection.
type collSink struct {
	c       *index.Collection
	batch   int
	retries int
	version string
	grid    vision.Grid // the collection's grid; zero with per-image grids
	maxP    int         // per-image grids: the patch budget; 0 for one grid
	log     interface {
		Warn(msg string, args ...any)
	}
}

// openCollection connects to (and creates) the job's collection.
func openCollection(ctx context.Context, cc *CollectionConfig, eng *pipeline.Engine, version string) (*collSink, error) {
	meta, err := CollectionMeta(eng)
	if err != nil {
		return nil, err
	}
	g, maxP := vision.Grid{H: meta.Grid[0], W: meta.Grid[1]}, meta.MaxPatches
	if cc.Batch < 0 || cc.Retries < 0 {
		return nil, fmt.Errorf("batch: collection %s: batch %d and retries %d: want 0 (the default) or more", cc.URL, cc.Batch, cc.Retries)
	}
	c, err := index.OpenCollection(ctx, cc.URL, index.CollectionOptions{APIKey: cc.APIKey, Consistency: cc.Consistency,
		Create: &meta, Replication: cc.Replication, Muvera: cc.Muvera,
		VectorIndex: cc.VectorIndex, EFConstruction: cc.EFConstruction, MaxConnections: cc.MaxConnections,
		Quantization: cc.Quantization, RescoreLimit: cc.RescoreLimit})
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	s := &collSink{c: c, batch: cc.Batch, retries: cc.Retries, version: version, grid: g, maxP: maxP}
	if s.batch == 0 {
		s.batch = 64
	}
	if s.retries == 0 {
		s.retries = 8
	}
	return s, nil
}

// CollectionMeta returns what a job of eng stamps on its collection: the
// model, revision, readout, width, patch grid (or patch budget) and logit
// scale and bias. A collection made with it (index.CreateCollection) takes
// that job's images, and only those of the same model, readout and grid.
func CollectionMeta(eng *pipeline.Engine) (index.CollectionMeta, error) {
	if eng.JointDim() <= 0 {
		return index.CollectionMeta{}, errors.New("batch: a collection needs the engine in CLIP's joint space both ways (the default layer, both directions)")
	}
	m := eng.Model()
	g, maxP, err := jobGrids(eng)
	if err != nil {
		return index.CollectionMeta{}, fmt.Errorf("batch: collection: %w", err)
	}
	return index.CollectionMeta{Model: m.Name(), Revision: m.Revision(), Readout: indexReadout(eng.Options().Readout),
		Dim: eng.JointDim(), Grid: [2]int{g.H, g.W}, MaxPatches: maxP, LogitScale: eng.LogitScale(), LogitBias: eng.LogitBias()}, nil
}

// object makes w's object from its encoding, for the collector to write.
func (s *collSink) object(eng *pipeline.Engine, w *work, enc *pipeline.ImageEncoding) error {
	switch {
	case s.maxP > 0 && (enc.Grid.Patches() <= 0 || enc.Grid.Patches() > s.maxP):
		return fmt.Errorf("batch: collection: a %s patch grid; the model's images have their own grids of 1 to %d patches", enc.Grid, s.maxP)
	case s.maxP == 0 && enc.Grid != s.grid:
		return fmt.Errorf("batch: collection: a %s patch grid, the collection's is %s", enc.Grid, s.grid)
	}
	patches, err := eng.JointPatches(enc)
	if err != nil {
		return fmt.Errorf("batch: collection: %w", err)
	}
	o := &index.CollectionObject{Path: w.entry.Path, Source: w.entry.Source, SHA256: w.entry.SHA256,
		Embeds: append([]float32(nil), enc.Embeds...), Patches: patches, Grid: enc.Grid, ProgramVersion: s.version}
	if w.entry.Time != nil {
		t := *w.entry.Time
		o.Video, o.Time = w.entry.Video, &t
	}
	if w.it.Member {
		if o.Member = w.it.MemberName; o.Member == "" {
			o.Member = strings.TrimPrefix(w.entry.Path, w.it.Unit+"/")
		}
	}
	w.obj = o
	return nil
}

// write writes the objects of ws (the ok ones) in one batch, sent again
// while it fails as a whole (until ctx is done), and marks each image the
// collection refused (or the whole batch, once retries are spent) failed.
func (s *collSink) write(ctx context.Context, ws []*work) {
	var objs []index.CollectionObject
	var of []*work
	for _, w := range ws {
		if w.fail == nil && w.obj != nil {
			objs = append(objs, *w.obj)
			of = append(of, w)
		}
	}
	if len(objs) == 0 {
		return
	}
	t := time.Now()
	var errs []error
	var err error
	wait := time.Second
	// A stopped job still writes the images under way, for 30 s at most,
	// and sends no failed batch again.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(30*time.Second, cancel) })()
	for attempt := 0; ; attempt++ {
		errs, err = s.c.Upsert(wctx, objs)
		if err == nil || attempt >= s.retries || ctx.Err() != nil {
			break
		}
		if s.log != nil {
			s.log.Warn("collection write failed; sending the batch again", "collection", s.c.String(), "objects", len(objs), "attempt", attempt+1, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait/2)))):
		}
		wait = min(2*wait, 15*time.Second)
	}
	ms := float64(time.Since(t).Microseconds()) / 1000 / float64(len(objs))
	for i, w := range of {
		w.obj = nil
		w.timings["collection"] = ms
		switch {
		case err != nil:
			w.fail = fmt.Errorf("collection %s: the batch of %d objects was not written: %w", s.c.String(), len(objs), err)
		case errs[i] != nil:
			w.fail = fmt.Errorf("collection %s: %w", s.c.String(), errs[i])
		default:
			w.entry.Object = s.c.String() + "/" + objs[i].ID()
		}
	}
}
