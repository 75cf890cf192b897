package batch

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/internal/s3test"
	"github.com/conditionhq/condition/pipeline/index"
)

// TestRunIndexObjectStore: a shards-layout job with an index into an S3
// prefix (SeaweedFS) uploads index parts equal, byte for byte, to the same
// job's on a local disk; VerifyShards proves them from the store; a
// resumed job keeps them; one with a part's index.json deleted redoes
// that part alone; --overwrite removes them with the rest.
func TestRunIndexObjectStore(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "out"); err != nil {
		t.Fatal(err)
	}
	st := &objstore.Stores{}
	defer st.Close()
	f := newIndexFixture(t, 6)
	cfg := func(out string) Config {
		return Config{Engine: f.eng, Inputs: []string{f.in}, Prompts: []string{"a cat"}, Out: out, Layout: "shards", ShardSize: 3,
			Batch: 2, Streams: 2, Index: true}
	}
	local := filepath.Join(t.TempDir(), "local")
	if _, err := Run(ctx, cfg(local)); err != nil {
		t.Fatal(err)
	}
	const prefix = "s3://out/ix/"
	if _, err := Run(ctx, cfg(prefix)); err != nil {
		t.Fatal(err)
	}
	want, got := localFiles(t, local), storeFiles(t, st, prefix)
	n := 0
	for name, b := range want {
		if !strings.HasPrefix(name, "index/") {
			continue
		}
		n++
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s: the store's differs from the local job's (%d bytes, %d local)", name, len(got[name]), len(b))
		}
	}
	if n != 3*3 {
		t.Errorf("%d index files locally, want 3 parts of 3 (embeds, patches, index.json)", n)
	}
	rep, err := VerifyShards(ctx, prefix, []string{f.in}, nil)
	if err != nil || !rep.Complete() || rep.IndexParts != 3 {
		t.Fatalf("verify the store: %+v, %v", rep, err)
	}
	// Searched from the store: the same hits, scores and word boxes as
	// from the local copy.
	lx, err := index.Open(ctx, local, index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lx.Close()
	ur := objstore.NewURLReader()
	defer ur.Close()
	sx, err := index.Open(ctx, prefix, index.Options{Store: ur})
	if err != nil {
		t.Fatalf("open the index in the store: %v", err)
	}
	lr, err := lx.Search(ctx, f.eng, "a cat", index.SearchOptions{Top: 4, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	sr, err := sx.Search(ctx, f.eng, "a cat", index.SearchOptions{Top: 4, Words: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Hits) != len(lr.Hits) || len(sr.Hits) == 0 {
		t.Fatalf("%d hits from the store, %d locally", len(sr.Hits), len(lr.Hits))
	}
	for i := range sr.Hits {
		s, l := sr.Hits[i], lr.Hits[i]
		if s.Path != l.Path || s.Score != l.Score || len(s.Words) != len(l.Words) || s.Words[0].Box != l.Words[0].Box {
			t.Errorf("hit %d from the store %s %v, locally %s %v", i, s.Path, s.Score, l.Path, l.Score)
		}
	}
	if err := sx.Close(); err != nil {
		t.Errorf("close the store's index: %v", err)
	}
	resumed := cfg(prefix)
	resumed.Resume = true
	if sum, err := Run(ctx, resumed); err != nil || sum.Skipped != 7 {
		t.Errorf("resumed when whole: %+v, %v; want all 7 skipped", sum, err)
	}
	l, _ := objstore.Parse(prefix + "index/000001/index.json")
	if err := st.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	if rep, _ := VerifyShards(ctx, prefix, nil, nil); rep == nil || rep.Complete() {
		t.Errorf("verify without index/000001/index.json: %+v; want incomplete", rep)
	}
	if sum, err := Run(ctx, resumed); err != nil || sum.Skipped != 4 || sum.Done+sum.Failed != 3 {
		t.Errorf("resumed with index part 000001 incomplete: %+v, %v; want its 3 images done again", sum, err)
	}
	got = storeFiles(t, st, prefix)
	for name, b := range want {
		if strings.HasPrefix(name, "index/") && !bytes.Equal(got[name], b) {
			t.Errorf("%s: differs after the resume", name)
		}
	}
	over := cfg(prefix)
	over.Overwrite, over.Index = true, false
	if _, err := Run(ctx, over); err != nil {
		t.Fatal(err)
	}
	for name := range storeFiles(t, st, prefix) {
		if strings.HasPrefix(name, "index/") {
			t.Errorf("%s: left by --overwrite", name)
		}
	}
}
