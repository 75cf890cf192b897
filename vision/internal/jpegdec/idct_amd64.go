//go:build amd64 && gc && !purego

package jpegdec

import "golang.org/x/sys/cpu"

// useAVX2 says idctBlock runs idctAVX2; tests turn it off to run the Go
// twin.
var useAVX2 = cpu.X86.HasAVX2

// hasAVX2 says the CPU can run idctAVX2.
var hasAVX2 = cpu.X86.HasAVX2

// idctAVX2 is idctGeneric in AVX2, both passes eight columns or rows at once,
// for any last: dst holds 7·stride+8 bytes.
//
//go:noescape
func idctAVX2(blk *[64]int32, dst *byte, stride int)

// idctBlock is idct, in AVX2 where the CPU has it.
func idctBlock(blk *[64]int32, last int, dst []byte, stride int) {
	if last == 0 || !useAVX2 {
		idct(blk, last, dst, stride)
		return
	}
	dst = dst[:7*stride+8]
	idctAVX2(blk, &dst[0], stride)
}
