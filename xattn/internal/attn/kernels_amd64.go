//go:build amd64 && gc && !purego

package attn

import "github.com/conditionhq/condition/xattn/internal/cpuid"

func attend(o []float32, ldo int, q []float32, ldq, tiles int, kp, vp []float32, n, hd int, scale float32, s, prob []float32, ldp int, ml []float32) {
	var pp, pml *float32
	if prob != nil {
		pp = &prob[0]
	}
	if ml != nil {
		_ = ml[8*tiles-1]
		pml = &ml[0]
	}
	switch cpuid.Current() {
	case cpuid.AVX512:
		attendAVX512(&o[0], ldo, &q[0], ldq, tiles, &kp[0], &vp[0], n, hd, scale, &s[0], pp, ldp, pml)
	case cpuid.AVX2:
		attendAVX2(&o[0], ldo, &q[0], ldq, tiles, &kp[0], &vp[0], n, hd, scale, &s[0], pp, ldp, pml)
	default:
		AttendGeneric(o, ldo, q, ldq, tiles, kp, vp, n, hd, scale, s, prob, ldp, ml)
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

func geluTanh(x []float32) {
	w := lanes()
	n := len(x)
	if w == 0 || n < w {
		GeluTanhGeneric(x)
		return
	}
	v := n &^ (w - 1)
	if w == 16 {
		geluTanhAVX512(&x[0], v)
	} else {
		geluTanhAVX2(&x[0], v)
	}
	if v < n {
		GeluTanhGeneric(x[v:])
	}
}
