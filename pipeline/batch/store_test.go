package batch

import (
	"bytes"
	"context"
	"errors"
	"image/color"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/internal/s3test"
	"github.com/conditionhq/condition/pipeline"
)

// putTree uploads every file under dir to the prefix at.
func putTree(t *testing.T, st *objstore.Stores, dir, at string) {
	t.Helper()
	base, err := objstore.Parse(at)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return st.Write(context.Background(), base.Child(filepath.ToSlash(rel)), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storeFiles reads every object under the prefix at, by name below it.
func storeFiles(t *testing.T, st *objstore.Stores, at string) map[string][]byte {
	t.Helper()
	base, _ := objstore.Parse(at)
	out := map[string][]byte{}
	err := st.List(context.Background(), base, func(o objstore.Object) error {
		l := base
		l.Key = o.Key
		b, err := st.ReadAll(context.Background(), l, 0)
		out[strings.TrimPrefix(o.Key, base.Dir())] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// localFiles reads every file under dir, by slash-separated name.
func localFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)], _ = os.ReadFile(p)
		}
		return err
	})
	return out
}

// metaRows reads a shard's metadata.
func metaRows(t *testing.T, b []byte) []shardRow {
	t.Helper()
	rows, err := parquet.Read[shardRow](bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestRunObjectStore runs the job on a real S3-compatible server
// (SeaweedFS): images under a prefix (names with spaces and non-ASCII
// letters), a WebDataset shard in the store (a corrupt member, a member
// named ../x) and a list of s3:// URLs in, the shards layout out to a
// prefix. Its arrays equal, byte for byte, those of the same job on local
// copies; its metadata names the same images. Then the server is stopped
// mid-job and started again: the job's retries carry it through, or it
// fails clearly and --resume completes it; either way the shards are byte-
// identical to the uninterrupted job's. Wrong credentials fail before any
// work, naming the location.
func TestRunObjectStore(t *testing.T) {
	srv := s3test.Start(t)
	srv.Setenv(t)
	ctx := context.Background()
	for _, b := range []string{"imgs", "out"} {
		if err := srv.CreateBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
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
		{"../evil.png", red},
		{"000003.png", blue},
	})
	putTree(t, st, photos, "s3://imgs/photos/")
	putTree(t, st, filepath.Join(local, "shards"), "s3://imgs/shards/")

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
	if sum.Done != 11 || sum.Failed != 2 {
		t.Fatalf("local job: %+v; want 11 done, 2 failed", sum)
	}
	remote := cfg([]string{"s3://imgs/photos/", "s3://imgs/shards/{000001..000001}.tar"}, "s3://out/job/")
	rsum, err := Run(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	if rsum.Done != sum.Done || rsum.Failed != sum.Failed {
		t.Fatalf("store job: %+v; the local one %+v", rsum, sum)
	}
	want := localFiles(t, localOut)
	got := storeFiles(t, st, "s3://out/job/")
	if len(got) != len(want) {
		t.Errorf("store job wrote %d objects, the local job %d files: %v", len(got), len(want), keys(got))
	}
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
				if gr[i].Status == StatusOK && !strings.HasPrefix(gr[i].Source, "s3://imgs/") {
					t.Errorf("%s row %d: source %q, want the object's URL", name, i, gr[i].Source)
				}
			}
		case strings.HasSuffix(name, ".jsonl"):
		case !bytes.Equal(g, b):
			t.Errorf("%s: the store's bytes differ from the local job's", name)
		}
	}
	if _, err := Run(ctx, remote); !errors.As(err, new(*OutputExistsError)) {
		t.Errorf("a second job into the same prefix: %v; want OutputExistsError", err)
	}

	// A list of s3:// URLs.
	list := filepath.Join(t.TempDir(), "list.txt")
	os.WriteFile(list, []byte("s3://imgs/photos/img-002.png\ns3://imgs/photos/ein schönes Bild 日本.png\ns3://imgs/photos/gone.png\n"), 0o644)
	lcfg := cfg(nil, filepath.Join(t.TempDir(), "listed"))
	lcfg.Lists = []string{list}
	lsum, err := Run(ctx, lcfg)
	if err != nil || lsum.Done != 2 || lsum.Failed != 1 {
		t.Errorf("list of URLs: %+v, %v; want 2 done, 1 failed", lsum, err)
	}

	// The server stopped and started again mid-job.
	again := remote
	again.Out = "s3://out/again/"
	var once sync.Once
	restarted := make(chan error, 1)
	again.Progress = func(p Progress) {
		if p.Done >= 3 {
			once.Do(func() {
				srv.Stop()
				go func() {
					time.Sleep(500 * time.Millisecond)
					restarted <- srv.Restart()
				}()
			})
		}
	}
	asum, err := Run(ctx, again)
	if rerr := <-restarted; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Logf("the job over a restarting server failed (%v); resuming", err)
		if !strings.Contains(err.Error(), "s3://") {
			t.Errorf("the failure does not name the store: %v", err)
		}
		again.Resume, again.Progress = true, nil
		if asum, err = Run(ctx, again); err != nil {
			t.Fatal(err)
		}
	}
	got2 := storeFiles(t, st, "s3://out/again/")
	// The images that failed, by the manifest's last word on each (a
	// resumed job skips those of shards the first run finished).
	entries, err := ParseManifest(bytes.NewReader(got2["manifest.jsonl"]))
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	var storeErrs []string // failures that name the store: reads the restart outlasted
	for _, e := range Latest(entries) {
		if e.Status == StatusError {
			failed++
			if strings.Contains(e.Error, "s3://") && !strings.Contains(e.Error, "decode") {
				storeErrs = append(storeErrs, e.Path+": "+e.Error)
			}
		}
	}
	compare := true
	switch {
	case failed > sum.Failed && failed-sum.Failed <= len(storeErrs):
		// A read that outlasted the job's retries while the server was
		// down is recorded as that image's failure, and its shard differs.
		t.Logf("over a restarting server: %d images failed where the uninterrupted job had %d, reads of the store during the restart (%s); the shards are not compared",
			failed, sum.Failed, strings.Join(storeErrs, "; "))
		compare = false
	case failed != sum.Failed:
		t.Errorf("over a restarting server: %d images failed by the manifest (this run %+v); want %d like the uninterrupted job", failed, asum, sum.Failed)
	}
	for name, b := range got {
		if !compare {
			break
		}
		if strings.HasPrefix(name, "shards/") || strings.HasPrefix(name, "img_emb/") {
			if !bytes.Equal(got2[name], b) {
				t.Errorf("%s: differs after the restart", name)
			}
		}
	}

	// A URL that names no object and no prefix stops the job, naming it,
	// beside roots that have images too (it would otherwise go missing).
	missing := cfg([]string{"s3://imgs/photos/", "s3://imgs/photos/no-such-image.png"}, filepath.Join(t.TempDir(), "missing"))
	if _, err := Run(ctx, missing); !errors.As(err, new(*InputError)) || !strings.Contains(err.Error(), "s3://imgs/photos/no-such-image.png") || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a URL naming nothing: %v; want an InputError naming it, not found", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	bad := remote
	bad.Out = filepath.Join(t.TempDir(), "bad")
	_, err = Run(ctx, bad)
	if !errors.As(err, new(*InputError)) || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), "s3://imgs/photos/") {
		t.Errorf("wrong credentials: %v; want an InputError naming the location and access denied", err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
