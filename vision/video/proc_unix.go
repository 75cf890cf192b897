//go:build unix

package video

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own, killed whole when its
// context is cancelled, so that no FFmpeg process outlives a decode.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
