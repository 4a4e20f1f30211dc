//go:build !linux

package miniotest

import "os/exec"

// startCmd starts cmd; elsewhere than on Linux a server outlives a test
// binary that dies.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
