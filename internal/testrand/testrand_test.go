package testrand

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestFillMatchesTheLoop: Fill gives the bytes of the obvious loop over
// rand.New(p).Uint32, for sizes around its buffer, and leaves p in the
// same state (the next draws agree).
func TestFillMatchesTheLoop(t *testing.T) {
	for _, n := range []int{0, 1, 7, 4095, 4096, 4097, 3*4096 + 5} {
		for _, seed := range []uint64{1, 2026} {
			want := make([]byte, n)
			wp := rand.NewPCG(seed, 13)
			wr := rand.New(wp)
			wr.IntN(10) // a draw before, as callers interleave them
			for i := range want {
				want[i] = byte(wr.Uint32())
			}
			gp := rand.NewPCG(seed, 13)
			gr := rand.New(gp)
			gr.IntN(10)
			got := make([]byte, n)
			Fill(gp, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("n=%d seed=%d: bytes differ", n, seed)
			}
			if a, b := gr.Uint64(), wr.Uint64(); a != b {
				t.Fatalf("n=%d seed=%d: next draw %d, want %d", n, seed, a, b)
			}
		}
	}
}
