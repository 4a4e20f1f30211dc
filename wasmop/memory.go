package wasmop

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// maxPooledMemory bounds the linear memories kept for reuse.
const maxPooledMemory = 64 << 20

// memoryPool reuses the byte buffers of linear memories between calls: a
// fresh instance per call would otherwise allocate (and the garbage
// collector free) its whole memory every time, about half the cost of a
// trivial call. A reused buffer is zeroed exactly where the memory grows
// into it, so every call still starts from zeroed memory.
var memoryPool = sync.Pool{}

var memoryAllocator = experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
	m := &pooledMemory{max: maxBytes}
	if b, ok := memoryPool.Get().(*[]byte); ok {
		m.buf = (*b)[:0]
	}
	return m
})

type pooledMemory struct {
	buf []byte
	max uint64
}

// Reallocate returns the memory with size bytes: the old contents, then
// zeros. It never fails (a nil result would make memory.grow return -1 for
// a reason of this machine).
func (m *pooledMemory) Reallocate(size uint64) []byte {
	old := len(m.buf)
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		clear(m.buf[old:])
		return m.buf
	}
	newCap := max(size, min(2*uint64(cap(m.buf)), m.max))
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

// Free returns the buffer to the pool (when not too large).
func (m *pooledMemory) Free() {
	if b := m.buf[:0]; cap(b) > 0 && cap(b) <= maxPooledMemory {
		memoryPool.Put(&b)
	}
	m.buf = nil
}
