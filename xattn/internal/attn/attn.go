// Package attn holds the attention-core kernels of xattn: scores against
// packed keys, a vectorised exp with row sums, and probabilities times
// values. Every kernel has a pure-Go reference (the ...Generic functions,
// also the fallback on other platforms) and, on amd64, AVX2+FMA and
// AVX-512 versions generated with avo (see xattn/_asm/attn). The exported
// functions dispatch on cpuid.Current() at each call.
//
// Callers check sizes; the kernels assume valid input.
package attn

import "math"

// MR is the number of query rows in one tile: Scores and PV always compute
// MR rows (rows past the caller's count hold harmless garbage).
const MR = 8

// NR is the number of keys in one packed panel of K.
const NR = 16

// BlockK is the number of keys processed per online-softmax step: sources
// longer than BlockK keys are handled in blocks with a running max and sum.
const BlockK = 512

// Panels returns the number of NR-key panels holding tk keys.
func Panels(tk int) int { return (tk + NR - 1) / NR }

// PadHD returns hd rounded up to a multiple of 16, the row length of
// packed V and of the output accumulator.
func PadHD(hd int) int { return (hd + 15) &^ 15 }

// PackedKLen returns the length of a packed K for tk keys of width hd.
func PackedKLen(tk, hd int) int { return Panels(tk) * NR * hd }

// PackK packs the keys k [tk, hd] (row stride ldk) into panels of NR keys:
// dst [Panels(tk), hd, NR], dst[(p*hd+d)*NR+j] = k[(p*NR+j)*ldk+d], with
// zeros for keys past tk. len(dst) >= PackedKLen(tk, hd).
func PackK(dst, k []float32, ldk, tk, hd int) {
	np := Panels(tk)
	for p := 0; p < np; p++ {
		pan := dst[p*hd*NR : (p+1)*hd*NR]
		for j := 0; j < NR; j++ {
			key := p*NR + j
			if key >= tk {
				for d := 0; d < hd; d++ {
					pan[d*NR+j] = 0
				}
				continue
			}
			row := k[key*ldk : key*ldk+hd]
			for d, x := range row {
				pan[d*NR+j] = x
			}
		}
	}
}

// PackV copies the values v [tk, hd] (row stride ldv) into dst [tk, PadHD(hd)]
// with zero padding.
func PackV(dst, v []float32, ldv, tk, hd int) {
	hp := PadHD(hd)
	for j := 0; j < tk; j++ {
		row := dst[j*hp : (j+1)*hp]
		copy(row, v[j*ldv:j*ldv+hd])
		clear(row[hd:])
	}
}

// ScoresGeneric computes s[i*lds + p*NR + j] = Σ_d q[i*hd+d] · kp[(p*hd+d)*NR+j]
// for i < MR, p < np, j < NR: the MR query rows q [MR, hd] against np packed
// key panels. lds >= np*NR.
func ScoresGeneric(s []float32, lds int, q, kp []float32, np, hd int) {
	var acc [NR]float32
	for i := 0; i < MR; i++ {
		qr := q[i*hd : i*hd+hd]
		for p := 0; p < np; p++ {
			acc = [NR]float32{}
			pan := kp[p*hd*NR : (p+1)*hd*NR]
			for d, x := range qr {
				kr := (*[NR]float32)(pan[d*NR : d*NR+NR])
				for j := range acc {
					acc[j] += x * kr[j]
				}
			}
			copy(s[i*lds+p*NR:], acc[:])
		}
	}
}

// PVGeneric accumulates o[i*hp+c] += Σ_{j<n} p[i*ldp+j] · v[j*hp+c] for
// i < MR, c < hp: MR probability rows times the packed values v [n, hp].
// hp is a multiple of 16.
func PVGeneric(o, p []float32, ldp int, v []float32, n, hp int) {
	for i := 0; i < MR; i++ {
		or := o[i*hp : i*hp+hp]
		pr := p[i*ldp : i*ldp+n]
		for j, w := range pr {
			vr := v[j*hp : j*hp+hp]
			for c, x := range vr {
				or[c] += w * x
			}
		}
	}
}

