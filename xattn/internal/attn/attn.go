// Package attn holds the attention-core kernels of xattn. Attend is the
// fused core: for tiles of MR query rows it computes the scores against
// keys packed in panels (register tiles), an exact softmax with a
// vectorised exp, and the probabilities times the values, in one kernel
// call for any number of tiles. Every kernel has a pure-Go reference (the
// ...Generic functions, also the fallback on other platforms and with the
// purego tag) and, on amd64, AVX2+FMA and AVX-512 versions generated with
// avo (see xattn/_asm/attn). The exported functions dispatch on
// cpuid.Current() at each call.
//
// Attend checks the lengths of its slices once per call; the assembly
// assumes valid input.
package attn

import "math"

// MR is the number of query rows in one tile: Attend works on whole
// tiles of MR rows.
const MR = 4

// NR is the number of keys in one packed panel of K.
const NR = 16

// Panels returns the number of NR-key panels holding tk keys.
func Panels(tk int) int { return (tk + NR - 1) / NR }

// PadHD returns hd rounded up to a multiple of 16, the row length of
// packed V.
func PadHD(hd int) int { return (hd + 15) &^ 15 }

// PackedKLen returns the length of a packed K for tk keys of width hd.
func PackedKLen(tk, hd int) int { return Panels(tk) * NR * hd }

// BlockKeys is the most keys Attend scores in one pass. Beyond it, keys
// run in blocks of BlockKeys with online softmax (each block's maximum and
// sum rescale the running output), so that a tile's scores, MR·BlockKeys
// floats, stay in L1 whatever T_k.
const BlockKeys = 512

// blockTiles is how many tiles attendBlocks runs through one kernel call
// per block of keys.
const blockTiles = 16

// ScratchLen returns the length of the scratch buffer Attend needs for n
// keys of width hd: MR rows of Panels(n)·NR scores; past BlockKeys keys, a
// block's scores, the block output of blockTiles tiles [blockTiles·MR, hd]
// and 8 statistics per tile and block.
func ScratchLen(n, hd int) int {
	if n <= BlockKeys {
		return MR * Panels(n) * NR
	}
	return MR*BlockKeys + blockTiles*MR*hd + 8*blockTiles*blocks(n)
}

func blocks(n int) int { return (n + BlockKeys - 1) / BlockKeys }

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

// Max is MaxGeneric on the fastest kernel; len(x) >= 1.
func Max(x []float32) float32 { return rowMax(x) }

// ExpSum is ExpSumGeneric on the fastest kernel.
func ExpSum(x []float32, sub float32) float32 {
	if len(x) == 0 {
		return 0
	}
	return expSum(x, sub)
}

// AttendGeneric computes the attention of tiles·MR query rows to n keys.
// For query row r < tiles·MR, q_r = q[r*ldq : r*ldq+hd]:
//
//	s_j = scale · Σ_d q_r[d]·K[j][d]       j < n, K packed in kp by PackK
//	e_j = Exp(s_j - max_j s_j),  l = Σ_j e_j
//	o[r*ldo+c] = (Σ_j e_j·V[j][c]) · (1/l)  c < hd, V packed in vp by PackV
//	prob[r*ldp+j] = e_j · (1/l)            j < n, only when prob != nil
//	ml[8t+i], ml[8t+4+i] = max_j s_j, l    row i of tile t, only when ml != nil
//
// s is scratch of MR·Panels(n)·NR floats. No element of o or prob outside
// those is written. tiles, n, hd >= 1. It is the reference of the kernels,
// which score all n keys in one pass (Attend splits more than BlockKeys).
func AttendGeneric(o []float32, ldo int, q []float32, ldq, tiles int, kp, vp []float32, n, hd int, scale float32, s, prob []float32, ldp int, ml []float32) {
	hp := PadHD(hd)
	sr := s[:n]
	for r := 0; r < tiles*MR; r++ {
		qr := q[r*ldq : r*ldq+hd]
		for j := range sr {
			p, jj := j/NR, j%NR
			pan := kp[p*hd*NR : (p+1)*hd*NR]
			var acc float32
			for d, x := range qr {
				acc += x * pan[d*NR+jj]
			}
			sr[j] = acc * scale
		}
		mx := MaxGeneric(sr)
		l := ExpSumGeneric(sr, mx)
		if ml != nil {
			ml[8*(r/MR)+r%MR], ml[8*(r/MR)+4+r%MR] = mx, l
		}
		inv := 1 / l
		or := o[r*ldo : r*ldo+hd]
		clear(or)
		for j, e := range sr {
			vr := vp[j*hp : j*hp+hd]
			for c, x := range vr {
				or[c] += e * x
			}
		}
		for c := range or {
			or[c] *= inv
		}
		if prob != nil {
			pr := prob[r*ldp : r*ldp+n]
			for j, e := range sr {
				pr[j] = e * inv
			}
		}
	}
}

