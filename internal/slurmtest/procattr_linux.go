package slurmtest

import "syscall"

// daemonAttr has a daemon killed when the test process dies without its
// cleanup (a test binary's timeout).
func daemonAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
