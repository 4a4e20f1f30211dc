package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
)

// planPool runs executions in the background (SPECS.md §18.12): a fixed
// number of workers take execution ids from a queue and drive each with
// plan.Leases.Run, holding its lease, so that servers sharing a store
// drive an execution one at a time. Invariants, under mu: an id is in
// queue at most once; an id in running is not in queue; again holds only
// ids in running (asked for again while they run).
type planPool struct {
	runner  *plan.Runner
	leases  *plan.Leases
	workers int
	rescan  time.Duration
	log     *slog.Logger
	m       *serverMetrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []asl.Reference
	queued  map[asl.Reference]bool
	running map[asl.Reference]bool
	again   map[asl.Reference]bool
	timers  map[*time.Timer]bool
	closed  bool

	// counted holds the runs counted in amduat_plan_runs_total so far,
	// by outcome; countedCond (on mu) is broadcast as it grows. A run's
	// outcome is counted after its last ledger event is written, so a
	// test that saw the event waits here for the count.
	counted     map[string]int
	countedCond *sync.Cond
}

func newPlanPool(cfg PlanConfig, log *slog.Logger, m *serverMetrics) *planPool {
	p := &planPool{runner: cfg.Runner, leases: plan.NewLeases(cfg.Runner, plan.LeaseOptions{TTL: cfg.LeaseTTL}),
		workers: cfg.Workers, rescan: cfg.Rescan, log: log, m: m,
		queued: map[asl.Reference]bool{}, running: map[asl.Reference]bool{}, again: map[asl.Reference]bool{}, timers: map[*time.Timer]bool{}}
	if p.rescan == 0 {
		p.rescan = time.Minute
	}
	p.cond = sync.NewCond(&p.mu)
	p.counted, p.countedCond = map[string]int{}, sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	cfg.Runner.Ledger().Observe(m.planEvent)
	return p
}

// start launches the workers and the scan that resumes the unfinished
// executions of the store, at once and every rescan.
func (p *planPool) start() {
	if p.workers <= 0 {
		return
	}
	for range p.workers {
		p.wg.Add(1)
		go p.work()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			p.scan()
			if p.rescan < 0 {
				return
			}
			t := time.NewTimer(p.rescan)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the workers: runs in progress are cancelled (a call in
// flight is cut off as by a crash, SPECS.md §24.7) and their leases
// released.
func (p *planPool) Close() {
	p.mu.Lock()
	p.closed = true
	for t := range p.timers {
		t.Stop()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// scan queues every execution that is running (some step can progress
// without a person).
func (p *planPool) scan() {
	xs, err := p.runner.List(p.ctx)
	if err != nil {
		if p.ctx.Err() == nil {
			p.log.Error("plan scan", "error", err.Error())
		}
		return
	}
	for _, x := range xs {
		p.kick(x)
	}
}

// kick queues x when a worker has something to do with it.
func (p *planPool) kick(x *plan.Execution) {
	if p == nil || p.workers <= 0 || x.Status != plan.ExecRunning {
		return
	}
	p.enqueue(x.ID)
}

func (p *planPool) enqueue(id asl.Reference) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed || p.queued[id]:
	case p.running[id]:
		p.again[id] = true
	default:
		p.queued[id] = true
		p.queue = append(p.queue, id)
		p.cond.Signal()
	}
}

// later queues id again after d.
func (p *planPool) later(id asl.Reference, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		p.mu.Lock()
		delete(p.timers, t)
		p.mu.Unlock()
		p.enqueue(id)
	})
	p.timers[t] = true
}

func (p *planPool) next() (asl.Reference, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return asl.Reference{}, false
	}
	id := p.queue[0]
	p.queue = p.queue[1:]
	delete(p.queued, id)
	p.running[id] = true
	return id, true
}

func (p *planPool) work() {
	defer p.wg.Done()
	for {
		id, ok := p.next()
		if !ok {
			return
		}
		x, err := p.leases.Run(p.ctx, id)
		p.mu.Lock()
		delete(p.running, id)
		again := p.again[id]
		delete(p.again, id)
		p.mu.Unlock()
		var held *plan.LeaseHeldError
		var outcome string
		switch {
		case p.ctx.Err() != nil:
			return
		case errors.As(err, &held):
			// Another runner drives it; look again when its lease may
			// have expired (it may have died).
			outcome = "lease_held"
			p.later(id, held.Wait+time.Second)
		case errors.Is(err, plan.ErrLeaseLost):
			outcome = "lease_lost"
			p.later(id, p.leases.TTL())
		case err != nil:
			outcome = "error"
			p.log.Error("plan run", "exec", id.String(), "error", err.Error())
			p.later(id, p.leases.TTL())
		default:
			outcome = x.Status.String()
			if keyClaimed(x) {
				// Waits on another execution's claim, which is recorded
				// nowhere in this ledger: look again later.
				p.later(id, p.leases.TTL())
			}
		}
		p.m.planRuns.WithLabelValues(outcome).Inc()
		p.mu.Lock()
		p.counted[outcome]++
		p.countedCond.Broadcast()
		p.mu.Unlock()
		if again {
			p.enqueue(id)
		}
	}
}

// keyClaimed reports whether x waits for a key another execution holds.
func keyClaimed(x *plan.Execution) bool {
	for _, b := range x.BlockedOn {
		if b.Reason == plan.ReasonKeyClaimed {
			return true
		}
	}
	return false
}
