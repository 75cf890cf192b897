package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/conditionhq/condition/internal/orttest"
)

func TestWithHeads(t *testing.T) {
	for _, g := range [][]byte{mhaBlockONNX, mhaCoreONNX} {
		for _, h := range []int{1, 8, 12, 127} {
			p, err := withHeads(g, h)
			if err != nil {
				t.Fatal(err)
			}
			want := append(bytes.Clone(numHeadsAttr[:len(numHeadsAttr)-1]), byte(h))
			if len(p) != len(g) || bytes.Count(p, want) != 1 {
				t.Errorf("heads %d: patched graph lacks the attribute", h)
			}
		}
		for _, h := range []int{0, 128, -1} {
			if _, err := withHeads(g, h); err == nil {
				t.Errorf("heads %d: no error", h)
			}
		}
	}
	if _, err := withHeads([]byte("not a graph"), 8); err == nil {
		t.Error("graph without the attribute: no error")
	}
}

// TestBenchORT runs `condition-bench xattn --ort` on small shapes and checks that
// ONNX Runtime's block and core (an independent implementation, fed the
// same inputs and weights) agree with ours: the command itself refuses to
// report a comparison above 1e-3, this asks for float32 agreement.
func TestBenchORT(t *testing.T) {
	orttest.Load(t)
	for _, args := range [][]string{
		{"--tq", "9", "--tk", "13", "--dq", "32", "--dkv", "24", "--heads", "4"},
		{"--tq", "37", "--tk", "77", "--dq", "80", "--dkv", "48", "--heads", "2", "--inner", "80", "--threads", "2"},
	} {
		code, out, errs := runCLI(t, append([]string{"xattn", "--ort", "--json", "--time", "1ms", "--count", "1"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var r benchResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
			t.Fatalf("%v: %v in %q", args, err, out)
		}
		if r.ORTBlockMS <= 0 || r.ORTCoreMS <= 0 || r.BlockMS <= 0 || r.CoreMS <= 0 || r.ProjMS <= 0 {
			t.Errorf("%v: missing timings: %+v", args, r)
		}
		if r.ORTProjMS <= 0 || r.ORTProjGFLOPS <= 0 || r.SpeedupProj <= 0 {
			t.Errorf("%v: no ONNX Runtime projection timing: %+v", args, r)
		}
		if r.ORTBlockDiff > 2e-5 || r.ORTCoreDiff > 2e-5 || r.ORTProjDiff > 2e-5 {
			t.Errorf("%v: ONNX Runtime differs from ours: block %.3g, core %.3g, projection %.3g of the largest output", args, r.ORTBlockDiff, r.ORTCoreDiff, r.ORTProjDiff)
		}
		t.Logf("%v: relative differences block %.3g core %.3g", args, r.ORTBlockDiff, r.ORTCoreDiff)
	}
}
