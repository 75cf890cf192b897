//go:build unix

package text

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used (user and system), so
// that benchmarks on a shared machine can also report work per CPU-second.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
