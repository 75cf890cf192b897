//go:build linux

package vision

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU runs fn with the goroutine locked to its thread and returns
// the CPU time that thread spent: on a shared machine this moves far less
// with the load than wall time does. ok is false where it cannot be read.
func threadCPU(fn func()) (d time.Duration, ok bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var a, b unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &a) != nil {
		fn()
		return 0, false
	}
	fn()
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &b) != nil {
		return 0, false
	}
	return time.Duration(b.Nano() - a.Nano()), true
}
