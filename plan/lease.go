package plan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
)

// Leases of executions (SPECS.md §24.7, "Leases"): a runner that drives an
// execution in the background holds its lease, so that of several runners
// sharing a store (servers on one bucket) one drives it at a time and none
// takes another's call in flight for a crash. Term N of the lease of
// execution E is the pin
//
//	plan/lease/E/NNNNNNNNNNNN
//
// naming a lease record: an artifact without a type tag whose bytes are
// "amduat-plan-lease/1 held HOLDER\n" (HOLDER the runner's name and a nonce
// of this acquisition) or "amduat-plan-lease/1 released\n". The lease is
// the highest term. Terms are created without Force, so of two runners
// creating term N+1 one wins (pins are compare-and-swap, §19.8). The
// holder renews by creating the next term every TTL/3; another runner takes
// a lease over when its highest term is released, or when it has seen
// the same highest term for TTL on its own clock (no clocks are compared
// across machines).

const (
	pinLeases        = "plan/lease/"
	leaseMagic       = "amduat-plan-lease/1 "
	leaseReleasedTxt = leaseMagic + "released\n"
	// DefaultLeaseTTL is the lease time of a zero LeaseOptions.TTL.
	DefaultLeaseTTL = 30 * time.Second
)

// LeasePinName is the pin of term term of the lease of execution id.
func LeasePinName(id asl.Reference, term uint64) string {
	return fmt.Sprintf("%s%s/%0*d", pinLeases, id, seqDigits, term)
}

// LeaseRecord returns the lease record artifact: held by holder, or
// released when holder is empty.
func LeaseRecord(holder string) asl.Artifact {
	if holder == "" {
		return asl.Artifact{Bytes: []byte(leaseReleasedTxt)}
	}
	return asl.Artifact{Bytes: []byte(leaseMagic + "held " + holder + "\n")}
}

// ErrLeaseHeld is wrapped by a LeaseHeldError.
var ErrLeaseHeld = errors.New("another runner holds the execution's lease")

// ErrLeaseLost is the cause of the context of a run whose lease another
// runner took over, or that could not be renewed within half its TTL.
var ErrLeaseLost = errors.New("the execution's lease was lost")

// LeaseHeldError says that another runner holds the lease of Exec at term
// Term and that it may be expired, at the earliest, after Wait.
type LeaseHeldError struct {
	Exec asl.Reference
	Term uint64
	Wait time.Duration
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("execution %s: lease term %d is held by another runner (may expire in %s)", e.Exec, e.Term, e.Wait)
}

func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// LeaseOptions configure Leases.
type LeaseOptions struct {
	// TTL is how long a lease term unchanged is taken for a dead holder's;
	// zero means DefaultLeaseTTL. The holder renews every TTL/3.
	TTL time.Duration
}

// Leases runs executions holding their leases. It remembers, per
// execution, the highest term it saw held by another runner and since when
// (on the runner's clock): that is how it judges a lease expired. It is
// safe for concurrent use, but one execution must not be run by two of
// its Run calls at once.
type Leases struct {
	r   *Runner
	ttl time.Duration

	mu   sync.Mutex
	seen map[asl.Reference]seenTerm
}

type seenTerm struct {
	term  uint64
	since time.Time
}

// NewLeases returns the leases of r's runs.
func NewLeases(r *Runner, opts LeaseOptions) *Leases {
	if opts.TTL <= 0 {
		opts.TTL = DefaultLeaseTTL
	}
	return &Leases{r: r, ttl: opts.TTL, seen: map[asl.Reference]seenTerm{}}
}

// TTL returns the lease time in force.
func (l *Leases) TTL() time.Duration { return l.ttl }

// held is a lease this runner holds.
type held struct {
	id     asl.Reference
	term   uint64
	record asl.Reference
}

// Run drives execution id as Runner.Run does while holding its lease. It
// returns a *LeaseHeldError when another runner holds the lease and it
// cannot yet be taken for expired. The run's context is cancelled with
// ErrLeaseLost as its cause when the lease is lost; the lease is released
// when Run returns.
func (l *Leases) Run(ctx context.Context, id asl.Reference) (*Execution, error) {
	h, err := l.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	sctx, stop := context.WithCancel(rctx)
	renewed := make(chan uint64, 1)
	go func() { renewed <- l.renew(sctx, h, cancel) }()
	x, err := l.r.Run(rctx, id)
	stop()
	h.term = <-renewed
	lost := errors.Is(context.Cause(rctx), ErrLeaseLost)
	cancel(nil)
	if lost {
		if err == nil {
			return x, nil
		}
		return x, fmt.Errorf("execution %s: %w: %w", id, ErrLeaseLost, err)
	}
	// Released even when ctx ended: the next runner need not wait a TTL.
	if rerr := l.release(context.WithoutCancel(ctx), h); rerr != nil && err == nil {
		err = rerr
	}
	return x, err
}

