package miniotest

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startCmd starts cmd so that the kernel kills it when the process that
// started it ends (a test binary that dies of a panic or of go test's
// timeout leaves no server behind). Pdeathsig fires when the starting
// thread ends, so the start runs on a thread locked for the life of the
// process.
func startCmd(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errc := make(chan error)
	starter <- func() { errc <- cmd.Start() }
	return <-errc
}

var starter = make(chan func())

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for f := range starter {
			f()
		}
	}()
}
