package jpegdec

// The constants of libjpeg's accurate integer IDCT (JDCT_ISLOW): the
// Loeffler–Ligtenberg–Moschytz factorization's multipliers, rounded to
// constBits fractional bits; pass1Bits more bits of precision are kept
// between the column pass and the row pass.
const (
	constBits = 13
	pass1Bits = 2

	fix0_298631336 = 2446  // 0.298631336 · 2^13
	fix0_390180644 = 3196  // 0.390180644 · 2^13
	fix0_541196100 = 4433  // 0.541196100 · 2^13
	fix0_765366865 = 6270  // 0.765366865 · 2^13
	fix0_899976223 = 7373  // 0.899976223 · 2^13
	fix1_175875602 = 9633  // 1.175875602 · 2^13
	fix1_501321110 = 12299 // 1.501321110 · 2^13
	fix1_847759065 = 15137 // 1.847759065 · 2^13
	fix1_961570560 = 16069 // 1.961570560 · 2^13
	fix2_053119869 = 16819 // 2.053119869 · 2^13
	fix2_562915447 = 20995 // 2.562915447 · 2^13
	fix3_072711026 = 25172 // 3.072711026 · 2^13
)

// sample is one output of the row pass, x scaled by 2^(constBits +
// pass1Bits + 3) and already rounded, as a sample: x + 128 clamped to
// 0..255, as libjpeg-turbo's SIMD IDCT saturates it.
func sample(x int32) byte {
	x = x>>(constBits+pass1Bits+3) + 128
	if uint32(x) > 255 {
		return byte(^(x >> 31)) // 0 below, 255 above
	}
	return byte(x)
}

// idct writes the 8×8 samples of blk, dequantized coefficients in natural
// order, to dst (rows stride bytes apart), and zeroes blk. last is the
// zigzag index of the last coefficient that may be nonzero: it bounds the
// columns and rows the passes must transform. A column or row whose AC
// coefficients are all zero is its DC coefficient scaled, as libjpeg
// computes it, and where the last four inputs of a pass are zero their
// terms are left out: either way the full computation gives the same
// integers.
func idct(blk *[64]int32, last int, dst []byte, stride int) {
	if last == 0 {
		idctDC(blk, dst, stride)
		return
	}
	idctGeneric(blk, last, dst, stride)
}

// idctGeneric is idct in Go, for blocks with AC coefficients: the reference
// of idctAVX2.
func idctGeneric(blk *[64]int32, last int, dst []byte, stride int) {
	var ws [64]int32
	cols, rows := int(zigzagCols[last&63]), int(zigzagRows[last&63])
	// Pass 1: the columns, into ws scaled by 2^pass1Bits.
	for c := range cols {
		col := blk[c:]
		col = col[:57:57]
		if col[8]|col[16]|col[24]|col[32]|col[40]|col[48]|col[56] == 0 {
			v := dcColumn(col[0])
			for r := range 8 {
				ws[8*r+c] = v
			}
			continue
		}
		var t [8]int32
		if rows <= 4 {
			idct4(&t, col[0], col[8], col[16], col[24], 0)
		} else {
			idct8(&t, col[0], col[8], col[16], col[24], col[32], col[40], col[48], col[56], 0)
		}
		const sh, half = constBits - pass1Bits, 1 << (constBits - pass1Bits - 1)
		for r, v := range t {
			ws[8*r+c] = (v + half) >> sh
		}
	}
	// Pass 2: the rows, from ws into samples; the rounding of the final
	// shift is added to the DC term.
	const round = 1 << (pass1Bits + 2)
	for r := range 8 {
		w := ws[8*r : 8*r+8 : 8*r+8]
		out := dst[r*stride : r*stride+8 : r*stride+8]
		if cols == 1 || w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
			v := sample((w[0] + round) << constBits)
			putRow(out, uint64(v)*0x0101010101010101)
			continue
		}
		var t [8]int32
		if cols <= 4 {
			idct4(&t, w[0], w[1], w[2], w[3], round)
		} else {
			idct8(&t, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], round)
		}
		putRow(out, uint64(sample(t[0]))|uint64(sample(t[1]))<<8|uint64(sample(t[2]))<<16|uint64(sample(t[3]))<<24|
			uint64(sample(t[4]))<<32|uint64(sample(t[5]))<<40|uint64(sample(t[6]))<<48|uint64(sample(t[7]))<<56)
	}
	clear(blk[:])
}

