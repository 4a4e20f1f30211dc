package wasmop

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// maxPooledMemory bounds the linear memories kept for reuse; a memory
// growing beyond it is mapped from the system instead (when the system
// allows, linearMemory).
const maxPooledMemory = 64 << 20

// memoryPool reuses the byte buffers of linear memories between
// instances: a new instance would otherwise allocate (and the garbage
// collector free) its whole memory every time, about half the cost of a
// trivial call. A reused buffer is zeroed exactly where the memory grows
// into it, so every new instance still starts from zeroed memory (an
// instance kept for reuse is reset by its snapshot instead, snapshot.go).
var memoryPool = sync.Pool{}

// allocator returns the memory allocator of one call: every growth of the
// memory is first reserved in the engine's memory budget (SPECS.md §20.8),
// which st.memHeld has already reserved the minimum of.
func allocator(st *callState) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		m := &linearMemory{st: st, max: maxBytes}
		if b, ok := memoryPool.Get().(*[]byte); ok {
			m.buf = (*b)[:0]
		}
		st.mem = m
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

// linearMemory is one call's linear memory. Up to maxPooledMemory it is a
// buffer of the pool; a memory growing beyond that is moved, once, into an
// address range of its whole effective maximum mapped from the system
// without reserving pages (where the system allows): only the pages the
// module touches then take memory, later growths never copy, and Free
// gives every page back at once.
type linearMemory struct {
	st     *callState // the call using the memory (an instance reused from a snapshot changes it, snapshot.go)
	max    uint64
	buf    []byte // pooled buffer, while region is nil
	region []byte // mapped range
}

// Reallocate returns the memory with size bytes: the old contents, then
// zeros. It never returns nil (which would make memory.grow return -1 for
// a reason of this machine): a growth the budget refuses, or a mapping the
// system refuses, ends the call operationally.
func (m *linearMemory) Reallocate(size uint64) []byte {
	m.st.reserveMemory(size)
	if m.region != nil {
		return m.region[:size]
	}
	if size > maxPooledMemory && mmapSupported {
		r, err := mmapZeroed(m.max)
		if err != nil {
			m.st.operational("mapping a linear memory of %d bytes: %v", m.max, err)
		}
		copy(r, m.buf)
		m.freeBuf()
		m.region = r
		return r[:size]
	}
	old := len(m.buf)
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		clear(m.buf[old:])
		return m.buf
	}
	limit := m.max
	if mmapSupported {
		limit = min(limit, maxPooledMemory)
	}
	newCap := max(size, min(2*uint64(cap(m.buf)), limit))
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

// Free returns the buffer to the pool (when not too large), or the mapped
// range to the system.
func (m *linearMemory) Free() {
	if m.region != nil {
		munmap(m.region)
		m.region = nil
	}
	m.freeBuf()
}

func (m *linearMemory) freeBuf() {
	if b := m.buf[:0]; cap(b) > 0 && cap(b) <= maxPooledMemory {
		memoryPool.Put(&b)
	}
	m.buf = nil
}
