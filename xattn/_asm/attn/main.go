// Command attn generates the attention-core kernels of package
// xattn/internal/attn in AVX-512 and AVX2+FMA versions:
//
//   - attend: the fused attention of tiles of 4 query rows (scores in
//     register tiles, exact softmax, P·V), one call for many tiles; see
//     attend.go;
//   - max and expSum over whole vectors, the vector exp on its own (tested
//     for accuracy against math.Exp);
//   - GELU in its tanh form over whole vectors, on the same exp (gelu.go).
//
// Run it through the //go:generate line in xattn/internal/attn/attn_test.go.
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

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
	{"ninf", math.Float32bits(float32(math.Inf(-1)))},
}

var consts, tailMask Mem

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
	tailMask = GLOBL("tailmask", RODATA|NOPTR)
	for j := 0; j < 16; j++ {
		v := uint32(0)
		if j < 8 {
			v = 0xffffffff
		}
		DATA(4*j, U32(v))
	}
	geluData()
	attend(isa{name: "AVX512", z: true, lanes: 16, vec: zmm, maxW: 5})
	attend(isa{name: "AVX2", lanes: 8, vec: ymm, maxW: 3})
	maxKernel("AVX512", zmm, 16)
	maxKernel("AVX2", ymm, 8)
	expSum(isa{name: "AVX512", z: true, lanes: 16, vec: zmm, maxW: 5})
	expSum(isa{name: "AVX2", lanes: 8, vec: ymm, maxW: 3})
	geluTanh(isa{name: "AVX512", z: true, lanes: 16, vec: zmm, maxW: 5})
	geluTanh(isa{name: "AVX2", lanes: 8, vec: ymm, maxW: 3})
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

// hsum/hmax reduce a vector register to lane 0 of X0.
func reduce(lanes int, r, ry VecPhysical, op func(a, b, dst Op)) {
	if lanes == 16 {
		VEXTRACTF64X4(U8(1), r, Y1)
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

// expSum generates expSum<isa>: x[i] = exp(x[i] - sub) for i < n and their
// sum, with expVec, the exp of the fused attend kernel, so that the
// accuracy test of ExpSum covers the instructions attend runs.
func expSum(a isa) {
	name := "expSum" + a.name
	TEXT(name, NOSPLIT, "func(x *float32, n int, sub float32) float32")
	Pragma("noescape")
	if a.z {
		Doc(name+" replaces x[i] by exp(x[i] - sub) for i < n (n a positive multiple",
			"of 16) and returns their sum, with the algorithm of Exp and the code of",
			"the attend kernels' exp: lanes with x[i] - sub below -87.33654 (or NaN)",
			"give 0; arguments above 88.376 are clamped there.")
	} else {
		Doc(name + " is expSumAVX512 for n a positive multiple of 8.")
	}
	x, n := RDI, RSI
	Load(Param("x"), x)
	Load(Param("n"), n)
	LEAQ(consts, RAX)
	v := a.vec
	e := expRegs{t: v[1], fx: v[2], nf: v[3], y: v[4], r2: v[5], mask: v[6], cst: map[string]Op{}}
	var sub, hi VecPhysical
	if a.z {
		for i, c := range []string{"lo", "log2e", "c1", "c2", "one", "bias", "p0", "p1", "p2", "p3", "p4", "p5"} {
			r := zmm[16+i]
			VBROADCASTSS(Mem{Base: RAX, Disp: cst(c).Disp}, r)
			e.cst[c] = r
		}
		VBROADCASTSS(Mem{Base: RAX, Disp: cst("hi").Disp}, Z28)
		sub, hi = Z29, Z28
	} else {
		for _, c := range expConsts {
			e.cst[c.name] = cst(c.name)
		}
		VBROADCASTSS(cst("hi"), Y7)
		sub, hi = Y15, Y7
	}
	VBROADCASTSS(NewParamAddr("sub", 16), sub)
	sum := v[0]
	zero(a, sum)
	Label("loop" + a.name)
	VMOVUPS(Mem{Base: x}, e.t)
	VSUBPS(sub, e.t, e.t)
	VMINPS(e.t, hi, e.t) // min(hi, t), NaN kept (the second source wins)
	expVec(a, e)
	VMOVUPS(e.y, Mem{Base: x})
	VADDPS(e.y, sum, sum)
	ADDQ(U8(4*a.lanes), x)
	SUBQ(U8(a.lanes), n)
	JNZ(LabelRef("loop" + a.name))
	reduce(a.lanes, sum, Y0, func(a, b, dst Op) { VADDPS(a, b, dst) })
	VZEROUPPER()
	Store(X0, ReturnIndex(0))
	RET()
}
