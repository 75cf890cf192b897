//go:build amd64 && gc && !purego

#include "textflag.h"

// VPSHUFB mask: 4 packed RGB pixels (12 bytes) to R, G, B, 0 each.
DATA shufRGB<>+0(SB)/8, $0x8005040380020100
DATA shufRGB<>+8(SB)/8, $0x800b0a0980080706
GLOBL shufRGB<>(SB), RODATA|NOPTR, $16

// The low 3 bytes of each dword.
DATA maskRGB<>+0(SB)/8, $0x00ffffff00ffffff
DATA maskRGB<>+8(SB)/8, $0x00ffffff00ffffff
GLOBL maskRGB<>(SB), RODATA|NOPTR, $16

// VPERMD order that undoes VPACKSSDW/VPACKUSWB's lane interleave.
DATA permPack<>+0(SB)/4, $0
DATA permPack<>+4(SB)/4, $4
DATA permPack<>+8(SB)/4, $1
DATA permPack<>+12(SB)/4, $5
DATA permPack<>+16(SB)/4, $2
DATA permPack<>+20(SB)/4, $6
DATA permPack<>+24(SB)/4, $3
DATA permPack<>+28(SB)/4, $7
GLOBL permPack<>(SB), RODATA|NOPTR, $32

// 4x4 transpose of dwords: X0..X3 (rows) to X0..X3 (columns), X4..X7 scratch.
#define TRANSPOSE4 \
	VPUNPCKLDQ  X1, X0, X4 \
	VPUNPCKHDQ  X1, X0, X5 \
	VPUNPCKLDQ  X3, X2, X6 \
	VPUNPCKHDQ  X3, X2, X7 \
	VPUNPCKLQDQ X6, X4, X0 \
	VPUNPCKHQDQ X6, X4, X1 \
	VPUNPCKLQDQ X7, X5, X2 \
	VPUNPCKHQDQ X7, X5, X3

#define STORE4 \
	VMOVDQU X0, (DI)   \
	VMOVDQU X1, 16(DI) \
	VMOVDQU X2, 32(DI) \
	VMOVDQU X3, 48(DI)

// func quadRGBAVX2(q, r0, r1, r2, r3 *byte, n int)
// Requires: AVX, SSSE3
TEXT ·quadRGBAVX2(SB), NOSPLIT, $0-48
	MOVQ    q+0(FP), DI
	MOVQ    r0+8(FP), SI
	MOVQ    r1+16(FP), DX
	MOVQ    r2+24(FP), R8
	MOVQ    r3+32(FP), R9
	MOVQ    n+40(FP), CX
	VMOVDQU shufRGB<>(SB), X8

qrgb:
	VMOVDQU (SI), X0
	VMOVDQU (DX), X1
	VMOVDQU (R8), X2
	VMOVDQU (R9), X3
	VPSHUFB X8, X0, X0
	VPSHUFB X8, X1, X1
	VPSHUFB X8, X2, X2
	VPSHUFB X8, X3, X3
	TRANSPOSE4
	STORE4
	ADDQ    $12, SI
	ADDQ    $12, DX
	ADDQ    $12, R8
	ADDQ    $12, R9
	ADDQ    $64, DI
	SUBQ    $4, CX
	JNZ     qrgb
	RET

// func quadRGBAAVX2(q, r0, r1, r2, r3 *byte, n int) byte
// Requires: AVX
TEXT ·quadRGBAAVX2(SB), NOSPLIT, $0-49
	MOVQ     q+0(FP), DI
	MOVQ     r0+8(FP), SI
	MOVQ     r1+16(FP), DX
	MOVQ     r2+24(FP), R8
	MOVQ     r3+32(FP), R9
	MOVQ     n+40(FP), CX
	VMOVDQU  maskRGB<>(SB), X8
	VPCMPEQD X9, X9, X9

