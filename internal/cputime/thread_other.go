//go:build !linux

package cputime

import "time"

// Thread reports that a thread's CPU time cannot be read here.
func Thread() (time.Duration, bool) { return 0, false }
