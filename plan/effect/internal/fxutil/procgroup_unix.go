//go:build unix

package fxutil

import (
	"os/exec"
	"syscall"
)

// NewProcessGroup makes cmd start in a process group of its own, so that
// KillGroup reaches every process it starts.
func NewProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// KillGroup sends SIGKILL to the process group of a started cmd.
func KillGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// NoFollow is the open flag that refuses a symbolic link as the last
// element of a path.
const NoFollow = syscall.O_NOFOLLOW
