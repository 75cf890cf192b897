package rgbx

// QuadRGBGeneric is QuadRGB's reference: q[16x+4r : 16x+4r+4] = R, G, B, 0 of
// pixel x of packed RGB row rows[r], for the len(q)/16 columns.
func QuadRGBGeneric(q []byte, rows [4][]byte) {
	n := len(q) / 16
	for r, row := range rows {
		row = row[:3*n]
		for x := range n {
			o := q[16*x+4*r : 16*x+4*r+4 : 16*x+4*r+4]
			p := row[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2], o[3] = p[0], p[1], p[2], 0
		}
	}
}

// QuadRGBAGeneric is QuadRGBA's reference: QuadRGBGeneric for rows of 4 bytes a
// pixel (R, G, B, A), returning the AND of every A read.
func QuadRGBAGeneric(q []byte, rows [4][]byte) byte {
	n := len(q) / 16
	a := byte(0xff)
	for r, row := range rows {
		row = row[:4*n]
		for x := range n {
			o := q[16*x+4*r : 16*x+4*r+4 : 16*x+4*r+4]
			p := row[4*x : 4*x+4 : 4*x+4]
			o[0], o[1], o[2], o[3] = p[0], p[1], p[2], 0
			a &= p[3]
		}
	}
	return a
}

// HconvGeneric is Hconv's reference: the horizontal pass on one quad row q, for
// the len(taps)/2 outputs, whose taps (byte offset into q and count) are
// taps[2·xx], taps[2·xx+1] and weights k[xx·ksize:]. Output xx of row r is
// pixel xx of RGBX row r of dst (stride ws): bytes 0..2 hold its channels,
// byte 3 the clipped sum of the quad's zero bytes.
func HconvGeneric(dst []byte, ws int, q []byte, taps []int32, k []int32, ksize int) {
	const half = 1 << (precision - 1)
	ow := len(taps) / 2
	for xx := range ow {
		off, n := int(taps[2*xx]), int(taps[2*xx+1])
		kk := k[xx*ksize:][:n]
		var acc [16]int32
		for i := range acc {
			acc[i] = half
		}
		for t, kv := range kk {
			p := q[off+16*t:][:16]
			for i := range acc {
				acc[i] += int32(p[i]) * kv
			}
		}
		for r := range 4 {
			o := dst[r*ws+4*xx:][:4]
			for c := range o {
				o[c] = clip8(acc[4*r+c])
			}
		}
	}
}

// VconvGeneric is Vconv's reference: one output row of the vertical pass,
// dst[j] = clip8(half + Σ_t k[t]·src[t·ws+j]) for j < len(dst), a multiple
// of Align.
func VconvGeneric(dst, src []byte, ws int, k []int32) {
	const half = 1 << (precision - 1)
	for j := range dst {
		s := int32(half)
		for t, kv := range k {
			s += int32(src[t*ws+j]) * kv
		}
		dst[j] = clip8(s)
	}
}

// LutGeneric is Lut's reference: pixel j of the RGBX row src becomes
// r[j], g[j], b[j] through the tables lut[0], lut[1], lut[2], for
// j < len(r).
func LutGeneric(r, g, b []float32, src []byte, lut *[3][256]float32) {
	n := len(r)
	g, b, src = g[:n], b[:n], src[:4*n]
	for j := range r {
		p := src[4*j : 4*j+3 : 4*j+3]
		r[j], g[j], b[j] = lut[0][p[0]], lut[1][p[1]], lut[2][p[2]]
	}
}

// QuadYCCGeneric is QuadYCC's reference: for j < n, column x = xs+j of two rows
// T and B of a 4:2:0 JPEG that share a chroma row (Y' values yT[j],
// yB[j]) becomes R, G, B, 0 of row T at q[16j:16j+4] and of row B at
// q[16j+4:16j+8], as libjpeg-turbo's h2v2 fancy upsampling and YCC→RGB make them. pc holds six padded chroma
// rows of m bytes: for Cb then Cr, the shared row, the row libjpeg blends
// into T, the row it blends into B; pc[k·m+1+i] is chroma column i, with
// columns -1 and cw repeating the edges.
func QuadYCCGeneric(q, yT, yB, pc []byte, m, xs, n int) {
	// colSum is 3·(shared row) + (row k) of plane p at chroma column i.
	colSum := func(p, k, i int) int32 {
		return 3*int32(pc[3*p*m+1+i]) + int32(pc[(3*p+k)*m+1+i])
	}
	for j := range n {
		x := xs + j
		i := x >> 1
		for row, yv := range [2]byte{yT[j], yB[j]} {
			var c [2]int32
			for p := range c {
				if x&1 == 0 {
					c[p] = (colSum(p, 1+row, i)*3 + colSum(p, 1+row, i-1) + 8) >> 4
				} else {
					c[p] = (colSum(p, 1+row, i)*3 + colSum(p, 1+row, i+1) + 7) >> 4
				}
			}
			r, g, b := yccRGB(int32(yv), c[0], c[1])
			o := q[16*j+4*row:][:4]
			o[0], o[1], o[2], o[3] = r, g, b, 0
		}
	}
}
