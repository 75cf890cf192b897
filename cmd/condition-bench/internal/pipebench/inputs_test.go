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
	"time"

	"github.com/conditionhq/condition/cmd/condition-bench/internal/pipebench"
	"github.com/conditionhq/condition/internal/cputime"
	"github.com/conditionhq/condition/internal/objstore"
	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/internal/s3test"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/models/embedded"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
)

// BenchmarkInputKinds reads the same 2,000 synthetic 64×64 JPEGs as a
// folder, as two local WebDataset tar shards, from a local SeaweedFS S3
// server as a prefix of objects and as two tar shards there, with the
// built-in model and the shards layout, in alternated rounds; it reports
// each kind's median images/s and its ratio to the folder's, and the CPU
// per image of the job's process and of the S3 server (one weed process
// sharing the machine's cores). "s3-get" only reads the 2,000 objects, 16 at
// once, nothing else: the most images/s this server gives one client here.
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
	eng, err := pipeline.New(ctx, m, pipeline.Options{Streams: pipeline.AutoStreams, NoSpinning: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	streams := eng.Streams()
	kinds := []struct {
		name   string
		inputs []string
	}{
		{"folder", []string{folder}},
		{"tar", tars},
		{"s3-objects", []string{"s3://bench/folder/"}},
		{"s3-tar", []string{"s3://bench/tars/{000000..000001}.tar"}},
	}
	keys := make([]objstore.Location, len(files))
	for i, f := range files {
		rel, _ := filepath.Rel(folder, f)
		keys[i], _ = objstore.Parse("s3://bench/folder/" + filepath.ToSlash(rel))
	}
	names := []string{"folder", "tar", "s3-objects", "s3-tar", "s3-get"}
	rates := map[string][]float64{}
	jobCPU := map[string][]float64{}    // ms per image, this process
	serverCPU := map[string][]float64{} // ms per image, the S3 server
	for round := range 3 {
		for _, name := range names {
			p0, _ := cputime.Process()
			w0, _ := cputime.PID(srv.PID())
			var rate float64
			if name == "s3-get" {
				rate = readAll(b, ctx, st, keys, 16)
			} else {
				var inputs []string
				for _, k := range kinds {
					if k.name == name {
						inputs = k.inputs
					}
				}
				out := filepath.Join(dir, fmt.Sprintf("out-%s-%d", name, round))
				sum, err := batch.Run(ctx, batch.Config{Engine: eng, Inputs: inputs, Prompts: []string{"a red circle"},
					Out: out, Layout: "shards", Streams: streams})
				if err != nil {
					b.Fatal(err)
				}
				if sum.Done != 2000 {
					b.Fatalf("%s: %+v", name, sum)
				}
				rate = sum.ImagesPerSec()
				os.RemoveAll(out)
			}
			p1, _ := cputime.Process()
			w1, _ := cputime.PID(srv.PID())
			rates[name] = append(rates[name], rate)
			jobCPU[name] = append(jobCPU[name], float64(p1-p0)/float64(time.Millisecond)/2000)
			serverCPU[name] = append(serverCPU[name], float64(w1-w0)/float64(time.Millisecond)/2000)
		}
	}
	base := pipebench.Median(rates["folder"])
	var line []string
	for _, name := range names {
		r := pipebench.Median(rates[name])
		b.ReportMetric(r, name+"-images/s")
		if name != "folder" {
			b.ReportMetric(r/base, name+"/folder")
		}
		line = append(line, fmt.Sprintf("%s %.1f images/s %v, CPU ms/image: job %.2f, S3 server %.2f",
			name, r, rates[name], pipebench.Median(jobCPU[name]), pipebench.Median(serverCPU[name])))
	}
	b.Log("\n" + strings.Join(line, "\n"))
}

// readAll reads every object of keys whole, n at a time, and returns the
// objects read per second.
func readAll(b *testing.B, ctx context.Context, st *objstore.Stores, keys []objstore.Location, n int) float64 {
	next := make(chan objstore.Location)
	var wg sync.WaitGroup
	var errOnce sync.Once
	var readErr error
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range next {
				if _, err := st.ReadAll(ctx, l, 0); err != nil {
					errOnce.Do(func() { readErr = err })
				}
			}
		}()
	}
	for _, l := range keys {
		next <- l
	}
	close(next)
	wg.Wait()
	if readErr != nil {
		b.Fatal(readErr)
	}
	return float64(len(keys)) / time.Since(start).Seconds()
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
