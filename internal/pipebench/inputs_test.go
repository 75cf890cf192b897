package pipebench_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/conditionhq/condition/internal/pipebench"
	"github.com/conditionhq/condition/internal/s3test"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/models/ort/orttest"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/objstore"
)

// BenchmarkInputKinds reads the same 2,000 synthetic 64×64 JPEGs as a
// folder, as two local WebDataset tar shards, from a local SeaweedFS S3
// server as a prefix of objects and as two tar shards there, with the
// built-in model and the shards layout, in alternated rounds; it reports
// each kind's median images/s and its ratio to the folder's.
//
//	go test -run '^$' -bench BenchmarkInputKinds -benchtime 1x ./internal/pipebench
func BenchmarkInputKinds(b *testing.B) {
	orttest.Load(b)
	dir := b.TempDir()
	folder := filepath.Join(dir, "folder")
	if err := pipebench.WriteSyntheticImages(folder, 2000, 64, 1); err != nil {
		b.Fatal(err)
	}
	var files []string
	filepath.WalkDir(folder, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	sort.Strings(files)
	tars := []string{filepath.Join(dir, "tars", "000000.tar"), filepath.Join(dir, "tars", "000001.tar")}
	os.MkdirAll(filepath.Dir(tars[0]), 0o755)
	for k, tp := range tars {
		writeShard(b, tp, files[k*len(files)/2:(k+1)*len(files)/2])
	}

	srv := s3test.Start(b)
	srv.Setenv(b)
	ctx := context.Background()
	if err := srv.CreateBucket(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	st := &objstore.Stores{}
	defer st.Close()
	put := func(local, key string) error {
		data, err := os.ReadFile(local)
		if err != nil {
			return err
		}
		l, _ := objstore.Parse("s3://bench/" + key)
		return st.Write(ctx, l, data)
	}
	jobs := make(chan [2]string)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var putErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := put(j[0], j[1]); err != nil {
					errOnce.Do(func() { putErr = err })
				}
			}
		}()
	}
	for _, f := range files {
		rel, _ := filepath.Rel(folder, f)
		jobs <- [2]string{f, "folder/" + filepath.ToSlash(rel)}
	}
	for _, tp := range tars {
		jobs <- [2]string{tp, "tars/" + filepath.Base(tp)}
	}
	close(jobs)
	wg.Wait()
	if putErr != nil {
		b.Fatal(putErr)
	}

	m, err := models.FromFS(embedded.FS(), models.DefaultRef)
	if err != nil {
		b.Fatal(err)
	}
	threads, streams := pipeline.EncoderPlan(0, 0)
	eng, err := pipeline.New(ctx, m, pipeline.Options{Threads: threads, NoSpinning: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	kinds := []struct {
		name   string
		inputs []string
	}{
		{"folder", []string{folder}},
		{"tar", tars},
		{"s3-objects", []string{"s3://bench/folder/"}},
		{"s3-tar", []string{"s3://bench/tars/{000000..000001}.tar"}},
	}
	rates := map[string][]float64{}
	for round := range 3 {
		for _, k := range kinds {
			out := filepath.Join(dir, fmt.Sprintf("out-%s-%d", k.name, round))
			sum, err := pipeline.Run(ctx, pipeline.Config{Engine: eng, Inputs: k.inputs, Prompts: []string{"a red circle"},
				Out: out, Layout: "shards", Streams: streams})
			if err != nil {
				b.Fatal(err)
			}
			if sum.Done != 2000 {
				b.Fatalf("%s: %+v", k.name, sum)
			}
			rates[k.name] = append(rates[k.name], sum.ImagesPerSec())
			os.RemoveAll(out)
		}
	}
	base := pipebench.Median(rates["folder"])
	var line []string
	for _, k := range kinds {
		r := pipebench.Median(rates[k.name])
		b.ReportMetric(r, k.name+"-images/s")
		if k.name != "folder" {
			b.ReportMetric(r/base, k.name+"/folder")
		}
		line = append(line, fmt.Sprintf("%s %.1f (%v)", k.name, r, rates[k.name]))
	}
	b.Log(strings.Join(line, "; "))
}

// writeShard writes files as one WebDataset tar shard, keys in order.
func writeShard(b *testing.B, p string, files []string) {
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for i, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			b.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.jpg", i), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
}
