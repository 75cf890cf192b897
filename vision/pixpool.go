package vision

import (
	"image"
	"math/bits"
	"sync"
)

// Pixel buffers of decoded images, kept for reuse by later decodes (see
// Release). Class k holds buffers of a capacity of at least 1<<k bytes;
// buffers under 1<<minPoolBits bytes are not worth keeping, and over
// 1<<maxPoolBits (a 16k × 16k RGBA image) are left to the collector.
const (
	minPoolBits = 16
	maxPoolBits = 30
)

var pixPools [maxPoolBits + 1]sync.Pool

// pixBuffer returns a buffer of n bytes whose contents are undefined: one
// released before when a large enough one is free, else a new one with room
// for the next power of two, so that it serves images of other sizes later.
func pixBuffer(n int) []byte {
	k := bits.Len(uint(n - 1)) // 1<<k >= n
	if n < 1<<minPoolBits || k > maxPoolBits {
		return make([]byte, n)
	}
	if b, ok := pixPools[k].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<k)
}

// Release hands the pixel buffer of img, an image Decode returned, to later
// decodes to reuse: img (and any image sharing its pixels) must not be used
// afterwards. Releasing is optional: an image never released is collected
// as any other. A job that decodes many images saves, per image, allocating
// and zeroing its pixels (3 MB for a 1024×768 photo decoded to RGBA) and
// the collector's work on them. Only *image.RGBA, *image.Gray and
// *image.CMYK, the types libjpeg-turbo decodes to, and *image.YCbCr, the
// planes of baseline and progressive JPEGs decoded in Go, are kept, and
// only buffers of a power-of-two capacity, as the pool makes them (not
// those of Go's decoders); others are left alone. Of a YCbCr image the memory kept is
// its Y plane's to the end of its capacity: all three planes, which Decode
// makes from one buffer.
func Release(img image.Image) {
	var pix []byte
	switch m := img.(type) {
	case *image.RGBA:
		pix = m.Pix
	case *image.Gray:
		pix = m.Pix
	case *image.CMYK:
		pix = m.Pix
	case *image.YCbCr:
		pix = m.Y[:cap(m.Y)]
	default:
		return
	}
	if c := cap(pix); c&(c-1) != 0 {
		return // not from pixBuffer
	}
	k := bits.Len(uint(cap(pix))) - 1 // 1<<k <= cap
	if k < minPoolBits || k > maxPoolBits {
		return
	}
	pix = pix[:0]
	pixPools[k].Put(&pix)
}

// newDecoded makes the image a JPEG of comps components decodes into, of
// bounds r, with pixels from pixBuffer: *image.Gray for 1, *image.RGBA for
// 3, *image.CMYK for 4; rows are stride bytes, with no gap.
func newDecoded(comps int, r image.Rectangle) (img image.Image, pix []byte, stride int) {
	bpp := 4
	if comps == 1 {
		bpp = 1
	}
	stride = bpp * r.Dx()
	pix = pixBuffer(stride * r.Dy())
	switch comps {
	case 1:
		return &image.Gray{Pix: pix, Stride: stride, Rect: r}, pix, stride
	case 3:
		return &image.RGBA{Pix: pix, Stride: stride, Rect: r}, pix, stride
	}
	return &image.CMYK{Pix: pix, Stride: stride, Rect: r}, pix, stride
}