qrgba:
	VMOVDQU (SI), X0
	VMOVDQU (DX), X1
	VMOVDQU (R8), X2
	VMOVDQU (R9), X3
	VPAND   X0, X9, X9
	VPAND   X1, X9, X9
	VPAND   X2, X9, X9
	VPAND   X3, X9, X9
	VPAND   X8, X0, X0
	VPAND   X8, X1, X1
	VPAND   X8, X2, X2
	VPAND   X8, X3, X3
	TRANSPOSE4
	STORE4
	ADDQ    $16, SI
	ADDQ    $16, DX
	ADDQ    $16, R8
	ADDQ    $16, R9
	ADDQ    $64, DI
	SUBQ    $4, CX
	JNZ     qrgba

	// AND of the alpha bytes (3, 7, 11, 15) of X9.
	VPSRLD     $24, X9, X9
	VPSHUFD    $0x4e, X9, X10
	VPAND      X10, X9, X9
	VPSHUFD    $0xb1, X9, X10
	VPAND      X10, X9, X9
	VMOVD      X9, AX
	MOVB       AX, ret+48(FP)
	RET

// func hconvAVX2(dst *byte, ws int, q *byte, taps *int32, k *int32, ksize, ow int)
// Requires: AVX, AVX2
TEXT ·hconvAVX2(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         ws+8(FP), R8
	MOVQ         q+16(FP), SI
	MOVQ         taps+24(FP), R9
	MOVQ         k+32(FP), R10
	MOVQ         ksize+40(FP), R11
	SHLQ         $2, R11
	MOVQ         ow+48(FP), R12
	LEAQ         (R8)(R8*2), R13
	MOVL         $0x200000, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

hout2:
	MOVL    (R9), AX
	MOVL    4(R9), CX
	LEAQ    (SI)(AX*1), BX
	MOVQ    R10, DX
	VMOVDQA Y15, Y0
	VMOVDQA Y15, Y1
	TESTL   CX, CX
	JZ      hstore2

htap2:
	VPBROADCASTD (DX), Y2
	VPMOVZXBD    (BX), Y3
	VPMOVZXBD    8(BX), Y4
	VPMULLD      Y2, Y3, Y3
	VPMULLD      Y2, Y4, Y4
	VPADDD       Y3, Y0, Y0
	VPADDD       Y4, Y1, Y1
	ADDQ         $4, DX
	ADDQ         $16, BX
	DECL         CX
	JNZ          htap2

hstore2:
	VPSRAD       $22, Y0, Y0
	VPSRAD       $22, Y1, Y1
	VPACKSSDW    Y1, Y0, Y0
	VPACKUSWB    Y0, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VMOVD        X0, (DI)
	VPEXTRD      $1, X0, (DI)(R8*2)
	VMOVD        X1, (DI)(R8*1)
	VPEXTRD      $1, X1, (DI)(R13*1)
	ADDQ         $4, DI
	ADDQ         $8, R9
	ADDQ         R11, R10
	DECQ         R12
	JNZ          hout2
	VZEROUPPER
	RET

// func hconvAVX512(dst *byte, ws int, q *byte, taps *int32, k *int32, ksize, ow int)
// Requires: AVX, AVX512F
TEXT ·hconvAVX512(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         ws+8(FP), R8
	MOVQ         q+16(FP), SI
	MOVQ         taps+24(FP), R9
	MOVQ         k+32(FP), R10
	MOVQ         ksize+40(FP), R11
	SHLQ         $2, R11
	MOVQ         ow+48(FP), R12
	LEAQ         (R8)(R8*2), R13
	MOVL         $0x200000, AX
	VPBROADCASTD AX, Z15
	VPXORD       Z14, Z14, Z14

hout5:
	MOVL      (R9), AX
	MOVL      4(R9), CX
	LEAQ      (SI)(AX*1), BX
	MOVQ      R10, DX
	VMOVDQA32 Z15, Z0
	VMOVDQA32 Z15, Z1
	CMPL      CX, $2
	JLT       hone5

htap5: // two taps at a time, into two sums
	VPMOVZXBD    (BX), Z3
	VPMOVZXBD    16(BX), Z4
	VPMULLD.BCST (DX), Z3, Z3
	VPMULLD.BCST 4(DX), Z4, Z4
	VPADDD       Z3, Z0, Z0
	VPADDD       Z4, Z1, Z1
	ADDQ         $8, DX
	ADDQ         $32, BX
	SUBL         $2, CX
	CMPL         CX, $2
	JGE          htap5

hone5:
	TESTL        CX, CX
	JZ           hstore5
	VPMOVZXBD    (BX), Z3
	VPMULLD.BCST (DX), Z3, Z3
	VPADDD       Z3, Z0, Z0

hstore5:
	VPSUBD    Z15, Z1, Z1 // the second sum's rounding half
	VPADDD    Z1, Z0, Z0
	VPSRAD    $22, Z0, Z0
	VPMAXSD   Z14, Z0, Z0
	VPMOVUSDB Z0, X0
	VMOVD     X0, (DI)
	VPEXTRD   $1, X0, (DI)(R8*1)
	VPEXTRD   $2, X0, (DI)(R8*2)
	VPEXTRD   $3, X0, (DI)(R13*1)
	ADDQ      $4, DI
	ADDQ      $8, R9
	ADDQ      R11, R10
	DECQ      R12
	JNZ       hout5
	VZEROUPPER
	RET

// func vconvAVX2(dst, src *byte, ws int, k *int32, n, width int)
// Requires: AVX, AVX2
TEXT ·vconvAVX2(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         ws+16(FP), R8
	MOVQ         k+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         width+40(FP), R12
	MOVL         $0x200000, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU      permPack<>(SB), Y14

vcol2:
	MOVQ    SI, BX
	MOVQ    R10, DX
	MOVQ    R11, CX
	VMOVDQA Y15, Y0
	VMOVDQA Y15, Y1
	VMOVDQA Y15, Y2
	VMOVDQA Y15, Y3

vtap2:
	VPBROADCASTD (DX), Y4
	VPMOVZXBD    (BX), Y5
	VPMOVZXBD    8(BX), Y6
	VPMOVZXBD    16(BX), Y7
	VPMOVZXBD    24(BX), Y8
	VPMULLD      Y4, Y5, Y5
	VPMULLD      Y4, Y6, Y6
	VPMULLD      Y4, Y7, Y7
	VPMULLD      Y4, Y8, Y8
	VPADDD       Y5, Y0, Y0
	VPADDD       Y6, Y1, Y1
	VPADDD       Y7, Y2, Y2
	VPADDD       Y8, Y3, Y3
	ADDQ         $4, DX
	ADDQ         R8, BX
	DECQ         CX
	JNZ          vtap2

	VPSRAD    $22, Y0, Y0
	VPSRAD    $22, Y1, Y1
	VPSRAD    $22, Y2, Y2
	VPSRAD    $22, Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD    Y0, Y14, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $32, DI
	ADDQ      $32, SI
	SUBQ      $32, R12
	JNZ       vcol2
	VZEROUPPER
	RET

// func vconvAVX512(dst, src *byte, ws int, k *int32, n, width int)
// Requires: AVX512F
TEXT ·vconvAVX512(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         ws+16(FP), R8
	MOVQ         k+24(FP), R10
	MOVQ         n+32(FP), R11
	MOVQ         width+40(FP), R12
	MOVL         $0x200000, AX
	VPBROADCASTD AX, Z15
	VPXORD       Z14, Z14, Z14

vcol5:
	MOVQ      SI, BX
	MOVQ      R10, DX
	MOVQ      R11, CX
	VMOVDQA32 Z15, Z0
	VMOVDQA32 Z15, Z1
	VMOVDQA32 Z15, Z2
	VMOVDQA32 Z15, Z3

vtap5:
	VPBROADCASTD (DX), Z4
	VPMOVZXBD    (BX), Z5
	VPMOVZXBD    16(BX), Z6
	VPMOVZXBD    32(BX), Z7
	VPMOVZXBD    48(BX), Z8
	VPMULLD      Z4, Z5, Z5
	VPMULLD      Z4, Z6, Z6
	VPMULLD      Z4, Z7, Z7
	VPMULLD      Z4, Z8, Z8
	VPADDD       Z5, Z0, Z0
	VPADDD       Z6, Z1, Z1
	VPADDD       Z7, Z2, Z2
	VPADDD       Z8, Z3, Z3
	ADDQ         $4, DX
	ADDQ         R8, BX
	DECQ         CX
	JNZ          vtap5

	VPSRAD    $22, Z0, Z0
	VPSRAD    $22, Z1, Z1
	VPSRAD    $22, Z2, Z2
	VPSRAD    $22, Z3, Z3
	VPMAXSD   Z14, Z0, Z0
	VPMAXSD   Z14, Z1, Z1
	VPMAXSD   Z14, Z2, Z2
	VPMAXSD   Z14, Z3, Z3
	VPMOVUSDB Z0, X0
	VPMOVUSDB Z1, X1
	VPMOVUSDB Z2, X2
	VPMOVUSDB Z3, X3
	VMOVDQU   X0, (DI)
	VMOVDQU   X1, 16(DI)
	VMOVDQU   X2, 32(DI)
	VMOVDQU   X3, 48(DI)
	ADDQ      $64, DI
	ADDQ      $64, SI
	SUBQ      $64, R12
	JNZ       vcol5
	VZEROUPPER
	RET

// func lutRGBXAVX2(dr, dg, db *float32, src *byte, n int, lut *float32)
// Requires: AVX, AVX2
TEXT ·lutRGBXAVX2(SB), NOSPLIT, $0-48
	MOVQ         dr+0(FP), DI
	MOVQ         dg+8(FP), R8
	MOVQ         db+16(FP), R9
	MOVQ         src+24(FP), SI
	MOVQ         n+32(FP), CX
	MOVQ         lut+40(FP), AX
	MOVL         $0xff, DX
	VMOVD        DX, X13
	VPBROADCASTD X13, Y13

lut2:
	VMOVDQU    (SI), Y0
	VPAND      Y13, Y0, Y1
	VPCMPEQD   Y2, Y2, Y2
	VPGATHERDD Y2, (AX)(Y1*4), Y3
	VMOVDQU    Y3, (DI)
	VPSRLD     $8, Y0, Y1
	VPAND      Y13, Y1, Y1
	VPCMPEQD   Y2, Y2, Y2
	VPGATHERDD Y2, 1024(AX)(Y1*4), Y4
	VMOVDQU    Y4, (R8)
	VPSRLD     $16, Y0, Y1
	VPAND      Y13, Y1, Y1
	VPCMPEQD   Y2, Y2, Y2
	VPGATHERDD Y2, 2048(AX)(Y1*4), Y5
	VMOVDQU    Y5, (R9)
	ADDQ       $32, SI
	ADDQ       $32, DI
	ADDQ       $32, R8
	ADDQ       $32, R9
	SUBQ       $8, CX
	JNZ        lut2
	VZEROUPPER
	RET

// func lutRGBXAVX512(dr, dg, db *float32, src *byte, n int, lut *float32)
// Requires: AVX512F
TEXT ·lutRGBXAVX512(SB), NOSPLIT, $0-48
	MOVQ         dr+0(FP), DI
	MOVQ         dg+8(FP), R8
	MOVQ         db+16(FP), R9
	MOVQ         src+24(FP), SI
	MOVQ         n+32(FP), CX
	MOVQ         lut+40(FP), AX
	MOVL         $0xff, DX
	VPBROADCASTD DX, Z13

lut5:
	VMOVDQU32  (SI), Z0
	VPANDD     Z13, Z0, Z1
	KXNORW     K1, K1, K1
	VPGATHERDD (AX)(Z1*4), K1, Z3
	VMOVDQU32  Z3, (DI)
	VPSRLD     $8, Z0, Z1
	VPANDD     Z13, Z1, Z1
	KXNORW     K2, K2, K2
	VPGATHERDD 1024(AX)(Z1*4), K2, Z4
	VMOVDQU32  Z4, (R8)
	VPSRLD     $16, Z0, Z1
	VPANDD     Z13, Z1, Z1
	KXNORW     K3, K3, K3
	VPGATHERDD 2048(AX)(Z1*4), K3, Z5
	VMOVDQU32  Z5, (R9)
	ADDQ       $64, SI
	ADDQ       $64, DI
	ADDQ       $64, R8
	ADDQ       $64, R9
	SUBQ       $16, CX
	JNZ        lut5
	VZEROUPPER
	RET

// libjpeg's YCC→RGB factors (jdcolor.c, SCALEBITS 16), 8 dwords each:
// FIX(1.40200), FIX(1.77200), -FIX(0.34414), -FIX(0.71414).
#define DWORDS8(name, v) \
	DATA name+0(SB)/4, v  \
	DATA name+4(SB)/4, v  \
	DATA name+8(SB)/4, v  \
	DATA name+12(SB)/4, v \
	DATA name+16(SB)/4, v \
	DATA name+20(SB)/4, v \
	DATA name+24(SB)/4, v \
	DATA name+28(SB)/4, v \
	GLOBL name(SB), RODATA|NOPTR, $32

DWORDS8(yccCrR<>, $91881)
DWORDS8(yccCbB<>, $116130)
DWORDS8(yccCbG<>, $-22554)
DWORDS8(yccCrG<>, $-46802)
DWORDS8(ycc128<>, $128)
DWORDS8(yccHalf<>, $32768)

// Chroma columns (from i-1) to output columns 2i, 2i+1, ...: the nearer
// one, and the neighbour on the output's side; with the rounding biases.
DATA yccNear<>+0(SB)/4, $1
DATA yccNear<>+4(SB)/4, $1
DATA yccNear<>+8(SB)/4, $2
DATA yccNear<>+12(SB)/4, $2
DATA yccNear<>+16(SB)/4, $3
DATA yccNear<>+20(SB)/4, $3
DATA yccNear<>+24(SB)/4, $4
DATA yccNear<>+28(SB)/4, $4
GLOBL yccNear<>(SB), RODATA|NOPTR, $32
DATA yccFar<>+0(SB)/4, $0
DATA yccFar<>+4(SB)/4, $2
DATA yccFar<>+8(SB)/4, $1
DATA yccFar<>+12(SB)/4, $3
DATA yccFar<>+16(SB)/4, $2
DATA yccFar<>+20(SB)/4, $4
DATA yccFar<>+24(SB)/4, $3
DATA yccFar<>+28(SB)/4, $5
GLOBL yccFar<>(SB), RODATA|NOPTR, $32
DATA yccBias<>+0(SB)/8, $0x0000000700000008
DATA yccBias<>+8(SB)/8, $0x0000000700000008
DATA yccBias<>+16(SB)/8, $0x0000000700000008
DATA yccBias<>+24(SB)/8, $0x0000000700000008
GLOBL yccBias<>(SB), RODATA|NOPTR, $32

// Bytes R0-3 G0-3 B0-3 0000 of a lane to pixels R G B 0.
DATA yccPix<>+0(SB)/8, $0x0d0905010c080400
DATA yccPix<>+8(SB)/8, $0x0f0b07030e0a0602
DATA yccPix<>+16(SB)/8, $0x0d0905010c080400
DATA yccPix<>+24(SB)/8, $0x0f0b07030e0a0602
GLOBL yccPix<>(SB), RODATA|NOPTR, $32

// UPSAMPLE: the chroma row sums 3·C + N of 8 chroma columns (from i-1) to
// the chroma of output columns 2i ... 2i+7 in dst (libjpeg-turbo's
// h2v2_fancy_upsample); clobbers Y3..Y5.
#define UPSAMPLE(C, N, dst) \
	VPADDD  C, C, Y3           \
	VPADDD  C, Y3, Y3          \
	VPADDD  N, Y3, Y3          \
	VPERMD  Y3, Y15, Y4        \
	VPERMD  Y3, Y14, Y5        \
	VPADDD  Y4, Y4, dst        \
	VPADDD  Y4, dst, dst       \
	VPADDD  Y5, dst, dst       \
	VPADDD  Y13, dst, dst      \
	VPSRAD  $4, dst, dst

// TORGB: Y' at (yp), cb-128 in cb, cr-128 in cr to 8 pixels R G B 0 in Y1.
#define TORGB(yp, cb, cr) \
	VPMOVZXBD yp, Y0                 \
	VPMULLD   yccCrR<>(SB), cr, Y1   \
	VPADDD    Y11, Y1, Y1            \
	VPSRAD    $16, Y1, Y1            \
	VPADDD    Y0, Y1, Y1             \
	VPMULLD   yccCbB<>(SB), cb, Y2   \
	VPADDD    Y11, Y2, Y2            \
	VPSRAD    $16, Y2, Y2            \
	VPADDD    Y0, Y2, Y2             \
	VPMULLD   yccCbG<>(SB), cb, Y3   \
	VPMULLD   yccCrG<>(SB), cr, Y4   \
	VPADDD    Y4, Y3, Y3             \
	VPADDD    Y11, Y3, Y3            \
	VPSRAD    $16, Y3, Y3            \
	VPADDD    Y0, Y3, Y3             \
	VPACKSSDW Y3, Y1, Y1             \
	VPACKSSDW Y10, Y2, Y2            \
	VPACKUSWB Y2, Y1, Y1             \
	VPSHUFB   Y12, Y1, Y1

// func quadYCCAVX2(q, yT, yB, pc *byte, m, n int)
// Requires: AVX, AVX2
TEXT ·quadYCCAVX2(SB), NOSPLIT, $0-48
	MOVQ    q+0(FP), DI
	MOVQ    yT+8(FP), R10
	MOVQ    yB+16(FP), R11
	MOVQ    pc+24(FP), SI
	MOVQ    m+32(FP), R8
	MOVQ    n+40(FP), CX
	LEAQ    (R8)(R8*2), AX
	LEAQ    (SI)(AX*1), R9 // the Cr rows
	VMOVDQU yccNear<>(SB), Y15
	VMOVDQU yccFar<>(SB), Y14
	VMOVDQU yccBias<>(SB), Y13
	VMOVDQU yccPix<>(SB), Y12
	VMOVDQU yccHalf<>(SB), Y11
	VPXOR   Y10, Y10, Y10

ycc:
	// Cb, Cr of rows T (Y6, Y8) and B (Y7, Y9); UPSAMPLE keeps Y0..Y2.
	VPMOVZXBD (SI), Y0
	VPMOVZXBD (SI)(R8*1), Y1
	VPMOVZXBD (SI)(R8*2), Y2
	UPSAMPLE(Y0, Y1, Y6)
	UPSAMPLE(Y0, Y2, Y7)
	VPMOVZXBD (R9), Y0
	VPMOVZXBD (R9)(R8*1), Y1
	VPMOVZXBD (R9)(R8*2), Y2
	UPSAMPLE(Y0, Y1, Y8)
	UPSAMPLE(Y0, Y2, Y9)
	VPSUBD    ycc128<>(SB), Y6, Y6
	VPSUBD    ycc128<>(SB), Y7, Y7
	VPSUBD    ycc128<>(SB), Y8, Y8
	VPSUBD    ycc128<>(SB), Y9, Y9
	TORGB((R10), Y6, Y8)
	VMOVDQA   Y1, Y6
	TORGB((R11), Y7, Y9)

	// Rows T (Y6) and B (Y1) side by side, 8 bytes a column, 16 apart.
	VPUNPCKLDQ   Y1, Y6, Y4
	VPUNPCKHDQ   Y1, Y6, Y5
	VMOVQ        X4, (DI)
	VPEXTRQ      $1, X4, 16(DI)
	VMOVQ        X5, 32(DI)
	VPEXTRQ      $1, X5, 48(DI)
	VEXTRACTI128 $1, Y4, X4
	VEXTRACTI128 $1, Y5, X5
	VMOVQ        X4, 64(DI)
	VPEXTRQ      $1, X4, 80(DI)
	VMOVQ        X5, 96(DI)
	VPEXTRQ      $1, X5, 112(DI)

	ADDQ $4, SI
	ADDQ $4, R9
	ADDQ $8, R10
	ADDQ $8, R11
	ADDQ $128, DI
	SUBQ $8, CX
	JNZ  ycc
	VZEROUPPER
	RET
