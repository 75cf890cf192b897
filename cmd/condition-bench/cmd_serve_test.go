package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

// TestBenchServe runs `bench serve` on the built-in model with a few
// requests and checks the report is filled and adds up (no timing is
// checked, nor any target).
func TestBenchServe(t *testing.T) {
	orttest.Load(t)
	code, out, errs := runCLI(t, "bench", "serve", "--clients", "1,4", "--requests", "40", "--encoder-time", "50ms",
		"--rss-requests", "40", "--settle", "1s", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r serveBenchResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if r.Model != "default" || r.Requests != 40 || r.MaxBatch != 8 || r.Streams < 1 || r.Threads < 1 || r.Cores < 1 ||
		r.ImageBytes <= 0 || len(r.Prompts) != 2 || r.EncoderBatch1PerSec <= 0 {
		t.Fatalf("report %+v", r)
	}
	if len(r.Rows) != 4 {
		t.Fatalf("%d rows, want 4 (1 and 4 clients, batching on and off)", len(r.Rows))
	}
	for i, row := range r.Rows {
		wantClients, wantBatching := []int{1, 4}[i/2], i%2 == 0
		if row.Clients != wantClients || row.Batching != wantBatching || (row.Batching && row.MaxBatch != 8) || (!row.Batching && row.MaxBatch != 1) {
			t.Errorf("row %d: %d clients, batching %v, max batch %d", i, row.Clients, row.Batching, row.MaxBatch)
		}
		errsum := 0
		for _, n := range row.Errors {
			errsum += n
		}
		if row.Sent != 40 || row.OK+row.Status429+errsum != row.Sent || errsum != 0 || row.Measured != row.OK {
			t.Errorf("row %d: %d sent, %d ok, %d 429s, errors %v, %d measured", i, row.Sent, row.OK, row.Status429, row.Errors, row.Measured)
		}
		if row.ImagesPerSec <= 0 || row.EncoderPerSec <= 0 || row.WindowS <= 0 ||
			math.Abs(row.ImagesPerSec-float64(row.Measured)/row.WindowS) > 1e-9*row.ImagesPerSec ||
			math.Abs(row.Ratio-row.ImagesPerSec/row.EncoderPerSec) > 1e-9*row.Ratio {
			t.Errorf("row %d: rates %+v", i, row)
		}
		if row.P50ms <= 0 || row.P50ms > row.P90ms || row.P90ms > row.P99ms {
			t.Errorf("row %d: latencies p50 %v p90 %v p99 %v", i, row.P50ms, row.P90ms, row.P99ms)
		}
		// Every image answered was encoded once, in a batch the server
		// counted; with batching off, one per batch.
		if row.Batched != float64(row.OK) || row.Batches == 0 || math.Abs(row.MeanBatch-row.Batched/float64(row.Batches)) > 1e-9 ||
			row.MeanBatch < 1 || row.MeanBatch > float64(row.MaxBatch) || (!row.Batching && row.Batches != uint64(row.OK)) {
			t.Errorf("row %d: %v images in %d batches, mean %v", i, row.Batched, row.Batches, row.MeanBatch)
		}
	}
	if m := r.RSS; m == nil || m.Requests != 40 || m.Clients != 4 || m.OK+m.Status429+m.Errors != 40 || m.Errors != 0 ||
		m.BeforeMB <= 0 || m.AfterMB <= 0 || len(m.QuarterMB) != 4 || math.Abs(m.GrowthMB-(m.AfterMB-m.BeforeMB)) > 1e-9 || m.HeapAfterMB <= 0 {
		t.Errorf("memory phase %+v", r.RSS)
	}
	if r.GoroutinesBefore <= 0 || r.GoroutinesAfter <= 0 {
		t.Errorf("goroutines %d → %d", r.GoroutinesBefore, r.GoroutinesAfter)
	}
	names := map[string]bool{}
	for _, c := range r.Targets {
		names[strings.Fields(c.Name)[0]] = true
	}
	for _, n := range []string{"batching", "served", "errors", "RSS", "goroutines"} {
		if !names[n] {
			t.Errorf("no target %q among %+v", n, r.Targets)
		}
	}
}

// TestBenchServeUsage checks the flags a run cannot take.
func TestBenchServeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--clients", "0"},
		{"--max-batch", "0"},
		{"--requests", "-1"},
		{"--json", "--markdown"},
		{"extra"},
	} {
		if code, _, errs := runCLI(t, append([]string{"bench", "serve"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errs)
		}
	}
}
