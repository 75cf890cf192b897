package xattn

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

type shape struct{ tq, tk, dq, dkv, heads, hd, dout int }

// edgeShapes straddles the kernel tiles: MR = 4 query rows (whole tiles,
// a partial last tile, tiles split across goroutines), NR = 16 keys per
// panel, score tiles of up to 5 zmm / 3 ymm of keys (groups 3+3, 4+3, ...),
// P·V tiles of up to 5 zmm / 3 ymm of columns, 16-wide head_dim padding.
var edgeShapes = []shape{
	{1, 1, 1, 1, 1, 1, 1},
	{1, 77, 40, 24, 2, 16, 40},
	{7, 15, 5, 3, 1, 3, 7},
	{8, 16, 16, 16, 1, 16, 16},
	{9, 17, 17, 9, 1, 17, 5},
	{15, 31, 33, 20, 3, 11, 13},
	{16, 32, 64, 48, 2, 32, 64},
	{17, 33, 31, 29, 4, 8, 30},
	{23, 47, 12, 12, 1, 64, 12},
	{50, 77, 96, 64, 2, 64, 96},
	{3, 77, 20, 20, 1, 65, 20},
	{5, 48, 20, 20, 2, 63, 20},
	{6, 511, 24, 16, 1, 32, 24},
	{9, 512, 24, 16, 2, 16, 24},
	{10, 513, 24, 16, 1, 33, 24},
	{4, 1030, 16, 16, 2, 24, 16},
	{2, 3, 300, 257, 3, 100, 301},
	{3, 9, 8, 8, 1, 8, 8},
	{4, 16, 8, 8, 1, 8, 8},
	{61, 97, 40, 24, 1, 40, 40},
	{5, 200, 16, 16, 2, 80, 16},
	{33, 77, 48, 32, 3, 112, 48},
	{131, 9, 16, 24, 2, 256, 16}, // several chunks of query rows on one thread too
}

func maskFor(r *rand.Rand, kind string, tk int) []bool {
	switch kind {
	case "none":
		return nil
	case "true":
		m := make([]bool, tk)
		for i := range m {
			m[i] = true
		}
		return m
	case "false":
		return make([]bool, tk)
	case "prefix": // a padded prompt
		m := make([]bool, tk)
		for i := range (tk + 1) / 2 {
			m[i] = true
		}
		return m
	}
	m := make([]bool, tk) // random
	for i := range m {
		m[i] = r.IntN(3) > 0
	}
	return m
}

func TestForwardEdges(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for si, s := range edgeShapes {
			for _, mk := range []string{"none", "true", "prefix", "random", "false"} {
				r := rand.New(rand.NewPCG(uint64(si), 7))
				inner := s.heads * s.hd
				w := randWeights(r, s.dq, s.dkv, inner, s.dout, s.heads, si%2 == 0)
				l, err := New(w)
				if err != nil {
					t.Fatal(err)
				}
				q := randVec(r, s.tq*s.dq, 1)
				kv := randVec(r, s.tk*s.dkv, 1)
				mask := maskFor(r, mk, s.tk)
				name := fmt.Sprintf("%+v/mask=%s", s, mk)
				wantOut, wantP := forwardRef(w, q, s.tq, kv, s.tk, mask)
				for _, threads := range []int{1, 2} {
					ws := l.NewWorkspace(threads)
					for _, mode := range []AttnMode{PerHeadAttention, MeanAttention} {
						res := guarded(s.tq*s.dout, mode, s.heads*s.tq*s.tk)
						if err := ws.Forward(res, q, s.tq, kv, s.tk, mask, mode); err != nil {
							t.Fatal(err)
						}
						checkGuards(t, name, res)
						checkClose(t, name+"/out", res.Out, wantOut, outAbs, outRel)
						if mode == PerHeadAttention {
							checkClose(t, name+"/attn", res.Attn, wantP, probAbs, probRel)
						} else {
							checkClose(t, name+"/mean", res.Attn, meanHeads(wantP, s.heads, s.tq, s.tk), probAbs, probRel)
						}
						checkRowSums(t, name, res, mask)
					}
					ws.Close()
				}
			}
		}
	})
}

const guardN = 37

var guardVal = float32(math.Float32frombits(0x7fc0dead))

