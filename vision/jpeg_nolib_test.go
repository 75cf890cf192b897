//go:build !cgo || libjpeg

package vision

// withoutLibjpeg does nothing in this build: without cgo there is no
// libjpeg, and linked in it cannot be turned off.
func withoutLibjpeg() (restore func()) { return func() {} }

// canForceGo reports whether withoutLibjpeg works in this build: with
// libjpeg linked in, not.
func canForceGo() bool { return !jpegExact() }
