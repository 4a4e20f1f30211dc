package server

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// Errors of runQueue.acquire besides the context's.
var (
	errQueueFull    = errors.New("run queue full")
	errQueueTimeout = errors.New("run queue wait expired")
)

// runQueue admits at most slots runs at once (SPECS.md §18.6, "Run
// slots"). A run that finds every slot busy waits in a first-in first-out
// queue of at most depth runs, for at most maxWait; a slot that frees goes
// to the run that has waited longest. A run refused because the queue is
// full, or whose wait expired, is told so (429 and 503 with Retry-After);
// no run is refused while it can still wait its turn. Invariants, under
// mu: active <= slots; waiters is empty unless active == slots;
// waiters.Len() <= depth.
type runQueue struct {
	slots   int
	depth   int
	maxWait time.Duration

	// onWait, when set (by tests), is called each time a run starts to
	// wait, outside mu.
	onWait func()

	mu      sync.Mutex
	active  int
	waiters list.List // of *runWaiter, oldest first
}

// runWaiter is one queued run; ready is closed when release hands it a
// slot (granted is then true, under runQueue.mu).
type runWaiter struct {
	ready   chan struct{}
	granted bool
}

func newRunQueue(slots, depth int, maxWait time.Duration) *runQueue {
	return &runQueue{slots: slots, depth: max(depth, 0), maxWait: maxWait}
}

// acquire takes a run slot, waiting in the queue when none is free. It
// returns the function that gives the slot back (to be called once) and
// how long the run waited; or errQueueFull at once, errQueueTimeout after
// maxWait, or ctx's error when ctx ends first.
func (q *runQueue) acquire(ctx context.Context) (release func(), waited time.Duration, err error) {
	q.mu.Lock()
	if q.active < q.slots && q.waiters.Len() == 0 {
		q.active++
		q.mu.Unlock()
		return q.releaser(), 0, nil
	}
	if q.waiters.Len() >= q.depth {
		q.mu.Unlock()
		return nil, 0, errQueueFull
	}
	w := &runWaiter{ready: make(chan struct{})}
	e := q.waiters.PushBack(w)
	q.mu.Unlock()
	if q.onWait != nil {
		q.onWait()
	}

	start := time.Now()
	t := time.NewTimer(q.maxWait)
	defer t.Stop()
	select {
	case <-w.ready:
		return q.releaser(), time.Since(start), nil
	case <-t.C:
		err = errQueueTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	q.mu.Lock()
	if w.granted {
		// The slot came as the wait ended: a run whose wait expired
		// takes it; one whose client went away hands it on.
		q.mu.Unlock()
		if err == errQueueTimeout {
			return q.releaser(), time.Since(start), nil
		}
		q.releaser()()
		return nil, time.Since(start), err
	}
	q.waiters.Remove(e)
	q.mu.Unlock()
	return nil, time.Since(start), err
}

// releaser returns the function that gives one slot back: to the oldest
// waiter when there is one, else to the pool. Calls after the first do
// nothing.
func (q *runQueue) releaser() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if f := q.waiters.Front(); f != nil {
				w := q.waiters.Remove(f).(*runWaiter)
				w.granted = true
				close(w.ready)
				return
			}
			q.active--
		})
	}
}

// running is the number of runs holding a slot.
func (q *runQueue) running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active
}

// queued is the number of runs waiting for a slot.
func (q *runQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiters.Len()
}
