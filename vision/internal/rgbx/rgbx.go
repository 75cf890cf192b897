// Package rgbx holds the SIMD kernels of vision's resampler and their
// pure-Go twins, which are the reference loops the assembly must match
// byte for byte. The layouts:
//
//   - quad rows: four source rows interleaved column by column, 16 bytes a
//     column (row r's R, G, B, 0 at bytes 4r..4r+3);
//   - RGBX rows: 4 bytes a pixel (R, G, B and an unspecified byte), rows
//     padded to a multiple of Align bytes.
//
// The sums are Pillow's (Resample.c, 8 bits a channel): 32-bit products
// of 8-bit values and fixed-point weights of 22 fractional bits, added to
// the rounding half, shifted right and clipped to 0..255.
//
// The kernels run on amd64 without the purego tag: AVX-512F or AVX2, as
// Impl says; elsewhere every function runs its Go twin.
package rgbx

// Align is the padding of RGBX rows: Vconv takes rows of a multiple of it.
const Align = 64

// precision is Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2.
const precision = 22

// Impl names the kernel set the functions run: "avx512", "avx2", or "go"
// (the Go twins).
func Impl() string { return simdImpl }

// SetImpl makes the functions run the named kernel set (one of Impls) and
// returns the previous one (tests).
func SetImpl(name string) (prev string) {
	prev = simdImpl
	for _, n := range Impls() {
		if n == name {
			simdImpl = name
			return prev
		}
	}
	panic("rgbx: kernel set " + name + " not available")
}

// Impls are the kernel sets this CPU and build can run, "go" first.
func Impls() []string {
	out := []string{"go"}
	if best != "go" {
		out = append(out, best)
		if best == "avx512" && hasAVX2 {
			out = append(out, "avx2") // the AVX2 kernels run where AVX-512 does
		}
	}
	return out
}

// SetTrace makes the functions call f with the name of each assembly
// kernel they run (nil: none; tests check the dispatch with it). Not
// safe to call while kernels run.
func SetTrace(f func(name string)) { kernelTrace = f }

// kernelTrace is SetTrace's function.
var kernelTrace func(name string)

func trace(name string) {
	if kernelTrace != nil {
		kernelTrace(name)
	}
}

// clip8 is Pillow's clip8 on a sum with the rounding half added.
func clip8(ss int32) uint8 {
	v := ss >> precision
	if uint32(v) <= 255 {
		return uint8(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// libjpeg's YCC→RGB tables (jdcolor.c, SCALEBITS 16):
// R = Y + crR[Cr], G = Y + (cbG[Cb] + crG[Cr]) >> 16, B = Y + cbB[Cb].
var crR, cbB, crG, cbG [256]int32

func init() {
	const half = 1 << 15
	fix := func(x float64) int32 { return int32(x*(1<<16) + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix(1.40200)*x + half) >> 16
		cbB[i] = (fix(1.77200)*x + half) >> 16
		crG[i] = -fix(0.71414) * x
		cbG[i] = -fix(0.34414)*x + half
	}
}

func clamp8(v int32) uint8 {
	if uint32(v) <= 255 {
		return uint8(v)
	}
	if v < 0 {
		return 0
	}
	return 255
}

// yccRGB is libjpeg's fixed-point YCC→RGB of one sample.
func yccRGB(y, cb, cr int32) (r, g, b uint8) {
	return clamp8(y + crR[cr]), clamp8(y + (cbG[cb]+crG[cr])>>16), clamp8(y + cbB[cb])
}
