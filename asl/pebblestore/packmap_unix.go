//go:build unix

package pebblestore

import "golang.org/x/sys/unix"

// mapPack maps length bytes of the pack file fd read-only and shared, or
// returns nil when the mapping fails (reads then use the file).
func mapPack(fd uintptr, length int64) []byte {
	if int64(int(length)) != length {
		return nil
	}
	b, err := unix.Mmap(int(fd), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return b
}

func unmapPack(b []byte) { _ = unix.Munmap(b) }
