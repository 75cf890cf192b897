package batch

import (
	"bytes"
	"context"
	"errors"
	"image/color"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/pipeline"
)

// TestRunGCS runs the job on gs:// prefixes served by a Cloud Storage JSON
// API server (fake-gcs-server, found by STORAGE_EMULATOR_HOST): images
// under a prefix (names with spaces and non-ASCII letters), a WebDataset
// shard in the store and a list of gs:// URLs in, the shards layout out to
// a prefix. Its arrays equal, byte for byte, those of the same job on local
// copies; its metadata names the same images.
func TestRunGCS(t *testing.T) {
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", NoListener: true, Writer: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gcs.HTTPHandler())
	t.Cleanup(func() { srv.Close(); gcs.Stop() })
	for _, b := range []string{"imgs", "out"} {
		gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	ctx := context.Background()
	st := &objstore.Stores{}
	defer st.Close()

	local := t.TempDir()
	photos := filepath.Join(local, "photos")
	makeImages(t, photos, 9)
	os.Rename(filepath.Join(photos, "img-001.png"), filepath.Join(photos, "ein schönes Bild 日本.png"))
	red, blue := string(pngBytes(t, color.RGBA{220, 30, 30, 255})), string(pngBytes(t, color.RGBA{30, 30, 220, 255}))
	tarPath := filepath.Join(local, "shards", "000001.tar")
	os.MkdirAll(filepath.Dir(tarPath), 0o755)
	writeTar(t, tarPath, [][2]string{
		{"000000.png", red}, {"000000.txt", "a red square"},
		{"000001.jpg", "not a jpeg"},
		{"000003.png", blue},
	})
	putTree(t, st, photos, "gs://imgs/photos/")
	putTree(t, st, filepath.Join(local, "shards"), "gs://imgs/shards/")

	m := openTiny(t)
	eng := tinyEngine(t, m, pipeline.Options{Threads: 1})
	prompts := []string{"a photo of a cat", "a red car"}
	cfg := func(inputs []string, out string) Config {
		return Config{Engine: eng, Inputs: inputs, Prompts: prompts, Out: out, Layout: "shards", ShardSize: 4, Batch: 2, Streams: 2}
	}
	localOut := filepath.Join(t.TempDir(), "out")
	sum, err := Run(ctx, cfg([]string{photos, tarPath}, localOut))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 11 || sum.Failed != 1 {
		t.Fatalf("local job: %+v; want 11 done, 1 failed", sum)
	}
	remote := cfg([]string{"gs://imgs/photos/", "gs://imgs/shards/{000001..000001}.tar"}, "gs://out/job/")
	rsum, err := Run(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	if rsum.Done != sum.Done || rsum.Failed != sum.Failed {
		t.Fatalf("store job: %+v; the local one %+v", rsum, sum)
	}
	want := localFiles(t, localOut)
	got := storeFiles(t, st, "gs://out/job/")
	if len(got) != len(want) {
		t.Errorf("store job wrote %d objects, the local job %d files: %v", len(got), len(want), keys(got))
	}
	arrays := 0
	for name, b := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: not in the store", name)
		case strings.HasPrefix(name, "metadata/"):
			lr, gr := metaRows(t, b), metaRows(t, g)
			if len(lr) != len(gr) {
				t.Errorf("%s: %d rows in the store, %d local", name, len(gr), len(lr))
				continue
			}
			for i := range lr {
				if lr[i].Key != gr[i].Key || lr[i].Status != gr[i].Status || lr[i].SHA256 != gr[i].SHA256 || lr[i].Unit != gr[i].Unit {
					t.Errorf("%s row %d: store %+v, local %+v", name, i, gr[i], lr[i])
				}
				if gr[i].Status == StatusOK && !strings.HasPrefix(gr[i].Source, "gs://imgs/") {
					t.Errorf("%s row %d: source %q, want the object's URL", name, i, gr[i].Source)
				}
			}
		case strings.HasSuffix(name, ".jsonl"):
		case !bytes.Equal(g, b):
			t.Errorf("%s: the store's bytes differ from the local job's", name)
		default:
			arrays++
		}
	}
	if arrays == 0 {
		t.Errorf("no output compared byte for byte: %v", keys(want))
	}
	if _, err := Run(ctx, remote); !errors.As(err, new(*OutputExistsError)) {
		t.Errorf("a second job into the same prefix: %v; want OutputExistsError", err)
	}

	// A list of gs:// URLs.
	list := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(list, []byte("gs://imgs/photos/img-002.png\ngs://imgs/photos/ein schönes Bild 日本.png\ngs://imgs/photos/gone.png\n"), 0o644)
	lcfg := cfg(nil, filepath.Join(t.TempDir(), "listed"))
	lcfg.Lists = []string{list}
	lsum, err := Run(ctx, lcfg)
	if err != nil || lsum.Done != 2 || lsum.Failed != 1 {
		t.Errorf("list of URLs: %+v, %v; want 2 done, 1 failed", lsum, err)
	}

	// A URL that names nothing stops the job, naming it.
	missing := cfg([]string{"gs://imgs/photos/", "gs://imgs/photos/no-such-image.png"}, filepath.Join(t.TempDir(), "missing"))
	if _, err := Run(ctx, missing); !errors.As(err, new(*InputError)) || !strings.Contains(err.Error(), "gs://imgs/photos/no-such-image.png") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a URL naming nothing: %v; want an InputError naming it, not found", err)
	}
}
