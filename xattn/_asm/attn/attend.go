package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The fused attention kernel, one call for any number of tiles of 4 query
// rows. Per tile:
//
//  1. scores: S [4, n] = scale · Q·Kᵀ in register tiles of 4 rows × up to
//     maxW vectors of keys (K packed in 16-key panels), stored to the
//     scratch s [4, lds]; the next tile's query rows are prefetched;
//  2. softmax, per row: exact max, exp and sum in one pass over s (the tail
//     of the last vector masked), 1/sum kept on the stack, and, when prob is
//     not nil, the normalised probabilities written out;
//  3. P·V in register tiles of 4 rows × up to maxW vectors of output
//     columns, scaled by 1/sum and stored to o (the tail column vector
//     masked).
//
// Scores and P·V split their vectors into groups of at most maxW, balanced
// so that no group is narrower than it must be (6 → 3+3, 7 → 4+3, ...).

// isa describes one variant of the kernel.
type isa struct {
	name  string
	z     bool          // AVX-512 (else AVX2+FMA)
	lanes int           // floats per vector
	vec   []VecPhysical // the vector registers
	maxW  int           // vectors per row in a register tile
}

func (a isa) vbytes() int { return 4 * a.lanes }

// acc, kv and bc give the register roles of the tile loops: 4·maxW
// accumulators, maxW loaded vectors (keys or values), one broadcast.
func (a isa) acc(i, c int) VecPhysical { return a.vec[i*a.maxW+c] }
func (a isa) kv(c int) VecPhysical     { return a.vec[4*a.maxW+c] }
func (a isa) bc() VecPhysical          { return a.vec[5*a.maxW] }

const attendDoc = ` computes the attention of tiles·4 query rows to n keys.
For row r, with scores s_j = scale·Σ_d q[r*ldq+d]·K[j][d] (K packed in
16-key panels in kp) and e_j = exp(s_j - max s), it writes
o[r*ldo+c] = Σ_j e_j·V[j][c] / Σ_j e_j for c < hd (V rows padded to 16
in vp) and, if prob is not nil, prob[r*ldp+j] = e_j / Σ e for j < n;
if ml is not nil, ml[8t+i] = max s and ml[8t+4+i] = Σ e of row i of
tile t (the statistics of online softmax over blocks of keys).
s is scratch of 4·ceil(n/16)·16 floats. tiles, n, hd >= 1.`

