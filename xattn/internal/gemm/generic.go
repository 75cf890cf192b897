package gemm

// kcGeneric is the largest k block of the pure-Go code: 128 rows of a
// packed panel (32 KiB) stay in L1 while every row tile of A passes.
const kcGeneric = 128

// mcGeneric is the row block of the pure-Go code: its k blocks of A
// (96 KiB) stay in L2 while the panels of B pass.
const mcGeneric = 192

// matMulGeneric is the pure-Go MatMulRange for valid arguments with m > 0,
// k > 0 and n0 < n1: the reference the assembly kernels are tested against.
//
//	for i < m, n0 <= j < n1:
//		C[i][j] = bias[j] (or 0) + Σ_{p<K} A[i][p]·B[p][j]
//
// It accumulates k in blocks of kcGeneric: each block's sum of products
// (multiply, then add, in float32) is added to C.
func matMulGeneric(c []float32, ldc int, a []float32, lda int, m int, p *Packed, bias []float32, n0, n1 int) {
	for i0 := 0; i0 < m; i0 += mcGeneric {
		i1 := min(i0+mcGeneric, m)
		matMulGenericRows(c[i0*ldc:], ldc, a[i0*lda:], lda, i1-i0, p, bias, n0, n1)
	}
}

// matMulGenericRows is matMulGeneric for one block of rows.
func matMulGenericRows(c []float32, ldc int, a []float32, lda int, m int, p *Packed, bias []float32, n0, n1 int) {
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
				j := ja
				for ; j+3 <= jb; j += 3 {
					var s0, s1 [3]float32
					s0[0], s0[1], s0[2], s1[0], s1[1], s1[2] = dot2x3(a0, a1, b[j-j0:])
					store(c0[j:j+3], s0[:], bias, j, first)
					store(c1[j:j+3], s1[:], bias, j, first)
				}
				if w := jb - j; w > 0 {
					var s [2]float32
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

// dot2x3 returns, for rows a0, a1 [kc] and the 3 columns of b starting at
// b[0] (rows panelWidth apart), c0j = Σ_p a0[p]·B[p][j] and c1j likewise.
// Two rows by three columns is the largest block whose six accumulators,
// two row values and products fit the registers of the Go compiler (a 2×4
// block spilled an accumulator, which made its chain go through memory).
func dot2x3(a0, a1, b []float32) (c00, c01, c02, c10, c11, c12 float32) {
	a1 = a1[:len(a0)]
	for p, x0 := range a0 {
		bb := b[p*panelWidth : p*panelWidth+3 : p*panelWidth+3]
		x1 := a1[p]
		c00 += x0 * bb[0]
		c01 += x0 * bb[1]
		c02 += x0 * bb[2]
		c10 += x1 * bb[0]
		c11 += x1 * bb[1]
		c12 += x1 * bb[2]
	}
	return
}

// dot1x4 returns, for the row a0 [kc] and the 4 columns of b starting at
// b[0], s[j] = Σ_p a0[p]·B[p][j].
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
