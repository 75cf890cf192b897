// Command attn generates the attention-core kernels of package
// xattn/internal/attn in AVX-512 and AVX2+FMA versions:
//
//   - scores: MR=8 query rows against packed key panels of 16 keys
//     (AVX-512: 8 rows × 2 panels = 16 zmm accumulators; AVX2: 4 rows ×
//     1 panel = 8 ymm accumulators, twice);
//   - pv: 8 probability rows times packed values, accumulating into the
//     output tile (AVX-512: 8 rows × 32 columns; AVX2: 4 rows × 16 columns);
//   - rowMax and expSum over whole vectors (the caller pads rows with -Inf).
//
// Run it through the //go:generate line in xattn/internal/attn/attn.go.
package main

import (
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

const mr = 8

var zmm = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}

var ymm = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}

// Exp constants, as in attn.Exp. Each is stored 8 times (32 bytes) so AVX2
// can use it as a memory operand.
var expConsts = []struct {
	name string
	bits uint32
}{
	{"lo", math.Float32bits(-87.33654)},
	{"log2e", math.Float32bits(1.44269504088896341)},
	{"c1", math.Float32bits(0.693359375)},
	{"c2", math.Float32bits(-2.12194440e-4)},
	{"p0", math.Float32bits(1.9875691500e-4)},
	{"p1", math.Float32bits(1.3981999507e-3)},
	{"p2", math.Float32bits(8.3334519073e-3)},
	{"p3", math.Float32bits(4.1665795894e-2)},
	{"p4", math.Float32bits(1.6666665459e-1)},
	{"p5", math.Float32bits(5.0000001201e-1)},
	{"one", math.Float32bits(1)},
	{"bias", 127},
	{"hi", math.Float32bits(88.3762626647949)},
}

var consts Mem

func cst(name string) Mem {
	for i, c := range expConsts {
		if c.name == name {
			return consts.Offset(32 * i)
		}
	}
	panic(name)
}

func main() {
	ConstraintExpr("amd64,gc,!purego")
	consts = GLOBL("expconsts", RODATA|NOPTR)
	for i, c := range expConsts {
		for j := 0; j < 8; j++ {
			DATA(32*i+4*j, U32(c.bits))
		}
	}
	scoresAVX512()
	scoresAVX2()
	pvAVX512()
	pvAVX2()
	maxKernel("AVX512", zmm, 16)
	maxKernel("AVX2", ymm, 8)
	expSumAVX512()
	expSumAVX2()
	Generate()
}

// rowAddr returns the address of row i (0..3) from base with stride s and
// s3 = 3·s.
func rowAddr(base, s, s3 Register, i int, disp int) Mem {
	switch i {
	case 0:
		return Mem{Base: base, Disp: disp}
	case 1:
		return Mem{Base: base, Index: s, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: base, Index: s, Scale: 2, Disp: disp}
	}
	return Mem{Base: base, Index: s3, Scale: 1, Disp: disp}
}

const scoresDoc = `computes s[i*lds + p*16 + j] = Σ_d q[i*hd+d]·kp[(p*hd+d)*16+j]
for i < 8, p < np, j < 16 (np >= 1, hd >= 1).`