func attend(a isa) {
	name := "attend" + a.name
	TEXT(name, NOSPLIT, "func(o *float32, ldo int, q *float32, ldq int, tiles int, kp *float32, vp *float32, n int, hd int, scale float32, s *float32, prob *float32, ldp int, ml *float32)")
	Pragma("noescape")
	Doc(splitLines(name + attendDoc)...)
	param := func(p string) Mem {
		b, err := Param(p).Resolve()
		if err != nil {
			panic(err)
		}
		return b.Addr
	}
	lbl := func(s string, x ...any) string { return a.name + fmt.Sprintf(s, x...) }
	inv := AllocLocal(16) // 1/sum of the tile's 4 rows
	lq, lo, lprob, ltiles, lml := AllocLocal(8), AllocLocal(8), AllocLocal(8), AllocLocal(8), AllocLocal(8)
	lnv, lv, ls := AllocLocal(8), AllocLocal(8), AllocLocal(8)
	lkm, lhm := AllocLocal(8), AllocLocal(8) // AVX2: tail masks (lhm 0 when hd%8 == 0)
	V := a.vbytes()
	shift := 6
	if !a.z {
		shift = 5
	}

	for _, p := range []struct {
		name string
		m    Mem
	}{{"q", lq}, {"o", lo}, {"prob", lprob}, {"tiles", ltiles}, {"ml", lml}} {
		MOVQ(param(p.name), RAX)
		MOVQ(RAX, p.m)
	}
	// nv = ceil(n/lanes) key vectors
	MOVQ(param("n"), RAX)
	ADDQ(U8(a.lanes-1), RAX)
	SHRQ(U8(shift-2), RAX)
	MOVQ(RAX, lnv)
	// tail masks: rem = ((x-1) mod lanes) + 1 lanes valid in the last vector
	if a.z {
		for _, t := range []struct {
			p string
			k Register
		}{{"n", K3}, {"hd", K4}} {
			MOVQ(param(t.p), RCX)
			DECQ(RCX)
			ANDQ(U8(15), RCX)
			INCQ(RCX)
			MOVL(U32(1), EAX)
			SHLL(CL, EAX)
			DECL(EAX)
			KMOVW(EAX, t.k)
		}
	} else {
		// mask = tailmask + (8-rem)*4 holds rem all-ones lanes then zeros.
		LEAQ(tailMask, RBX)
		MOVQ(param("n"), RCX)
		DECQ(RCX)
		ANDQ(U8(7), RCX)
		INCQ(RCX)
		NEGQ(RCX)
		LEAQ(Mem{Base: RBX, Index: RCX, Scale: 4, Disp: 32}, RAX)
		MOVQ(RAX, lkm)
		MOVQ(param("hd"), RCX)
		ANDQ(U8(7), RCX)
		MOVQ(U32(0), RAX)
		JZ(LabelRef(lbl("hdfull")))
		NEGQ(RCX)
		LEAQ(Mem{Base: RBX, Index: RCX, Scale: 4, Disp: 32}, RAX)
		Label(lbl("hdfull"))
		MOVQ(RAX, lhm)
	}

	Label(lbl("tile"))
	// ---- scores ----
	MOVQ(param("ldq"), R8)
	SHLQ(U8(2), R8)
	LEAQ(Mem{Base: R8, Index: R8, Scale: 2}, R9)
	MOVQ(param("hd"), R10)
	SHLQ(U8(6), R10) // bytes per panel, and per d step of the loop end
	MOVQ(param("n"), R11)
	ADDQ(U8(15), R11)
	SHRQ(U8(4), R11)
	SHLQ(U8(6), R11) // ldsb: bytes per scratch row
	LEAQ(Mem{Base: R11, Index: R11, Scale: 2}, R12)
	// Prefetch the next tile's query rows (hd floats each, a cache line
	// more for misalignment): with wide rows (inner > hd) they are not
	// contiguous, which the hardware prefetchers follow poorly.
	MOVQ(lq, RAX)
	LEAQ(Mem{Base: RAX, Index: R8, Scale: 4}, RAX)
	MOVQ(param("hd"), RCX)
	SHLQ(U8(2), RCX)
	for i := 0; i < 4; i++ {
		LEAQ(rowAddr(RAX, R8, R9, i, 0), RBX)
		XORQ(RDI, RDI)
		Label(lbl("pf%d", i))
		PREFETCHT0(Mem{Base: RBX, Index: RDI, Scale: 1})
		ADDQ(U8(64), RDI)
		CMPQ(RDI, RCX)
		JLE(LabelRef(lbl("pf%d", i)))
	}
	MOVQ(U32(0), lv)
	MOVQ(param("s"), RAX)
	MOVQ(RAX, ls)
	MOVQ(lnv, R14)
	ptrs := []Register{RAX, RBX, RCX, RDX, R13}
	Label(lbl("sgroup"))
	selectW(a.maxW, R14, R15, func(w int) string { return lbl("s%d", w) })
	for w := 1; w <= a.maxW; w++ {
		Label(lbl("s%d", w))
		MOVQ(lv, R15)
		for c := 0; c < w; c++ {
			p := ptrs[c]
			LEAQ(Mem{Base: R15, Disp: c}, p)
			if a.z {
				IMULQ(R10, p)
				ADDQ(param("kp"), p)
			} else {
				MOVQ(p, RDI)
				ANDQ(U8(1), RDI)
				SHLQ(U8(5), RDI)
				SHRQ(U8(1), p)
				IMULQ(R10, p)
				ADDQ(param("kp"), p)
				ADDQ(RDI, p)
			}
		}
		MOVQ(lq, RSI)
		XORQ(RDI, RDI)
		for i := 0; i < 4; i++ {
			for c := 0; c < w; c++ {
				zero(a, a.acc(i, c))
			}
		}
		Label(lbl("sloop%d", w))
		for c := 0; c < w; c++ {
			VMOVUPS(Mem{Base: ptrs[c], Index: RDI, Scale: 1}, a.kv(c))
		}
		for i := 0; i < 4; i++ {
			VBROADCASTSS(rowAddr(RSI, R8, R9, i, 0), a.bc())
			for c := 0; c < w; c++ {
				VFMADD231PS(a.kv(c), a.bc(), a.acc(i, c))
			}
		}
		ADDQ(U8(4), RSI)
		ADDQ(U8(64), RDI)
		CMPQ(RDI, R10)
		JNE(LabelRef(lbl("sloop%d", w)))
		VBROADCASTSS(param("scale"), a.kv(0))
		MOVQ(ls, RSI)
		for i := 0; i < 4; i++ {
			for c := 0; c < w; c++ {
				VMULPS(a.kv(0), a.acc(i, c), a.acc(i, c))
				VMOVUPS(a.acc(i, c), rowAddr(RSI, R11, R12, i, c*V))
			}
		}
		ADDQ(U8(w), lv)
		ADDQ(U32(w*V), ls)
		SUBQ(U8(w), R14)
		JNZ(LabelRef(lbl("sgroup")))
		JMP(LabelRef(lbl("softmax")))
	}

	// ---- softmax ----
	// The four rows run interleaved, so that their dependency chains
	// (horizontal reductions, the division) overlap.
	Label(lbl("softmax"))
	MOVQ(lnv, R10)
	DECQ(R10) // full vectors before the last
	MOVQ(param("s"), RSI)
	MOVQ(R10, RDX)
	SHLQ(U8(shift), RDX)
	ADDQ(RSI, RDX) // row 0's last vector; row i's at rowAddr(RDX, i)
	var e expRegs
	// m[i]: row maxima, then their broadcasts; sum[i]: row sums; tmp:
	// the reductions' scratch.
	var m, sum, tmp [4]VecPhysical
	var pinv VecPhysical
	if a.z {
		LEAQ(consts, RAX)
		e = expRegs{t: Z4, fx: Z5, nf: Z6, y: Z7, r2: Z8, cst: map[string]Op{}}
		for i, c := range []string{"lo", "log2e", "c1", "c2", "one", "bias", "p0", "p1", "p2", "p3", "p4", "p5", "ninf"} {
			r := zmm[17+i]
			VBROADCASTSS(Mem{Base: RAX, Disp: cst(c).Disp}, r)
			e.cst[c] = r
		}
		m = [4]VecPhysical{Z0, Z1, Z2, Z3}
		sum = [4]VecPhysical{Z12, Z13, Z14, Z15}
		tmp = [4]VecPhysical{Z4, Z5, Z6, Z7}
		pinv = Z30
	} else {
		e = expRegs{t: Y4, fx: Y5, nf: Y6, y: Y7, r2: Y8, mask: Y14, cst: map[string]Op{}}
		for _, c := range expConsts {
			e.cst[c.name] = cst(c.name)
		}
		MOVQ(lkm, RAX)
		VMOVUPS(Mem{Base: RAX}, Y9)
		m = [4]VecPhysical{Y0, Y1, Y2, Y3}
		sum = [4]VecPhysical{Y10, Y11, Y12, Y13}
		tmp = [4]VecPhysical{Y4, Y5, Y6, Y7}
		pinv = Y14
	}
	// max: the masked last vectors, then the full ones
	for i := 0; i < 4; i++ {
		if a.z {
			VMOVAPS(e.cst["ninf"], m[i])
			VMAXPS(rowAddr(RDX, R11, R12, i, 0), m[i], K3, m[i])
		} else {
			VBROADCASTSS(e.cst["ninf"], m[i])
			VBLENDVPS(Y9, rowAddr(RDX, R11, R12, i, 0), m[i], m[i])
		}
	}
	MOVQ(RSI, RAX)
	MOVQ(R10, RCX)
	TESTQ(RCX, RCX)
	JZ(LabelRef(lbl("maxd")))
	Label(lbl("maxl"))
	for i := 0; i < 4; i++ {
		VMAXPS(rowAddr(RAX, R11, R12, i, 0), m[i], m[i])
	}
	ADDQ(U8(V), RAX)
	DECQ(RCX)
	JNZ(LabelRef(lbl("maxl")))
	Label(lbl("maxd"))
	reduce4(a.lanes, m, tmp, func(x, y, d Op) { VMAXPS(x, y, d) })
	for i := 0; i < 4; i++ {
		VBROADCASTSS(m[i].AsX(), m[i])
	}
	// exp and sum
	for i := 0; i < 4; i++ {
		zero(a, sum[i])
	}
	expRow := func(addr Mem, i int, last bool) {
		VMOVUPS(addr, e.t)
		VSUBPS(m[i], e.t, e.t)
		expVec(a, e)
		VMOVUPS(e.y, addr)
		switch {
		case last && a.z:
			VADDPS(e.y, sum[i], K3, sum[i])
		case last:
			VANDPS(Y9, e.y, e.y)
			VADDPS(e.y, sum[i], sum[i])
		default:
			VADDPS(e.y, sum[i], sum[i])
		}
	}
	MOVQ(RSI, RAX)
	MOVQ(R10, RCX)
	TESTQ(RCX, RCX)
	JZ(LabelRef(lbl("expd")))
	Label(lbl("expl"))
	for i := 0; i < 4; i++ {
		expRow(rowAddr(RAX, R11, R12, i, 0), i, false)
	}
	ADDQ(U8(V), RAX)
	DECQ(RCX)
	JNZ(LabelRef(lbl("expl")))
	Label(lbl("expd"))
	for i := 0; i < 4; i++ {
		expRow(rowAddr(RDX, R11, R12, i, 0), i, true)
	}
	reduce4(a.lanes, sum, tmp, func(x, y, d Op) { VADDPS(x, y, d) })
	// inv[i] = 1 / sum[i], four at once
	VUNPCKLPS(sum[1].AsX(), sum[0].AsX(), X4)
	VUNPCKLPS(sum[3].AsX(), sum[2].AsX(), X5)
	VMOVLHPS(X5, X4, X4)
	VMOVUPS(cst("one"), X6)
	VDIVPS(X4, X6, X6)
	VMOVUPS(X6, inv)
	// statistics: the four maxima, then the four sums
	MOVQ(lml, RAX)
	TESTQ(RAX, RAX)
	JZ(LabelRef(lbl("nostats")))
	VMOVUPS(X4, Mem{Base: RAX, Disp: 16})
	VUNPCKLPS(m[1].AsX(), m[0].AsX(), X5)
	VUNPCKLPS(m[3].AsX(), m[2].AsX(), X7)
	VMOVLHPS(X7, X5, X5)
	VMOVUPS(X5, Mem{Base: RAX})
	ADDQ(U8(32), lml)
	Label(lbl("nostats"))
	// probabilities
	MOVQ(lprob, RBX)
	TESTQ(RBX, RBX)
	JZ(LabelRef(lbl("probd")))
	MOVQ(param("ldp"), R15)
	SHLQ(U8(2), R15)
	for i := 0; i < 4; i++ {
		VBROADCASTSS(inv.Offset(4*i), pinv)
		LEAQ(rowAddr(RSI, R11, R12, i, 0), RAX)
		MOVQ(RBX, RDI)
		MOVQ(R10, RCX)
		TESTQ(RCX, RCX)
		JZ(LabelRef(lbl("problast%d", i)))
		Label(lbl("probl%d", i))
		VMULPS(Mem{Base: RAX}, pinv, e.t)
		VMOVUPS(e.t, Mem{Base: RDI})
		ADDQ(U8(V), RAX)
		ADDQ(U8(V), RDI)
		DECQ(RCX)
		JNZ(LabelRef(lbl("probl%d", i)))
		Label(lbl("problast%d", i))
		VMULPS(rowAddr(RDX, R11, R12, i, 0), pinv, e.t)
		if a.z {
			VMOVUPS(e.t, K3, Mem{Base: RDI})
		} else {
			VMASKMOVPS(e.t, Y9, Mem{Base: RDI})
		}
		ADDQ(R15, RBX)
	}
	Label(lbl("probd"))

	// ---- P·V ----
	MOVQ(param("hd"), R10)
	ADDQ(U8(15), R10)
	ANDQ(I8(-16), R10)
	MOVQ(param("hd"), R14)
	ADDQ(U8(a.lanes-1), R14)
	SHRQ(U8(shift-2), R14) // output vectors
	SHLQ(U8(2), R10)       // bytes per V row
	MOVQ(param("vp"), R13)
	MOVQ(lo, R15)
	MOVQ(param("ldo"), R8)
	SHLQ(U8(2), R8)
	LEAQ(Mem{Base: R8, Index: R8, Scale: 2}, R9)
	Label(lbl("pgroup"))
	selectW(a.maxW, R14, RDX, func(w int) string { return lbl("p%d", w) })
	for w := 1; w <= a.maxW; w++ {
		Label(lbl("p%d", w))
		if a.z {
			// K5 masks the last vector: the hd tail in the last group.
			CMPQ(R14, U8(w))
			JNE(LabelRef(lbl("pfull%d", w)))
			KMOVW(K4, K5)
			JMP(LabelRef(lbl("pgo%d", w)))
			Label(lbl("pfull%d", w))
			KXNORW(K5, K5, K5)
			Label(lbl("pgo%d", w))
		}
		for i := 0; i < 4; i++ {
			for c := 0; c < w; c++ {
				zero(a, a.acc(i, c))
			}
		}
		MOVQ(RSI, RAX)
		MOVQ(R13, RBX)
		MOVQ(param("n"), RCX)
		Label(lbl("ploop%d", w))
		for c := 0; c < w; c++ {
			VMOVUPS(Mem{Base: RBX, Disp: c * V}, a.kv(c))
		}
		for i := 0; i < 4; i++ {
			VBROADCASTSS(rowAddr(RAX, R11, R12, i, 0), a.bc())
			for c := 0; c < w; c++ {
				VFMADD231PS(a.kv(c), a.bc(), a.acc(i, c))
			}
		}
		ADDQ(U8(4), RAX)
		ADDQ(R10, RBX)
		DECQ(RCX)
		JNZ(LabelRef(lbl("ploop%d", w)))
		epilogue := func(masked bool) {
			for i := 0; i < 4; i++ {
				VBROADCASTSS(inv.Offset(4*i), a.bc())
				for c := 0; c < w; c++ {
					VMULPS(a.bc(), a.acc(i, c), a.acc(i, c))
					dst := rowAddr(R15, R8, R9, i, c*V)
					switch {
					case a.z && c == w-1:
						VMOVUPS(a.acc(i, c), K5, dst)
					case masked && c == w-1:
						VMASKMOVPS(a.acc(i, c), a.kv(1), dst)
					default:
						VMOVUPS(a.acc(i, c), dst)
					}
				}
			}
		}
		if a.z {
			epilogue(false)
		} else {
			CMPQ(R14, U8(w))
			JNE(LabelRef(lbl("pplain%d", w)))
			MOVQ(lhm, RDX)
			TESTQ(RDX, RDX)
			JZ(LabelRef(lbl("pplain%d", w)))
			VMOVUPS(Mem{Base: RDX}, a.kv(1))
			epilogue(true)
			JMP(LabelRef(lbl("pnext%d", w)))
			Label(lbl("pplain%d", w))
			epilogue(false)
			Label(lbl("pnext%d", w))
		}
		ADDQ(U32(w*V), R13)
		ADDQ(U32(w*V), R15)
		SUBQ(U8(w), R14)
		JNZ(LabelRef(lbl("pgroup")))
		JMP(LabelRef(lbl("next")))
	}

	// ---- next tile ----
	Label(lbl("next"))
	MOVQ(param("ldq"), RAX)
	SHLQ(U8(4), RAX)
	ADDQ(RAX, lq)
	MOVQ(param("ldo"), RAX)
	SHLQ(U8(4), RAX)
	ADDQ(RAX, lo)
	MOVQ(lprob, RAX)
	TESTQ(RAX, RAX)
	JZ(LabelRef(lbl("noprob")))
	MOVQ(param("ldp"), RAX)
	SHLQ(U8(4), RAX)
	ADDQ(RAX, lprob)
	Label(lbl("noprob"))
	DECQ(ltiles)
	JNZ(LabelRef(lbl("tile")))
	VZEROUPPER()
	RET()
}

