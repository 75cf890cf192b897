package batch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conditionhq/condition/pipeline"
	"github.com/conditionhq/condition/pipeline/internal/enginetest"
)

// TestRunDecoderPanicFailsOneImage: a decoder that panics on one file is
// that image's failure in the manifest; the job goes on with the others.
func TestRunDecoderPanicFailsOneImage(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 4)
	if err := os.WriteFile(filepath.Join(in, "bad.png"), []byte(enginetest.PanicMagic+"rest of a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Config{Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"},
		Out: filepath.Join(t.TempDir(), "out"), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 4 || sum.Failed != 1 {
		t.Fatalf("summary %+v, want 4 done and 1 failed", sum)
	}
	for _, e := range readManifest(t, sum.Manifest) {
		if e.Path == "bad.png" && (e.Status != StatusError || !strings.Contains(e.Error, "panicked")) {
			t.Errorf("bad.png: %+v, want an error saying the decoder panicked", e)
		}
	}
}

// TestRunStopsWhenManifestFails: when a manifest line cannot be written, the
// job takes no new images and returns the error (a result the manifest does
// not list would be lost to --resume and merge).
func TestRunStopsWhenManifestFails(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 40)
	cfg := Config{Engine: tinyEngine(t, m, pipeline.Options{Threads: 1}), Inputs: []string{in}, Prompts: []string{"red"},
		Out: filepath.Join(t.TempDir(), "out"), Batch: 1, Workers: 1, Streams: 1}
	j, err := newJob(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	// Writes to a file opened for reading fail.
	ro, err := os.Open(j.manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	j.man.f.Close()
	j.man.f = ro
	sum, err := j.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "manifest") {
		t.Fatalf("run: %v, want the manifest's error", err)
	}
	if n := sum.Done + sum.Failed; n >= 40 {
		t.Errorf("the job went on after the manifest failed: %d of 40 images done", n)
	}
	t.Logf("stopped after %d images: %v", sum.Done+sum.Failed, err)
}

// TestReadTakesBudgetFirst: a file's bytes are counted in the read-ahead
// budget before it is read, so a full budget holds the reading back.
func TestReadTakesBudgetFirst(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.bin")
	if err := os.WriteFile(p, bytes.Repeat([]byte{7}, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &job{cfg: Config{}}
	b := newByteBudget(1500)
	b.take(1000) // another file held
	w := &work{it: Item{Path: p, Rel: "a.bin"}, timings: map[string]float64{}}
	done := make(chan struct{})
	go func() { j.read(w, b); close(done) }()
	select {
	case <-done:
		t.Fatal("read went ahead with the budget full")
	case <-time.After(100 * time.Millisecond):
	}
	b.give(1000)
	<-done
	if w.fail != nil || w.held != 1000 || len(w.data) != 1000 || b.used != 1000 {
		t.Fatalf("after the budget freed: fail %v, held %d, %d bytes read, budget used %d; want 1000 each", w.fail, w.held, len(w.data), b.used)
	}
}

// TestRunSetupCancelled: a job whose context is cancelled during setup
// stops there with the context's error and writes no manifest.
func TestRunSetupCancelled(t *testing.T) {
	m := openTiny(t)
	in := filepath.Join(t.TempDir(), "in")
	makeImages(t, in, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "out")
	_, err := Run(ctx, Config{Engine: tinyEngine(t, m, pipeline.Options{}), Inputs: []string{in}, Prompts: []string{"red"}, Out: out})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(out, "manifest.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a manifest was written: %v", err)
	}
	if _, err := pipeline.New(ctx, m, pipeline.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("pipeline.New with a cancelled context: %v, want context.Canceled", err)
	}
}
