// Package halfdot is the dot product of IEEE 754 half-precision rows with
// a float32 vector: the kernel of a search over an index stored as
// float16. Dot runs the assembly kernel this CPU and build support
// (AVX-512F, or AVX2 with F16C and FMA, on amd64 without the purego tag)
// and DotGeneric, the portable pure-Go kernel, otherwise. Tile, over
// rows converted to float32 and packed (Pack), is the register-blocked
// kernel of an all-pairs search: twelve rows against 32 at a time
// (AVX-512F, or AVX2 with FMA); TileInt8 is the same tile over int8 rows (AVX512-VNNI), a coarse
// filter in front of it.
package halfdot

import "math"

// magic scales a float16's exponent and mantissa, shifted into a float32's
// places, to the value they stand for: 2^(127-15).
const magic = 0x1p112

// ToFloat32 converts float16 bits to float32: exact for every finite value
// (normal or subnormal); infinities and NaNs come out finite (an index of
// unit vectors holds none).
func ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h&0x7fff)<<13|uint32(h&0x8000)<<16) * magic
}

// Dot returns Σ a[i]·b[i] over the float16 row a and the float32 vector b
// (len(b) ≥ len(a)), accumulated in float32.
func Dot(a []uint16, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	b = b[:len(a)]
	return dot(a, b)
}

// DotGeneric is Dot in pure Go: four accumulators, unrolled by 8.
func DotGeneric(a []uint16, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += ToFloat32(aa[0])*bb[0] + ToFloat32(aa[4])*bb[4]
		s1 += ToFloat32(aa[1])*bb[1] + ToFloat32(aa[5])*bb[5]
		s2 += ToFloat32(aa[2])*bb[2] + ToFloat32(aa[6])*bb[6]
		s3 += ToFloat32(aa[3])*bb[3] + ToFloat32(aa[7])*bb[7]
	}
	for ; i < len(a); i++ {
		s0 += ToFloat32(a[i]) * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// DotInt8 returns Σ a[i]·b[i] over the int8 row a and the float32 vector
// b (len(b) ≥ len(a)); the row's scale is the caller's to apply.
func DotInt8(a []int8, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		aa, bb := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += float32(aa[0]) * bb[0]
		s1 += float32(aa[1]) * bb[1]
		s2 += float32(aa[2]) * bb[2]
		s3 += float32(aa[3]) * bb[3]
	}
	for ; i < len(a); i++ {
		s0 += float32(a[i]) * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// DotFloat32 returns Σ a[i]·b[i] (len(b) ≥ len(a)).
func DotFloat32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		aa, bb := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += aa[0] * bb[0]
		s1 += aa[1] * bb[1]
		s2 += aa[2] * bb[2]
		s3 += aa[3] * bb[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Impl names the kernel Dot runs: "avx512", "avx2" or "go".
func Impl() string { return impl }

// Dot4 sets out[k] = Σ a[i]·b[k·ldb+i] for k < 4: the float16 row a
// against four float32 rows of b, ldb values apart (ldb ≥ len(a),
// len(b) ≥ 3·ldb+len(a)), each block of a converted once for the four,
// accumulated in float32. It panics when b is too short.
func Dot4(a []uint16, b []float32, ldb int, out *[4]float32) {
	if ldb < len(a) || len(b) < 3*ldb+len(a) {
		panic("halfdot: Dot4: b shorter than four rows of ldb values")
	}
	dot4(a, b, ldb, out)
}

// Dot4Generic is Dot4 in pure Go: DotGeneric for each row.
func Dot4Generic(a []uint16, b []float32, ldb int, out *[4]float32) {
	for k := range 4 {
		out[k] = DotGeneric(a, b[k*ldb:k*ldb+len(a)])
	}
}

// Dot4x2 sets out[4r+k] = Σ a[r·lda+i]·b[k·ldb+i] for r < 2, k < 4, i < n:
// two float16 rows of a, lda apart, against four float32 rows of b, ldb
// apart (lda, ldb ≥ n; len(a) ≥ lda+n, len(b) ≥ 3·ldb+n), each value of b
// loaded once for both rows of a, accumulated in float32. It panics when
// a or b is too short.
func Dot4x2(a []uint16, lda int, b []float32, ldb, n int, out *[8]float32) {
	if n < 0 || lda < n || ldb < n || len(a) < lda+n || len(b) < 3*ldb+n {
		panic("halfdot: Dot4x2: a shorter than two rows of lda values or b than four of ldb")
	}
	dot4x2(a, lda, b, ldb, n, out)
}

// Dot4x2Generic is Dot4x2 in pure Go: Dot4Generic for each row of a.
func Dot4x2Generic(a []uint16, lda int, b []float32, ldb, n int, out *[8]float32) {
	for r := range 2 {
		Dot4Generic(a[r*lda:r*lda+n], b, ldb, (*[4]float32)(out[4*r:4*r+4]))
	}
}