// reduce4 reduces each of the four vectors r[i] with op into its lane 0,
// the four reductions interleaved step by step; t holds scratch registers.
func reduce4(lanes int, r, t [4]VecPhysical, op func(a, b, dst Op)) {
	if lanes == 16 {
		for i := range r {
			VEXTRACTF64X4(U8(1), r[i], t[i].AsY())
		}
		for i := range r {
			op(t[i].AsY(), r[i].AsY(), r[i].AsY())
		}
	}
	for i := range r {
		VEXTRACTF128(U8(1), r[i].AsY(), t[i].AsX())
	}
	for i := range r {
		op(t[i].AsX(), r[i].AsX(), r[i].AsX())
	}
	for _, imm := range []uint8{0x4e, 0xb1} {
		for i := range r {
			VPERMILPS(U8(imm), r[i].AsX(), t[i].AsX())
		}
		for i := range r {
			op(t[i].AsX(), r[i].AsX(), r[i].AsX())
		}
	}
}

// selectW jumps to label(w) for the width of the next group of vectors
// out of rem: maxW when rem >= 2·maxW or rem == maxW, half of rem
// (rounded up) between, rem itself below maxW. tmp is clobbered.
func selectW(maxW int, rem, tmp Register, label func(w int) string) {
	id := label(0)
	CMPQ(rem, U8(2*maxW))
	JGE(LabelRef(label(maxW)))
	CMPQ(rem, U8(maxW))
	JE(LabelRef(label(maxW)))
	JL(LabelRef(id + "small"))
	MOVQ(rem, tmp)
	INCQ(tmp)
	SHRQ(U8(1), tmp)
	JMP(LabelRef(id + "dispatch"))
	Label(id + "small")
	MOVQ(rem, tmp)
	Label(id + "dispatch")
	for w := 1; w < maxW; w++ {
		CMPQ(tmp, U8(w))
		JE(LabelRef(label(w)))
	}
	JMP(LabelRef(label(maxW)))
}

