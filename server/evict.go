package server

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/internal/metrics"
)

// Size-bounded stores (SPECS.md §18.11; `serve --max-size`, Go
// Limits.MaxStoreBytes): when the stored bytes of the store's artifacts
// pass the bound, the least recently used artifacts that no pin reaches
// are deleted until the store is back under the low-water mark, as
// bazel-remote's max_size does for a cache.
//
// Invariants:
//   - Nothing a pin names or reaches (closure.Protected's walk, the mark of
//     gc) is ever evicted: the protected set is computed and the victims
//     deleted under s.maint, which every pin change also holds.
//   - Recency is an in-memory logical access clock: every put, get, stat,
//     missing, batch read and run touches the references it names, one map
//     update under a mutex. It is not persisted: after a restart every
//     artifact is equally old, and ties are broken by ascending
//     ReferenceBytes (in effect arbitrary: references are hashes).
//   - A victim touched after the round took its snapshot is spared.

// evictLowWater is the fraction of the bound a round evicts down to, so
// that one round makes room for many puts.
const evictLowWater = 0.9

// evictBatch is how many artifacts one Delete takes.
const evictBatch = 1024

// evictRecheck is how long after the last round a run (whose outputs the
// server does not count) makes the next put or run start one anyway.
const evictRecheck = 10 * time.Second

type evictor struct {
	s   *Server
	max int64

	mu       sync.Mutex
	clock    uint64
	ticks    map[asl.Reference]uint64 // last access
	size     int64                    // stored bytes at the last round
	pending  int64                    // payload bytes put since
	dirty    bool                     // a run stored things since the last round
	last     time.Time
	running  bool
	idle     chan struct{} // closed when no round runs
	rounds   int64
	lastErr  error
	evictedN *metrics.Counter
	evictedB *metrics.Counter
	sizeG    *metrics.Gauge
}

func newEvictor(s *Server, max int64, reg *metrics.Registry) (*evictor, error) {
	if max <= 0 {
		return nil, nil
	}
	e := &evictor{s: s, max: max, ticks: map[asl.Reference]uint64{}, idle: make(chan struct{})}
	close(e.idle)
	e.evictedN = metrics.NewCounter(metrics.Opts{Name: "amduat_store_evicted_total", Help: "Artifacts evicted to keep the store under --max-size."})
	e.evictedB = metrics.NewCounter(metrics.Opts{Name: "amduat_store_evicted_bytes_total", Help: "Stored bytes of the artifacts evicted."})
	e.sizeG = metrics.NewGauge(metrics.Opts{Name: "amduat_store_size_bytes", Help: "Stored bytes of the store's artifacts, as of the last eviction check."})
	maxG := metrics.NewGauge(metrics.Opts{Name: "amduat_store_max_size_bytes", Help: "The --max-size bound."})
	maxG.Set(float64(max))
	for _, c := range []metrics.Collector{e.evictedN, e.evictedB, e.sizeG, maxG} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// The first round learns the store's size.
	e.dirty = true
	return e, nil
}

// touch records an access to refs.
func (e *evictor) touch(refs ...asl.Reference) {
	if e == nil || len(refs) == 0 {
		return
	}
	e.mu.Lock()
	for _, r := range refs {
		if !r.IsZero() {
			e.clock++
			e.ticks[r] = e.clock
		}
	}
	e.mu.Unlock()
}

// forget drops a deleted artifact's access record.
func (e *evictor) forget(ref asl.Reference) {
	if e == nil {
		return
	}
	e.mu.Lock()
	delete(e.ticks, ref)
	e.mu.Unlock()
}

// wrote notes n payload bytes put (or, with ran, a run that stored an
// unknown amount) and starts a round in the background when the store may
// have passed its bound.
func (e *evictor) wrote(n int64, ran bool) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.pending += n
	e.dirty = e.dirty || ran
	start := !e.running && (e.size+e.pending > e.max || (e.dirty && time.Since(e.last) >= evictRecheck))
	if start {
		e.running = true
		e.idle = make(chan struct{})
	}
	e.mu.Unlock()
	if start {
		go e.background()
	}
}

func (e *evictor) background() {
	err := e.round(context.Background())
	if err != nil {
		e.s.log.Error("eviction", "error", oneLine(err.Error()))
	}
	e.mu.Lock()
	e.running, e.lastErr = false, err
	close(e.idle)
	e.mu.Unlock()
}

// EvictReport says what one eviction round did.
type EvictReport struct {
	Size      int64 // stored bytes before
	After     int64 // stored bytes after
	Protected int64 // artifacts a pin reaches
	Evicted   int64
	Bytes     int64
	// Disk is the store's pack bytes before and after the space of the
	// evicted artifacts was given back (zero when nothing was evicted or
	// the store does not reclaim, reclaimer).
	Disk [2]int64
}

// reclaimer is a store that gives back the space of deleted artifacts
// (pebblestore.Store.Reclaim): a round that evicted calls it, so that a
// size-bounded store's disk use follows its size (SPECS.md §18.11).
type reclaimer interface {
	Reclaim(ctx context.Context, below float64) (pebblestore.ReclaimReport, error)
}

