//go:build !amd64 || !gc || purego

package vision

// simdImpl is the kernel set ApplyInto resizes with: this build has only
// resample's pure-Go passes.
var simdImpl = "go"

// hasAVX2 is false: this build has no assembly kernels.
const hasAVX2 = false

func quadRGB(q []byte, rows [4][]byte)       { quadRGBGo(q, rows) }
func quadRGBA(q []byte, rows [4][]byte) byte { return quadRGBAGo(q, rows) }
func hconv(dst []byte, ws int, q []byte, taps []int32, k []int32, ksize int) {
	hconvGo(dst, ws, q, taps, k, ksize)
}
func vconv(dst, src []byte, ws int, k []int32)                    { vconvGo(dst, src, ws, k) }
func lutRGBX(r, g, b []float32, src []byte, lut *[3][256]float32) { lutRGBXGo(r, g, b, src, lut) }
func quadYCC(q, yT, yB, pc []byte, m, xs, n int)                  { quadYCCGo(q, yT, yB, pc, m, xs, n) }

// kernelTrace is never called: this build has no assembly kernels.
var kernelTrace func(name string)
