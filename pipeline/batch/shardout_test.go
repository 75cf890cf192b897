package batch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/tensorio"
)

// TestRunShardsLayout: 7 images in shards of 3 give shards of 3, 3 and 1
// rows whose arrays hold, row for row, what the files layout writes per
// image; the metadata names each row; a resumed job skips whole shards; a
// job stopped midway leaves no shard that is not whole, and resumed it
// writes the same bytes as a job never stopped.
func TestRunShardsLayout(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 7)
	prompts := []string{"a photo of a cat", "a red car"}
	files := filepath.Join(t.TempDir(), "files")
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	if _, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: prompts, Out: files}); err != nil {
		t.Fatal(err)
	}
	run := func(out string, ctx context.Context, resume bool, progress func(Progress)) *Summary {
		sum, err := Run(ctx, Config{Engine: eng, Inputs: []string{in}, Prompts: prompts, Out: out, Layout: "shards", ShardSize: 3,
			Batch: 2, Streams: 2, Resume: resume, Progress: progress})
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		return sum
	}
	whole := filepath.Join(t.TempDir(), "whole")
	if sum := run(whole, context.Background(), false, nil); sum.Done != 7 {
		t.Fatalf("summary %+v", sum)
	}
	var order []string // the walk's order: row r of shard i is image 3i+r
	Walk(context.Background(), []string{in}, func(it Item) error { order = append(order, it.Rel); return nil }, nil)
	for i, n := range []int{3, 3, 1} {
		name := fmt.Sprintf("%06d", i)
		b, err := os.ReadFile(filepath.Join(whole, "metadata", "metadata_"+name+".parquet"))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := parquet.Read[shardRow](bytes.NewReader(b), int64(len(b)))
		if err != nil || len(rows) != n {
			t.Fatalf("shard %s metadata: %d rows, %v; want %d", name, len(rows), err, n)
		}
		for r, row := range rows {
			if int(row.Row) != r || row.Key != order[3*i+r] || row.Status != StatusOK || len(row.Scores) != 2 {
				t.Errorf("shard %s row %d: %+v, want %s", name, r, row, order[3*i+r])
			}
		}
		for _, tn := range []string{"image_embeds", "patch_features", "prompt.0.text_to_image", "prompt.1.image_to_text", "prompt.0.conditioned_tokens"} {
			x, err := tensorio.ReadNPY(filepath.Join(whole, "shards", name, tn+".npy"))
			if err != nil {
				t.Fatalf("%s/%s: %v", name, tn, err)
			}
			if x.Shape[0] != n {
				t.Fatalf("%s/%s: shape %v, want %d rows", name, tn, x.Shape, n)
			}
			stacked := x.Data.([]float32)
			per := len(stacked) / n
			for r := range n {
				one, _, err := tensorio.ReadSafetensors(filepath.Join(files, order[3*i+r]+".safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(stacked[r*per:(r+1)*per], one[tn].Data.([]float32)) {
					t.Errorf("%s/%s row %d differs from %s's file", name, tn, r, order[3*i+r])
				}
			}
		}
		emb, err := os.ReadFile(filepath.Join(whole, "img_emb", "img_emb_"+name+".npy"))
		ref, _ := os.ReadFile(filepath.Join(whole, "shards", name, "image_embeds.npy"))
		if err != nil || !bytes.Equal(emb, ref) {
			t.Errorf("img_emb_%s.npy: %v, or not the shard's image_embeds", name, err)
		}
	}
	if sum := run(whole, context.Background(), true, nil); sum.Done != 0 || sum.Skipped != 7 {
		t.Errorf("resumed when complete: %+v, want all 7 skipped", sum)
	}

	// Stopped after 4 images, then resumed.
	stopped := filepath.Join(t.TempDir(), "stopped")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	run(stopped, ctx, false, func(Progress) {
		if n++; n == 4 {
			cancel()
		}
	})
	for i := range 3 {
		name := fmt.Sprintf("%06d", i)
		_, metaErr := os.Stat(filepath.Join(stopped, "metadata", "metadata_"+name+".parquet"))
		_, dirErr := os.Stat(filepath.Join(stopped, "shards", name))
		if (metaErr == nil) != (dirErr == nil) {
			t.Errorf("shard %s is half there after the stop: metadata %v, arrays %v", name, metaErr, dirErr)
		}
	}
	run(stopped, context.Background(), true, nil)
	for _, dir := range []string{"shards", "img_emb", "metadata"} {
		want, got := treeBytes(t, filepath.Join(whole, dir)), treeBytes(t, filepath.Join(stopped, dir))
		if len(want) == 0 || len(want) != len(got) {
			t.Fatalf("%s: %d files after stop and resume, %d uninterrupted", dir, len(got), len(want))
		}
		for name, b := range want {
			if !bytes.Equal(b, got[name]) {
				t.Errorf("%s/%s differs after stop and resume", dir, name)
			}
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(stopped, ".tmp-shard-*")); len(ents) != 0 {
		t.Errorf("temporary shard folders left: %v", ents)
	}
}

// treeBytes maps every file under dir (relative) to its bytes.
func treeBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel], _ = os.ReadFile(p)
		}
		return nil
	})
	return out
}

// TestShardsLayoutEntryOutputs: in the shards layout with heatmaps and the
// index, an ok image's entry lists its shard's arrays (sorted), its
// img_emb and metadata files, then its heatmaps (one a prompt, as PNG),
// then its index part's files (index.json last); every file listed exists,
// and the shard's arrays listed are exactly those in its folder.
func TestShardsLayoutEntryOutputs(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 4)
	prompts := []string{"a photo of a cat", "a red car"}
	out := filepath.Join(t.TempDir(), "out")
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	if _, err := Run(context.Background(), Config{Engine: eng, Inputs: []string{in}, Prompts: prompts, Out: out, Layout: "shards", ShardSize: 3,
		Heatmaps: true, Index: true, Batch: 2, Streams: 2}); err != nil {
		t.Fatal(err)
	}
	var order []string // the walk's order: image k is row k%3 of shard k/3
	Walk(context.Background(), []string{in}, func(it Item) error { order = append(order, it.Rel); return nil }, nil)
	entries := readManifest(t, filepath.Join(out, "manifest.jsonl"))
	if len(entries) != 4 {
		t.Fatalf("%d entries, want 4", len(entries))
	}
	for _, e := range entries {
		k := slices.Index(order, e.Path)
		if e.Status != StatusOK || k < 0 {
			t.Fatalf("entry %+v", e)
		}
		name := fmt.Sprintf("%06d", k/3)
		dir, err := os.ReadDir(filepath.Join(out, "shards", name))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range dir {
			want = append(want, "shards/"+name+"/"+d.Name())
		}
		slices.Sort(want)
		want = append(want, "img_emb/img_emb_"+name+".npy", "metadata/metadata_"+name+".parquet",
			e.Path+".heatmap.0.png", e.Path+".heatmap.1.png",
			"index/"+name+"/embeds.npy", "index/"+name+"/patches.npy", "index/"+name+"/index.json")
		if !slices.Equal(e.Outputs, want) {
			t.Errorf("%s outputs\n%q\nwant\n%q", e.Path, e.Outputs, want)
		}
		for _, o := range e.Outputs {
			if _, err := os.Stat(filepath.Join(out, o)); err != nil {
				t.Errorf("%s lists %s: %v", e.Path, o, err)
			}
		}
	}
}
