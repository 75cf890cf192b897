//go:build !amd64 || !gc || purego

package rgbx

// best and simdImpl are the kernel sets (see Impl): this build has only
// the Go twins.
var (
	best     = "go"
	simdImpl = "go"
)

// hasAVX2 is false: this build has no assembly kernels.
const hasAVX2 = false

// The functions run their Go twins.

func QuadRGB(q []byte, rows [4][]byte)       { QuadRGBGeneric(q, rows) }
func QuadRGBA(q []byte, rows [4][]byte) byte { return QuadRGBAGeneric(q, rows) }
func Hconv(dst []byte, ws int, q []byte, taps []int32, k []int32, ksize int) {
	HconvGeneric(dst, ws, q, taps, k, ksize)
}
func Vconv(dst, src []byte, ws int, k []int32)                { VconvGeneric(dst, src, ws, k) }
func Lut(r, g, b []float32, src []byte, lut *[3][256]float32) { LutGeneric(r, g, b, src, lut) }
func QuadYCC(q, yT, yB, pc []byte, m, xs, n int)              { QuadYCCGeneric(q, yT, yB, pc, m, xs, n) }
