// Package testrand fills test inputs with pseudo-random bytes quickly
// under the race detector, byte for byte as the obvious loop would.
//
// Tests draw their inputs from a seeded math/rand/v2 PCG so that they are
// the same on every run (golden files name their references). The obvious
// loop, b[i] = byte(r.Uint32()), costs about 90 ns a byte under -race: the
// detector checks every step of the generator's state and every byte
// written. Fill makes the same steps on a copy of the state held on the
// stack and writes through a stack buffer, a check per 4 KiB.
package testrand

import "math/rand/v2"

// Fill fills b with the bytes byte(rand.New(p).Uint32()) would give, one
// step of p per byte, in order, and leaves p where that loop would: a
// caller may interleave Fill with other draws from rand.New(p).
func Fill(p *rand.PCG, b []byte) {
	s := *p // steps of a stack copy are not checked by the race detector
	var buf [4096]byte
	for off := 0; off < len(b); off += len(buf) {
		m := min(len(buf), len(b)-off)
		for i := range m {
			buf[i] = byte(s.Uint64() >> 32) // rand.Rand.Uint32 is the high half
		}
		copy(b[off:], buf[:m])
	}
	*p = s
}