// guarded returns a result whose buffers have room for n outputs and na
// probabilities followed by guard bands of NaNs with a payload.
func guarded(n int, mode AttnMode, na int) *Result {
	fill := func(n int) []float32 {
		b := make([]float32, n+guardN)
		for i := range b {
			b[i] = guardVal
		}
		return b[:0]
	}
	res := &Result{Out: fill(n)}
	if mode != NoAttention {
		res.Attn = fill(na)
	}
	return res
}

func checkGuards(t *testing.T, name string, res *Result) {
	t.Helper()
	for _, b := range [][]float32{res.Out, res.Attn} {
		g := b[len(b):cap(b)]
		for i, v := range g {
			if math.Float32bits(v) != math.Float32bits(guardVal) {
				t.Fatalf("%s: guard band overwritten at len+%d (cap %d)", name, i, cap(b))
			}
		}
	}
}

func checkRowSums(t *testing.T, name string, res *Result, mask []bool) {
	t.Helper()
	any := res.TK > 0
	if mask != nil {
		any = false
		for _, m := range mask {
			any = any || m
		}
	}
	rows := len(res.Attn) / max(res.TK, 1)
	for i := 0; i < rows; i++ {
		var s float64
		for j, p := range res.Attn[i*res.TK : (i+1)*res.TK] {
			if math.IsNaN(float64(p)) || p < 0 {
				t.Fatalf("%s: probability [%d,%d] = %v", name, i, j, p)
			}
			if mask != nil && !mask[j] && p != 0 {
				t.Fatalf("%s: masked key %d has probability %v", name, j, p)
			}
			s += float64(p)
		}
		want := 1.0
		if !any {
			want = 0
		}
		if math.Abs(s-want) > 1e-5 {
			t.Fatalf("%s: row %d sums to %v, want %v", name, i, s, want)
		}
	}
	for i, v := range res.Out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s: output %d = %v", name, i, v)
		}
	}
}

// TestPrepared checks that prepared sources and queries give Forward's
// results, reused across calls with different partners.
func TestPrepared(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		w := randWeights(r, 40, 24, 32, 40, 2, true)
		l, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		kv := randVec(r, 11*24, 1)
		mask := maskFor(r, "prefix", 11)
		src, err := l.PrepareSource(kv, 11, mask)
		if err != nil {
			t.Fatal(err)
		}
		q0 := randVec(r, 5*40, 1)
		pq, err := l.PrepareQuery(q0, 5)
		if err != nil {
			t.Fatal(err)
		}
		ws := l.NewWorkspace(2)
		defer ws.Close()
		res := new(Result)
		for i := range 3 {
			tq := 3 + 7*i
			q := randVec(r, tq*40, 1)
			want, wantP := forwardRef(w, q, tq, kv, 11, mask)
			if err := ws.ForwardSource(res, q, tq, src, PerHeadAttention); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "ForwardSource/out", res.Out, want, outAbs, outRel)
			checkClose(t, "ForwardSource/attn", res.Attn, wantP, probAbs, probRel)

			tk := 2 + 9*i
			kv2 := randVec(r, tk*24, 1)
			want, wantP = forwardRef(w, q0, 5, kv2, tk, nil)
			if err := ws.ForwardQuery(res, pq, kv2, tk, nil, MeanAttention); err != nil {
				t.Fatal(err)
			}
			checkClose(t, "ForwardQuery/out", res.Out, want, outAbs, outRel)
			checkClose(t, "ForwardQuery/mean", res.Attn, meanHeads(wantP, 2, 5, tk), probAbs, probRel)
		}
		want, _ := forwardRef(w, q0, 5, kv, 11, mask)
		if err := ws.ForwardPrepared(res, pq, src, NoAttention); err != nil {
			t.Fatal(err)
		}
		checkClose(t, "ForwardPrepared/out", res.Out, want, outAbs, outRel)
		if res.Attn != nil {
			t.Errorf("NoAttention returned %d probabilities", len(res.Attn))
		}
	})
}

