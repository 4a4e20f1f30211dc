package wasmop

import (
	"bytes"
	"container/list"
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"
)

// This file holds the engine's snapshots (SPECS.md §20.9, informative: no
// byte of a result depends on them). A Go-built module spends about a
// millisecond being instantiated (its tens of thousands of data segments)
// and another in its runtime's _initialize, against microseconds for its
// entry on a small input. So the first call of a module takes, right after
// _initialize, a snapshot of the state that function leaves: the linear
// memory, the mutable globals, the fuel it used and the state of the host
// functions (fake clock, random stream, console). Later calls start from
// that state instead of running _initialize again, on an instance kept
// from an earlier call (idle) or a new one, which the engine resets to the
// snapshot first.
//
// Why it is equivalent to a fresh instance and _initialize (§20.3 step 9):
// the instance's state after instantiation is a function of the module
// bytes and max_memory_pages (the cache key), and _initialize is a
// deterministic function of that state and of what the host functions
// return. The WASI functions return what the call's own host state (clock,
// random stream, console: the same at the start of every call) and the
// memory determine; only the six functions of the amduat import module
// read the call's data inputs or params or write its outputs, so a module
// whose _initialize calls one of them is never snapshotted. The state
// _initialize leaves is then the same on every call; it lies wholly in
// the memory and the mutable globals when the code changes no table and
// drops no segment (decoded.stateOps), and when no global holds a
// reference: a module with such code or globals is never snapshotted
// either. Fuel: _initialize charges the same U units on every call, and a
// counter starting at F runs out in it exactly when F <= U, so a snapshot
// serves the calls with F > U, starting the entry with F - U; the others
// instantiate afresh and fail in _initialize as they always did. The stack
// counter is 0 after every return. An instance is kept for reuse only when
// its entry returned (no trap, no failing host call) with its memory at the
// snapshot's size (memory never shrinks); its next call writes the whole
// memory and every mutable global back to the snapshot, so no state of one
// call reaches another.
//
// Memory: an instance started from a snapshot reserves, in the memory
// budget (§20.8), the snapshot's memory size as if it had grown to it,
// and its tables as a fresh one does; idle instances count in the budget
// too (a reservation the budget cannot hold first closes idle instances,
// least recently used first) and are bounded by Options.MaxIdleBytes. The
// snapshot itself (its non-zero pages) lives with the compiled module.

// snapshotPage is the unit of a snapshot's memory image: runs of whole
// pages of zeros are cleared, the others copied.
const snapshotPage = 4096

// maxSnapshotMemory bounds the memory of a snapshot: a module whose
// _initialize leaves a larger memory is instantiated afresh on every call.
const maxSnapshotMemory = maxPooledMemory

// DefaultMaxIdleBytes is the default of Options.MaxIdleBytes.
const DefaultMaxIdleBytes = 128 << 20

// memRun is a run of a snapshot's memory: data, or len bytes of zeros
// when data is nil.
type memRun struct {
	off, len uint64
	data     []byte
}

// snapshot is the state a module's _initialize leaves (see above).
type snapshot struct {
	size     uint64   // the memory's size in bytes
	runs     []memRun // cover [0, size) in order
	globals  []uint64 // the values of decoded.mutGlobals
	fuelUsed uint64   // units _initialize charged
	clock    uint64
	rndCtr   uint64
	rndBuf   []byte // never written: shared by the calls
	console  []byte
	// reserve is what an instance holds in the memory budget: the memory
	// and the tables (§20.8).
	reserve uint64
}

// instance is a module instance that a snapshot can reset.
type instance struct {
	ent     *entry
	mod     api.Module
	mem     *linearMemory // nil without a memory
	fuel    api.MutableGlobal
	stack   api.MutableGlobal
	globals []api.MutableGlobal // decoded.mutGlobals
	funcs   map[string]api.Function
	elem    *list.Element // in Engine.idle while idle
}

// newInstance wraps mod, instantiated for st, and finds its counters.
func newInstance(ent *entry, mod api.Module, st *callState) *instance {
	in := &instance{ent: ent, mod: mod, mem: st.mem, funcs: make(map[string]api.Function, 2)}
	var ok bool
	if in.fuel, ok = mod.ExportedGlobal(FuelExport).(api.MutableGlobal); !ok {
		panic(&OperationalError{Reason: "the fuel counter is missing"})
	}
	if in.stack, ok = mod.ExportedGlobal(StackExport).(api.MutableGlobal); !ok {
		panic(&OperationalError{Reason: "the stack counter is missing"})
	}
	return in
}

// function returns the exported function name (the instance's own, kept
// for its later calls).
func (in *instance) function(name string) api.Function {
	f, ok := in.funcs[name]
	if !ok {
		f = in.mod.ExportedFunction(name)
		in.funcs[name] = f
	}
	return f
}

