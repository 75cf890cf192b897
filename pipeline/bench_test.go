package pipeline

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 31 ticks: 2.81 s.
	const tail = " S 1 2 3 0 -1 4194560 5000 0 3 0 250 31 0 0 20 0 9 0 100 1000000 300 18446744073709551615"
	for _, tc := range []struct {
		name string
		stat string
		want time.Duration
		ok   bool
	}{
		{"plain", "1234 (condition)" + tail, 2810 * time.Millisecond, true},
		{"name with spaces and parentheses", "1234 (a) b (c)" + tail, 2810 * time.Millisecond, true},
		{"no parenthesis", "1234 condition" + tail, 0, false},
		{"truncated", "1234 (condition) S 1 2 3", 0, false},
		{"not a number", "1234 (condition) S 1 2 3 0 -1 4194560 5000 0 3 0 x 31 0", 0, false},
		{"empty", "", 0, false},
	} {
		got, ok := parseStatCPU([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parseStatCPU = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestProcessCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("processCPU reads /proc/self/stat, which only Linux has")
	}
	a, ok := processCPU()
	if !ok {
		t.Fatal("processCPU: /proc/self/stat unreadable on Linux")
	}
	spinUntil(t, "processCPU", processCPU, a, 50*time.Millisecond) // 5 ticks
}

// spinUntil busy-loops until clock reports at least d more than from. On a
// loaded machine that takes longer in wall time, so only a generous
// deadline fails it.
func spinUntil(t *testing.T, name string, clock func() (time.Duration, bool), from, d time.Duration) {
	t.Helper()
	x, deadline := 1.0, time.Now().Add(30*time.Second)
	for {
		for i := 0; i < 100000; i++ {
			x = x*1.0000001 + 1e-9
		}
		now, ok := clock()
		if !ok || now < from {
			t.Fatalf("%s went from %v to %v, %v", name, from, now, ok)
		}
		if now-from >= d {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s grew by only %v over 30 s of busy loop (x=%g)", name, now-from, x)
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

// TestThreadCPU checks what the encoder's share rests on: threadCPU counts
// the calling thread's work and not another thread's.
func TestThreadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("threadCPU reads CLOCK_THREAD_CPUTIME_ID, which this package uses on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, ok := threadCPU()
	if !ok {
		t.Fatal("threadCPU: unreadable on Linux")
	}
	// Another goroutine (another thread) busy for 100 ms of wall time while
	// this thread sleeps.
	stop := make(chan struct{})
	done := make(chan float64)
	go func() {
		x := 1.0
		for {
			select {
			case <-stop:
				done <- x
				return
			default:
			}
			for i := 0; i < 10000; i++ {
				x = x*1.0000001 + 1e-9
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-done
	b, _ := threadCPU()
	if b-a > 30*time.Millisecond {
		t.Errorf("threadCPU grew by %v while this thread slept and another worked; it counts other threads", b-a)
	}
	spinUntil(t, "threadCPU", threadCPU, b, 50*time.Millisecond) // this thread busy
}

func TestEncoderCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("encoderCPU reads thread CPU time, which this package reads on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c encoderCPU
	boom := errors.New("boom")
	busy := func() error {
		a, _ := threadCPU()
		spinUntil(t, "threadCPU", threadCPU, a, 20*time.Millisecond)
		return boom
	}
	if err := c.encode(busy); err != boom {
		t.Errorf("encode returned %v, want fn's error", err)
	}
	if err := c.encode(func() error { time.Sleep(50 * time.Millisecond); return nil }); err != nil {
		t.Errorf("encode returned %v, want nil", err)
	}
	if got := c.total(); got < 20*time.Millisecond || got > 40*time.Millisecond {
		t.Errorf("total = %v after 20 ms of work and 50 ms of sleep, want 20–40 ms", got)
	}
	c.failed.Store(true)
	if got := c.total(); got != 0 {
		t.Errorf("total = %v with a failed reading, want 0 (unknown)", got)
	}
	c.reset()
	if got := c.total(); got != 0 || c.failed.Load() {
		t.Errorf("after reset: total %v, failed %v; want 0, false", got, c.failed.Load())
	}
}

func TestStageMedians(t *testing.T) {
	entries := []Entry{
		{Status: StatusOK, Timings: map[string]float64{"decode": 3, "encode": 10}},
		{Status: StatusOK, Timings: map[string]float64{"decode": 1, "encode": 30}},
		{Status: StatusOK, Timings: map[string]float64{"decode": 2}},
		{Status: StatusError, Timings: map[string]float64{"decode": 100, "read": 5}},
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

// TestBenchRates runs both measurements of `condition bench pipeline` on
// the tiny model: they count what they did (no timing is checked).
func TestBenchRates(t *testing.T) {
	m := openTiny(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := WriteSyntheticImages(in, 13, 40, 1); err != nil {
		t.Fatal(err)
	}
	// A file that is not an image: EncoderRate leaves it out, the job records it.
	if err := os.WriteFile(filepath.Join(in, "000", "bad.jpg"), []byte("not a jpeg"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Model: m, Inputs: []string{in}, Prompts: []string{"a photo of a cat"}, Out: filepath.Join(dir, "out"), Batch: 4}
	enc, n, err := EncoderRate(context.Background(), cfg, 3)
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
	sum, job, err := JobRate(context.Background(), cfg, func() { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("JobRate called started %d times, want once", calls)
	}
	if sum.Done != 13 || sum.Failed != 1 || job.Images != 13 || job.Wall != sum.Elapsed || job.EncoderCPU != sum.EncoderCPU {
		t.Errorf("JobRate = %+v, summary %+v; want 13 done, 1 failed, the summary's elapsed time and encoder CPU", job, sum)
	}
	if linux && (job.EncoderCPU <= 0 || job.EncoderCPU > job.CPU+tick) {
		t.Errorf("JobRate: encoder calls' CPU %v, process CPU %v; want more than 0 and at most the process's", job.EncoderCPU, job.CPU)
	}
	f, err := os.Open(sum.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := ParseManifest(f)
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
	m := openTiny(b)
	in := filepath.Join(b.TempDir(), "in")
	if err := WriteSyntheticImages(in, 200, 128, 1); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	images := 0
	for i := 0; b.Loop(); i++ {
		sum, err := Run(context.Background(), Config{Model: m, Inputs: []string{in}, Prompts: []string{"a red circle"}, Out: filepath.Join(b.TempDir(), "out")})
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
	m := openTiny(b)
	in := filepath.Join(b.TempDir(), "in")
	if err := WriteSyntheticImages(in, 200, 128, 1); err != nil {
		b.Fatal(err)
	}
	cfg := Config{Model: m, Inputs: []string{in}, Prompts: []string{"a red circle"}, Batch: 8}
	var total Rate
	for b.Loop() {
		r, _, err := EncoderRate(context.Background(), cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		total.Images += r.Images
		total.Wall += r.Wall
	}
	b.ReportMetric(total.PerSec(), "images/s")
}
