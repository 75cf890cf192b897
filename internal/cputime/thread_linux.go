//go:build linux

package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Thread returns the CPU time the calling thread has used so far; the
// caller keeps its goroutine on one thread (runtime.LockOSThread) between
// two readings. false where it cannot be read.
func Thread() (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
