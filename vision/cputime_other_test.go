//go:build !linux

package vision

import "time"

// threadCPU runs fn; thread CPU time is read on Linux only.
func threadCPU(fn func()) (time.Duration, bool) {
	fn()
	return 0, false
}
