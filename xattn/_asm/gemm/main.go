// Command gemm generates the packed-GEMM micro-kernels of package
// xattn/internal/gemm: an AVX-512 kernel (6 rows × 64 columns, 24 zmm
// accumulators) and an AVX2+FMA kernel (6 rows × 16 columns, 12 ymm
// accumulators), each in one variant per row count 1..6.
//
// Run it through the //go:generate line in xattn/internal/gemm/gemm.go.
// The output depends only on this program, so regenerating is deterministic.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

const (
	// panel is the width, in float32s, of a packed panel of B. It must match
	// panelWidth in package gemm.
	panel = 64
	// mrMax is the number of rows of the register tile.
	mrMax = 6
	// unroll is how many k steps the main loop does per iteration.
	unroll = 4
)

// isa describes one instruction set's register tile.
type isa struct {
	name   string       // function name suffix
	lanes  int          // float32 lanes per vector register
	nv     int          // vector registers per tile row
	vec    func(int) Op // vector register by number
	nregs  int          // vector registers available
	masked bool         // stores and C/bias loads use k1..k4 column masks
	zero   func(r Op)   // zeroes a vector register
	copyv  func(src, dst Op)
}

var zmm = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}

var ymm = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}

var masks = []Op{K1, K2, K3, K4}

func main() {
	ConstraintExpr("amd64,gc,!purego")
	avx512 := isa{
		name:   "AVX512",
		lanes:  16,
		nv:     4,
		vec:    func(i int) Op { return zmm[i] },
		nregs:  len(zmm),
		masked: true,
		zero:   func(r Op) { VPXORD(r, r, r) },
		copyv:  func(src, dst Op) { VMOVAPS(src, dst) },
	}
	avx2 := isa{
		name:  "AVX2",
		lanes: 8,
		nv:    2,
		vec:   func(i int) Op { return ymm[i] },
		nregs: len(ymm),
		zero:  func(r Op) { VXORPS(r, r, r) },
		copyv: func(src, dst Op) { VMOVAPS(src, dst) },
	}
	for mr := 1; mr <= mrMax; mr++ {
		kernel(avx512, mr)
	}
	for mr := 1; mr <= mrMax; mr++ {
		kernel(avx2, mr)
	}
	Generate()
}

