//go:build !cgo

package vision

import "image"

// jpegExact reports whether Decode's JPEG pixels are Pillow's bit for bit:
// not without cgo, where Go's image/jpeg decodes them; its IDCT differs
// from libjpeg-turbo's (within a few 8-bit levels).
func jpegExact() bool { return false }

// JPEGDecoder names the JPEG decoder this build of Decode uses, for job
// metadata: without cgo, Go's image/jpeg ("Go image/jpeg"). Built with cgo,
// Decode uses libjpeg-turbo, as Pillow does, where it is installed.
func JPEGDecoder() string { return "Go image/jpeg" }

// CanDraft reports whether Decode honours DecodeOptions.Draft: not in this
// build, as image/jpeg has no scaled decoding; JPEGs decode at full size.
func CanDraft() bool { return false }

// decodeLibjpeg leaves every JPEG to image/jpeg in this build.
func decodeLibjpeg(data []byte, limit int64, draft int) (image.Image, error) { return nil, nil }
