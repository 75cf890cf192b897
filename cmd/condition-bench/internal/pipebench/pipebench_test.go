package pipebench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/orttest"
	"github.com/conditionhq/condition/models"
	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/batch"
)

// tinyEngine opens the engine of the tiny random CLIP of testdata/tinyclip
// with one thread, closed when the test ends.
func tinyEngine(t testing.TB) *pipeline.Engine {
	t.Helper()
	orttest.Load(t)
	m, err := models.Open(filepath.Join("..", "..", "..", "..", "testdata", "tinyclip"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := pipeline.New(context.Background(), m, pipeline.Options{Threads: 1, NoSpinning: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{4, 1}, 2.5}, {[]float64{5, 1, 3}, 3}, {[]float64{9, 1, 3, 4}, 3.5}} {
		if got := Median(append([]float64(nil), tc.v...)); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestRate(t *testing.T) {
	r := Rate{Images: 50, Wall: 2 * time.Second, CPU: 3 * time.Second}
	if got := r.PerSec(); got != 25 {
		t.Errorf("PerSec = %v, want 25", got)
	}
	if got := r.CPUPerImage(); got != 60*time.Millisecond {
		t.Errorf("CPUPerImage = %v, want 60ms", got)
	}
	var z Rate
	if z.PerSec() != 0 || z.CPUPerImage() != 0 || z.EncoderShare() != 0 {
		t.Errorf("zero Rate gives %v images/s, %v per image, encoder share %v; want 0, 0, 0", z.PerSec(), z.CPUPerImage(), z.EncoderShare())
	}
	r.EncoderCPU = 2400 * time.Millisecond
	if got := r.EncoderShare(); math.Abs(got-0.8) > 1e-12 {
		t.Errorf("EncoderShare = %v, want 0.8 (2.4 s of 3 s)", got)
	}
}

func TestStageMedians(t *testing.T) {
	entries := []batch.Entry{
		{Status: batch.StatusOK, Timings: map[string]float64{"decode": 3, "encode": 10}},
		{Status: batch.StatusOK, Timings: map[string]float64{"decode": 1, "encode": 30}},
		{Status: batch.StatusOK, Timings: map[string]float64{"decode": 2}},
		{Status: batch.StatusError, Timings: map[string]float64{"decode": 100, "read": 5}},
	}
	got := StageMedians(entries)
	want := map[string]float64{"decode": 2, "encode": 20}
	if len(got) != len(want) {
		t.Fatalf("StageMedians = %v, want %v (failed entries left out)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("StageMedians[%q] = %v, want %v", k, got[k], v)
		}
	}
	if got := StageMedians(nil); len(got) != 0 {
		t.Errorf("StageMedians(nil) = %v, want empty", got)
	}
}

// TestBenchRates runs both measurements of `condition-bench pipeline` on
// the tiny model: they count what they did (no timing is checked).
func TestBenchRates(t *testing.T) {
	eng := tinyEngine(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := WriteSyntheticImages(in, 13, 40, 1); err != nil {
		t.Fatal(err)
	}
	// A file that is not an image: EncoderRate leaves it out, the job records it.
	if err := os.WriteFile(filepath.Join(in, "000", "bad.jpg"), []byte("not a jpeg"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a photo of a cat"}, Out: filepath.Join(dir, "out"), Batch: 4}
	enc, n, err := EncoderRate(context.Background(), eng, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if n != 13 || enc.Images != 39 || enc.Wall <= 0 || enc.PerSec() <= 0 {
		t.Errorf("EncoderRate = %+v, %d distinct; want 39 images (13 × 3 rounds), 13 distinct, a positive time", enc, n)
	}
	// The process's CPU time counts in 10 ms ticks, the encoder's calls' in ns.
	const tick = 10 * time.Millisecond
	linux := runtime.GOOS == "linux"
	if linux && (enc.EncoderCPU <= 0 || enc.EncoderCPU > enc.CPU+tick) {
		t.Errorf("EncoderRate: encoder calls' CPU %v, process CPU %v; want more than 0 and at most the process's", enc.EncoderCPU, enc.CPU)
	}
	calls := 0
	cfg.Started = func() { calls++ }
	sum, job, err := JobRate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("JobRate called Started %d times, want once", calls)
	}
	if sum.Done != 13 || sum.Failed != 1 || job.Images != 13 || job.Wall != sum.Elapsed {
		t.Errorf("JobRate = %+v, summary %+v; want 13 done, 1 failed, the summary's elapsed time", job, sum)
	}
	if linux && (job.EncoderCPU <= 0 || job.EncoderCPU > job.CPU+tick) {
		t.Errorf("JobRate: encoder calls' CPU %v, process CPU %v; want more than 0 and at most the process's", job.EncoderCPU, job.CPU)
	}
	f, err := os.Open(sum.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := batch.ParseManifest(f)
	if err != nil {
		t.Fatal(err)
	}
	st := StageMedians(entries)
	for _, k := range []string{"read", "decode", "preprocess", "encode", "attend", "write", "total"} {
		if _, ok := st[k]; !ok {
			t.Errorf("stage %q missing from the manifest's timings: %v", k, st)
		}
	}
}

// BenchmarkRun measures the whole job on the tiny test model over synthetic
// images (images/s); compare with BenchmarkEncoder, the encoder alone.
func BenchmarkRun(b *testing.B) {
	eng := tinyEngine(b)
	in := filepath.Join(b.TempDir(), "in")
	if err := WriteSyntheticImages(in, 200, 128, 1); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	images := 0
	for i := 0; b.Loop(); i++ {
		sum, err := batch.Run(context.Background(), batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a red circle"}, Out: filepath.Join(b.TempDir(), "out")})
		if err != nil {
			b.Fatal(err)
		}
		images += sum.Done
	}
	b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "images/s")
}

// BenchmarkEncoder measures the tiny test model's vision encoder alone on
// the images of BenchmarkRun, in batches of 8 (images/s).
func BenchmarkEncoder(b *testing.B) {
	eng := tinyEngine(b)
	in := filepath.Join(b.TempDir(), "in")
	if err := WriteSyntheticImages(in, 200, 128, 1); err != nil {
		b.Fatal(err)
	}
	cfg := batch.Config{Engine: eng, Inputs: []string{in}, Prompts: []string{"a red circle"}, Batch: 8}
	var total Rate
	for b.Loop() {
		r, _, err := EncoderRate(context.Background(), eng, cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		total.Images += r.Images
		total.Wall += r.Wall
	}
	b.ReportMetric(total.PerSec(), "images/s")
}
