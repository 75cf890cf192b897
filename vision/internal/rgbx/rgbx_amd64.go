//go:build amd64 && gc && !purego

package rgbx

import "golang.org/x/sys/cpu"

// best is the kernel set for this CPU: "avx512" (AVX-512F; the AVX2
// kernels run beside them), "avx2", or "go". simdImpl is the one the
// functions run (SetImpl).
var (
	best     = pickSIMD()
	simdImpl = best
)

func pickSIMD() string {
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX2:
		return "avx512"
	case cpu.X86.HasAVX2:
		return "avx2"
	}
	return "go"
}

// hasAVX2 says the AVX2 kernels can run (tests run them beside AVX-512).
var hasAVX2 = cpu.X86.HasAVX2

// QuadRGB is QuadRGBGeneric; each row has 16 bytes readable from pixel
// len(q)/16-4 on (len(q) a multiple of 64).
func QuadRGB(q []byte, rows [4][]byte) {
	n := len(q) / 16
	if simdImpl == "go" || n == 0 {
		QuadRGBGeneric(q, rows)
		return
	}
	for _, r := range rows {
		_ = r[3*n+3]
	}
	trace("quadRGBAVX2")
	quadRGBAVX2(&q[0], &rows[0][0], &rows[1][0], &rows[2][0], &rows[3][0], n)
}

// QuadRGBA is QuadRGBAGeneric; len(q) is a multiple of 64.
func QuadRGBA(q []byte, rows [4][]byte) byte {
	n := len(q) / 16
	if simdImpl == "go" || n == 0 {
		return QuadRGBAGeneric(q, rows)
	}
	for _, r := range rows {
		_ = r[4*n-1]
	}
	trace("quadRGBAAVX2")
	return quadRGBAAVX2(&q[0], &rows[0][0], &rows[1][0], &rows[2][0], &rows[3][0], n)
}

// Hconv is HconvGeneric; dst holds 4 rows of ws bytes, ws >= 4·len(taps)/2.
func Hconv(dst []byte, ws int, q []byte, taps []int32, k []int32, ksize int) {
	ow := len(taps) / 2
	switch {
	case simdImpl == "go" || ow == 0:
		HconvGeneric(dst, ws, q, taps, k, ksize)
		return
	}
	_ = dst[3*ws+4*ow-1]
	_ = k[(ow-1)*ksize]
	for xx := range ow { // the kernels trust the offsets
		if off, n := int(taps[2*xx]), int(taps[2*xx+1]); off < 0 || n < 0 || n > ksize || off+16*n > len(q) {
			panic("rgbx: hconv: taps out of range")
		}
	}
	if simdImpl == "avx512" {
		trace("hconvAVX512")
		hconvAVX512(&dst[0], ws, &q[0], &taps[0], &k[0], ksize, ow)
	} else {
		trace("hconvAVX2")
		hconvAVX2(&dst[0], ws, &q[0], &taps[0], &k[0], ksize, ow)
	}
}

// Vconv is VconvGeneric; len(dst) is a multiple of Align, len(k) > 0 and
// src holds len(k) rows of ws >= len(dst) bytes.
func Vconv(dst, src []byte, ws int, k []int32) {
	n := len(k)
	if simdImpl == "go" || len(dst) == 0 {
		VconvGeneric(dst, src, ws, k)
		return
	}
	if len(dst)%Align != 0 || ws < len(dst) {
		panic("rgbx: vconv: bad row length")
	}
	_ = src[(n-1)*ws+len(dst)-1]
	if simdImpl == "avx512" {
		trace("vconvAVX512")
		vconvAVX512(&dst[0], &src[0], ws, &k[0], n, len(dst))
	} else {
		trace("vconvAVX2")
		vconvAVX2(&dst[0], &src[0], ws, &k[0], n, len(dst))
	}
}