// kernel emits kernel<ISA>x<mr>, which computes an mr × (nv·lanes) tile of C
// from k steps of A rows and one packed panel of B.
func kernel(s isa, mr int) {
	width := s.nv * s.lanes
	name := fmt.Sprintf("kernel%sx%d", s.name, mr)
	sig := "func(k int, a *float32, lda int, b *float32, c *float32, ldc int, bias *float32, mode int)"
	if s.masked {
		sig = "func(k int, a *float32, lda int, b *float32, c *float32, ldc int, bias *float32, mode int, mask uint64)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	doc := []string{
		fmt.Sprintf("%s computes the %d×%d tile", name, mr, width),
		"",
		fmt.Sprintf("\tC[i][j] = init[i][j] + Σ_{p<k} A[i][p]·B[p][j]   (i < %d, j < %d)", mr, width),
		"",
		"with A[i][p] = a[i*lda+p], B[p][j] = b[p*64+j] (one packed panel, rows",
		fmt.Sprintf("64 floats apart, of which this kernel reads the first %d columns)", width),
		"and C[i][j] = c[i*ldc+j]. init is 0 for mode 0, bias[j] for mode 1 and",
		"the current C[i][j] for mode 2. k may be 0.",
	}
	if s.masked {
		doc = append(doc,
			"Column j of C (and of bias) is read and written only where bit j of",
			"mask is set; masked-off columns are computed from B's zero padding and dropped.",
		)
	} else {
		doc = append(doc, "All columns are read and written: the caller handles partial tiles.")
	}
	Doc(doc...)

	acc := func(r, v int) Op { return s.vec(r*s.nv + v) }
	bReg := func(v int) Op { return s.vec(mrMax*s.nv + v) }
	nBcast := s.nregs - mrMax*s.nv - s.nv
	bcast := func(i int) Op { return s.vec(mrMax*s.nv + s.nv + i%nBcast) }

	// General registers.
	k := RCX
	a0, a3 := RSI, RDI // rows 0..2 and 3..5 of A
	lda := R8
	pb := RDX
	c0, c3 := R10, R13 // rows 0..2 and 3..5 of C
	ldc := R11
	mode := RBX
	tmp := RAX

	Load(Param("k"), k)
	Load(Param("a"), a0)
	Load(Param("lda"), lda)
	SHLQ(U8(2), lda)
	Load(Param("b"), pb)
	Load(Param("c"), c0)
	Load(Param("ldc"), ldc)
	SHLQ(U8(2), ldc)
	Load(Param("mode"), mode)
	if mr > 3 {
		LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, tmp)
		LEAQ(Mem{Base: a0, Index: tmp, Scale: 1}, a3)
		LEAQ(Mem{Base: ldc, Index: ldc, Scale: 2}, tmp)
		LEAQ(Mem{Base: c0, Index: tmp, Scale: 1}, c3)
	}
	if s.masked {
		Load(Param("mask"), tmp)
		for v := 0; v < s.nv; v++ {
			if v > 0 {
				SHRQ(U8(16), tmp)
			}
			KMOVW(EAX, masks[v])
		}
	}

	// rowMem addresses element (row r, byte offset disp) of A or C.
	rowMem := func(b0, b3, ld Register, r, disp int) Mem {
		base := b0
		if r >= 3 {
			base, r = b3, r-3
		}
		m := Mem{Base: base, Disp: disp}
		if r > 0 {
			m.Index, m.Scale = ld, uint8(r)
		}
		return m
	}
	cMem := func(r, v int) Mem { return rowMem(c0, c3, ldc, r, v*s.lanes*4) }
	aMem := func(r, p int) Mem { return rowMem(a0, a3, lda, r, p*4) }

	Comment("Initialise the accumulators: mode 0 zero, 1 bias, 2 C.")
	CMPQ(mode, U8(1))
	JEQ(LabelRef(name + "_bias"))
	JGT(LabelRef(name + "_loadc"))
	for r := 0; r < mr; r++ {
		for v := 0; v < s.nv; v++ {
			s.zero(acc(r, v))
		}
	}
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_bias")
	Load(Param("bias"), tmp)
	for v := 0; v < s.nv; v++ {
		m := Mem{Base: tmp, Disp: v * s.lanes * 4}
		if s.masked {
			VMOVUPS_Z(m, masks[v], acc(0, v))
		} else {
			VMOVUPS(m, acc(0, v))
		}
	}
	for r := 1; r < mr; r++ {
		for v := 0; v < s.nv; v++ {
			s.copyv(acc(0, v), acc(r, v))
		}
	}
	JMP(LabelRef(name + "_loop4"))

	Label(name + "_loadc")
	for r := 0; r < mr; r++ {
		for v := 0; v < s.nv; v++ {
			if s.masked {
				VMOVUPS_Z(cMem(r, v), masks[v], acc(r, v))
			} else {
				VMOVUPS(cMem(r, v), acc(r, v))
			}
		}
	}

	// step emits one k step at A column offset p and B row offset p.
	nb := 0
	step := func(p int) {
		for v := 0; v < s.nv; v++ {
			VMOVUPS(Mem{Base: pb, Disp: p*panel*4 + v*s.lanes*4}, bReg(v))
		}
		for r := 0; r < mr; r++ {
			x := bcast(nb)
			nb++
			VBROADCASTSS(aMem(r, p), x)
			for v := 0; v < s.nv; v++ {
				VFMADD231PS(bReg(v), x, acc(r, v))
			}
		}
	}
	advance := func(n int) {
		ADDQ(U32(n*4), a0)
		if mr > 3 {
			ADDQ(U32(n*4), a3)
		}
		ADDQ(U32(n*panel*4), pb)
	}

	Comment(fmt.Sprintf("Main loop: %d k steps per iteration.", unroll))
	Label(name + "_loop4")
	CMPQ(k, U8(unroll))
	JLT(LabelRef(name + "_loop1"))
	for p := 0; p < unroll; p++ {
		step(p)
	}
	advance(unroll)
	SUBQ(U8(unroll), k)
	JMP(LabelRef(name + "_loop4"))

	Comment("Remaining k steps, one at a time.")
	Label(name + "_loop1")
	TESTQ(k, k)
	JEQ(LabelRef(name + "_store"))
	step(0)
	advance(1)
	DECQ(k)
	JMP(LabelRef(name + "_loop1"))

	Label(name + "_store")
	for r := 0; r < mr; r++ {
		for v := 0; v < s.nv; v++ {
			if s.masked {
				VMOVUPS(acc(r, v), masks[v], cMem(r, v))
			} else {
				VMOVUPS(acc(r, v), cMem(r, v))
			}
		}
	}
	VZEROUPPER()
	RET()
}
