//go:build !unix

package video

import "os/exec"

// ownGroup leaves cmd as it is: its context kills the process itself.
func ownGroup(cmd *exec.Cmd) {}