func scoresAVX512() {
	TEXT("scoresAVX512", NOSPLIT, "func(s *float32, lds int, q *float32, kp *float32, np int, hd int)")
	Pragma("noescape")
	Doc(strings.Split("scoresAVX512 "+scoresDoc, "\n")...)
	s, lds, q, kp, np, hd := RDI, RSI, RDX, RCX, R8, R9
	Load(Param("s"), s)
	Load(Param("lds"), lds)
	Load(Param("q"), q)
	Load(Param("kp"), kp)
	Load(Param("np"), np)
	Load(Param("hd"), hd)
	SHLQ(U8(2), lds)
	ls3 := R10
	LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, ls3)
	qs, qs3 := R11, R12
	MOVQ(hd, qs)
	SHLQ(U8(2), qs)
	LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, qs3)
	pb := R13 // bytes per panel: hd*64
	MOVQ(hd, pb)
	SHLQ(U8(6), pb)
	qp, q4, kk, n := R14, R15, RAX, RBX
	acc := func(i, c int) VecPhysical { return zmm[2*i+c] }
	k0, k1, b := Z16, Z17, Z18

	store := func(np int) {
		s4 := R14
		LEAQ(Mem{Base: s, Index: lds, Scale: 4}, s4)
		for i := 0; i < mr; i++ {
			base := s
			if i >= 4 {
				base = s4
			}
			for c := 0; c < np; c++ {
				VMOVUPS(acc(i, c), rowAddr(base, lds, ls3, i%4, 64*c))
			}
		}
	}
	loop := func(np int, label string) {
		for i := 0; i < mr; i++ {
			for c := 0; c < np; c++ {
				VPXORD(acc(i, c), acc(i, c), acc(i, c))
			}
		}
		MOVQ(q, qp)
		LEAQ(Mem{Base: q, Index: qs, Scale: 4}, q4)
		MOVQ(kp, kk)
		MOVQ(hd, n)
		Label(label)
		VMOVUPS(Mem{Base: kk}, k0)
		if np == 2 {
			VMOVUPS(Mem{Base: kk, Index: pb, Scale: 1}, k1)
		}
		for i := 0; i < mr; i++ {
			base := qp
			if i >= 4 {
				base = q4
			}
			VBROADCASTSS(rowAddr(base, qs, qs3, i%4, 0), b)
			VFMADD231PS(k0, b, acc(i, 0))
			if np == 2 {
				VFMADD231PS(k1, b, acc(i, 1))
			}
		}
		ADDQ(U8(64), kk)
		ADDQ(U8(4), qp)
		ADDQ(U8(4), q4)
		DECQ(n)
		JNZ(LabelRef(label))
		store(np)
	}

	Label("pairs")
	CMPQ(np, U8(2))
	JL(LabelRef("single"))
	loop(2, "pairloop")
	ADDQ(U8(128), s)
	LEAQ(Mem{Base: kp, Index: pb, Scale: 2}, kp)
	SUBQ(U8(2), np)
	JMP(LabelRef("pairs"))
	Label("single")
	CMPQ(np, U8(0))
	JE(LabelRef("done"))
	loop(1, "oneloop")
	Label("done")
	VZEROUPPER()
	RET()
}

func scoresAVX2() {
	TEXT("scoresAVX2", NOSPLIT, "func(s *float32, lds int, q *float32, kp *float32, np int, hd int)")
	Pragma("noescape")
	Doc(strings.Split("scoresAVX2 "+scoresDoc, "\n")...)
	s, lds, q, kp, np, hd := RDI, RSI, RDX, RCX, R8, R9
	Load(Param("s"), s)
	Load(Param("lds"), lds)
	Load(Param("q"), q)
	Load(Param("kp"), kp)
	Load(Param("np"), np)
	Load(Param("hd"), hd)
	SHLQ(U8(2), lds)
	ls3 := R10
	LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, ls3)
	qs, qs3 := R11, R12
	MOVQ(hd, qs)
	SHLQ(U8(2), qs)
	LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, qs3)
	qp, kk, n, p, sp, kpp := R14, RAX, RBX, R13, R15, RCX
	acc := func(i, c int) VecPhysical { return ymm[2*i+c] }
	k0, k1, b := Y8, Y9, Y10
	for g := 0; g < 2; g++ {
		// rows 4g..4g+3: q + 4g·qs, s + 4g·lds
		if g == 1 {
			LEAQ(Mem{Base: q, Index: qs, Scale: 4}, q)
			Load(Param("s"), s)
			LEAQ(Mem{Base: s, Index: lds, Scale: 4}, s)
			Load(Param("kp"), kpp)
		}
		MOVQ(s, sp)
		MOVQ(np, p)
		lp := "panel" + string(rune('0'+g))
		ld := "d" + string(rune('0'+g))
		Label(lp)
		for i := 0; i < 4; i++ {
			VXORPS(acc(i, 0), acc(i, 0), acc(i, 0))
			VXORPS(acc(i, 1), acc(i, 1), acc(i, 1))
		}
		MOVQ(q, qp)
		MOVQ(hd, n)
		MOVQ(kpp, kk)
		Label(ld)
		VMOVUPS(Mem{Base: kk}, k0)
		VMOVUPS(Mem{Base: kk, Disp: 32}, k1)
		for i := 0; i < 4; i++ {
			VBROADCASTSS(rowAddr(qp, qs, qs3, i, 0), b)
			VFMADD231PS(k0, b, acc(i, 0))
			VFMADD231PS(k1, b, acc(i, 1))
		}
		ADDQ(U8(64), kk)
		ADDQ(U8(4), qp)
		DECQ(n)
		JNZ(LabelRef(ld))
		for i := 0; i < 4; i++ {
			VMOVUPS(acc(i, 0), rowAddr(sp, lds, ls3, i, 0))
			VMOVUPS(acc(i, 1), rowAddr(sp, lds, ls3, i, 32))
		}
		MOVQ(kk, kpp) // next panel starts where this one ended
		ADDQ(U8(64), sp)
		DECQ(p)
		JNZ(LabelRef(lp))
	}
	VZEROUPPER()
	RET()
}

