//go:build !unix

package fxutil

import "os/exec"

// NewProcessGroup does nothing where process groups do not exist.
func NewProcessGroup(cmd *exec.Cmd) {}

// KillGroup kills the process itself where process groups do not exist.
func KillGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}

// NoFollow is zero where the flag does not exist; callers Lstat first.
const NoFollow = 0