// Evict runs one eviction round now (SPECS.md §18.11), waiting for a
// round in progress first; without a bound it does nothing.
func (s *Server) Evict(ctx context.Context) (EvictReport, error) {
	e := s.evict
	if e == nil {
		return EvictReport{}, nil
	}
	for {
		e.mu.Lock()
		if !e.running {
			e.running = true
			e.idle = make(chan struct{})
			e.mu.Unlock()
			break
		}
		idle := e.idle
		e.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return EvictReport{}, ctx.Err()
		}
	}
	var rep EvictReport
	err := e.roundReport(ctx, &rep)
	e.mu.Lock()
	e.running, e.lastErr = false, err
	close(e.idle)
	e.mu.Unlock()
	return rep, err
}

func (e *evictor) round(ctx context.Context) error {
	var rep EvictReport
	return e.roundReport(ctx, &rep)
}

type evictCand struct {
	ref  asl.Reference
	size int64
	tick uint64
}

func (e *evictor) roundReport(ctx context.Context, rep *EvictReport) error {
	s := e.s
	s.maint.Lock()
	defer s.maint.Unlock()
	e.mu.Lock()
	snap := e.clock
	e.pending, e.dirty, e.last = 0, false, time.Now()
	e.mu.Unlock()

	var all []evictCand
	var total int64
	err := s.store.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
		all = append(all, evictCand{ref: in.Ref, size: in.StoredSize})
		total += in.StoredSize
		return nil
	})
	if err != nil {
		return fmt.Errorf("eviction: listing the store: %w", err)
	}
	rep.Size, rep.After = total, total
	e.mu.Lock()
	e.size = total
	// Drop the access records of what is no longer stored.
	if len(e.ticks) > len(all) {
		present := make(map[asl.Reference]struct{}, len(all))
		for _, c := range all {
			present[c.ref] = struct{}{}
		}
		for r := range e.ticks {
			if _, ok := present[r]; !ok {
				delete(e.ticks, r)
			}
		}
	}
	for i := range all {
		all[i].tick = e.ticks[all[i].ref]
	}
	e.mu.Unlock()
	e.sizeG.Set(float64(total))
	if total <= e.max {
		return nil
	}

	protected, err := e.protected(ctx)
	if err != nil {
		return fmt.Errorf("eviction: marking what the pins reach: %w", err)
	}
	rep.Protected = int64(len(protected))
	cands := all[:0]
	for _, c := range all {
		if _, ok := protected[c.ref]; !ok {
			cands = append(cands, c)
		}
	}
	slices.SortFunc(cands, func(a, b evictCand) int {
		if a.tick != b.tick {
			if a.tick < b.tick {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.ref.Bytes(), b.ref.Bytes())
	})
	target := int64(float64(e.max) * evictLowWater)
	d, ok := s.store.(asl.Deleter)
	if !ok {
		return fmt.Errorf("eviction: the store cannot delete: %w", asl.ErrUnsupported)
	}
	size := total
	for len(cands) > 0 && size > target {
		var batch []evictCand
		var need int64
		for len(cands) > 0 && len(batch) < evictBatch && size-need > target {
			batch = append(batch, cands[0])
			need += cands[0].size
			cands = cands[1:]
		}
		// Spare what was touched since the snapshot.
		e.mu.Lock()
		refs := make([]asl.Reference, 0, len(batch))
		sizes := make([]int64, 0, len(batch))
		for _, c := range batch {
			if e.ticks[c.ref] <= snap {
				refs = append(refs, c.ref)
				sizes = append(sizes, c.size)
			}
		}
		e.mu.Unlock()
		if len(refs) == 0 {
			continue
		}
		del, err := d.Delete(ctx, refs)
		if err != nil {
			return fmt.Errorf("eviction: %w", err)
		}
		var n, b int64
		for i, ok := range del {
			if ok {
				n++
				b += sizes[i]
				e.forget(refs[i])
			}
		}
		size -= b
		rep.Evicted += n
		rep.Bytes += b
		e.evictedN.Add(float64(n))
		e.evictedB.Add(float64(b))
	}
	rep.After = size
	e.mu.Lock()
	e.size = size
	e.mu.Unlock()
	e.sizeG.Set(float64(size))
	if r, ok := s.store.(reclaimer); ok && rep.Evicted > 0 {
		rr, err := r.Reclaim(ctx, 0)
		if err != nil {
			return fmt.Errorf("eviction: giving back the space: %w", err)
		}
		rep.Disk = rr.PackBytes
		s.log.Info("eviction: space given back", "packs_before", rr.PackBytes[0], "packs_after", rr.PackBytes[1],
			"packs_compacted", rr.PacksCompacted, "rewritten", rr.Rewritten, "duration", rr.Duration)
	}
	if size > target {
		s.log.Warn("eviction: what the pins reach keeps the store above the low-water mark",
			"size", size, "max_size", e.max, "protected", len(protected))
	}
	s.log.Info("eviction", "before", total, "after", size, "evicted", rep.Evicted, "evicted_bytes", rep.Bytes, "protected", len(protected))
	return nil
}

// protected returns everything the pins reach (SPECS.md §19.6), present or
// not.
func (e *evictor) protected(ctx context.Context) (map[asl.Reference]struct{}, error) {
	out := map[asl.Reference]struct{}{}
	p, ok := e.s.store.(asl.Pinner)
	if !ok {
		return out, nil
	}
	pins, err := p.Pins(ctx)
	if err != nil {
		return nil, err
	}
	roots := make([]asl.Reference, len(pins))
	for i, pn := range pins {
		roots[i] = pn.Ref
	}
	err = closure.Walk(ctx, e.s.store, roots, func(n closure.Node) error {
		out[n.Ref] = struct{}{}
		return nil
	})
	return out, err
}