// Lut is LutGeneric: the kernels take the whole blocks (16 pixels for
// AVX-512, 8 for AVX2), Go the rest.
func Lut(r, g, b []float32, src []byte, lut *[3][256]float32) {
	n := len(r)
	g, b, src = g[:n], b[:n], src[:4*n]
	var m int
	switch simdImpl {
	case "avx512":
		if m = n &^ 15; m > 0 {
			trace("lutRGBXAVX512")
			lutRGBXAVX512(&r[0], &g[0], &b[0], &src[0], m, &lut[0][0])
		}
	case "avx2":
		if m = n &^ 7; m > 0 {
			trace("lutRGBXAVX2")
			lutRGBXAVX2(&r[0], &g[0], &b[0], &src[0], m, &lut[0][0])
		}
	}
	if m < n {
		LutGeneric(r[m:], g[m:], b[m:], src[4*m:], lut)
	}
}

// quadRGBAVX2 is QuadRGBGeneric over n columns (n a multiple of 4), reading 16
// bytes at each pixel 4i of every row.
//
//go:noescape
func quadRGBAVX2(q, r0, r1, r2, r3 *byte, n int)

// quadRGBAAVX2 is QuadRGBAGeneric over n columns (n a multiple of 4).
//
//go:noescape
func quadRGBAAVX2(q, r0, r1, r2, r3 *byte, n int) byte

// hconvAVX2 is HconvGeneric for ow outputs: per output, per tap, VPMOVZXBD of
// the tap's 16 bytes, VPMULLD by the broadcast weight, VPADDD; then
// VPSRAD, and VPACKSSDW/VPACKUSWB clip to bytes.
//
//go:noescape
func hconvAVX2(dst *byte, ws int, q *byte, taps *int32, k *int32, ksize, ow int)

// hconvAVX512 is hconvAVX2 on zmm registers: one VPMULLD a tap for the
// four rows; VPMAXSD and VPMOVUSDB clip.
//
//go:noescape
func hconvAVX512(dst *byte, ws int, q *byte, taps *int32, k *int32, ksize, ow int)

// vconvAVX2 is VconvGeneric for width bytes (a multiple of 32): 32 bytes at a
// time, four ymm sums of 8.
//
//go:noescape
func vconvAVX2(dst, src *byte, ws int, k *int32, n, width int)

// vconvAVX512 is VconvGeneric for width bytes (a multiple of 64): 64 bytes at
// a time, four zmm sums of 16.
//
//go:noescape
func vconvAVX512(dst, src *byte, ws int, k *int32, n, width int)

// lutRGBXAVX2 is LutGeneric for n pixels (a multiple of 8), with VPGATHERDD
// from the tables.
//
//go:noescape
func lutRGBXAVX2(dr, dg, db *float32, src *byte, n int, lut *float32)

// lutRGBXAVX512 is LutGeneric for n pixels (a multiple of 16).
//
//go:noescape
func lutRGBXAVX512(dr, dg, db *float32, src *byte, n int, lut *float32)

// QuadYCC is QuadYCCGeneric; the kernel takes the whole blocks of 8 columns
// from an even xs, Go the rest.
func QuadYCC(q, yT, yB, pc []byte, m, xs, n int) {
	nb := n &^ 7
	if simdImpl == "go" || xs&1 != 0 || nb == 0 {
		QuadYCCGeneric(q, yT, yB, pc, m, xs, n)
		return
	}
	_ = q[16*(nb-1)+7]
	_, _ = yT[nb-1], yB[nb-1]
	_ = pc[5*m+xs>>1+nb/2+3]
	trace("quadYCCAVX2")
	quadYCCAVX2(&q[0], &yT[0], &yB[0], &pc[xs>>1], m, nb)
	if nb < n {
		QuadYCCGeneric(q[16*nb:], yT[nb:], yB[nb:], pc, m, xs+nb, n-nb)
	}
}

// quadYCCAVX2 is QuadYCCGeneric for n columns (a multiple of 8) from an even
// column, pc at its padded column xs/2 (chroma column xs/2-1): 8 columns
// a block, the upsampling and libjpeg's YCC→RGB in 32-bit lanes
// (VPMULLD by the same fixed-point factors as its tables).
//
//go:noescape
func quadYCCAVX2(q, yT, yB, pc *byte, m, n int)
