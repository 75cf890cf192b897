//go:build !linux

package slurmtest

import "syscall"

// daemonAttr is nil: Start skips outside Linux.
func daemonAttr() *syscall.SysProcAttr { return nil }
