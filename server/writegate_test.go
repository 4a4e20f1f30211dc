package server

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// waiting blocks until g has n waiters queued.
func waiting(g *writeGate, n int) {
	for {
		g.mu.Lock()
		k := len(g.waiters)
		g.mu.Unlock()
		if k == n {
			return
		}
		runtime.Gosched()
	}
}

func TestWriteGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newWriteGate(10)
	a, err := g.acquire(ctx, 6)
	if err != nil || a != 6 {
		t.Fatalf("acquire 6: %d, %v", a, err)
	}
	// Larger than the gate: clamped to its capacity, so it waits for all.
	big := make(chan int64)
	go func() { n, _ := g.acquire(ctx, 100); big <- n }()
	waiting(g, 1)
	// First come, first served: a small put that would fit waits behind it.
	small := make(chan int64)
	go func() { n, _ := g.acquire(ctx, 1); small <- n }()
	waiting(g, 2)
	g.release(a)
	if n := <-big; n != 10 {
		t.Fatalf("big put took %d, want the capacity 10", n)
	}
	waiting(g, 1)
	g.release(10)
	if n := <-small; n != 1 {
		t.Fatalf("small put took %d", n)
	}
	g.release(1)
	if g.used != 0 || len(g.waiters) != 0 {
		t.Fatalf("after all releases: used %d, %d waiters", g.used, len(g.waiters))
	}
}

// TestWriteGateCancel: a put whose request ends leaves the queue holding
// nothing, and the put behind it goes on.
func TestWriteGateCancel(t *testing.T) {
	t.Parallel()
	g := newWriteGate(4)
	held, _ := g.acquire(context.Background(), 3)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := g.acquire(ctx, 4); errc <- err }()
	waiting(g, 1)
	next := make(chan int64)
	go func() { n, _ := g.acquire(context.Background(), 1); next <- n }()
	waiting(g, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	if n := <-next; n != 1 {
		t.Fatalf("the put behind the cancelled one took %d", n)
	}
	g.release(1)
	g.release(held)
	if g.used != 0 || len(g.waiters) != 0 {
		t.Fatalf("after all releases: used %d, %d waiters", g.used, len(g.waiters))
	}
}
