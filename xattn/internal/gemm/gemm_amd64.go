//go:build amd64 && gc && !purego

package gemm

import "github.com/conditionhq/condition/xattn/internal/cpuid"

// Blocking of the assembly paths. A k block of one packed panel (kc rows
// of 256 bytes, of which the AVX2 kernel reads a 64-byte strip) stays in
// L1 while the row tiles of an mc-row block of A, which stays in L2, pass
// over it. Measured on Zen 5 the rate is flat (within noise) for kc in
// 96..256 and mc in 96..480.
const (
	kcAVX512 = 128
	mcAVX512 = 192
	kcAVX2   = 256
	mcAVX2   = 192
	mrAsm    = 6  // rows of the register tiles
	nrAVX2   = 16 // columns of the AVX2 register tile
)

// matMulAsm runs MatMulRange (valid arguments, m > 0, k > 0, n0 < n1) on
// the assembly kernels of impl and reports whether it did.
func matMulAsm(impl cpuid.Impl, c []float32, ldc int, a []float32, lda int, m int, p *Packed, bias []float32, n0, n1 int) bool {
	switch impl {
	case cpuid.AVX512:
		matMulAVX512(c, ldc, a, lda, m, p, bias, n0, n1)
	case cpuid.AVX2:
		matMulAVX2(c, ldc, a, lda, m, p, bias, n0, n1)
	default:
		return false
	}
	return true
}

// colMask returns the bits of columns [lo, hi) of a panel.
func colMask(lo, hi int) uint64 {
	var m uint64
	if hi-lo < 64 {
		m = (uint64(1) << uint(hi-lo)) - 1
	} else {
		m = ^uint64(0)
	}
	return m << uint(lo)
}

func matMulAVX512(c []float32, ldc int, a []float32, lda int, m int, p *Packed, bias []float32, n0, n1 int) {
	k := p.k
	kc := kBlocks(k, kcAVX512)
	for i0 := 0; i0 < m; i0 += mcAVX512 {
		i1 := min(i0+mcAVX512, m)
		for q := n0 / panelWidth; q*panelWidth < n1; q++ {
			j0 := q * panelWidth
			mask := colMask(max(n0, j0)-j0, min(n1, j0+panelWidth)-j0)
			panel := p.panel(q)
			var pbias *float32
			mode := 0
			if bias != nil {
				pbias, mode = &bias[j0], 1
			}
			for p0 := 0; p0 < k; p0 += kc {
				kk := min(kc, k-p0)
				if p0 > 0 {
					mode = 2
				}
				pb := &panel[p0*panelWidth]
				for i := i0; i < i1; i += mrAsm {
					pa, pc := &a[i*lda+p0], &c[i*ldc+j0]
					switch min(mrAsm, i1-i) {
					case 6:
						kernelAVX512x6(kk, pa, lda, pb, pc, ldc, pbias, mode, mask)
					case 5:
						kernelAVX512x5(kk, pa, lda, pb, pc, ldc, pbias, mode, mask)
					case 4:
						kernelAVX512x4(kk, pa, lda, pb, pc, ldc, pbias, mode, mask)
					case 3:
						kernelAVX512x3(kk, pa, lda, pb, pc, ldc, pbias, mode, mask)
					case 2:
						kernelAVX512x2(kk, pa, lda, pb, pc, ldc, pbias, mode, mask)
					case 1:
						kernelAVX512x1(kk, pa, lda, pb, pc, ldc, pbias, mode, mask)
					}
				}
			}
		}
	}
}

func matMulAVX2(c []float32, ldc int, a []float32, lda int, m int, p *Packed, bias []float32, n0, n1 int) {
	k := p.k
	kc := kBlocks(k, kcAVX2)
	for i0 := 0; i0 < m; i0 += mcAVX2 {
		i1 := min(i0+mcAVX2, m)
		for q := n0 / panelWidth; q*panelWidth < n1; q++ {
			panel := p.panel(q)
			for s := 0; s < panelWidth; s += nrAVX2 {
				j0 := q*panelWidth + s
				ja, jb := max(n0, j0), min(n1, j0+nrAVX2)
				if ja >= jb {
					continue
				}
				full := ja == j0 && jb == j0+nrAVX2
				var pbias *float32
				mode := 0
				if bias != nil {
					pbias, mode = &bias[j0], 1
				}
				for p0 := 0; p0 < k; p0 += kc {
					kk := min(kc, k-p0)
					if p0 > 0 {
						mode = 2
					}
					pb := &panel[p0*panelWidth+s]
					for i := i0; i < i1; i += mrAsm {
						mr := min(mrAsm, i1-i)
						pa := &a[i*lda+p0]
						if full {
							kernelAVX2(mr, kk, pa, lda, pb, &c[i*ldc+j0], ldc, pbias, mode)
						} else {
							partialAVX2(mr, kk, pa, lda, pb, c[i*ldc:], ldc, bias, mode, j0, ja, jb)
						}
					}
				}
			}
		}
	}
}

// kernelAVX2 calls the AVX2 kernel for mr rows.
func kernelAVX2(mr, k int, a *float32, lda int, b, c *float32, ldc int, bias *float32, mode int) {
	switch mr {
	case 6:
		kernelAVX2x6(k, a, lda, b, c, ldc, bias, mode)
	case 5:
		kernelAVX2x5(k, a, lda, b, c, ldc, bias, mode)
	case 4:
		kernelAVX2x4(k, a, lda, b, c, ldc, bias, mode)
	case 3:
		kernelAVX2x3(k, a, lda, b, c, ldc, bias, mode)
	case 2:
		kernelAVX2x2(k, a, lda, b, c, ldc, bias, mode)
	case 1:
		kernelAVX2x1(k, a, lda, b, c, ldc, bias, mode)
	}
}

// partialAVX2 runs the AVX2 kernel for the tile of mr rows and 16 columns
// starting at column j0 of c (row 0 of the tile at c[0]) through a buffer
// on the stack, reading and writing only columns [ja, jb) of C and bias.
func partialAVX2(mr, k int, a *float32, lda int, b *float32, c []float32, ldc int, bias []float32, mode, j0, ja, jb int) {
	var tile [mrAsm * nrAVX2]float32
	var tbias [nrAVX2]float32
	lo, hi := ja-j0, jb-j0
	switch mode {
	case 1:
		copy(tbias[lo:hi], bias[ja:jb])
	case 2:
		for r := 0; r < mr; r++ {
			copy(tile[r*nrAVX2+lo:r*nrAVX2+hi], c[r*ldc+ja:r*ldc+jb])
		}
	}
	kernelAVX2(mr, k, a, lda, b, &tile[0], nrAVX2, &tbias[0], mode)
	for r := 0; r < mr; r++ {
		copy(c[r*ldc+ja:r*ldc+jb], tile[r*nrAVX2+lo:r*nrAVX2+hi])
	}
}
