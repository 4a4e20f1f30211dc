//go:build unix

package filelock

import (
	"os"
	"syscall"
)

// Lock takes an exclusive lock on the file name (created if needed),
// waiting for it, and returns its release. flock locks belong to an open
// file, so two callers in one process exclude each other too.
func Lock(name string) (func(), error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return func() { f.Close() }, nil // closing the file releases the lock
}
