//go:build !cgo

package vision

import "image"

// jpegExact reports whether all of Decode's JPEG pixels are Pillow's bit
// for bit: not without cgo. Baseline and progressive files are, through
// jpegdec (see decodeGoJPEG); CMYK and other files go to Go's
// image/jpeg, whose IDCT differs from libjpeg-turbo's (within a few 8-bit
// levels).
func jpegExact() bool { return false }

// JPEGDecoder names the JPEG decoder this build of Decode uses, for job
// metadata: without cgo, Go code ("Go (libjpeg-exact baseline and
// progressive; image/jpeg for CMYK and others)"): this package's decoder
// for baseline and progressive files, with libjpeg-turbo's arithmetic,
// and Go's image/jpeg for the rest. Built with cgo, Decode uses
// libjpeg-turbo, as Pillow does, where it is installed.
func JPEGDecoder() string { return goJPEGName }

// CanDraft reports whether Decode honours DecodeOptions.Draft: not in this
// build, as image/jpeg has no scaled decoding; JPEGs decode at full size.
func CanDraft() bool { return false }

// decodeLibjpeg leaves every JPEG to image/jpeg in this build.
func decodeLibjpeg(data []byte, limit int64, draft int) (image.Image, error) { return nil, nil }