// TestWorkspacePrepare checks Workspace.PrepareSource, PrepareQuery and
// PrepareSourceProjected: one Source and one Query reused for sides of
// growing and shrinking sizes (so stale rows of a larger earlier side would
// show), masks of every kind, results against the float64 reference.
func TestWorkspacePrepare(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		w := randWeights(r, 40, 24, 32, 40, 2, true)
		w.KVNorm = &LayerNorm{Weight: randVec(r, 24, 1), Bias: randVec(r, 24, 0.5), Eps: 1e-5}
		w.QNorm = &LayerNorm{Weight: randVec(r, 40, 1), Eps: 1e-5}
		w.NormalizeK = true
		l, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		// Layers whose query sides are l's key and value sides.
		kside, err := New(Weights{DQ: 24, DKV: 32, Inner: 32, Heads: 2, Q: w.K, BQ: w.BK, QNorm: w.KVNorm, NormalizeQ: true})
		if err != nil {
			t.Fatal(err)
		}
		vside, err := New(Weights{DQ: 24, DKV: 32, Inner: 32, Heads: 2, Q: w.V, BQ: w.BV, QNorm: w.KVNorm})
		if err != nil {
			t.Fatal(err)
		}
		ws := l.NewWorkspace(2)
		defer ws.Close()
		wk, wv := kside.NewWorkspace(2), vside.NewWorkspace(1)
		defer wk.Close()
		defer wv.Close()
		var src, proj Source
		var pq, pk, pv Query
		res := new(Result)
		for i, tk := range []int{30, 7, 19, 1, 45} {
			tq := []int{13, 3, 25, 1, 8}[i]
			kv, q := randVec(r, tk*24, 1), randVec(r, tq*40, 1)
			mask := maskFor(r, []string{"none", "prefix", "random", "false", "random"}[i], tk)
			want, wantP := forwardRef(w, q, tq, kv, tk, mask)
			if err := ws.PrepareSource(&src, kv, tk, mask); err != nil {
				t.Fatal(err)
			}
			if err := ws.PrepareQuery(&pq, q, tq); err != nil {
				t.Fatal(err)
			}
			if err := ws.ForwardPrepared(res, &pq, &src, PerHeadAttention); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("tk %d tq %d", tk, tq)
			checkClose(t, name+"/out", res.Out, want, outAbs, outRel)
			checkClose(t, name+"/attn", res.Attn, wantP, probAbs, probRel)
			// The same source from keys and values projected elsewhere.
			if err := wk.PrepareQuery(&pk, kv, tk); err != nil {
				t.Fatal(err)
			}
			if err := wv.PrepareQuery(&pv, kv, tk); err != nil {
				t.Fatal(err)
			}
			if err := ws.PrepareSourceProjected(&proj, pk.Rows(), pv.Rows(), tk, mask); err != nil {
				t.Fatal(err)
			}
			if err := ws.ForwardSource(res, q, tq, &proj, MeanAttention); err != nil {
				t.Fatal(err)
			}
			checkClose(t, name+"/projected/out", res.Out, want, outAbs, outRel)
			checkClose(t, name+"/projected/mean", res.Attn, meanHeads(wantP, 2, tq, tk), probAbs, probRel)
		}
		if n := testing.AllocsPerRun(10, func() {
			kv, q := make([]float32, 19*24), make([]float32, 25*40)
			_ = ws.PrepareSource(&src, kv, 19, nil)
			_ = ws.PrepareQuery(&pq, q, 25)
		}); n > 2 {
			t.Errorf("%v allocations per prepare of a size seen before, want only the test's own 2", n)
		}

		// Values that are the keys: CLIP's joint space, both directions
		// sharing one projection of the image side.
		jw := Weights{DQ: 20, DKV: 12, Inner: 16, Heads: 1, Scale: 50,
			Q: randVec(r, 16*20, 0.2), K: randVec(r, 16*12, 0.3),
			KVNorm: &LayerNorm{Weight: randVec(r, 12, 1), Bias: randVec(r, 12, 1), Eps: 1e-5}, NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
		img := Weights{DQ: 12, DKV: 20, Inner: 16, Heads: 1, Scale: 50, Q: jw.K, K: jw.Q, QNorm: jw.KVNorm,
			NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
		lj, err := New(jw)
		if err != nil {
			t.Fatal(err)
		}
		li, err := New(img)
		if err != nil {
			t.Fatal(err)
		}
		wj, wi := lj.NewWorkspace(1), li.NewWorkspace(2)
		defer wj.Close()
		defer wi.Close()
		patches, tokens := randVec(r, 9*12, 1), randVec(r, 5*20, 1)
		var imgQ Query
		var imgSrc Source
		if err := wi.PrepareQuery(&imgQ, patches, 9); err != nil {
			t.Fatal(err)
		}
		if err := wj.PrepareSourceProjected(&imgSrc, imgQ.Rows(), nil, 9, nil); err != nil {
			t.Fatal(err)
		}
		if err := wj.ForwardSource(res, tokens, 5, &imgSrc, MeanAttention); err != nil {
			t.Fatal(err)
		}
		want, wantP := forwardRef(jw, tokens, 5, patches, 9, nil)
		checkClose(t, "joint/out", res.Out, want, outAbs, outRel)
		checkClose(t, "joint/mean", res.Attn, wantP, probAbs, probRel)

		// Errors name what is wrong.
		for _, c := range []struct {
			name string
			err  error
		}{
			{"values of a values-are-keys layer", wj.PrepareSourceProjected(new(Source), imgQ.Rows(), imgQ.Rows(), 9, nil)},
			{"short keys", ws.PrepareSourceProjected(new(Source), make([]float32, 5), pv.Rows(), pk.TQ(), nil)},
			{"no values", ws.PrepareSourceProjected(new(Source), pk.Rows(), nil, pk.TQ(), nil)},
			{"short mask", ws.PrepareSourceProjected(new(Source), pk.Rows(), pv.Rows(), pk.TQ(), make([]bool, 3))},
			{"another layer's source", wj.PrepareSource(&src, patches, 9, nil)},
			{"another layer's query", wi.PrepareQuery(&pq, patches, 9)},
			{"nil source", ws.PrepareSource(nil, nil, 0, nil)},
			{"short queries", ws.PrepareQuery(new(Query), make([]float32, 39), 1)},
		} {
			if c.err == nil {
				t.Errorf("%s: no error", c.name)
			}
		}
	})
}

