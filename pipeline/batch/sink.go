package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"slices"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
	"github.com/conditionhq/condition/vision"
)

// sink is one of a job's outputs: the per-image files, the output shards,
// the index parts or the collection in Weaviate. The encoder streams give
// it each image's results (write, several streams at once); the collector,
// in one goroutine, gives it the images that wait for its next checkpoint
// (holds, checkpoint), then each image's final entry (account), and once
// every image is in, finishes it; abandon closes what is left unfinished.
type sink interface {
	// write puts image w's results r in the output, adding what it
	// writes to w's entry; an error fails the image.
	write(w *work, r *result) error
	// holds returns, when w's entry must wait for the output's next
	// checkpoint, how many images may wait at most; 0 when it need not.
	holds(w *work) int
	// checkpoint writes what the images ws wait for in one go, and fails
	// those it could not write.
	checkpoint(ctx context.Context, ws []*work)
	// account records w's final entry; total is the number of images the
	// walk found, or -1 while it goes on.
	account(w *work, total int) error
	// finish ends the output once every image of the total is accounted
	// for.
	finish(total int) error
	// abandon closes what is left unfinished (the job failed or was
	// stopped); its temporary files stay for --resume to remove.
	abandon()
}

// result is one attended image's results, as the sinks take them.
type result struct {
	enc    *pipeline.ImageEncoding
	grid   vision.Grid                // the grid of its maps
	p      int                        // patches on that grid
	ts     map[string]tensorio.Tensor // its arrays, named as in its file
	meta   map[string]string          // its file's metadata
	scores []Score
	sheets []*pipeline.Attention // the attentions whose heatmaps are drawn (Config.Heatmaps)
	buf    []byte                // the stream's last file encoding, for this one to reuse
}

// sinkBase is a sink's defaults: no checkpoint, nothing to account for,
// finish or abandon.
type sinkBase struct{}

func (sinkBase) holds(*work) int                     { return 0 }
func (sinkBase) checkpoint(context.Context, []*work) {}
func (sinkBase) account(*work, int) error            { return nil }
func (sinkBase) finish(int) error                    { return nil }
func (sinkBase) abandon()                            {}

// filesSink writes an image's own files: its arrays (the files layout, in
// format) and its heatmaps (in either layout).
type filesSink struct {
	sinkBase
	out    *outFolder
	arrays bool
	format string
}

func (s *filesSink) write(w *work, r *result) error {
	if s.arrays {
		if err := s.writeArrays(w, r); err != nil {
			return err
		}
	}
	for k, a := range r.sheets {
		if len(a.Overlays()) == 0 {
			continue
		}
		name := fmt.Sprintf("%s.heatmap.%d.png", w.it.Rel, k)
		var base image.Image = w.base
		if w.sheet != nil {
			base = w.sheet
		}
		if err := s.writeHeatmap(name, base, a); err != nil {
			return err
		}
		w.entry.Outputs = append(w.entry.Outputs, name)
	}
	w.base = pipeline.HeatmapBase{}
	if w.sheet != nil {
		vision.Release(w.sheet)
		w.sheet = nil
	}
	return nil
}

// writeArrays writes w's file of arrays and metadata.
func (s *filesSink) writeArrays(w *work, r *result) error {
	outName := w.it.Rel + "." + s.format
	var data []byte
	var err error
	if s.format == "npz" {
		mb, _ := json.Marshal(r.meta)
		r.ts["metadata_json"] = tensorio.Tensor{DType: tensorio.DTypeU8, Shape: []int{len(mb)}, Data: mb}
		data, err = tensorio.EncodeNPZ(r.ts)
	} else {
		data, err = tensorio.AppendSafetensors(r.buf[:0], r.ts, r.meta)
		r.buf = data
	}
	if err == nil {
		if err = s.out.WriteFile(outName, data); err == nil {
			w.entry.Outputs = append(w.entry.Outputs, outName)
		}
	}
	return err
}

func (s *filesSink) writeHeatmap(name string, base image.Image, a *pipeline.Attention) error {
	sheet, err := a.Heatmap(base)
	if err != nil {
		return err
	}
	data, err := pipeline.EncodePNG(sheet)
	if err != nil {
		return err
	}
	return s.out.WriteFile(name, data)
}

// shardsSink puts each image's arrays in its output shard (the shards
// layout).
type shardsSink struct {
	sinkBase
	set *shardSet
}

func (s shardsSink) write(w *work, r *result) error {
	if err := s.set.write(w.seq, r.ts); err != nil {
		return err
	}
	name := shardName(s.set.proc, w.seq/s.set.size)
	for tn := range r.ts {
		w.entry.Outputs = append(w.entry.Outputs, "shards/"+name+"/"+tn+".npy")
	}
	slices.Sort(w.entry.Outputs)
	w.entry.Outputs = append(w.entry.Outputs, "img_emb/img_emb_"+name+".npy", "metadata/metadata_"+name+".parquet")
	return nil
}

func (s shardsSink) account(w *work, total int) error {
	return s.set.account(w.seq, shardRowOf(w.entry, w.it.ShardKey()), total)
}

func (s shardsSink) finish(total int) error { return s.set.finishAll(total) }

func (s shardsSink) abandon() { s.set.abandon() }

// shardRowOf is an image's row of its shard's metadata.
func shardRowOf(e Entry, unit string) shardRow {
	r := shardRow{Key: e.Path, ImagePath: e.Path, Source: e.Source, SHA256: e.SHA256, Status: e.Status, Error: e.Error,
		Width: int32(e.Width), Height: int32(e.Height), Unit: unit, Video: e.Video, Time: e.Time}
	for _, s := range e.Scores {
		r.Scores = append(r.Scores, s.Score)
	}
	return r
}

// indexSink puts each image's vectors in its index part (Config.Index),
// but for the images of a part kept whole from an earlier run.
type indexSink struct {
	sinkBase
	set *indexOutSet
	eng *pipeline.Engine
}

// write writes w's rows of its index part: its image_embeds normalised
// and its joint-space patches [H·W, D] on its grid.
func (s indexSink) write(w *work, r *result) error {
	if w.kept {
		return nil
	}
	enc := r.enc
	if s.set.maxP == 0 && enc.Grid != s.set.grid {
		return fmt.Errorf("batch: index: a %s patch grid, the index's is %s", enc.Grid, s.set.grid)
	}
	patches, err := s.eng.JointPatches(enc)
	if err != nil {
		return fmt.Errorf("batch: index: %w", err)
	}
	if err := s.set.write(w.seq, enc.Embeds, patches, enc.Grid); err != nil {
		return err
	}
	w.entry.Outputs = append(w.entry.Outputs, s.set.outputs(w.seq)...)
	return nil
}

func (s indexSink) account(w *work, total int) error {
	if w.kept {
		return nil
	}
	return s.set.account(w.seq, indexOutItemOf(w.it, w.entry), total)
}

func (s indexSink) finish(total int) error { return s.set.finishAll(total) }

func (s indexSink) abandon() { s.set.abandon() }

// collectionSink writes each image's object into the job's collection in
// Weaviate (Config.Collection): its entry waits for its batch's write.
type collectionSink struct {
	sinkBase
	coll *collSink
	eng  *pipeline.Engine
}

func (s collectionSink) write(w *work, r *result) error { return s.coll.object(s.eng, w, r.enc) }

func (s collectionSink) holds(w *work) int {
	if w.obj != nil {
		return s.coll.batch
	}
	return 0
}

func (s collectionSink) checkpoint(ctx context.Context, ws []*work) { s.coll.write(ctx, ws) }