// idct8 is the one-dimensional 8-point transform of x0..x7, scaled by
// 2^constBits, with round added to x0 first.
func idct8(t *[8]int32, x0, x1, x2, x3, x4, x5, x6, x7, round int32) {
	// Even part: inputs 0, 2, 4, 6.
	z1 := (x2 + x6) * fix0_541196100
	tmp2 := z1 - x6*fix1_847759065
	tmp3 := z1 + x2*fix0_765366865
	x0 += round
	tmp0 := (x0 + x4) << constBits
	tmp1 := (x0 - x4) << constBits
	tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
	tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
	// Odd part: inputs 7, 5, 3, 1.
	z1 = x7 + x1
	z2 := x5 + x3
	z3 := x7 + x3
	z4 := x5 + x1
	z5 := (z3 + z4) * fix1_175875602
	z1 *= -fix0_899976223
	z2 *= -fix2_562915447
	z3 = z3*-fix1_961570560 + z5
	z4 = z4*-fix0_390180644 + z5
	o0 := x7*fix0_298631336 + z1 + z3
	o1 := x5*fix2_053119869 + z2 + z4
	o2 := x3*fix3_072711026 + z2 + z3
	o3 := x1*fix1_501321110 + z1 + z4
	t[0], t[7] = tmp10+o3, tmp10-o3
	t[1], t[6] = tmp11+o2, tmp11-o2
	t[2], t[5] = tmp12+o1, tmp12-o1
	t[3], t[4] = tmp13+o0, tmp13-o0
}

// idct4 is idct8 for x4 = x5 = x6 = x7 = 0, their terms left out.
func idct4(t *[8]int32, x0, x1, x2, x3, round int32) {
	z1 := x2 * fix0_541196100
	tmp3 := z1 + x2*fix0_765366865
	tmp0 := (x0 + round) << constBits
	tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
	tmp11, tmp12 := tmp0+z1, tmp0-z1
	z5 := (x3 + x1) * fix1_175875602
	z1 = x1 * -fix0_899976223
	z2 := x3 * -fix2_562915447
	z3 := x3*-fix1_961570560 + z5
	z4 := x1*-fix0_390180644 + z5
	o0 := z1 + z3
	o1 := z2 + z4
	o2 := x3*fix3_072711026 + z2 + z3
	o3 := x1*fix1_501321110 + z1 + z4
	t[0], t[7] = tmp10+o3, tmp10-o3
	t[1], t[6] = tmp11+o2, tmp11-o2
	t[2], t[5] = tmp12+o1, tmp12-o1
	t[3], t[4] = tmp13+o0, tmp13-o0
}

// dcColumn is the output of pass 1 for a column whose only nonzero input
// is x0: x0·2^pass1Bits, computed as the full pass does (the same where
// the products overflow, on corrupt data).
func dcColumn(x0 int32) int32 {
	const sh, half = constBits - pass1Bits, 1 << (constBits - pass1Bits - 1)
	return (x0<<constBits + half) >> sh
}

// idctDC is idct for a block whose only nonzero coefficient is the DC:
// every sample is the same.
func idctDC(blk *[64]int32, dst []byte, stride int) {
	const round = 1 << (pass1Bits + 2)
	v := sample((dcColumn(blk[0]) + round) << constBits)
	blk[0] = 0
	w := uint64(v) * 0x0101010101010101
	for r := range 8 {
		putRow(dst[r*stride:r*stride+8:r*stride+8], w)
	}
}
