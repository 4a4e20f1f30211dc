package wasmop

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// maxPooledMemory bounds the linear memories kept for reuse; a memory whose
// effective maximum is above it is mapped from the system instead (when
// the system allows, mappedMemory).
const maxPooledMemory = 64 << 20

// memoryPool reuses the byte buffers of linear memories between calls: a
// fresh instance per call would otherwise allocate (and the garbage
// collector free) its whole memory every time, about half the cost of a
// trivial call. A reused buffer is zeroed exactly where the memory grows
// into it, so every call still starts from zeroed memory.
var memoryPool = sync.Pool{}

// allocator returns the memory allocator of one call: every growth of the
// memory is first reserved in the engine's memory budget (SPECS.md §20.8),
// which st.memHeld has already reserved the minimum of.
func allocator(st *callState) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		if maxBytes > maxPooledMemory && mmapSupported {
			return &mappedMemory{st: st, max: maxBytes}
		}
		m := &pooledMemory{st: st, max: maxBytes}
		if b, ok := memoryPool.Get().(*[]byte); ok {
			m.buf = (*b)[:0]
		}
		return m
	})
}

// reserveMemory reserves the memory's growth to size bytes in the budget
// (a failure ends the call operationally).
func (s *callState) reserveMemory(size uint64) {
	if size > s.memHeld {
		s.hold(size-s.memHeld, "memory.grow")
		s.memHeld = size
	}
}

type pooledMemory struct {
	st  *callState
	buf []byte
	max uint64
}

// Reallocate returns the memory with size bytes: the old contents, then
// zeros. It never returns nil (which would make memory.grow return -1 for
// a reason of this machine): a growth the budget refuses ends the call
// operationally.
func (m *pooledMemory) Reallocate(size uint64) []byte {
	m.st.reserveMemory(size)
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

// mappedMemory is a large linear memory: the address range of its whole
// effective maximum is mapped from the system at its first allocation,
// without reserving pages, so only the pages the module touches take
// memory, a growth never copies, and Free gives every page back at once.
type mappedMemory struct {
	st     *callState
	max    uint64
	region []byte
}

func (m *mappedMemory) Reallocate(size uint64) []byte {
	m.st.reserveMemory(size)
	if m.region == nil {
		r, err := mmapZeroed(m.max)
		if err != nil {
			m.st.operational("mapping a linear memory of %d bytes: %v", m.max, err)
		}
		m.region = r
	}
	return m.region[:size]
}

func (m *mappedMemory) Free() {
	if m.region != nil {
		munmap(m.region)
		m.region = nil
	}
}
