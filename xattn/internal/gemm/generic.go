package gemm

// kcGeneric is the largest k block of the pure-Go code: 128 rows of a
// packed panel (32 KiB) stay in L1 while every row tile of A passes.
const kcGeneric = 128

// matMulGeneric is the pure-Go MatMulRange for valid arguments with m > 0,
// k > 0 and n0 < n1: the reference the assembly kernels are tested against.
//
//	for i < m, n0 <= j < n1:
//		C[i][j] = bias[j] (or 0) + Σ_{p<K} A[i][p]·B[p][j]
//
// It accumulates k in blocks of kcGeneric: each block's sum of products
// (multiply, then add, in float32) is added to C.
func matMulGeneric(c []float32, ldc int, a []float32, lda int, m int, p *Packed, bias []float32, n0, n1 int) {
	k := p.k
	kc := kBlocks(k, kcGeneric)
	for q := n0 / panelWidth; q*panelWidth < n1; q++ {
		j0 := q * panelWidth
		ja, jb := max(n0, j0), min(n1, j0+panelWidth)
		panel := p.panel(q)
		for p0 := 0; p0 < k; p0 += kc {
			kk := min(kc, k-p0)
			first := p0 == 0
			b := panel[p0*panelWidth : (p0+kk)*panelWidth]
			for i := 0; i < m; i += 2 {
				a0 := a[i*lda+p0 : i*lda+p0+kk]
				c0 := c[i*ldc : i*ldc+jb]
				if i+1 == m {
					for j := ja; j < jb; j += 4 {
						var s [4]float32
						w := min(4, jb-j)
						if w == 4 {
							s = dot1x4(a0, b[j-j0:])
						} else {
							dotEdge(s[:w], a0, b[j-j0:])
						}
						store(c0[j:j+w], s[:w], bias, j, first)
					}
					break
				}
				a1 := a[(i+1)*lda+p0 : (i+1)*lda+p0+kk]
				c1 := c[(i+1)*ldc : (i+1)*ldc+jb]
				for j := ja; j < jb; j += 4 {
					w := min(4, jb-j)
					if w == 4 {
						s0, s1 := dot2x4(a0, a1, b[j-j0:])
						store(c0[j:j+4], s0[:], bias, j, first)
						store(c1[j:j+4], s1[:], bias, j, first)
						continue
					}
					var s [4]float32
					dotEdge(s[:w], a0, b[j-j0:])
					store(c0[j:j+w], s[:w], bias, j, first)
					dotEdge(s[:w], a1, b[j-j0:])
					store(c1[j:j+w], s[:w], bias, j, first)
				}
			}
		}
	}
}

// store writes the block sums s to dst = C[i][j:j+len(s)]: bias[j:] + s
// (or s) for the first k block, dst + s after it.
func store(dst, s []float32, bias []float32, j int, first bool) {
	dst = dst[:len(s)]
	switch {
	case !first:
		for x := range s {
			dst[x] += s[x]
		}
	case bias != nil:
		bias = bias[j : j+len(s)]
		for x := range s {
			dst[x] = bias[x] + s[x]
		}
	default:
		copy(dst, s)
	}
}

// dot2x4 returns, for rows a0, a1 [kc] and the 4 columns of b starting at
// b[0] (rows panelWidth apart), s0[j] = Σ_p a0[p]·B[p][j] and s1 likewise.
func dot2x4(a0, a1, b []float32) (s0, s1 [4]float32) {
	a1 = a1[:len(a0)]
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	for p, x0 := range a0 {
		bb := b[p*panelWidth : p*panelWidth+4 : p*panelWidth+4]
		x1 := a1[p]
		b0, b1, b2, b3 := bb[0], bb[1], bb[2], bb[3]
		c00 += x0 * b0
		c01 += x0 * b1
		c02 += x0 * b2
		c03 += x0 * b3
		c10 += x1 * b0
		c11 += x1 * b1
		c12 += x1 * b2
		c13 += x1 * b3
	}
	return [4]float32{c00, c01, c02, c03}, [4]float32{c10, c11, c12, c13}
}

// dot1x4 is dot2x4 for one row.
func dot1x4(a0, b []float32) [4]float32 {
	var c0, c1, c2, c3 float32
	for p, x := range a0 {
		bb := b[p*panelWidth : p*panelWidth+4 : p*panelWidth+4]
		c0 += x * bb[0]
		c1 += x * bb[1]
		c2 += x * bb[2]
		c3 += x * bb[3]
	}
	return [4]float32{c0, c1, c2, c3}
}

// dotEdge sets s[j] = Σ_p a0[p]·B[p][j] for the len(s) < 4 columns of b
// starting at b[0].
func dotEdge(s, a0, b []float32) {
	for j := range s {
		var t float32
		for p, x := range a0 {
			t += x * b[p*panelWidth+j]
		}
		s[j] = t
	}
}
