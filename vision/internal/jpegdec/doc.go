// Package jpegdec decodes baseline and progressive JPEGs (SOF0, and SOF1
// and SOF2 at 8 bits of precision, Huffman-coded, gray or Y'CbCr) to the
// very planes libjpeg-turbo produces before its colour conversion, in pure
// Go.
//
// vision decodes JPEGs as Pillow does, which runs libjpeg-turbo with its
// accurate integer IDCT (JDCT_ISLOW). Where libjpeg-turbo is not at hand
// (a build without cgo, or a machine without the library) Go's image/jpeg
// would decode them, and its IDCT is not libjpeg's: its pixels land a few
// 8-bit levels away from Pillow's. The exact result must not need cgo, so
// this package computes libjpeg's: the Loeffler–Ligtenberg–Moschytz integer
// IDCT with 13 fractional bits for the constants and 2 extra bits between
// the column and row passes, coefficients dequantized as coefficient times
// table entry, and each output sample clamped to 0..255 after adding 128,
// as libjpeg-turbo's SIMD IDCT (the one Pillow's builds run) does. That
// IDCT computes in 16-bit lanes: on coefficients no 8-bit image has (a
// dequantized value, or a first pass's output, beyond 16 bits: corrupt
// data, mostly) it wraps or saturates where this package's 32-bit
// arithmetic does not, and the two may then differ.
// Upsampling and Y'CbCr→RGB are left to the caller (vision/rgb.go does
// them as libjpeg-turbo does).
//
// The planes are image/jpeg's types and layout: *image.Gray for one
// component, *image.YCbCr (4:4:4, 4:4:0, 4:2:2, 4:2:0, 4:1:1 or 4:1:0)
// for three, each plane padded to whole MCUs, so that callers handle
// either decoder's output alike. Their memory comes from Options.Alloc.
//
// A progressive file's coefficients are kept for the whole image, 2 bytes
// each, through all its scans (spectral selection and successive
// approximation, T.81 annex G), then dequantized with each component's
// quantization table as it was at the component's first scan, as libjpeg
// latches it, and transformed as a baseline file's are.
//
// Everything else (lossless files, arithmetic coding, 12-bit samples,
// CMYK, YCCK, RGB, sampling factors image/jpeg refuses, heights defined by
// a DNL marker) is ErrUnsupported, for the caller to hand to another
// decoder; so are progressive files whose first AC coefficients are not
// all coded to their last bit, which libjpeg's block smoothing estimates,
// and restart intervals in one-component scans of a component with
// several blocks an MCU, which image/jpeg counts differently. The decoder
// is strict: a file it decodes is one image/jpeg decodes too, at the same
// size; anything corrupt (bad Huffman codes, more than 64 coefficients in
// a block, restart markers out of order, data ending before EOI, EOB runs
// past the end of a scan, progressive scans whose bands or successive
// approximation contradict the scans before) is an error rather than
// something to recover from as libjpeg would.
package jpegdec
