package plan

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// manualClock is a Clock that moves only when Advance is called; Sleep
// blocks until then, and sleeping reports each Sleep that starts, so a
// test advances once the sleeper waits, never by a guessed delay.
type manualClock struct {
	mu       sync.Mutex
	now      time.Time
	moved    chan struct{}
	sleeping chan struct{}
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), moved: make(chan struct{}), sleeping: make(chan struct{}, 64)}
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *manualClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	until := c.now.Add(d)
	c.mu.Unlock()
	c.sleeping <- struct{}{}
	for {
		c.mu.Lock()
		if !c.now.Before(until) {
			c.mu.Unlock()
			return nil
		}
		moved := c.moved
		c.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	close(c.moved)
	c.moved = make(chan struct{})
	c.mu.Unlock()
}

// blockingExec blocks every call until its context ends, and says when a
// call started.
type blockingExec struct{ started chan struct{} }

func (e blockingExec) Name() string    { return "block" }
func (e blockingExec) Version() string { return "1" }
func (e blockingExec) Call(ctx context.Context, _ effect.Store, _ effect.Request) (effect.Observation, error) {
	e.started <- struct{}{}
	<-ctx.Done()
	return effect.Observation{}, ctx.Err()
}

func leaseTerms(t *testing.T, st *memPinned, id asl.Reference) []string {
	t.Helper()
	pins, err := st.Pins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pins {
		if prefix := pinLeases + id.String() + "/"; len(p.Name) > len(prefix) && p.Name[:len(prefix)] == prefix {
			a, err := asl.Get(t.Context(), st, p.Ref, 1<<10)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %q", p.Name[len(p.Name)-seqDigits:], a.Bytes[:len(leaseMagic)+4]))
		}
	}
	return out
}

// TestLeaseTakeover: a lease held by another runner is refused until the
// same term has been seen for the TTL; then it is taken over, and the old
// holder's renewal and release find it lost.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := newMemPinned()
	clock := newManualClock()
	id := putBytes(t, st, "an execution id")
	r1, _ := NewRunner(st, Options{Clock: clock, Writer: "one"})
	r2, _ := NewRunner(st, Options{Clock: clock, Writer: "two"})
	ttl := 30 * time.Second
	l1, l2 := NewLeases(r1, LeaseOptions{TTL: ttl}), NewLeases(r2, LeaseOptions{TTL: ttl})
	h1, err := l1.acquire(ctx, id)
	if err != nil || h1.term != 1 {
		t.Fatalf("first acquire = %+v, %v", h1, err)
	}
	var he *LeaseHeldError
	if _, err := l2.acquire(ctx, id); !errors.As(err, &he) || he.Term != 1 || he.Wait != ttl {
		t.Fatalf("acquire of a held lease = %v, want LeaseHeldError term 1 wait %s", err, ttl)
	}
	clock.Advance(ttl - time.Second)
	if _, err := l2.acquire(ctx, id); !errors.As(err, &he) || he.Wait != time.Second {
		t.Fatalf("acquire before the TTL = %v, want a wait of 1s", err)
	}
	clock.Advance(time.Second)
	h2, err := l2.acquire(ctx, id)
	if err != nil || h2.term != 2 {
		t.Fatalf("takeover = %+v, %v; want term 2", h2, err)
	}
	if err := st.Pin(ctx, LeasePinName(id, 2), h1.record, asl.PinOptions{}); !errors.Is(err, asl.ErrPinExists) {
		t.Fatalf("the old holder's renewal = %v, want ErrPinExists", err)
	}
	if err := l1.release(ctx, h1); err != nil {
		t.Fatalf("release of a lost lease = %v, want nil", err)
	}
	if err := l2.release(ctx, h2); err != nil {
		t.Fatal(err)
	}
	if got := leaseTerms(t, st, id); len(got) != 1 || got[0] != fmt.Sprintf("%012d %q", 3, leaseMagic+"rele") {
		t.Fatalf("lease pins after release = %v, want term 3 released only", got)
	}
	// A released lease is taken at once.
	if h, err := l1.acquire(ctx, id); err != nil || h.term != 4 {
		t.Fatalf("acquire after release = %+v, %v", h, err)
	}
}

// TestLeaseRun: Run under a lease completes the execution and releases the
// lease; a run whose lease is taken over is cancelled with ErrLeaseLost,
// its call cut off as by a crash.
func TestLeaseRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc := startService(t)
	st := newMemPinned()
	clock := newManualClock()
	exe := &testExec{name: "svc", version: "1", url: svc.url}
	r, err := NewRunner(st, Options{Clock: clock, Executors: []effect.Executor{exe}})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLeases(r, LeaseOptions{TTL: 30 * time.Second})
	id, _, err := r.Submit(ctx, Submission{Plan: putPlan(t, st, demoPlan(t, st, GateNone)), Mode: Auto})
	if err != nil {
		t.Fatal(err)
	}
	x, err := l.Run(ctx, id)
	if err != nil || x.Status != ExecCompleted {
		t.Fatalf("leased run = %v, %v; want completed", x.Status, err)
	}
	if got := leaseTerms(t, st, id); len(got) != 1 || got[0] != fmt.Sprintf("%012d %q", 2, leaseMagic+"rele") {
		t.Fatalf("lease pins = %v, want term 2 released", got)
	}

	// A run holding the lease while its call blocks; another runner takes
	// the lease (as after the TTL); the holder's next renewal loses.
	started := make(chan struct{}, 1)
	clock = newManualClock() // no sleeper of the first run reported on it
	rb, _ := NewRunner(st, Options{Clock: clock, CallTimeout: time.Minute, Executors: []effect.Executor{blockingExec{started}}})
	lb := NewLeases(rb, LeaseOptions{TTL: 30 * time.Second})
	p := &Plan{Steps: []Step{effectStep("send", "block", "/x", effect.ExternalSend, GateNone, CacheNone)}}
	id2, _, err := rb.Submit(ctx, Submission{Plan: putPlan(t, st, p), Mode: Auto})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := lb.Run(ctx, id2)
		done <- err
	}()
	<-started
	<-clock.sleeping // the renewal waits
	other := putBytes(t, st, "another runner's lease record")
	if err := st.Pin(ctx, LeasePinName(id2, 2), other, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if err := <-done; !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("run whose lease was taken = %v, want ErrLeaseLost", err)
	}
	x2, err := rb.Status(ctx, id2)
	if err != nil || x2.Steps[0].State != StateRunning {
		t.Fatalf("step after a lost lease = %v, %v; want running (cut off as by a crash)", x2.Steps[0].State, err)
	}
	// Term 1 stays until the taker prunes it; the lost holder released
	// nothing.
	if got := leaseTerms(t, st, id2); len(got) != 2 || got[1] != fmt.Sprintf("%012d %q", 2, "another runner's lease r") {
		t.Fatalf("lease pins = %v, want terms 1 and the other runner's 2", got)
	}
}

// TestLeaseRecordBytes: the worked example of SPECS.md §24.7, "Leases".
func TestLeaseRecordBytes(t *testing.T) {
	t.Parallel()
	if got := hex.EncodeToString(LeaseRecord("").Bytes); got != "616d647561742d706c616e2d6c656173652f312072656c65617365640a" {
		t.Fatalf("released record = %s", got)
	}
	if got := string(LeaseRecord("h-1-abc 0123456789ab").Bytes); got != "amduat-plan-lease/1 held h-1-abc 0123456789ab\n" {
		t.Fatalf("held record = %q", got)
	}
	if LeaseRecord("").HasTag {
		t.Fatal("a lease record has no type tag")
	}
}
