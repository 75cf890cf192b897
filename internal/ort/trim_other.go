//go:build !linux && !darwin

package ort

// ReleaseFreed does nothing on this system (see the Linux version).
func ReleaseFreed() bool { return false }