func zero(a isa, r VecPhysical) {
	if a.z {
		VPXORD(r, r, r)
	} else {
		VXORPS(r, r, r)
	}
}

// expRegs are the registers of expVec: t holds the argument (<= 0 or
// NaN) and is clobbered, y receives exp(t). cst maps constant names to
// registers (AVX-512) or memory (AVX2).
type expRegs struct {
	t, fx, nf, y, r2, mask VecPhysical
	cst                    map[string]Op
}

// expVec computes y = exp(t) with the algorithm of attn.Exp: arguments
// below lo (and NaN) give 0.
func expVec(a isa, e expRegs) {
	c := e.cst
	if a.z {
		VCMPPS(U8(0x1d), c["lo"], e.t, K1) // t >= lo (ordered)
	} else {
		VCMPPS(U8(0x1d), c["lo"], e.t, e.mask)
	}
	VMAXPS(c["lo"], e.t, e.t)
	VMULPS(c["log2e"], e.t, e.fx)
	VCVTPS2DQ(e.fx, e.fx) // n, rounded to nearest even
	VCVTDQ2PS(e.fx, e.nf)
	VFNMADD231PS(c["c1"], e.nf, e.t)
	VFNMADD231PS(c["c2"], e.nf, e.t) // r
	if a.z {
		VMOVAPS(c["p0"], e.y)
	} else {
		VMOVUPS(c["p0"], e.y)
	}
	for i := 1; i < 6; i++ {
		VFMADD213PS(c["p"+itoa(i)], e.t, e.y)
	}
	VMULPS(e.t, e.t, e.r2)
	VFMADD213PS(e.t, e.r2, e.y)
	VADDPS(c["one"], e.y, e.y)
	VPADDD(c["bias"], e.fx, e.fx)
	VPSLLD(U8(23), e.fx, e.fx)
	VMULPS(e.fx, e.y, e.y)
	if a.z {
		VMOVAPS_Z(e.y, K1, e.y)
	} else {
		VANDPS(e.mask, e.y, e.y)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
