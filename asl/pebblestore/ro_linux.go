//go:build linux

package pebblestore

import (
	"os"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// openOSReadOnly opens name for reading the way vfs.Default does, minus
// the probe vfs.Default makes on every file it opens (a sync_file_range
// call with no range and no flags, to learn whether the file system has
// it): a read-only open makes no sync call of any kind, and one system
// call fewer per file.
func openOSReadOnly(fs vfs.FS, name string, opts []vfs.OpenOption) (vfs.File, bool, error) {
	if fs != vfs.Default {
		return nil, false, nil
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, err
	}
	file := &osReadFile{File: f, fd: f.Fd()}
	for _, o := range opts {
		o.Apply(file)
	}
	return file, true, nil
}

// osReadFile is a file opened by openOSReadOnly; roFile refuses its
// writes.
type osReadFile struct {
	*os.File
	fd uintptr
}

func (f *osReadFile) Fd() uintptr { return f.fd }

func (f *osReadFile) Prefetch(offset, length int64) error {
	_, _, err := unix.Syscall(unix.SYS_READAHEAD, f.fd, uintptr(offset), uintptr(length))
	if err != 0 {
		return err
	}
	return nil
}

func (f *osReadFile) Preallocate(int64, int64) error { return syscall.EBADF }
func (f *osReadFile) SyncData() error                { return syscall.EBADF }
func (f *osReadFile) SyncTo(int64) (bool, error)     { return false, syscall.EBADF }

// Stat gives the file's vfs.FileInfo (with its device) as vfs.Default
// would.
func (f *osReadFile) Stat() (vfs.FileInfo, error) { return vfs.Default.Stat(f.Name()) }
