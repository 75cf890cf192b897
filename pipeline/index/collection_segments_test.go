package index_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/conditionhq/condition/internal/weaviate"
	"github.com/conditionhq/condition/internal/weaviatetest"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
	"github.com/conditionhq/condition/pipeline/index"
	"github.com/conditionhq/condition/vision/video"
	"github.com/conditionhq/condition/vision/video/videotest"
)

// TestCollectionVideoSegments: the same job over two generated videos,
// written to a file index (float32) and to a collection in a real
// Weaviate node, gives the same hits (with video and time) and the same
// segments (video, start, end, frames, best frame and its words' cells),
// the collection's frames read a few at a time, and its export keeps
// them (the same segments without words); a collection made
// without the video and time properties (as before they were) gains them
// when a job writes into it, and then gives the same segments.
func TestCollectionVideoSegments(t *testing.T) {
	videotest.Need(t)
	node := weaviatetest.Start(t)
	defer index.SetSegmentPage(5)()
	ctx := context.Background()
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	makeClip(t, in, "a.mp4", redCircleClip())
	other := redCircleClip()[:4]
	makeClip(t, in, "b.mp4", append(other, other...))
	eng, err := pipeline.Open(ctx, "default", pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	job := func(cfg batch.Config) {
		t.Helper()
		cfg.Engine, cfg.Inputs, cfg.Prompts, cfg.Out = eng, []string{in}, []string{"x"}, filepath.Join(t.TempDir(), "out")
		cfg.Video = video.Options{FPS: 2}
		if _, err := batch.Run(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Index {
			if err := os.Rename(cfg.Out, filepath.Join(filepath.Dir(in), "findex")); err != nil {
				t.Fatal(err)
			}
		}
	}
	job(batch.Config{Index: true, IndexDType: "float32"})
	search := func(where string) *index.SearchResult {
		t.Helper()
		x, err := index.Open(ctx, where, index.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		if x.Rows() != 24 {
			t.Fatalf("%s: %d rows, want 24 frames", where, x.Rows())
		}
		res, err := x.Search(ctx, eng, "a red circle", index.SearchOptions{Top: 3, Words: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want := search(filepath.Join(filepath.Dir(in), "findex"))
	if len(want.Segments) == 0 {
		t.Fatal("no segments over the file index")
	}
	same := func(url string) {
		t.Helper()
		got := search(url)
		for i, h := range got.Hits {
			w := want.Hits[i]
			if h.Path != w.Path || h.Video != w.Video || h.Time == nil || *h.Time != *w.Time {
				t.Errorf("%s hit %d: %s (%s at %v); the file index: %s (%s at %v)", url, i, h.Path, h.Video, h.Time, w.Path, w.Video, *w.Time)
			}
		}
		if len(got.Segments) != len(want.Segments) {
			t.Fatalf("%s: %d segments; the file index %d: %+v", url, len(got.Segments), len(want.Segments), want.Segments)
		}
		for i, g := range got.Segments {
			w := want.Segments[i]
			if g.Video != w.Video || g.Start != w.Start || g.End != w.End || g.Frames != w.Frames || g.Best.Path != w.Best.Path ||
				*g.Best.Time != *w.Best.Time || g.Best.ID == "" || len(g.Best.Words) != len(w.Best.Words) {
				t.Fatalf("%s segment %d: %s %v-%v s (%d frames, best %s); the file index: %s %v-%v s (%d frames, best %s)",
					url, i, g.Video, g.Start, g.End, g.Frames, g.Best.Path, w.Video, w.Start, w.End, w.Frames, w.Best.Path)
			}
			for k := range w.Best.Words {
				if g.Best.Words[k].Cell != w.Best.Words[k].Cell {
					t.Errorf("%s segment %d word %s: cell %v; the file index %v", url, i, w.Best.Words[k].Word, g.Best.Words[k].Cell, w.Best.Words[k].Cell)
				}
			}
			t.Logf("%s segment %d: %s %.2f-%.2f s (%d frames), best %s score %.3f", url, i+1, g.Video, g.Start, g.End, g.Frames, g.Best.Path, g.Best.Score)
		}
	}
	url := "weaviate://" + node.Host() + "/Clips"
	job(batch.Config{Collection: &batch.CollectionConfig{URL: url}})
	same(url)

	// Its export (embeddings, no patches) keeps each frame's video and
	// time: the same segments without words.
	coll, err := index.OpenCollection(ctx, url, index.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(t.TempDir(), "export")
	if _, err := coll.ExportPooled(ctx, exported); err != nil {
		t.Fatal(err)
	}
	ex, err := index.Open(ctx, exported, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exRes, err := ex.Search(ctx, eng, "a red circle", index.SearchOptions{Top: 3})
	ex.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(exRes.Segments) != len(want.Segments) || exRes.Segments[0].Start != want.Segments[0].Start || exRes.Segments[0].End != want.Segments[0].End {
		t.Errorf("the export's segments %+v; the file index's %+v", exRes.Segments, want.Segments)
	}

	// A collection made before frames had a video and a time.
	meta, err := batch.CollectionMeta(eng)
	if err != nil {
		t.Fatal(err)
	}
	meta.Format = index.CollectionFormat
	desc, _ := json.Marshal(meta)
	old := "weaviate://" + node.Host() + "/Before"
	c := weaviate.New(node.Host(), "")
	if err := c.CreateClass(ctx, weaviate.ClassSpec{Name: "Before", Description: string(desc), Patches: true,
		Properties: []string{"path", "source", "member", "sha256", "grid", "model", "revision", "readout", "program_version"}}); err != nil {
		t.Fatal(err)
	}
	job(batch.Config{Collection: &batch.CollectionConfig{URL: old}})
	same(old)
}
