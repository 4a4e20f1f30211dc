//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package wasmop

import "errors"

// mmapSupported: every linear memory is allocated on the Go heap.
const mmapSupported = false

func mmapZeroed(uint64) ([]byte, error) { return nil, errors.New("not supported") }

func munmap([]byte) {}