// TestIdentityAndJointWeights covers layers without some projections: the
// identity layer and a joint-space layer (layer norm, normalisation, values
// = keys, no W_O).
func TestIdentityAndJointWeights(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		l, err := Identity(24, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		q, kv := randVec(r, 9*24, 1), randVec(r, 19*24, 1)
		res, err := l.Forward(q, 9, kv, 19, nil, PerHeadAttention, 1)
		if err != nil {
			t.Fatal(err)
		}
		want, wantP := forwardRef(Weights{DQ: 24, DKV: 24, Inner: 24, Heads: 3}, q, 9, kv, 19, nil)
		checkClose(t, "identity/out", res.Out, want, outAbs, outRel)
		checkClose(t, "identity/attn", res.Attn, wantP, probAbs, probRel)

		w := Weights{DQ: 20, DKV: 12, Inner: 16, Heads: 1, Scale: 100,
			Q: randVec(r, 16*20, 0.2), K: randVec(r, 16*12, 0.3),
			QNorm:      &LayerNorm{Weight: randVec(r, 20, 1), Bias: randVec(r, 20, 1), Eps: 1e-5},
			NormalizeQ: true, NormalizeK: true, ValueIsKey: true}
		lj, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		q, kv = randVec(r, 13*20, 1), randVec(r, 7*12, 1)
		mask := []bool{true, true, false, true, true, false, false}
		res, err = lj.Forward(q, 13, kv, 7, mask, MeanAttention, 2)
		if err != nil {
			t.Fatal(err)
		}
		want, wantP = forwardRef(w, q, 13, kv, 7, mask)
		checkClose(t, "joint/out", res.Out, want, outAbs, outRel)
		checkClose(t, "joint/attn", res.Attn, wantP, probAbs, probRel)
	})
}

func TestForwardAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	w := randWeights(r, 64, 48, 64, 64, 4, true)
	l, _ := New(w)
	q, kv := randVec(r, 37*64, 1), randVec(r, 77*48, 1)
	mask := maskFor(r, "prefix", 77)
	src, _ := l.PrepareSource(kv, 77, mask)
	for _, threads := range []int{1, 2} {
		ws := l.NewWorkspace(threads)
		res := new(Result)
		for _, mode := range []AttnMode{NoAttention, MeanAttention, PerHeadAttention} {
			f := func() {
				if err := ws.Forward(res, q, 37, kv, 77, mask, mode); err != nil {
					t.Fatal(err)
				}
				if err := ws.ForwardSource(res, q, 37, src, mode); err != nil {
					t.Fatal(err)
				}
			}
			f()
			if n := testing.AllocsPerRun(20, f); n != 0 {
				t.Errorf("threads %d mode %d: %v allocations per Forward", threads, mode, n)
			}
		}
		ws.Close()
		ws.Close()
		if err := ws.Forward(res, q, 37, kv, 77, mask, 0); !errors.Is(err, ErrClosed) {
			t.Errorf("Forward after Close: %v, want ErrClosed", err)
		}
	}
}