const pvDoc = `accumulates o[i*hp+c] += Σ_{j<n} p[i*ldp+j]·v[j*hp+c]
for i < 8, c < hp (n >= 1, hp a positive multiple of 16).`

func pvAVX512() {
	TEXT("pvAVX512", NOSPLIT, "func(o *float32, p *float32, ldp int, v *float32, n int, hp int)")
	Pragma("noescape")
	Doc(strings.Split("pvAVX512 "+pvDoc, "\n")...)
	o, p, ldp, v, n, hp := RDI, RSI, RDX, RCX, R8, R9
	Load(Param("o"), o)
	Load(Param("p"), p)
	Load(Param("ldp"), ldp)
	Load(Param("v"), v)
	Load(Param("n"), n)
	Load(Param("hp"), hp)
	SHLQ(U8(2), ldp)
	lp3 := R10
	LEAQ(Mem{Base: ldp, Index: ldp, Scale: 2}, lp3)
	ob, ob3 := R11, R12 // output row stride = value row stride, in bytes
	MOVQ(hp, ob)
	SHLQ(U8(2), ob)
	LEAQ(Mem{Base: ob, Index: ob, Scale: 2}, ob3)
	pp, p4, vv, j, o4, cols := R13, R14, R15, RAX, RBX, hp
	acc := func(i, c int) VecPhysical { return zmm[2*i+c] }
	v0, v1, b := Z16, Z17, Z18
	block := func(w int, label string) {
		LEAQ(Mem{Base: o, Index: ob, Scale: 4}, o4)
		for i := 0; i < mr; i++ {
			base := o
			if i >= 4 {
				base = o4
			}
			for c := 0; c < w; c++ {
				VMOVUPS(rowAddr(base, ob, ob3, i%4, 64*c), acc(i, c))
			}
		}
		MOVQ(p, pp)
		LEAQ(Mem{Base: p, Index: ldp, Scale: 4}, p4)
		MOVQ(v, vv)
		MOVQ(n, j)
		Label(label)
		VMOVUPS(Mem{Base: vv}, v0)
		if w == 2 {
			VMOVUPS(Mem{Base: vv, Disp: 64}, v1)
		}
		for i := 0; i < mr; i++ {
			base := pp
			if i >= 4 {
				base = p4
			}
			VBROADCASTSS(rowAddr(base, ldp, lp3, i%4, 0), b)
			VFMADD231PS(v0, b, acc(i, 0))
			if w == 2 {
				VFMADD231PS(v1, b, acc(i, 1))
			}
		}
		ADDQ(ob, vv)
		ADDQ(U8(4), pp)
		ADDQ(U8(4), p4)
		DECQ(j)
		JNZ(LabelRef(label))
		for i := 0; i < mr; i++ {
			base := o
			if i >= 4 {
				base = o4
			}
			for c := 0; c < w; c++ {
				VMOVUPS(acc(i, c), rowAddr(base, ob, ob3, i%4, 64*c))
			}
		}
	}
	Label("cols2")
	CMPQ(cols, U8(32))
	JL(LabelRef("cols1"))
	block(2, "loop2")
	ADDQ(U8(128), o)
	ADDQ(U8(128), v)
	SUBQ(U8(32), cols)
	JMP(LabelRef("cols2"))
	Label("cols1")
	CMPQ(cols, U8(0))
	JE(LabelRef("done"))
	block(1, "loop1")
	Label("done")
	VZEROUPPER()
	RET()
}

