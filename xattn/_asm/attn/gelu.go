package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// GELU's constants: z = x·(k1 + k2·x²) = -2·sqrt(2/π)·(x + 0.044715·x³),
// as attn.GeluTanhGeneric computes them.
var geluConsts = []struct {
	name string
	bits uint32
}{
	{"k1", math.Float32bits(float32(-2 * 0.7978845608028654))},
	{"k2", math.Float32bits(float32(-2 * 0.7978845608028654 * 0.044715))},
	{"pinf", math.Float32bits(float32(math.Inf(1)))},
}

var gconsts Mem

func gcst(name string) Mem {
	for i, c := range geluConsts {
		if c.name == name {
			return gconsts.Offset(32 * i)
		}
	}
	panic(name)
}

func geluData() {
	gconsts = GLOBL("geluconsts", RODATA|NOPTR)
	for i, c := range geluConsts {
		for j := 0; j < 8; j++ {
			DATA(32*i+4*j, U32(c.bits))
		}
	}
}

// geluTanh generates geluTanh<isa>: x[i] = x[i] / (1 + exp(z)) with
// z = x[i]·(k1 + k2·x[i]²) (exp(z) = +Inf above hi, so that large negative
// x give -0 as the formula does), which is GELU's tanh form
// 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))) = x·sigmoid(2u), with the
// vector exp of expVec.
func geluTanh(a isa) {
	name := "geluTanh" + a.name
	TEXT(name, NOSPLIT, "func(x *float32, n int)")
	Pragma("noescape")
	if a.z {
		Doc(name+" replaces x[i] by GELU(x[i]) in its tanh form for i < n (n a",
			"positive multiple of 16), as x / (1 + exp(z)), z = x·(k1 + k2·x²),",
			"with the exp of the attend kernels and exp(z) = +Inf above 88.376",
			"(see GeluTanhGeneric).")
	} else {
		Doc(name + " is geluTanhAVX512 for n a positive multiple of 8.")
	}
	x, n := RDI, RSI
	Load(Param("x"), x)
	Load(Param("n"), n)
	LEAQ(consts, RAX)
	LEAQ(gconsts, RBX)
	v := a.vec
	e := expRegs{t: v[1], fx: v[2], nf: v[3], y: v[4], r2: v[5], mask: v[6], cst: map[string]Op{}}
	xv, hi, tmp, over := v[0], v[7], v[8], v[9]
	var k1, k2, inf Op
	if a.z {
		for i, c := range []string{"lo", "log2e", "c1", "c2", "one", "bias", "p0", "p1", "p2", "p3", "p4", "p5"} {
			r := zmm[16+i]
			VBROADCASTSS(Mem{Base: RAX, Disp: cst(c).Disp}, r)
			e.cst[c] = r
		}
		VBROADCASTSS(Mem{Base: RAX, Disp: cst("hi").Disp}, hi)
		VBROADCASTSS(Mem{Base: RBX, Disp: gcst("k1").Disp}, Z28)
		VBROADCASTSS(Mem{Base: RBX, Disp: gcst("k2").Disp}, Z29)
		VBROADCASTSS(Mem{Base: RBX, Disp: gcst("pinf").Disp}, Z30)
		k1, k2, inf = Z28, Z29, Z30
	} else {
		for _, c := range expConsts {
			e.cst[c.name] = cst(c.name)
		}
		VBROADCASTSS(cst("hi"), hi)
		k1, k2, inf = gcst("k1"), gcst("k2"), gcst("pinf")
	}
	Label("gelu" + a.name)
	VMOVUPS(Mem{Base: x}, xv)
	VMULPS(xv, xv, tmp)  // x²
	VMULPS(k2, tmp, tmp) // k2·x²
	VADDPS(k1, tmp, tmp) // k1 + k2·x²
	VMULPS(tmp, xv, e.t) // z
	if a.z {
		VCMPPS(U8(0x1e), hi, e.t, K2) // z > hi (ordered)
	} else {
		VCMPPS(U8(0x1e), hi, e.t, over)
	}
	VMINPS(e.t, hi, e.t) // min(hi, z), NaN kept
	expVec(a, e)         // y = exp(z), 0 below lo
	if a.z {
		VMOVAPS(inf, K2, e.y) // +Inf above hi
	} else {
		VBLENDVPS(over, inf, e.y, e.y)
	}
	VADDPS(e.cst["one"], e.y, e.y)
	VDIVPS(e.y, xv, e.y) // x / (1 + exp(z))
	VMOVUPS(e.y, Mem{Base: x})
	ADDQ(U8(4*a.lanes), x)
	SUBQ(U8(a.lanes), n)
	JNZ(LabelRef("gelu" + a.name))
	VZEROUPPER()
	RET()
}
