package halfdot

// PackedLenInt8 is the length of k rows of d int8 values packed as panels
// of w rows (PackUint8, PackInt8): d rounded up to a multiple of 4.
func PackedLenInt8(k, d, w int) int { return (k + w - 1) / w * w * ((d + 3) &^ 3) }

// PackUint8 writes rows [0, k) of q (k rows of d int8 values, row-major)
// plus 128 into dst as panels of TileRows rows, the unsigned side of
// TileInt8: panel p holds rows [p·TileRows, p·TileRows+TileRows) at
// dst[p·TileRows·d4:] (d4 = d rounded up to a multiple of 4), values
// 4g..4g+3 of its row r at dst[p·TileRows·d4+g·4·TileRows+4r:]; values
// past d and rows past k are 0 (stored as 128). dst needs
// PackedLenInt8(k, d, TileRows) bytes.
func PackUint8(dst []uint8, q []int8, k, d int) {
	const w = TileRows
	d4 := (d + 3) &^ 3
	dst = dst[:PackedLenInt8(k, d, w)]
	for i := range dst {
		dst[i] = 128
	}
	for row := range k {
		p, r := row/w, row%w
		panel := dst[p*w*d4 : (p+1)*w*d4]
		for i, v := range q[row*d : (row+1)*d] {
			panel[i/4*4*w+4*r+i%4] = uint8(int(v) + 128)
		}
	}
}

// PackInt8 writes rows [0, k) of q (k rows of d int8 values, row-major)
// into dst as panels of TileCols rows, the signed side of TileInt8 (the
// layout of PackUint8 with TileCols for TileRows, values as they are),
// and sets sums[r] to the sum of row r's values (0 for the rows past k
// up to a whole panel). dst needs PackedLenInt8(k, d, TileCols) bytes,
// sums a whole panel's rows past k.
func PackInt8(dst []int8, sums []int32, q []int8, k, d int) {
	const w = TileCols
	d4 := (d + 3) &^ 3
	dst = dst[:PackedLenInt8(k, d, w)]
	clear(dst)
	clear(sums[:(k+w-1)/w*w])
	for row := range k {
		p, r := row/w, row%w
		panel := dst[p*w*d4 : (p+1)*w*d4]
		s := int32(0)
		for i, v := range q[row*d : (row+1)*d] {
			panel[i/4*4*w+4*r+i%4] = v
			s += int32(v)
		}
		sums[row] = s
	}
}

// TileInt8 sets out[r·TileCols+c] = Σ_{i<d4} a_ri·b_ci − 128·sums[c] for
// r < TileRows, c < TileCols, where a is a panel of TileRows unsigned rows
// (PackUint8) and b one of TileCols signed rows (PackInt8), d4 = d rounded
// up to a multiple of 4: with a = q_a + 128 and sums b's row sums, the
// exact int32 dot product Σ q_a·q_b of two int8 rows (no overflow for
// d < 66,000: |a·b| ≤ 255·127 per value). It reports whether any
// coarse value
//
//	float32(float32(float32(out[r·TileCols+c])·sb[c])·sa[r]) ≥ t,
//
// rounded as written (three roundings to float32): with sa and sb the
// rows' scales, the dot product of the dequantized rows sa·q_a and
// sb·q_b, within a relative 3.0000001·2⁻²⁴ of it (each rounding adds at
// most 2⁻²⁴ relative; the conversion of out is exact while
// |out| < 2²⁴, so for d ≤ 1040).
//
// A caller with float rows x and y, quantized as x = x̂ + e_x with
// x̂ = sa·q_a (and likewise y), has x·y − x̂·ŷ = e_x·y + x̂·e_y, so
// |x·y − x̂·ŷ| ≤ ‖e_x‖‖y‖ + ‖x̂‖‖e_y‖ (Cauchy–Schwarz on each term): a
// pair with x·y ≥ T has a coarse value of at least T − that bound less
// the rounding above, and a tile whose coarse values are all below it
// holds no such pair. The AVX-512 kernel is VPDPBUSD (AVX512-VNNI, u8 ×
// s8 → int32, four products a lane) over 24 zmm accumulators, twelve rows
// by two registers of 16 columns, as in Tile. It panics when a or b is
// shorter than a panel of d values.
func TileInt8(a []uint8, b []int8, d int, sums *[TileCols]int32, sa *[TileRows]float32, sb *[TileCols]float32, t float32, out *[TileRows * TileCols]int32) bool {
	if d < 0 || len(a) < PackedLenInt8(TileRows, d, TileRows) || len(b) < PackedLenInt8(TileCols, d, TileCols) {
		panic("halfdot: TileInt8: a or b shorter than a panel of d values")
	}
	if d == 0 {
		return TileInt8Generic(a, b, d, sums, sa, sb, t, out)
	}
	return tileInt8(a, b, d, sums, sa, sb, t, out)
}

// TileInt8Generic is TileInt8 in pure Go.
func TileInt8Generic(a []uint8, b []int8, d int, sums *[TileCols]int32, sa *[TileRows]float32, sb *[TileCols]float32, t float32, out *[TileRows * TileCols]int32) bool {
	const tr, tc = TileRows, TileCols
	for r := range tr {
		for c := range tc {
			out[r*tc+c] = -128 * sums[c]
		}
	}
	for g := range (d + 3) / 4 {
		av := a[g*4*tr : (g+1)*4*tr : (g+1)*4*tr]
		bv := b[g*4*tc : (g+1)*4*tc : (g+1)*4*tc]
		for r := range tr {
			o := out[r*tc : (r+1)*tc : (r+1)*tc]
			a0, a1, a2, a3 := int32(av[4*r]), int32(av[4*r+1]), int32(av[4*r+2]), int32(av[4*r+3])
			for c := range tc {
				o[c] += a0*int32(bv[4*c]) + a1*int32(bv[4*c+1]) + a2*int32(bv[4*c+2]) + a3*int32(bv[4*c+3])
			}
		}
	}
	any := false
	for r := range tr {
		for c := range tc {
			v := float32(float32(float32(out[r*tc+c])*sb[c]) * sa[r])
			any = any || v >= t
		}
	}
	return any
}

// HasInt8TileKernel says TileInt8 runs an assembly kernel on this CPU and
// build (AVX-512F with AVX512-VNNI on amd64 without the purego tag);
// otherwise it is TileInt8Generic.
func HasInt8TileKernel() bool { return impl == "avx512" && hasVNNI }
