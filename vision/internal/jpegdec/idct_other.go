//go:build !amd64 || !gc || purego

package jpegdec

// hasAVX2 is false: this build has no assembly.
const hasAVX2 = false

// idctBlock is idct: this build has no assembly.
func idctBlock(blk *[64]int32, last int, dst []byte, stride int) { idct(blk, last, dst, stride) }
