package main

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// TestBenchDedupFaiss runs faiss beside the search over the first 1,000
// rows of 3,000 as queries: the pairs of those rows are the same in both,
// and faiss's times are the measured ones scaled by 3.
func TestBenchDedupFaiss(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import faiss, numpy").Run(); err != nil {
		t.Skipf("no faiss for /usr/bin/python3 (apt-get install python3-faiss; .ci/run installs it): %v", err)
	}
	code, out, errs := runCLI(t, "dedup", "--n", "3000", "--planted", "60", "--faiss", "--faiss-queries", "1000", "--python", "/usr/bin/python3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r dedupBenchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := r.Faiss
	if f == nil {
		t.Fatalf("no faiss result: %s (%s)", r.FaissError, out)
	}
	if f.Queries != 1000 || f.Found == 0 || f.OnlyOurs != 0 || f.OnlyIts != 0 {
		t.Errorf("faiss: %d queries, %d pairs, %d only ours, %d only its; want 1000 queries, some pairs, none only in one", f.Queries, f.Found, f.OnlyOurs, f.OnlyIts)
	}
	if f.Found >= r.Found {
		t.Errorf("faiss found %d pairs over a third of the rows, the whole search %d: want fewer", f.Found, r.Found)
	}
	if f.CPUSeconds != 3*f.Measured[1] || f.Seconds != 3*f.Measured[0] {
		t.Errorf("faiss times %g s, %g CPU s; want 3× the measured %v", f.Seconds, f.CPUSeconds, f.Measured)
	}
}
