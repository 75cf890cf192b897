//go:build !libjpeg || !cgo

package vision

import "image"

// jpegExact reports whether Decode's JPEG pixels are Pillow's bit for bit:
// not with Go's image/jpeg, whose IDCT differs from libjpeg-turbo's (within
// a few 8-bit levels). Build with -tags libjpeg for the exact decoder.
const jpegExact = false

// JPEGDecoder names the JPEG decoder this build of Decode uses, for job
// metadata: here Go's image/jpeg ("Go image/jpeg"). Built with the tag
// libjpeg (and cgo), Decode uses libjpeg-turbo, as Pillow does.
func JPEGDecoder() string { return "Go image/jpeg" }

// CanDraft reports whether Decode honours DecodeOptions.Draft: not in this
// build, as image/jpeg has no scaled decoding; JPEGs decode at full size.
const CanDraft = false

// decodeLibjpeg leaves every JPEG to image/jpeg in this build.
func decodeLibjpeg(data []byte, limit int64, draft int) (image.Image, error) { return nil, nil }