func pvAVX2() {
	TEXT("pvAVX2", NOSPLIT, "func(o *float32, p *float32, ldp int, v *float32, n int, hp int)")
	Pragma("noescape")
	Doc(strings.Split("pvAVX2 "+pvDoc, "\n")...)
	o, p, ldp, v, n, hp := RDI, RSI, RDX, RCX, R8, R9
	Load(Param("o"), o)
	Load(Param("p"), p)
	Load(Param("ldp"), ldp)
	Load(Param("v"), v)
	Load(Param("n"), n)
	Load(Param("hp"), hp)
	SHLQ(U8(2), ldp)
	lp3 := R10
	LEAQ(Mem{Base: ldp, Index: ldp, Scale: 2}, lp3)
	ob, ob3 := R11, R12
	MOVQ(hp, ob)
	SHLQ(U8(2), ob)
	LEAQ(Mem{Base: ob, Index: ob, Scale: 2}, ob3)
	pp, vv, j, cols, oc, vc := R13, R14, R15, RAX, RBX, R9
	acc := func(i, c int) VecPhysical { return ymm[2*i+c] }
	v0, v1, b := Y8, Y9, Y10
	for g := 0; g < 2; g++ {
		if g == 1 {
			Load(Param("o"), o)
			LEAQ(Mem{Base: o, Index: ob, Scale: 4}, o)
			Load(Param("p"), p)
			LEAQ(Mem{Base: p, Index: ldp, Scale: 4}, p)
		}
		Load(Param("hp"), cols)
		MOVQ(o, oc)
		Load(Param("v"), vc)
		lc := "col" + string(rune('0'+g))
		lj := "j" + string(rune('0'+g))
		Label(lc)
		for i := 0; i < 4; i++ {
			VMOVUPS(rowAddr(oc, ob, ob3, i, 0), acc(i, 0))
			VMOVUPS(rowAddr(oc, ob, ob3, i, 32), acc(i, 1))
		}
		MOVQ(p, pp)
		MOVQ(vc, vv)
		MOVQ(n, j)
		Label(lj)
		VMOVUPS(Mem{Base: vv}, v0)
		VMOVUPS(Mem{Base: vv, Disp: 32}, v1)
		for i := 0; i < 4; i++ {
			VBROADCASTSS(rowAddr(pp, ldp, lp3, i, 0), b)
			VFMADD231PS(v0, b, acc(i, 0))
			VFMADD231PS(v1, b, acc(i, 1))
		}
		ADDQ(ob, vv)
		ADDQ(U8(4), pp)
		DECQ(j)
		JNZ(LabelRef(lj))
		for i := 0; i < 4; i++ {
			VMOVUPS(acc(i, 0), rowAddr(oc, ob, ob3, i, 0))
			VMOVUPS(acc(i, 1), rowAddr(oc, ob, ob3, i, 32))
		}
		ADDQ(U8(64), oc)
		ADDQ(U8(64), vc)
		SUBQ(U8(16), cols)
		JNZ(LabelRef(lc))
	}
	VZEROUPPER()
	RET()
}

// hsum/hmax reduce a vector register to lane 0 of X0.
func reduce(lanes int, r, ry VecPhysical, op func(a, b, dst Op)) {
	if lanes == 16 {
		VEXTRACTF32X8(U8(1), r, Y1)
		op(Y1, ry, Y0)
	} else if r != Y0 {
		VMOVAPS(r, Y0)
	}
	VEXTRACTF128(U8(1), Y0, X1)
	op(X1, X0, X0)
	VPERMILPS(U8(0x4e), X0, X1)
	op(X1, X0, X0)
	VPERMILPS(U8(0xb1), X0, X1)
	op(X1, X0, X0)
}

