package server

import (
	"context"
	"sync"
)

// writeGate bounds the batch-put bodies the server holds in memory at once
// (Limits.WriteBuffer, SPECS.md §18.4): a batch put takes a weight of
// min(its body's bytes, capacity) before reading its body and gives it back
// when its PutBatch returned. Puts that do not fit wait, first come first
// served, until enough is given back or their request ends; none is
// refused. A batch as large as the whole capacity still passes, alone.
type writeGate struct {
	mu      sync.Mutex
	cap     int64
	used    int64
	waiters []*gateWaiter // FIFO
}

type gateWaiter struct {
	n     int64
	ready chan struct{} // closed once the weight is granted
}

func newWriteGate(capacity int64) *writeGate { return &writeGate{cap: capacity} }

// acquire takes n (clamped to [1, capacity]) and returns what to release;
// it fails only with ctx's error, holding nothing.
func (g *writeGate) acquire(ctx context.Context, n int64) (int64, error) {
	n = max(1, min(n, g.cap))
	g.mu.Lock()
	if len(g.waiters) == 0 && g.used+n <= g.cap {
		g.used += n
		g.mu.Unlock()
		return n, nil
	}
	w := &gateWaiter{n: n, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			g.mu.Unlock()
			g.release(n)
			return 0, ctx.Err()
		default:
		}
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
		g.grantLocked() // the head may have been waiting behind w
		g.mu.Unlock()
		return 0, ctx.Err()
	}
}

// release gives back n taken by acquire.
func (g *writeGate) release(n int64) {
	g.mu.Lock()
	g.used -= n
	g.grantLocked()
	g.mu.Unlock()
}

// grantLocked grants the waiters at the head of the queue that now fit.
func (g *writeGate) grantLocked() {
	for len(g.waiters) > 0 && g.used+g.waiters[0].n <= g.cap {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		g.used += w.n
		close(w.ready)
	}
}
