package xattn

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/conditionhq/condition/internal/xattnhooks"
	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// TestHooks: the benchmarks' hooks are set, switch every kernel path on
// and off by name (each giving the reference's output), and the workspace
// timings count the passes and reset.
func TestHooks(t *testing.T) {
	names := xattnhooks.Impls()
	if len(names) == 0 || names[len(names)-1] != "go" || names[0] != cpuid.Best().String() {
		t.Fatalf("Impls = %v, want the fastest first and go last", names)
	}
	if got := xattnhooks.CurrentImpl(); got != names[0] {
		t.Errorf("CurrentImpl = %q before any switch, want %q", got, names[0])
	}
	r := rand.New(rand.NewPCG(3, 4))
	const tq, tk = 19, 11
	w := randWeights(r, 24, 16, 32, 24, 4, true)
	q, kv := randVec(r, tq*24, 1), randVec(r, tk*16, 1)
	want, _ := forwardRef(w, q, tq, kv, tk, nil)
	l, err := New(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(slices.Clone(names), "auto") {
		restore, err := xattnhooks.SetImpl(name)
		if err != nil {
			t.Fatalf("SetImpl(%q): %v", name, err)
		}
		wantName := name
		if name == "auto" {
			wantName = names[0]
		}
		if got := xattnhooks.CurrentImpl(); got != wantName {
			t.Errorf("SetImpl(%q): CurrentImpl = %q", name, got)
		}
		ws := l.NewWorkspace(2)
		res := new(Result)
		for range 3 {
			if err := ws.Forward(res, q, tq, kv, tk, nil, NoAttention); err != nil {
				t.Fatal(err)
			}
		}
		checkClose(t, name, res.Out, want, outAbs, outRel)
		tm := xattnhooks.PhaseTimes(ws)
		if tm.Calls != 3 || tm.Inputs <= 0 || tm.Core <= 0 {
			t.Errorf("%s: timings %+v after 3 passes", name, *tm)
		}
		*tm = xattnhooks.Timings{}
		if err := ws.Forward(res, q, tq, kv, tk, nil, NoAttention); err != nil {
			t.Fatal(err)
		}
		if tm.Calls != 1 {
			t.Errorf("%s: %d calls counted after a reset and one pass", name, tm.Calls)
		}
		ws.Close()
		restore()
		if got := xattnhooks.CurrentImpl(); got != names[0] {
			t.Errorf("restore after %q: CurrentImpl = %q", name, got)
		}
	}
	if _, err := xattnhooks.SetImpl("sse"); err == nil {
		t.Error("SetImpl(sse): no error")
	}
	for _, impl := range []cpuid.Impl{cpuid.AVX2, cpuid.AVX512} {
		if !cpuid.Supported(impl) {
			if _, err := xattnhooks.SetImpl(impl.String()); err == nil {
				t.Errorf("SetImpl(%s) on a machine without it: no error", impl)
			}
		}
	}
	if p := xattnhooks.PeakGFLOPS("go", 5*time.Millisecond); p <= 0 {
		t.Errorf("PeakGFLOPS(go) = %v", p)
	}
	if p := xattnhooks.PeakGFLOPS("nope", time.Millisecond); p != 0 {
		t.Errorf("PeakGFLOPS(nope) = %v, want 0", p)
	}
}
