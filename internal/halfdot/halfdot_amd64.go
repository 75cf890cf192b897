//go:build amd64 && gc && !purego

package halfdot

import "golang.org/x/sys/cpu"

// impl is the kernel dot runs, chosen once from the CPU's features (tests
// switch it).
var impl = pick()

func pick() string {
	switch {
	case cpu.X86.HasAVX512F:
		return "avx512"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C:
		return "avx2"
	}
	return "go"
}

// dot runs impl's kernel over the whole blocks of a (16 values for
// AVX-512, 8 for AVX2) and adds the rest in Go. len(a) > 0, len(b) = len(a).
func dot(a []uint16, b []float32) float32 {
	var n int
	var s float32
	switch impl {
	case "avx512":
		if n = len(a) &^ 15; n > 0 {
			s = dotAVX512(&a[0], &b[0], n)
		}
	case "avx2":
		if n = len(a) &^ 7; n > 0 {
			s = dotAVX2(&a[0], &b[0], n)
		}
	default:
		return DotGeneric(a, b)
	}
	for i := n; i < len(a); i++ {
		s += ToFloat32(a[i]) * b[i]
	}
	return s
}

// dot4 runs impl's four-row kernel over the whole blocks of a (16 values,
// AVX-512; AVX2 runs dot for each row) and adds the rest in Go.
func dot4(a []uint16, b []float32, ldb int, out *[4]float32) {
	n := len(a) &^ 15
	if impl != "avx512" || n == 0 {
		if impl == "go" {
			Dot4Generic(a, b, ldb, out)
			return
		}
		for k := range 4 {
			out[k] = Dot(a, b[k*ldb:k*ldb+len(a)])
		}
		return
	}
	dot4AVX512(&a[0], &b[0], ldb, n, out)
	for i := n; i < len(a); i++ {
		v := ToFloat32(a[i])
		for k := range 4 {
			out[k] += v * b[k*ldb+i]
		}
	}
}

// dot4AVX512 sets out[k] = Σ_{i<n} a[i]·b[k·ldb+i] for k < 4, n a
// multiple of 16: each VCVTPH2PS of a feeds four FMAs, eight accumulators.
//
//go:noescape
func dot4AVX512(a *uint16, b *float32, ldb, n int, out *[4]float32)

// dot4x2 runs impl's two-by-four kernel over the whole blocks of the rows
// (16 values, AVX-512; otherwise dot4 for each row of a) and adds the rest
// in Go.
func dot4x2(a []uint16, lda int, b []float32, ldb, n int, out *[8]float32) {
	m := n &^ 15
	if impl != "avx512" || m == 0 {
		for r := range 2 {
			dot4(a[r*lda:r*lda+n], b, ldb, (*[4]float32)(out[4*r:4*r+4]))
		}
		return
	}
	dot4x2AVX512(&a[0], lda, &b[0], ldb, m, out)
	for r := range 2 {
		for i := m; i < n; i++ {
			v := ToFloat32(a[r*lda+i])
			for k := range 4 {
				out[4*r+k] += v * b[k*ldb+i]
			}
		}
	}
}

// dot4x2AVX512 sets out[4r+k] = Σ_{i<n} a[r·lda+i]·b[k·ldb+i], n a
// multiple of 16: each load of b feeds two FMAs, eight accumulators.
//
//go:noescape
func dot4x2AVX512(a *uint16, lda int, b *float32, ldb, n int, out *[8]float32)

// dotAVX512 returns Σ_{i<n} a[i]·b[i], n a multiple of 16: VCVTPH2PS and
// FMA over zmm registers, four accumulators.
//
//go:noescape
func dotAVX512(a *uint16, b *float32, n int) float32

// dotAVX2 returns Σ_{i<n} a[i]·b[i], n a multiple of 8: F16C's VCVTPH2PS
// and FMA over ymm registers, four accumulators.
//
//go:noescape
func dotAVX2(a *uint16, b *float32, n int) float32

// hasAVX2 says the AVX2 kernel can run (tests run it beside AVX-512).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// available lists the kernels this CPU can run, fastest first.
func available() []string {
	out := []string{}
	if cpu.X86.HasAVX512F {
		out = append(out, "avx512")
	}
	if hasAVX2 {
		out = append(out, "avx2")
	}
	return append(out, "go")
}
