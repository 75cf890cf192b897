//go:build amd64 && gc && !purego

#include "textflag.h"

// func dotAVX512(a *uint16, b *float32, n int) float32
// Requires: AVX512F
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

loop64:
	CMPQ        CX, $64
	JLT         loop16
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   32(SI), Z5
	VCVTPH2PS   64(SI), Z6
	VCVTPH2PS   96(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $128, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	JMP         loop64

loop16:
	CMPQ        CX, $16
	JLT         reduce
	VCVTPH2PS   (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JMP         loop16

reduce:
	VADDPS        Z1, Z0, Z0
	VADDPS        Z3, Z2, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VZEROUPPER
	MOVSS         X0, ret+24(FP)
	RET

// func dotAVX2(a *uint16, b *float32, n int) float32
// Requires: AVX, AVX2, F16C, FMA3
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop32:
	CMPQ        CX, $32
	JLT         loop8
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         loop32

loop8:
	CMPQ        CX, $8
	JLT         reduce
	VCVTPH2PS   (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         loop8

reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func dot4AVX512(a *uint16, b *float32, ldb int, n int, out *[4]float32)
// Requires: AVX512F
TEXT ·dot4AVX512(SB), NOSPLIT, $0-40
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   ldb+16(FP), R8
	SHLQ   $2, R8
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), DX
	LEAQ   (DI)(R8*1), R9
	LEAQ   (R9)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7

loop4x32:
	CMPQ        CX, $32
	JLT         loop4x16
	VCVTPH2PS   (SI), Z8
	VCVTPH2PS   32(SI), Z9
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS (R9), Z8, Z1
	VFMADD231PS (R10), Z8, Z2
	VFMADD231PS (R11), Z8, Z3
	VFMADD231PS 64(DI), Z9, Z4
	VFMADD231PS 64(R9), Z9, Z5
	VFMADD231PS 64(R10), Z9, Z6
	VFMADD231PS 64(R11), Z9, Z7
	ADDQ        $64, SI
	ADDQ        $128, DI
	ADDQ        $128, R9
	ADDQ        $128, R10
	ADDQ        $128, R11
	SUBQ        $32, CX
	JMP         loop4x32

loop4x16:
	CMPQ        CX, $16
	JLT         reduce4
	VCVTPH2PS   (SI), Z8
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS (R9), Z8, Z1
	VFMADD231PS (R10), Z8, Z2
	VFMADD231PS (R11), Z8, Z3
	ADDQ        $32, SI
	ADDQ        $64, DI
	ADDQ        $64, R9
	ADDQ        $64, R10
	ADDQ        $64, R11
	SUBQ        $16, CX
	JMP         loop4x16

reduce4:
	VADDPS        Z4, Z0, Z0
	VADDPS        Z5, Z1, Z1
	VADDPS        Z6, Z2, Z2
	VADDPS        Z7, Z3, Z3
	VEXTRACTF64X4 $1, Z0, Y8
	VADDPS        Y8, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y8
	VADDPS        Y8, Y1, Y1
	VEXTRACTF64X4 $1, Z2, Y8
	VADDPS        Y8, Y2, Y2
	VEXTRACTF64X4 $1, Z3, Y8
	VADDPS        Y8, Y3, Y3
	VEXTRACTF128  $1, Y0, X8
	VADDPS        X8, X0, X0
	VEXTRACTF128  $1, Y1, X8
	VADDPS        X8, X1, X1
	VEXTRACTF128  $1, Y2, X8
	VADDPS        X8, X2, X2
	VEXTRACTF128  $1, Y3, X8
	VADDPS        X8, X3, X3
	VHADDPS       X1, X0, X0
	VHADDPS       X3, X2, X2
	VHADDPS       X2, X0, X0
	VMOVUPS       X0, (DX)
	VZEROUPPER
	RET
