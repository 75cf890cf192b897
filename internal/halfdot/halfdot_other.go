//go:build !amd64 || !gc || purego

package halfdot

// impl is the kernel dot runs: this build has only Go.
var impl = "go"

func dot(a []uint16, b []float32) float32 { return DotGeneric(a, b) }

// hasAVX2 is false: this build has no assembly kernels.
const hasAVX2 = false

func dot4(a []uint16, b []float32, ldb int, out *[4]float32) { Dot4Generic(a, b, ldb, out) }

func dot4x2(a []uint16, lda int, b []float32, ldb, n int, out *[8]float32) {
	Dot4x2Generic(a, lda, b, ldb, n, out)
}

// available lists the kernels this build can run: Go's.
func available() []string { return []string{"go"} }
