package wasmop

import "testing"

// TestLinearMemoryMoves: a memory growing beyond maxPooledMemory moves into
// a mapped range with its contents, zeros after them, and later growths
// keep both.
func TestLinearMemoryMoves(t *testing.T) {
	if !mmapSupported {
		t.Skip("no mapped memories here")
	}
	st := &callState{}
	m := allocator(st).Allocate(0, 4*maxPooledMemory).(*linearMemory)
	defer m.Free()
	b := m.Reallocate(65536)
	b[0], b[65535] = 1, 2
	b = m.Reallocate(2 * maxPooledMemory)
	if m.region == nil || m.buf != nil {
		t.Fatalf("a memory of %d bytes is not mapped", len(b))
	}
	if b[0] != 1 || b[65535] != 2 || b[65536] != 0 || b[len(b)-1] != 0 {
		t.Fatalf("contents after the move: %d %d %d %d", b[0], b[65535], b[65536], b[len(b)-1])
	}
	b[len(b)-1] = 3
	b = m.Reallocate(3 * maxPooledMemory)
	if b[0] != 1 || b[2*maxPooledMemory-1] != 3 || b[len(b)-1] != 0 {
		t.Fatal("contents after a mapped growth")
	}
	if st.memHeld != 3*maxPooledMemory {
		t.Fatalf("reserved %d bytes for a memory of %d", st.memHeld, len(b))
	}
}