// Attend is AttendGeneric (without statistics) on the fastest kernel
// cpuid.Current() allows, for any n: up to BlockKeys keys in one kernel
// call for all tiles, more in blocks of BlockKeys per tile with online
// softmax. It checks the lengths of its slices once. len(o) >=
// (tiles·MR-1)·ldo + hd, likewise q (ldq) and prob (ldp, n);
// len(kp) >= PackedKLen(n, hd), len(vp) >= n·PadHD(hd),
// len(s) >= ScratchLen(n, hd).
func Attend(o []float32, ldo int, q []float32, ldq, tiles int, kp, vp []float32, n, hd int, scale float32, s, prob []float32, ldp int) {
	if tiles <= 0 || n <= 0 || hd <= 0 {
		return
	}
	rows := tiles * MR
	_ = o[(rows-1)*ldo+hd-1]
	_ = q[(rows-1)*ldq+hd-1]
	_ = kp[PackedKLen(n, hd)-1]
	_ = vp[n*PadHD(hd)-1]
	_ = s[ScratchLen(n, hd)-1]
	if prob != nil {
		_ = prob[(rows-1)*ldp+n-1]
	}
	if n <= BlockKeys {
		attend(o, ldo, q, ldq, tiles, kp, vp, n, hd, scale, s, prob, ldp, nil)
		return
	}
	attendBlocks(o, ldo, q, ldq, tiles, kp, vp, n, hd, scale, s, prob, ldp)
}

// rowStats returns the maximum and the sum the kernel wrote into ml for
// row r of its call (see AttendGeneric).
func rowStats(ml []float32, r int) (m, l float64) {
	return float64(ml[8*(r/MR)+r%MR]), float64(ml[8*(r/MR)+4+r%MR])
}

// attendBlocks is Attend for n > BlockKeys, in groups of up to blockTiles
// tiles: one kernel call per group and block of keys, block 0's output to
// o, each later block's to scratch, merged by the weights of online softmax
// (with M the running maximum and L the running sum relative to it, a
// block of maximum m and sum l adds with weight l·e^(m-M')/L' against
// L·e^(M-M')/L' for the running output); the probabilities, normalised per
// block by the kernel, are rescaled at the end by l_b·e^(m_b-M)/L.
func attendBlocks(o []float32, ldo int, q []float32, ldq, tiles int, kp, vp []float32, n, hd int, scale float32, s, prob []float32, ldp int) {
	hp, nb := PadHD(hd), blocks(n)
	sc := s[:MR*BlockKeys]
	ob := s[MR*BlockKeys : MR*BlockKeys+blockTiles*MR*hd]
	st := s[MR*BlockKeys+blockTiles*MR*hd : MR*BlockKeys+blockTiles*MR*hd+8*blockTiles*nb]
	var mRun, lRun [blockTiles * MR]float64
	for t0 := 0; t0 < tiles; t0 += blockTiles {
		g := min(blockTiles, tiles-t0)
		rows := g * MR
		qt, ot := q[t0*MR*ldq:], o[t0*MR*ldo:]
		var pt []float32
		if prob != nil {
			pt = prob[t0*MR*ldp:]
		}
		for b := 0; b < nb; b++ {
			j0 := b * BlockKeys
			nk := min(BlockKeys, n-j0)
			var pb []float32
			if pt != nil {
				pb = pt[j0:]
			}
			bst := st[8*blockTiles*b : 8*blockTiles*b+8*g]
			if b == 0 {
				attend(ot, ldo, qt, ldq, g, kp, vp, nk, hd, scale, sc, pb, ldp, bst)
				for r := range rows {
					mRun[r], lRun[r] = rowStats(bst, r)
				}
				continue
			}
			attend(ob, hd, qt, ldq, g, kp[j0*hd:], vp[j0*hp:], nk, hd, scale, sc, pb, ldp, bst)
			for r := range rows {
				mb, lb := rowStats(bst, r)
				m := max(mRun[r], mb)
				a, c := lRun[r]*math.Exp(mRun[r]-m), lb*math.Exp(mb-m)
				l := a + c
				fa, fc := float32(a/l), float32(c/l)
				row, brow := ot[r*ldo:r*ldo+hd], ob[r*hd:r*hd+hd]
				for k, v := range brow {
					row[k] = row[k]*fa + v*fc
				}
				mRun[r], lRun[r] = m, l
			}
		}
		if pt == nil {
			continue
		}
		for b := 0; b < nb; b++ {
			j0 := b * BlockKeys
			nk := min(BlockKeys, n-j0)
			bst := st[8*blockTiles*b:]
			for r := range rows {
				mb, lb := rowStats(bst, r)
				f := float32(lb * math.Exp(mb-mRun[r]) / lRun[r])
				row := pt[r*ldp+j0 : r*ldp+j0+nk]
				for j := range row {
					row[j] *= f
				}
			}
		}
	}
}
