//go:build !linux

package pipeline

import "time"

// threadCPU reports that a thread's CPU time cannot be read here.
func threadCPU() (time.Duration, bool) { return 0, false }
