//go:build linux || darwin || freebsd || netbsd || openbsd

package wasmop

import "syscall"

// mmapSupported: large linear memories are mapped (mappedMemory).
const mmapSupported = true

// mmapZeroed maps n bytes of private, zeroed memory without reserving
// swap for them: pages take memory when first written.
func mmapZeroed(n uint64) ([]byte, error) {
	return syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
}

func munmap(b []byte) { syscall.Munmap(b) }
