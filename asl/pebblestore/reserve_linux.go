//go:build linux

package pebblestore

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// allocateFile gives the file fd size bytes of disk blocks with fallocate
// (mode 0: the file's size becomes size, so a stat tells the reserve is
// whole). done is false when the file system cannot fallocate.
func allocateFile(fd uintptr, size int64) (done bool, err error) {
	if fd == vfs.InvalidFd {
		return false, nil
	}
	err = unix.Fallocate(int(fd), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return false, nil
	}
	return err == nil, err
}
