//go:build !linux

package pebblestore

import "github.com/cockroachdb/pebble/v2/vfs"

// openOSReadOnly leaves opening to the file system (see ro_linux.go).
func openOSReadOnly(vfs.FS, string, []vfs.OpenOption) (vfs.File, bool, error) {
	return nil, false, nil
}