// terms lists the lease terms of id, the highest last.
func (l *Leases) terms(ctx context.Context, id asl.Reference) ([]asl.Pin, error) {
	prefix := pinLeases + id.String() + "/"
	pins, err := l.r.ledger.pinsWithPrefix(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", id, err)
	}
	for _, p := range pins {
		rest := strings.TrimPrefix(p.Name, prefix)
		if _, err := strconv.ParseUint(rest, 10, 64); err != nil || len(rest) != seqDigits {
			return nil, fmt.Errorf("lease of %s: pin %q is not a term: %w", id, p.Name, ErrBadLedger)
		}
	}
	return pins, nil
}

func termOf(p asl.Pin) uint64 {
	n, _ := strconv.ParseUint(p.Name[len(p.Name)-seqDigits:], 10, 64)
	return n
}

// acquire takes the lease of id: a new term after a released or expired
// one.
func (l *Leases) acquire(ctx context.Context, id asl.Reference) (*held, error) {
	released, err := l.r.ledger.put(ctx, LeaseRecord(""))
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", id, err)
	}
	pins, err := l.terms(ctx, id)
	if err != nil {
		return nil, err
	}
	var top uint64
	if len(pins) > 0 {
		last := pins[len(pins)-1]
		top = termOf(last)
		if last.Ref == released {
			l.mu.Lock()
			delete(l.seen, id)
			l.mu.Unlock()
		} else {
			now := l.r.clock.Now()
			l.mu.Lock()
			s, ok := l.seen[id]
			if !ok || s.term != top {
				s = seenTerm{term: top, since: now}
				l.seen[id] = s
			}
			l.mu.Unlock()
			if age := now.Sub(s.since); age < l.ttl {
				return nil, &LeaseHeldError{Exec: id, Term: top, Wait: l.ttl - age}
			}
		}
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	rec, err := l.r.ledger.put(ctx, LeaseRecord(l.r.writer+" "+hex.EncodeToString(nonce[:])))
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", id, err)
	}
	h := &held{id: id, term: top + 1, record: rec}
	if err := l.r.st.Pin(ctx, LeasePinName(id, h.term), rec, asl.PinOptions{}); errors.Is(err, asl.ErrPinExists) {
		return nil, &LeaseHeldError{Exec: id, Term: h.term, Wait: l.ttl}
	} else if err != nil {
		return nil, fmt.Errorf("lease of %s: term %d: %w", id, h.term, err)
	}
	l.mu.Lock()
	delete(l.seen, id)
	l.mu.Unlock()
	l.prune(ctx, id, h.term)
	return h, nil
}

// prune unpins the terms before term: only the highest is read, and a
// lease's terms would otherwise grow with every renewal. Best effort: a
// term left behind costs a listing entry, never a decision.
func (l *Leases) prune(ctx context.Context, id asl.Reference, term uint64) {
	if term > 1 {
		_, _ = l.r.st.Unpin(ctx, LeasePinName(id, term-1))
	}
}

// renew creates the next term every TTL/3 until stopped, and cancels the
// run with ErrLeaseLost when another runner created a term first or no
// renewal succeeded for TTL/2. It returns the last term it holds.
func (l *Leases) renew(ctx context.Context, h *held, cancel context.CancelCauseFunc) uint64 {
	term, last := h.term, l.r.clock.Now()
	// A renewal is never cut off half-made: its outcome decides whether
	// this runner still holds the lease.
	pctx := context.WithoutCancel(ctx)
	for {
		if err := l.r.clock.Sleep(ctx, l.ttl/3); err != nil {
			return term
		}
		perr := l.r.st.Pin(pctx, LeasePinName(h.id, term+1), h.record, asl.PinOptions{})
		switch {
		case perr == nil:
			term++
			last = l.r.clock.Now()
			l.prune(pctx, h.id, term)
		case errors.Is(perr, asl.ErrPinExists):
			cancel(ErrLeaseLost)
			return term
		case l.r.clock.Now().Sub(last) >= l.ttl/2:
			cancel(fmt.Errorf("%w: no renewal for %s: %w", ErrLeaseLost, l.ttl/2, perr))
			return term
		}
	}
}

// release creates the next term naming the released record, so another
// runner may take the lease at once.
func (l *Leases) release(ctx context.Context, h *held) error {
	released, err := l.r.ledger.put(ctx, LeaseRecord(""))
	if err != nil {
		return fmt.Errorf("lease of %s: release: %w", h.id, err)
	}
	err = l.r.st.Pin(ctx, LeasePinName(h.id, h.term+1), released, asl.PinOptions{})
	if errors.Is(err, asl.ErrPinExists) {
		return nil // taken over meanwhile: nothing of ours to release
	}
	if err != nil {
		return fmt.Errorf("lease of %s: release term %d: %w", h.id, h.term+1, err)
	}
	l.prune(ctx, h.id, h.term+1)
	return nil
}
