//go:build amd64 && gc && !purego

package attn

import "github.com/conditionhq/condition/xattn/internal/cpuid"

func scores(s []float32, lds int, q, kp []float32, np, hd int) {
	switch cpuid.Current() {
	case cpuid.AVX512:
		scoresAVX512(&s[0], lds, &q[0], &kp[0], np, hd)
	case cpuid.AVX2:
		scoresAVX2(&s[0], lds, &q[0], &kp[0], np, hd)
	default:
		ScoresGeneric(s, lds, q, kp, np, hd)
	}
}

func pv(o, p []float32, ldp int, v []float32, n, hp int) {
	switch cpuid.Current() {
	case cpuid.AVX512:
		pvAVX512(&o[0], &p[0], ldp, &v[0], n, hp)
	case cpuid.AVX2:
		pvAVX2(&o[0], &p[0], ldp, &v[0], n, hp)
	default:
		PVGeneric(o, p, ldp, v, n, hp)
	}
}

// lanes returns the vector width of the current kernels (0 for Go).
func lanes() int {
	switch cpuid.Current() {
	case cpuid.AVX512:
		return 16
	case cpuid.AVX2:
		return 8
	}
	return 0
}

func rowMax(x []float32) float32 {
	w := lanes()
	n := len(x)
	if w == 0 || n < w {
		return MaxGeneric(x)
	}
	v := n &^ (w - 1)
	var m float32
	if w == 16 {
		m = maxAVX512(&x[0], v)
	} else {
		m = maxAVX2(&x[0], v)
	}
	if v < n {
		m = max(m, MaxGeneric(x[v:]))
	}
	return m
}

func expSum(x []float32, sub float32) float32 {
	w := lanes()
	n := len(x)
	if w == 0 || n < w {
		return ExpSumGeneric(x, sub)
	}
	v := n &^ (w - 1)
	var s float32
	if w == 16 {
		s = expSumAVX512(&x[0], v, sub)
	} else {
		s = expSumAVX2(&x[0], v, sub)
	}
	if v < n {
		s += ExpSumGeneric(x[v:], sub)
	}
	return s
}
