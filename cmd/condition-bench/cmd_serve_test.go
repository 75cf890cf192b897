package main

import (
	"strings"
	"testing"
)

// TestBenchServeUsage checks the flags a run cannot take.
func TestBenchServeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--clients", "0"},
		{"--max-batch", "0"},
		{"--requests", "-1"},
		{"--json", "--markdown"},
		{"extra"},
	} {
		if code, _, errs := runCLI(t, append([]string{"serve"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errs)
		}
	}
}

// TestServeTargets: the targets' figures are computed from the rows they
// name, and met or not by their thresholds.
func TestServeTargets(t *testing.T) {
	res := serveBenchResult{
		Rows: []serveBenchRow{
			{Clients: 8, Batching: true, ImagesPerSec: 30, Ratio: 0.9, P50ms: 10, P99ms: 40, CPUms: 20, CPURatio: 0.8, Status429: 2},
			{Clients: 8, Batching: false, ImagesPerSec: 15, CPUms: 30, Errors: map[string]int{"500": 1}},
		},
		RSS:              &serveBenchRSS{Requests: 100, BeforeMB: 100, AfterMB: 120, GrowthMB: 20, Status429: 1},
		GoroutinesBefore: 10, GoroutinesAfter: 10,
	}
	want := map[string]struct {
		value float64
		met   bool
	}{
		"batching": {2, true}, "served": {0.9, true}, "p99": {4, false}, "errors": {1, false}, "RSS": {20, true}, "goroutines": {0, true},
	}
	got := serveTargets(res, 8)
	if len(got) != len(want) {
		t.Fatalf("%d targets, want %d: %+v", len(got), len(want), got)
	}
	for _, c := range got {
		w, ok := want[strings.Fields(c.Name)[0]]
		if !ok || c.Value != w.value || c.Met != w.met {
			t.Errorf("%s: value %v met %v, want %+v", c.Name, c.Value, c.Met, w)
		}
	}
	if c := got[3]; c.Shown != "1 (429s: 3)" {
		t.Errorf("errors shown as %q", c.Shown)
	}
}