func maxKernel(name string, regs []VecPhysical, lanes int) {
	TEXT("max"+name, NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("max"+name+" returns the largest of x[:n] (n a positive multiple of", itoa(lanes)+").")
	x, n := RDI, RSI
	Load(Param("x"), x)
	Load(Param("n"), n)
	m := regs[2]
	VMOVUPS(Mem{Base: x}, m)
	Label("loop" + name)
	VMAXPS(Mem{Base: x}, m, m)
	ADDQ(U8(4*lanes), x)
	SUBQ(U8(lanes), n)
	JNZ(LabelRef("loop" + name))
	reduce(lanes, m, Y2, func(a, b, dst Op) { VMAXPS(a, b, dst) })
	VZEROUPPER()
	Store(X0, ReturnIndex(0))
	RET()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func expSumAVX512() {
	TEXT("expSumAVX512", NOSPLIT, "func(x *float32, n int, sub float32) float32")
	Pragma("noescape")
	Doc("expSumAVX512 replaces x[i] by exp(x[i] - sub) for i < n (n a positive multiple",
		"of 16) and returns their sum, with the algorithm of Exp: lanes with",
		"x[i] - sub below -87.33654 (or NaN) give 0; arguments above 88.376 are",
		"clamped there.")
	x, n, tab := RDI, RSI, RAX
	Load(Param("x"), x)
	Load(Param("n"), n)
	LEAQ(consts, tab)
	sub, lo, log2e, c1, c2, one, bias, hi := Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23
	p := []VecPhysical{Z24, Z25, Z26, Z27, Z28, Z29}
	VBROADCASTSS(NewParamAddr("sub", 16), sub)
	bc := func(name string, r VecPhysical) {
		c := cst(name)
		VBROADCASTSS(Mem{Base: tab, Disp: c.Disp}, r)
	}
	bc("lo", lo)
	bc("log2e", log2e)
	bc("c1", c1)
	bc("c2", c2)
	bc("one", one)
	bc("bias", bias)
	bc("hi", hi)
	for i, r := range p {
		bc("p"+itoa(i), r)
	}
	sum := Z0
	VPXORD(sum, sum, sum)
	t, fx, nf, y, r2 := Z1, Z2, Z3, Z4, Z5
	Label("loop")
	VMOVUPS(Mem{Base: x}, t)
	VSUBPS(sub, t, t)
	VCMPPS(U8(0x1d), lo, t, K1) // t >= lo (ordered)
	VMAXPS(lo, t, t)
	VMINPS(hi, t, t)
	VMULPS(log2e, t, fx)
	VCVTPS2DQ(fx, fx) // n, round to nearest even
	VCVTDQ2PS(fx, nf)
	VFNMADD231PS(c1, nf, t)
	VFNMADD231PS(c2, nf, t) // r
	VMOVAPS(p[0], y)
	for i := 1; i < 6; i++ {
		VFMADD213PS(p[i], t, y)
	}
	VMULPS(t, t, r2)
	VFMADD213PS(t, r2, y)
	VADDPS(one, y, y)
	VPADDD(bias, fx, fx)
	VPSLLD(U8(23), fx, fx)
	VMULPS(fx, y, y)
	VMOVAPS_Z(y, K1, y)
	VMOVUPS(y, Mem{Base: x})
	VADDPS(y, sum, sum)
	ADDQ(U8(64), x)
	SUBQ(U8(16), n)
	JNZ(LabelRef("loop"))
	reduce(16, sum, Y0, func(a, b, dst Op) { VADDPS(a, b, dst) })
	VZEROUPPER()
	Store(X0, ReturnIndex(0))
	RET()
}

func expSumAVX2() {
	TEXT("expSumAVX2", NOSPLIT, "func(x *float32, n int, sub float32) float32")
	Pragma("noescape")
	Doc("expSumAVX2 is expSumAVX512 for n a positive multiple of 8.")
	x, n, tab := RDI, RSI, RAX
	Load(Param("x"), x)
	Load(Param("n"), n)
	LEAQ(consts, tab)
	sub := Y15
	VBROADCASTSS(NewParamAddr("sub", 16), sub)
	c := func(name string) Mem { m := cst(name); return Mem{Base: tab, Disp: m.Disp} }
	sum := Y0
	VXORPS(sum, sum, sum)
	t, fx, nf, y, r2, mask := Y1, Y2, Y3, Y4, Y5, Y6
	Label("loop")
	VMOVUPS(Mem{Base: x}, t)
	VSUBPS(sub, t, t)
	VCMPPS(U8(0x1d), c("lo"), t, mask)
	VMAXPS(c("lo"), t, t)
	VMINPS(c("hi"), t, t)
	VMULPS(c("log2e"), t, fx)
	VCVTPS2DQ(fx, fx)
	VCVTDQ2PS(fx, nf)
	VFNMADD231PS(c("c1"), nf, t)
	VFNMADD231PS(c("c2"), nf, t)
	VMOVUPS(c("p0"), y)
	for i := 1; i < 6; i++ {
		VFMADD213PS(c("p"+itoa(i)), t, y)
	}
	VMULPS(t, t, r2)
	VFMADD213PS(t, r2, y)
	VADDPS(c("one"), y, y)
	VPADDD(c("bias"), fx, fx)
	VPSLLD(U8(23), fx, fx)
	VMULPS(fx, y, y)
	VANDPS(mask, y, y)
	VMOVUPS(y, Mem{Base: x})
	VADDPS(y, sum, sum)
	ADDQ(U8(32), x)
	SUBQ(U8(8), n)
	JNZ(LabelRef("loop"))
	reduce(8, sum, Y0, func(a, b, dst Op) { VADDPS(a, b, dst) })
	VZEROUPPER()
	Store(X0, ReturnIndex(0))
	RET()
}
