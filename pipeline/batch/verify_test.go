package batch

import (
	"context"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/pipeline"
)

// TestVerifyShards: a one-process shards-layout job and a job split over
// two processes are each proven complete against their inputs (a folder
// and a tar shard); one process's output alone misses the other's images;
// a cut array and a lost metadata file are found.
func TestVerifyShards(t *testing.T) {
	m := openTiny(t)
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	makeImages(t, in, 7)
	tarPath := filepath.Join(dir, "000001.tar")
	red := string(pngBytes(t, color.RGBA{200, 20, 20, 255}))
	writeTar(t, tarPath, [][2]string{{"a.png", red}, {"b.png", red}, {"c.jpg", "broken"}})
	inputs := []string{in, tarPath}
	run := func(out string, shard Shard) {
		t.Helper()
		if _, err := Run(context.Background(), Config{Engine: eng, Inputs: inputs, Prompts: []string{"a cat"}, Out: out,
			Layout: "shards", ShardSize: 3, Shard: shard}); err != nil {
			t.Fatal(err)
		}
	}
	one := filepath.Join(dir, "one")
	run(one, Shard{})
	rep, err := VerifyShards(context.Background(), one, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() || rep.Images != 10 || rep.Failed != 1 || rep.Shards != 4 || rep.Processes != 1 {
		t.Fatalf("one process: %+v; want complete, 10 images in 4 shards, 1 failed", rep)
	}

	split := filepath.Join(dir, "split")
	run(split, Shard{Index: 0, Count: 2})
	rep, err = VerifyShards(context.Background(), split, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete() || len(rep.Missing) == 0 || rep.Processes != 2 {
		t.Fatalf("process 0 of 2 alone: %+v; want incomplete with missing images", rep)
	}
	run(split, Shard{Index: 1, Count: 2})
	rep, err = VerifyShards(context.Background(), split, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() || rep.Images != 10 || len(rep.ProcessSeen) != 2 {
		t.Fatalf("both processes: %+v; want complete", rep)
	}

	// A cut array, a lost metadata file.
	arr := filepath.Join(one, "shards", "000001", "image_embeds.npy")
	st, _ := os.Stat(arr)
	os.Truncate(arr, st.Size()-4)
	os.Remove(filepath.Join(one, "metadata", "metadata_000002.parquet"))
	rep, err = VerifyShards(context.Background(), one, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete() || len(rep.Broken) != 1 || !strings.Contains(rep.Broken[0], "image_embeds.npy") || len(rep.Missing) != 3 {
		t.Fatalf("cut array, lost metadata: %+v; want 1 broken shard naming image_embeds.npy and 3 missing images", rep)
	}
}
