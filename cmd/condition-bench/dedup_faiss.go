package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/conditionhq/condition/pipeline/index/dedup"
)

// dedupFaissScript finds the same pairs with faiss: the float16 rows of
// the index's .npy as float32, normalised, in an IndexFlatIP, and one
// range_search of the first "queries" rows (every row when 0) at the
// threshold (faiss keeps inner products above the radius). It reports the
// search's wall and CPU seconds (the process's, all its threads), the
// queries searched and the pairs i < j of those queries.
const dedupFaissScript = `
import json, sys, time, resource
import numpy as np, faiss
cfg = json.load(sys.stdin)
faiss.omp_set_num_threads(cfg["threads"])
x = np.ascontiguousarray(np.load(cfg["file"]), dtype=np.float32)
faiss.normalize_L2(x)
index = faiss.IndexFlatIP(x.shape[1])
index.add(x)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
nq = cfg["queries"] or x.shape[0]
t, c = time.perf_counter(), cpu()
lims, D, I = index.range_search(x[:nq], cfg["threshold"])
secs, cpus = time.perf_counter() - t, cpu() - c
pairs = []
for q in range(nq):
    for k in range(lims[q], lims[q + 1]):
        if I[k] > q:
            pairs.append([q, int(I[k])])
json.dump({"version": faiss.__version__, "threads": faiss.omp_get_max_threads(), "seconds": secs, "cpu_seconds": cpus, "queries": nq, "pairs": pairs}, sys.stdout)
`

// dedupFaiss is what the faiss script reports, and its pairs against ours
// (those whose first row is one of its queries).
type dedupFaiss struct {
	Version           string     `json:"version"`
	Threads           int        `json:"threads"`
	Seconds           float64    `json:"seconds"`     // all N rows searched (scaled by N/Queries when fewer were)
	CPUSeconds        float64    `json:"cpu_seconds"` // likewise
	Queries           int        `json:"queries"`     // the rows searched as queries, the first ones
	Measured          [2]float64 `json:"measured"`    // wall and CPU seconds of the Queries searched
	Pairs             [][2]int   `json:"pairs"`
	Found             int        // len(Pairs)
	OnlyOurs, OnlyIts int        // pairs found by one search and not the other
}

// runDedupFaiss runs dedupFaissScript over the float16 .npy file of n
// rows with py (empty: the first of python3 and /usr/bin/python3 that
// imports faiss and numpy), the first queries rows as queries (0: all;
// its times are then scaled to all n: every query of a flat index costs
// the same), and compares its pairs with ours.
func runDedupFaiss(ctx context.Context, py, file string, n, queries int, threshold float32, threads int, ours []dedup.Pair) (*dedupFaiss, error) {
	in, err := json.Marshal(map[string]any{"file": file, "threshold": threshold, "threads": threads, "queries": queries})
	if err != nil {
		return nil, err
	}
	out, err := runFaissScript(ctx, py, dedupFaissScript, in)
	if err != nil {
		return nil, err
	}
	var f dedupFaiss
	if err := json.Unmarshal(out, &f); err != nil {
		return nil, fmt.Errorf("faiss script output: %w", err)
	}
	f.Found = len(f.Pairs)
	f.Measured = [2]float64{f.Seconds, f.CPUSeconds}
	if f.Queries > 0 && f.Queries < n {
		scale := float64(n) / float64(f.Queries)
		f.Seconds, f.CPUSeconds = f.Seconds*scale, f.CPUSeconds*scale
	}
	theirs := map[[2]int]bool{}
	for _, p := range f.Pairs {
		theirs[p] = true
	}
	for _, p := range ours {
		if p.A >= f.Queries {
			continue
		}
		if theirs[[2]int{p.A, p.B}] {
			delete(theirs, [2]int{p.A, p.B})
		} else {
			f.OnlyOurs++
		}
	}
	f.OnlyIts, f.Pairs = len(theirs), nil
	return &f, nil
}