// mutableGlobals finds the exports of the module's mutable globals, or
// returns false when one is missing.
func (in *instance) mutableGlobals() bool {
	if in.globals != nil {
		return true
	}
	d := in.ent.info
	gs := make([]api.MutableGlobal, len(d.mutGlobals))
	for i := range gs {
		g, ok := in.mod.ExportedGlobal(d.globalExport(i)).(api.MutableGlobal)
		if !ok {
			return false
		}
		gs[i] = g
	}
	in.globals = gs
	return true
}

// memorySize is the instance's memory size in bytes (0 without one).
func (in *instance) memorySize() uint64 {
	if !in.ent.info.hasMemory {
		return 0 // (wazero's Memory is then a nil pointer in an interface)
	}
	return uint64(in.mod.Memory().Size())
}

// snapshotable reports whether the state a call leaves after _initialize
// lies wholly in the memory and the mutable globals (see above).
func (d *decoded) snapshotable() bool {
	return d.stateOps == "" && d.refGlobals == 0
}

// takeSnapshot records the state of in, whose _initialize (if any) has
// just returned, as its entry's snapshot, when the entry has none and the
// module allows one.
func (e *Engine) takeSnapshot(st *callState, in *instance) {
	ent := in.ent
	if e.fresh || ent.noSnap.Load() || ent.snap.Load() != nil {
		return
	}
	size := in.memorySize()
	if !ent.info.snapshotable() || st.usedABI || size > maxSnapshotMemory || !in.mutableGlobals() {
		ent.noSnap.Store(true)
		return
	}
	s := &snapshot{
		size:     size,
		fuelUsed: st.budget - in.fuel.Get(),
		clock:    st.clock,
		rndCtr:   st.rndCtr,
		rndBuf:   st.rndBuf,
		console:  bytes.Clone(st.console),
		reserve:  size + ent.info.tableReserve()*TableElementBytes,
	}
	for _, g := range in.globals {
		s.globals = append(s.globals, g.Get())
	}
	if size > 0 {
		mem, ok := in.mod.Memory().Read(0, uint32(size))
		if !ok {
			panic(&OperationalError{Reason: "reading the memory for a snapshot"})
		}
		s.runs = memoryRuns(mem)
	}
	ent.snap.CompareAndSwap(nil, s)
}

// memoryRuns splits mem into runs of whole zero pages (cleared on a
// restore) and runs of the other pages (copied).
func memoryRuns(mem []byte) []memRun {
	var zero [snapshotPage]byte
	var runs []memRun
	lastZero := false
	for off := uint64(0); off < uint64(len(mem)); off += snapshotPage {
		end := min(off+snapshotPage, uint64(len(mem)))
		isZero := bytes.Equal(mem[off:end], zero[:end-off])
		if len(runs) > 0 && lastZero == isZero {
			runs[len(runs)-1].len = end - runs[len(runs)-1].off
		} else {
			runs = append(runs, memRun{off: off, len: end - off})
		}
		lastZero = isZero
	}
	for i := range runs {
		r := &runs[i]
		if !bytes.Equal(mem[r.off:r.off+min(r.len, snapshotPage)], zero[:min(r.len, snapshotPage)]) {
			r.data = bytes.Clone(mem[r.off : r.off+r.len])
		}
	}
	return runs
}

// restore resets in to snapshot s for the call st: memory (grown to the
// snapshot's size when in is new), mutable globals, counters, host state.
// st has reserved s.reserve in the budget.
func (in *instance) restore(st *callState, s *snapshot, fuel uint64) {
	if in.mem != nil {
		in.mem.st = st
	}
	st.mem = in.mem
	if s.size > 0 {
		m := in.mod.Memory()
		if cur := uint64(m.Size()); cur < s.size {
			if _, ok := m.Grow(uint32((s.size - cur) / 65536)); !ok {
				panic(&OperationalError{Reason: fmt.Sprintf("growing a new instance's memory to the snapshot's %d bytes", s.size)})
			}
		}
		mem, ok := m.Read(0, uint32(s.size))
		if !ok || uint64(m.Size()) != s.size {
			panic(&OperationalError{Reason: fmt.Sprintf("the instance's memory is not the snapshot's %d bytes", s.size)})
		}
		for _, r := range s.runs {
			if r.data == nil {
				clear(mem[r.off : r.off+r.len])
			} else {
				copy(mem[r.off:], r.data)
			}
		}
	}
	for i, g := range in.globals {
		g.Set(s.globals[i])
	}
	in.fuel.Set(fuel - s.fuelUsed)
	in.stack.Set(0)
	st.fuel, st.budget, st.stack = in.fuel, fuel, in.stack
	st.clock, st.rndCtr, st.rndBuf = s.clock, s.rndCtr, s.rndBuf
	st.console = bytes.Clone(s.console)
}