// MaxGeneric returns the largest of x (len(x) >= 1). With NaN among the
// inputs the result is unspecified (the kernels differ).
func MaxGeneric(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// ExpSumGeneric replaces x[i] by Exp(x[i] - sub) and returns their sum
// (accumulated in float32, in 16 interleaved lanes like the vector kernels).
func ExpSumGeneric(x []float32, sub float32) float32 {
	var lanes [16]float32
	for i, v := range x {
		e := Exp(v - sub)
		x[i] = e
		lanes[i&15] += e
	}
	var s float32
	for _, v := range lanes {
		s += v
	}
	return s
}

// Constants of Exp, shared with the vector kernels.
const (
	expLog2e = 1.44269504088896341
	expC1    = 0.693359375     // ln 2, high part (exact in few bits)
	expC2    = -2.12194440e-4  // ln 2 - expC1
	expLo    = -87.33654       // below this exp underflows float32 normals: result 0
	expP0    = 1.9875691500e-4 // Cephes expf polynomial
	expP1    = 1.3981999507e-3 //
	expP2    = 8.3334519073e-3 //
	expP3    = 4.1665795894e-2 //
	expP4    = 1.6666665459e-1 //
	expP5    = 5.0000001201e-1 //
	expHi    = 88.72283        // above this exp overflows: +Inf
)

// Exp returns e^x in float32 with the algorithm of the vector kernels:
// n = round(x·log2 e), r = x - n·ln2 (two-part Cody–Waite), a degree-7
// Cephes polynomial, times 2^n. Results below e^-87.33654 flush to 0 (the
// float32 normal range ends there); the error on [-87, 0] is at most 2 ulp
// (tested against math.Exp over a dense sweep). NaN gives NaN.
func Exp(x float32) float32 {
	if x != x {
		return x
	}
	if x < expLo {
		return 0
	}
	if x > expHi {
		return float32(math.Inf(1))
	}
	n := float32(math.RoundToEven(float64(x * expLog2e)))
	r := x - n*expC1
	r = r - n*expC2
	y := float32(expP0)
	y = y*r + expP1
	y = y*r + expP2
	y = y*r + expP3
	y = y*r + expP4
	y = y*r + expP5
	y = y*(r*r) + r + 1
	ni := int32(n)
	if ni > 127 {
		return y * 2 * math.Float32frombits(uint32(ni-1+127)<<23)
	}
	return y * math.Float32frombits(uint32(ni+127)<<23)
}

// Scores is ScoresGeneric on the fastest kernel cpuid.Current() allows.
// len(q) >= MR*hd, len(kp) >= np*hd*NR, len(s) >= (MR-1)*lds + np*NR.
func Scores(s []float32, lds int, q, kp []float32, np, hd int) {
	if np == 0 || hd == 0 {
		for i := 0; i < MR; i++ {
			clear(s[i*lds : i*lds+np*NR])
		}
		return
	}
	_ = s[(MR-1)*lds+np*NR-1]
	_ = q[MR*hd-1]
	_ = kp[np*hd*NR-1]
	scores(s, lds, q, kp, np, hd)
}

// PV is PVGeneric on the fastest kernel cpuid.Current() allows.
// len(o) >= MR*hp, len(p) >= (MR-1)*ldp + n, len(v) >= n*hp.
func PV(o, p []float32, ldp int, v []float32, n, hp int) {
	if n == 0 || hp == 0 {
		return
	}
	_ = o[MR*hp-1]
	_ = p[(MR-1)*ldp+n-1]
	_ = v[n*hp-1]
	pv(o, p, ldp, v, n, hp)
}

// Max is MaxGeneric on the fastest kernel; len(x) >= 1.
func Max(x []float32) float32 { return rowMax(x) }

// ExpSum is ExpSumGeneric on the fastest kernel.
func ExpSum(x []float32, sub float32) float32 {
	if len(x) == 0 {
		return 0
	}
	return expSum(x, sub)
}