func TestForwardErrors(t *testing.T) {
	l, err := Identity(8, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := l.NewWorkspace(1)
	defer ws.Close()
	res := new(Result)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"short query", ws.Forward(res, make([]float32, 15), 2, make([]float32, 8), 1, nil, 0)},
		{"short source", ws.Forward(res, make([]float32, 16), 2, make([]float32, 7), 1, nil, 0)},
		{"mask length", ws.Forward(res, make([]float32, 16), 2, make([]float32, 8), 1, []bool{true, true}, 0)},
		{"mode", ws.Forward(res, make([]float32, 16), 2, make([]float32, 8), 1, nil, 7)},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	for _, w := range []Weights{
		{DQ: 8, DKV: 8, Inner: 8, Heads: 3},
		{DQ: 8, DKV: 8, Inner: 8, Heads: 0},
		{DQ: 8, DKV: 6, Inner: 8, Heads: 1},                                 // W_K needed
		{DQ: 8, DKV: 8, Inner: 8, Heads: 1, Q: make([]float32, 63)},         // wrong size
		{DQ: 8, DKV: 8, Inner: 8, Heads: 1, BO: make([]float32, 8)},         // b_O without W_O
		{DQ: 8, DKV: 8, Inner: 8, Heads: 1, Scale: float32(math.Inf(1))},    // scale
		{DQ: 8, DKV: 8, Inner: 8, Heads: 1, QNorm: &LayerNorm{Weight: nil}}, // norm size
		{DQ: 8, DKV: 8, Inner: 8, Heads: 1, ValueIsKey: true, V: make([]float32, 64)},
	} {
		if _, err := New(w); err == nil {
			t.Errorf("New(%+v): no error", w)
		}
	}
}

// FuzzForward compares random layers, inputs and masks against the float64
// reference on the current kernel implementation.
func FuzzForward(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(5), uint8(7), uint8(9), uint8(2), uint8(4), uint8(0), uint8(1))
	f.Add(uint64(2), uint8(17), uint8(33), uint8(64), uint8(32), uint8(1), uint8(64), uint8(1), uint8(2))
	f.Add(uint64(3), uint8(8), uint8(255), uint8(16), uint8(16), uint8(3), uint8(17), uint8(2), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, tq, tk, dq, dkv, heads, hd, maskKind, threads uint8) {
		s := shape{int(tq%40) + 1, int(tk) + int(tk)*int(seed%5), int(dq%100) + 1, int(dkv%100) + 1, int(heads%4) + 1, int(hd%80) + 1, 0}
		s.dout = s.dq
		r := rand.New(rand.NewPCG(seed, 11))
		inner := s.heads * s.hd
		w := randWeights(r, s.dq, s.dkv, inner, s.dout, s.heads, seed%2 == 0)
		w.Scale = float32(r.Float64() * 2)
		l, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		q := randVec(r, s.tq*s.dq, 1+r.Float64()*3)
		kv := randVec(r, s.tk*s.dkv, 1+r.Float64()*3)
		mask := maskFor(r, []string{"none", "true", "prefix", "random", "false"}[maskKind%5], s.tk)
		res, err := l.Forward(q, s.tq, kv, s.tk, mask, PerHeadAttention, int(threads%3)+1)
		if err != nil {
			t.Fatal(err)
		}
		refMaxLogit = 0
		want, wantP := forwardRef(w, q, s.tq, kv, s.tk, mask)
		// Random weights and inputs reach large logits, where float32
		// rounding of the scores (relative 6e-8) moves the probabilities by
		// about |logit|·6e-8 relative: the tolerance grows with the largest
		// |logit| times the largest |value|.
		var big float64
		for _, v := range want {
			big = max(big, math.Abs(v))
		}
		cond := 1e-6 * refMaxLogit
		checkClose(t, "out", res.Out, want, outAbs*4+cond*big, outRel*4)
		checkClose(t, "attn", res.Attn, wantP, probAbs*4+cond, probRel*4)
		checkRowSums(t, "fuzz", res, mask)
	})
}
