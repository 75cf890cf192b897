package xattn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/conditionhq/condition/xattn/internal/cpuid"
)

// refMaxLogit is the largest |score| forwardRef has seen since it was last
// reset: float32 errors in the output grow with it (conditioning of softmax).
var refMaxLogit float64

// forwardRef is the float64 reference of a layer described by w: it returns
// the output [tq, dout] and the probabilities per head [heads, tq, tk].
func forwardRef(w Weights, q []float32, tq int, kv []float32, tk int, mask []bool) (out, probs []float64) {
	inner, heads := w.Inner, w.Heads
	hd := inner / heads
	dout := w.DOut
	if w.O == nil {
		dout = inner
	}
	scale := float64(w.Scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(hd))
	}
	ln := func(x []float32, n, d int, ln *LayerNorm) []float64 {
		y := make([]float64, n*d)
		for i := 0; i < n; i++ {
			row := x[i*d : (i+1)*d]
			var m, v float64
			for _, a := range row {
				m += float64(a)
			}
			m /= float64(d)
			for _, a := range row {
				v += (float64(a) - m) * (float64(a) - m)
			}
			v /= float64(d)
			for j, a := range row {
				t := float64(a)
				if ln != nil {
					eps := float64(ln.Eps)
					if eps == 0 {
						eps = 1e-5
					}
					t = (t - m) / math.Sqrt(v+eps) * float64(ln.Weight[j])
					if ln.Bias != nil {
						t += float64(ln.Bias[j])
					}
				}
				y[i*d+j] = t
			}
		}
		return y
	}
	proj := func(x []float64, n, din int, wm, b []float32, dout int, norm bool) []float64 {
		y := make([]float64, n*dout)
		for i := 0; i < n; i++ {
			for o := 0; o < dout; o++ {
				var s float64
				if wm == nil {
					s = x[i*din+o]
				} else {
					for k := 0; k < din; k++ {
						s += x[i*din+k] * float64(wm[o*din+k])
					}
				}
				if b != nil {
					s += float64(b[o])
				}
				y[i*dout+o] = s
			}
			if norm {
				var s float64
				for o := 0; o < dout; o++ {
					s += y[i*dout+o] * y[i*dout+o]
				}
				s = max(math.Sqrt(s), 1e-12)
				for o := 0; o < dout; o++ {
					y[i*dout+o] /= s
				}
			}
		}
		return y
	}
	xq := ln(q, tq, w.DQ, w.QNorm)
	xk := ln(kv, tk, w.DKV, w.KVNorm)
	Q := proj(xq, tq, w.DQ, w.Q, w.BQ, inner, w.NormalizeQ)
	K := proj(xk, tk, w.DKV, w.K, w.BK, inner, w.NormalizeK)
	V := K
	if !w.ValueIsKey {
		V = proj(xk, tk, w.DKV, w.V, w.BV, inner, false)
	}
	O := make([]float64, tq*inner)
	probs = make([]float64, heads*tq*tk)
	for h := 0; h < heads; h++ {
		for i := 0; i < tq; i++ {
			p := probs[(h*tq+i)*tk : (h*tq+i+1)*tk]
			m := math.Inf(-1)
			for j := 0; j < tk; j++ {
				if mask != nil && !mask[j] {
					continue
				}
				var s float64
				for d := 0; d < hd; d++ {
					s += Q[i*inner+h*hd+d] * K[j*inner+h*hd+d]
				}
				p[j] = s * scale
				m = max(m, p[j])
				refMaxLogit = max(refMaxLogit, math.Abs(p[j]))
			}
			var sum float64
			for j := 0; j < tk; j++ {
				if mask != nil && !mask[j] {
					p[j] = 0
					continue
				}
				p[j] = math.Exp(p[j] - m)
				sum += p[j]
			}
			if sum == 0 {
				continue
			}
			for j := range p {
				p[j] /= sum
			}
			for d := 0; d < hd; d++ {
				var s float64
				for j := 0; j < tk; j++ {
					s += p[j] * V[j*inner+h*hd+d]
				}
				O[i*inner+h*hd+d] = s
			}
		}
	}
	out = proj(O, tq, inner, w.O, w.BO, dout, false)
	return out, probs
}

func meanHeads(probs []float64, heads, tq, tk int) []float64 {
	m := make([]float64, tq*tk)
	for h := 0; h < heads; h++ {
		for i := range m {
			m[i] += probs[h*tq*tk+i]
		}
	}
	for i := range m {
		m[i] /= float64(heads)
	}
	return m
}

func randVec(r *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * sd)
	}
	return v
}

// randWeights returns a diffusers-style layer with random weights of the
// usual scale (1/sqrt(fan-in)).
func randWeights(r *rand.Rand, dq, dkv, inner, dout, heads int, biasQKV bool) Weights {
	w := Weights{DQ: dq, DKV: dkv, Inner: inner, DOut: dout, Heads: heads,
		Q:  randVec(r, inner*dq, 1/math.Sqrt(float64(dq))),
		K:  randVec(r, inner*dkv, 1/math.Sqrt(float64(dkv))),
		V:  randVec(r, inner*dkv, 1/math.Sqrt(float64(dkv))),
		O:  randVec(r, dout*inner, 1/math.Sqrt(float64(inner))),
		BO: randVec(r, dout, 0.1)}
	if biasQKV {
		w.BQ, w.BK, w.BV = randVec(r, inner, 0.1), randVec(r, inner, 0.1), randVec(r, inner, 0.1)
	}
	return w
}

// forEachImpl runs f once per kernel implementation the machine has
// (AVX-512, AVX2, Go), switching the faster ones off in turn.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, impl := range cpuid.Available() {
		t.Run(impl.String(), func(t *testing.T) {
			restore := cpuid.Set(impl)
			defer restore()
			f(t)
		})
	}
}

// Tolerances against the float64 reference, as |got-want| <= abs + rel·|want|.
const (
	outAbs, outRel   = 2e-5, 2e-4 // outputs (O(1) values, sums of up to ~1000 float32 products)
	probAbs, probRel = 2e-6, 2e-4 // attention probabilities
)

func checkClose(t *testing.T, what string, got []float32, want []float64, abs, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i, w := range want {
		g := float64(got[i])
		if !(math.Abs(g-w) <= abs+rel*math.Abs(w)) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v (diff %.3g)", what, i, g, w, g-w)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values off", what, bad, len(want))
	}
}