// fromSnapshot returns an instance for the call st reset to s: an idle one
// of the entry, else a new one. It reserves s.reserve in the budget first
// (an idle instance's bytes move from the idle account). A failure to
// instantiate is returned as the call's failure.
func (e *Engine) fromSnapshot(ctx context.Context, st *callState, ent *entry, s *snapshot, fuel uint64) (*instance, *failure) {
	in := e.takeIdle(ent, s.reserve)
	if in == nil {
		if err := e.reserve(s.reserve, 0, "creating the instance"); err != nil {
			panic(err)
		}
	}
	st.held, st.memHeld = s.reserve, s.size
	var mod api.Module
	if in != nil {
		mod = in.mod
	} else {
		var err error
		if mod, err = e.instantiate(ctx, st, ent); err != nil {
			return nil, classify(ctx, st, err, "instantiating the module")
		}
	}
	defer func() {
		if r := recover(); r != nil { // operational: the instance goes
			mod.Close(context.Background())
			panic(r)
		}
	}()
	if in == nil {
		in = newInstance(ent, mod, st)
		if !in.mutableGlobals() {
			panic(&OperationalError{Reason: "a mutable global's export is missing"})
		}
	}
	in.restore(st, s, fuel)
	return in, nil
}

// takeIdle removes an idle instance of ent and moves its bytes (reserve)
// from the idle account to the calls' reservations; nil when ent has none.
func (e *Engine) takeIdle(ent *entry, reserve uint64) *instance {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	n := len(ent.idle)
	if n == 0 {
		return nil
	}
	in := ent.idle[n-1]
	ent.idle = ent.idle[:n-1]
	e.idle.Remove(in.elem)
	in.elem = nil
	e.idleBytes -= reserve
	e.reserved += reserve
	e.peak = max(e.peak, e.reserved)
	return in
}

// park keeps in, whose call st has ended normally, for a later call of its
// entry when its memory is still at the snapshot's size, moving its
// reservation to the idle account; else it closes it.
func (e *Engine) park(st *callState, in *instance) {
	s := in.ent.snap.Load()
	keep := !e.fresh && s != nil && in.memorySize() == s.size && st.memHeld == s.size && s.reserve <= e.maxIdle && in.mutableGlobals()
	var drop []*instance
	if keep {
		// An entry evicted meanwhile closes its idle instances once its
		// last call releases it (Engine.release), after this one.
		e.resMu.Lock()
		ent := in.ent
		if len(ent.idle) >= maxIdlePerModule {
			keep = false
		} else {
			st.held -= s.reserve
			e.reserved -= s.reserve
			e.idleBytes += s.reserve
			in.elem = e.idle.PushFront(in)
			ent.idle = append(ent.idle, in)
			drop = e.trimIdleLocked(0)
		}
		e.resMu.Unlock()
	}
	if !keep {
		in.mod.Close(context.Background())
	}
	closeInstances(drop)
}

// maxIdlePerModule bounds the idle instances of one module.
const maxIdlePerModule = 8

// trimIdleLocked removes idle instances, least recently used first, until
// the idle account is within Options.MaxIdleBytes and, with a memory
// budget, the calls' reservations plus the idle account plus need fit in
// it. It returns them, for the caller to close once resMu is released.
func (e *Engine) trimIdleLocked(need uint64) []*instance {
	var drop []*instance
	for e.idle.Len() > 0 && (e.idleBytes > e.maxIdle || (e.budget > 0 && (need > e.budget || e.reserved+e.idleBytes > e.budget-need))) {
		in := e.idle.Back().Value.(*instance)
		e.removeIdleLocked(in)
		drop = append(drop, in)
	}
	return drop
}

// removeIdleLocked takes the idle instance in out of the idle account.
func (e *Engine) removeIdleLocked(in *instance) {
	e.idle.Remove(in.elem)
	in.elem = nil
	ent := in.ent
	for i, x := range ent.idle {
		if x == in {
			ent.idle = append(ent.idle[:i], ent.idle[i+1:]...)
			break
		}
	}
	e.idleBytes -= ent.snap.Load().reserve
}

func closeInstances(ins []*instance) {
	for _, in := range ins {
		in.mod.Close(context.Background())
	}
}

// dropIdle closes the idle instances of ent (evicted from the cache).
func (e *Engine) dropIdle(ent *entry) {
	e.resMu.Lock()
	drop := append([]*instance(nil), ent.idle...)
	for _, in := range drop {
		e.removeIdleLocked(in)
	}
	e.resMu.Unlock()
	closeInstances(drop)
}

// IdleInstances returns the number of instances kept for reuse and the
// bytes they hold in the memory budget.
func (e *Engine) IdleInstances() (n int, bytes uint64) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	return e.idle.Len(), e.idleBytes
}
