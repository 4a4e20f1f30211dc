package wasmop

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
)

// Name is the operation's name; it belongs to this project's extension
// registry OPREG/AMDUAT-WASM/1 (SPECS.md §20).
const Name = "amduat.wasm.run"

// OpID is the operation's id.
var OpID = opreg.OperationID{Name: Name, Version: 1}

// DefaultMaxCompiled is the default of Options.MaxCompiled.
const DefaultMaxCompiled = 64

// Features are the WebAssembly features a module may use: WebAssembly 2.0
// without SIMD (threads are not part of 2.0).
const Features = api.CoreFeaturesV2 &^ api.CoreFeatureSIMD

// Options configure an Engine.
type Options struct {
	// CacheDir, when set, keeps wazero's compilation cache in this
	// directory, so a module compiled by an earlier process is not
	// compiled again. "" keeps compiled modules in memory only.
	CacheDir string
	// Interpreter forces wazero's interpreter instead of its compiler.
	Interpreter bool
	// CallTimeout, when above 0, also bounds one call's wall time: a call
	// past it is an operational failure (ErrOperational). Fuel (SPECS.md
	// §20.5) already bounds every call deterministically; the wall-time
	// bound makes wazero check for cancellation in every loop and function
	// entry, which measured here made loop-heavy code about 7 times
	// slower, so it is off by default.
	CallTimeout time.Duration
	// MaxCompiled bounds the compiled modules kept in memory, least
	// recently used first out (0: DefaultMaxCompiled).
	MaxCompiled int
	// MemoryBudget, when above 0, bounds the bytes the engine's calls in
	// progress hold together (SPECS.md §20.8): each call's linear memory
	// (its current size), its tables (8 bytes an element of their
	// effective maxima, or of their minima when the module has no
	// table.grow, from the instance's creation) and its output
	// buffers (their capacity). Every such allocation is reserved before
	// it is made; one the budget cannot hold ends the call operationally
	// (ErrOperational and ErrMemoryBudget: no result). The CLI gives it
	// --max-memory.
	MemoryBudget uint64
	// FreshInstances turns the snapshots of SPECS.md §20.9 off: every
	// call instantiates the module and runs its _initialize. Results are
	// the same either way (snapshot.go); the equivalence tests use it.
	FreshInstances bool
	// MaxIdleBytes bounds the memory (as counted in the memory budget) of
	// the instances kept for reuse between calls (0: DefaultMaxIdleBytes).
	MaxIdleBytes uint64
}

// ErrMemoryBudget is wrapped by the operational failure of a call whose
// memory, tables or outputs would pass Options.MemoryBudget.
var ErrMemoryBudget = errors.New("memory budget exceeded")

// TableElementBytes is what one table element is counted as in the memory
// budget (wazero's element: one pointer).
const TableElementBytes = 8

// Engine runs amduat.wasm.run calls. It is safe for concurrent use.
type Engine struct {
	rt      wazero.Runtime
	cache   wazero.CompilationCache
	timeout time.Duration
	max     int

	// budget is Options.MemoryBudget; reserved the bytes the calls in
	// progress hold, peak its highest value (under resMu).
	budget         uint64
	resMu          sync.Mutex
	reserved, peak uint64
	// idle holds the instances kept for reuse (*instance, most recently
	// parked at the front), idleBytes their reservations (under resMu);
	// fresh is Options.FreshInstances.
	idle      list.List
	idleBytes uint64
	maxIdle   uint64
	fresh     bool

	mu      sync.Mutex
	entries map[cacheKey]*entry
	byAddr  map[addrKey]*entry // the same entries, by their bytes' address
	seed    maphash.Seed
	lru     list.List // of *entry, most recently used at the front
	closed  bool
}

// cacheKey finds a compiled module: a hash of its bytes (maphash, seeded
// per engine: a lookup key, never an output), its length and the page limit
// (which the pass writes into the module). A hit is confirmed by comparing
// the bytes.
type cacheKey struct {
	hash  uint64
	size  int
	pages uint32
}

// entry is one module in the in-memory cache: compiled, or rejected.
type entry struct {
	key    cacheKey
	module []byte        // the module bytes, to confirm a hit
	ready  chan struct{} // closed once the fields below are set
	cm     wazero.CompiledModule
	info   *decoded
	fail   *failure // deterministic rejection
	// modFail is the module's failure of the rules of SPECS.md §20.3
	// steps 2 to 7 under the entry's page limit (decoded.checkModule),
	// which do not depend on the export: checked once, not on every call
	// (a Go module has tens of thousands of data segments).
	modFail *failure
	err     error // operational failure (the entry is dropped)
	refs    int
	elem    *list.Element
	gone    bool // evicted: closed when refs reaches 0
	// snap is the state after _initialize once a call has taken it;
	// noSnap is set when the module cannot have one (snapshot.go). idle
	// are the entry's instances kept for reuse (under Engine.resMu).
	snap   atomic.Pointer[snapshot]
	noSnap atomic.Bool
	idle   []*instance
}

// New builds an Engine.
func New(ctx context.Context, opts Options) (*Engine, error) {
	var cfg wazero.RuntimeConfig
	if opts.Interpreter {
		cfg = wazero.NewRuntimeConfigInterpreter()
	} else {
		cfg = wazero.NewRuntimeConfig()
	}
	cfg = cfg.WithCoreFeatures(Features).WithCloseOnContextDone(opts.CallTimeout > 0).WithCustomSections(false)
	e := &Engine{timeout: opts.CallTimeout, max: opts.MaxCompiled, budget: opts.MemoryBudget, entries: make(map[cacheKey]*entry), byAddr: make(map[addrKey]*entry), seed: maphash.MakeSeed(),
		fresh: opts.FreshInstances, maxIdle: opts.MaxIdleBytes}
	if e.max <= 0 {
		e.max = DefaultMaxCompiled
	}
	if e.maxIdle == 0 {
		e.maxIdle = DefaultMaxIdleBytes
	}
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm compilation cache %s: %w", opts.CacheDir, err)
		}
		e.cache = c
		cfg = cfg.WithCompilationCache(c)
	}
	e.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateHost(ctx, e.rt); err != nil {
		e.Close(ctx)
		return nil, fmt.Errorf("wasm host modules: %w", err)
	}
	return e, nil
}

// Close releases the runtime and every compiled module. Calls after Close
// fail operationally.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.entries = map[cacheKey]*entry{}
	e.byAddr = map[addrKey]*entry{}
	e.mu.Unlock()
	e.resMu.Lock()
	for e.idle.Len() > 0 {
		e.removeIdleLocked(e.idle.Back().Value.(*instance))
	}
	e.resMu.Unlock()
	err := e.rt.Close(ctx)
	if e.cache != nil {
		err = errors.Join(err, e.cache.Close(ctx))
	}
	return err
}

// Operation returns the registry entry of amduat.wasm.run v1 backed by e.
func (e *Engine) Operation() opreg.Operation {
	return opreg.Operation{
		ID:        OpID,
		MinInputs: 1,
		MaxInputs: opreg.Unbounded,
		DecodeParams: func(b []byte) (any, error) {
			return DecodeParams(b)
		},
		EncodeParams: func(v any) ([]byte, error) {
			p, ok := v.(Params)
			if !ok {
				return nil, fmt.Errorf("%s params: %w: want wasmop.Params, got %T", Name, opreg.ErrParams, v)
			}
			return EncodeParams(p)
		},
		Run:            e.run,
		ParamsToJSON:   ParamsToJSON,
		ParamsFromJSON: ParamsFromJSON,
	}
}

// Extend returns reg (the kernel when reg is nil) extended with e's
// operation.
func Extend(reg *opreg.Registry, e *Engine) (*opreg.Registry, error) {
	if reg == nil {
		reg = opreg.Kernel()
	}
	return reg.Extend(e.Operation())
}

// KernelRegistry starts an Engine with opts and returns the kernel
// registry extended with its operation, and the function that closes the
// engine once the registry's runs are done.
func KernelRegistry(ctx context.Context, opts Options) (*opreg.Registry, func(), error) {
	e, err := New(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the WebAssembly engine: %w", err)
	}
	reg, err := Extend(nil, e)
	if err != nil {
		e.Close(ctx)
		return nil, nil, fmt.Errorf("registering %s: %w", Name, err)
	}
	return reg, func() { e.Close(context.WithoutCancel(ctx)) }, nil
}

// acquire returns the cache entry of module under the page limit, compiling
// it if needed. The caller releases it. An operational failure panics.
func (e *Engine) acquire(module []byte, pages uint32) *entry {
	ak := addrKey{data: unsafe.SliceData(module), size: len(module), pages: pages}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		panic(&OperationalError{Reason: "engine closed"})
	}
	ent, ok := e.byAddr[ak]
	if ok {
		ent.refs++
		e.lru.MoveToFront(ent.elem)
		e.mu.Unlock()
		<-ent.ready
		return e.acquired(ent)
	}
	e.mu.Unlock()
	key := cacheKey{hash: maphash.Bytes(e.seed, module), size: len(module), pages: pages}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		panic(&OperationalError{Reason: "engine closed"})
	}
	ent, ok = e.entries[key]
	switch {
	case ok && sameBytes(ent.module, module):
		ent.refs++
		e.lru.MoveToFront(ent.elem)
		e.mu.Unlock()
		<-ent.ready
	case ok:
		// A hash collision: compile this module for this call only.
		e.mu.Unlock()
		ent = &entry{key: key, module: module, ready: make(chan struct{}), refs: 1, gone: true}
		e.compile(ent, module, pages)
		close(ent.ready)
	default:
		ent = &entry{key: key, module: module, ready: make(chan struct{}), refs: 1}
		ent.elem = e.lru.PushFront(ent)
		e.entries[key] = ent
		e.byAddr[ak] = ent
		e.evictLocked()
		e.mu.Unlock()
		e.compile(ent, module, pages)
		close(ent.ready)
	}
	return e.acquired(ent)
}

// addrKey finds an entry by the address and length of the module bytes it
// holds (entry.module) and the page limit, without hashing them (a Go
// module has megabytes): a call given the very bytes an entry was made
// from is that entry's. This relies on the contract of opreg.Call that
// input bytes are never modified; the pointer in the key keeps the bytes
// alive, so their address cannot be reused for other bytes while the key
// is in Engine.byAddr (from the entry's creation to its eviction).
type addrKey struct {
	data  *byte
	size  int
	pages uint32
}

func (ent *entry) addrKey() addrKey {
	return addrKey{data: unsafe.SliceData(ent.module), size: len(ent.module), pages: ent.key.pages}
}

// acquired returns ent once it is ready, or drops it and panics with its
// operational failure.
func (e *Engine) acquired(ent *entry) *entry {
	key := ent.key
	if ent.err != nil {
		e.release(ent)
		e.mu.Lock()
		if e.entries[key] == ent {
			delete(e.entries, key)
			delete(e.byAddr, ent.addrKey())
			e.lru.Remove(ent.elem)
		}
		e.mu.Unlock()
		panic(&OperationalError{Reason: "compiling the module", Err: ent.err})
	}
	return ent
}

// sameBytes reports whether a and b hold the same bytes; the same backing
// array (the usual case: artifact bytes are immutable and shared) is
// recognised without reading it.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b) || bytes.Equal(a, b))
}

func (e *Engine) compile(ent *entry, module []byte, pages uint32) {
	d, err := decodeModule(module, pages)
	if err != nil {
		ent.fail = fail(StatusInvalidModule, msgInvalidModule)
		return
	}
	ent.info = d
	ent.modFail = d.checkModule(pages)
	cm, err := e.rt.CompileModule(context.Background(), d.rewritten)
	if err != nil {
		if isClosed(err) {
			ent.err = err
			return
		}
		ent.fail = fail(StatusInvalidModule, msgInvalidModule)
		return
	}
	ent.cm = cm
}

func isClosed(err error) bool {
	var ee interface{ ExitCode() uint32 }
	return errors.As(err, &ee)
}

// evictLocked drops least recently used entries above the bound.
func (e *Engine) evictLocked() {
	for e.lru.Len() > e.max {
		old := e.lru.Back().Value.(*entry)
		e.lru.Remove(old.elem)
		delete(e.entries, old.key)
		delete(e.byAddr, old.addrKey())
		old.gone = true
		if old.refs == 0 {
			e.closeModule(old)
		}
	}
}

func (e *Engine) release(ent *entry) {
	e.mu.Lock()
	ent.refs--
	done := ent.refs == 0 && ent.gone
	e.mu.Unlock()
	if done {
		e.closeModule(ent)
	}
}

func (e *Engine) closeModule(ent *entry) {
	e.dropIdle(ent)
	if ent.cm != nil {
		ent.cm.Close(context.Background())
	}
}

// reserve adds n bytes to the calls' reservations, or returns the
// operational failure of a call holding held bytes that needs them for
// what when the budget cannot hold them. Idle instances (snapshot.go)
// count in the budget too: they are closed first when it runs short.
func (e *Engine) reserve(n, held uint64, what string) *OperationalError {
	if e == nil { // a call outside an engine (tests)
		return nil
	}
	e.resMu.Lock()
	drop := e.trimIdleLocked(n)
	var err *OperationalError
	if e.budget > 0 && (n > e.budget || e.reserved > e.budget-n) {
		err = &OperationalError{Reason: fmt.Sprintf("out of memory: %s needs %d more bytes, with %d held by this call and %d by all calls, above the memory budget of %d",
			what, n, held, e.reserved, e.budget), Err: ErrMemoryBudget}
	} else {
		e.reserved += n
		e.peak = max(e.peak, e.reserved)
	}
	e.resMu.Unlock()
	closeInstances(drop)
	return err
}

func (e *Engine) unreserve(n uint64) {
	if e == nil {
		return
	}
	e.resMu.Lock()
	e.reserved -= n
	e.resMu.Unlock()
}

// MemoryReserved returns the bytes the calls in progress hold in the
// memory budget (Options.MemoryBudget; counted even without one) and the
// most they ever held together.
func (e *Engine) MemoryReserved() (now, peak uint64) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	return e.reserved, e.peak
}

// CachedModules is the number of modules in the in-memory cache.
func (e *Engine) CachedModules() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.entries)
}

const msgInvalidModule = "module is not valid WebAssembly 2.0 without SIMD and threads"

// checkModule applies the rejection rules of SPECS.md §20.3 that follow
// validation and do not depend on the export name (steps 2 to 7), in their
// order; checkEntry then applies step 8.
func (d *decoded) checkModule(maxPages uint32) *failure {
	for _, im := range d.imports {
		if im.Kind != KindFunc {
			return fail(StatusForbiddenImport, "import %s.%s: a %s import is not allowed", im.Module, im.Name, im.Kind)
		}
		want, ok := allowedImports[im.Module+"\x00"+im.Name]
		if !ok {
			return fail(StatusForbiddenImport, "import %s.%s is not allowed", im.Module, im.Name)
		}
		if !want.equal(im.Type) {
			return fail(StatusForbiddenImport, "import %s.%s has type %s, want %s", im.Module, im.Name, im.Type, want)
		}
	}
	if d.hasStart {
		return fail(StatusStartSection, "a start function is not allowed")
	}
	if d.hasMemory && d.memMin > maxPages {
		return fail(StatusMemoryTooLarge, "memory minimum %d pages exceeds max_memory_pages %d", d.memMin, maxPages)
	}
	if d.hasMemory && d.memMin > MaxLinearPages {
		return fail(StatusMemoryTooLarge, "memory minimum %d pages exceeds the largest memory of %d pages", d.memMin, MaxLinearPages)
	}
	if d.numTables > MaxTables {
		return fail(StatusTableTooLarge, "%d tables exceed the limit of %d", d.numTables, MaxTables)
	}
	if lim := d.tableLimit(); d.tableMin > lim {
		return fail(StatusTableTooLarge, "table minimum %d exceeds %d elements", d.tableMin, lim)
	}
	if msg := d.segmentFailure(); msg != "" {
		return fail(StatusSegmentBounds, "%s", msg)
	}
	for _, x := range d.exports {
		if x.Kind == KindFunc && x.Name == InitializeExport && !x.Type.equal(FuncType{}) {
			return fail(StatusExportType, "export %s has type %s, want () -> ()", InitializeExport, x.Type)
		}
	}
	return nil
}

// checkEntry finds the entry function.
func (d *decoded) checkEntry(export string) *failure {
	for _, x := range d.exports {
		if x.Kind != KindFunc || x.Name != export {
			continue
		}
		if !x.Type.equal(FuncType{Results: []byte{typeI32}}) {
			return fail(StatusExportType, "export %q has type %s, want () -> (i32)", export, x.Type)
		}
		return nil
	}
	return fail(StatusMissingExport, "no function export named %q", export)
}

func (d *decoded) hasInitialize() bool {
	for _, x := range d.exports {
		if x.Kind == KindFunc && x.Name == InitializeExport {
			return true
		}
	}
	return false
}

// InitializeExport is called before the entry when the module exports it
// (a Go reactor built with -buildmode=c-shared).
const InitializeExport = "_initialize"

func (e *Engine) run(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
	p := c.Params.(Params)
	ent := e.acquire(c.Inputs[0].Bytes, p.MaxMemoryPages)
	defer e.release(ent)
	f := ent.fail
	if f == nil {
		f = ent.modFail
	}
	if f == nil {
		f = ent.info.checkEntry(p.Export)
	}
	if f != nil {
		return nil, f.opError(nil)
	}
	st := &callState{inputs: c.Inputs[1:], outputs: make([][]byte, p.Outputs), maxOut: p.MaxOutputBytes, hasMemory: ent.info.hasMemory, eng: e}
	defer func() { e.unreserve(st.held) }()
	ctx := context.WithValue(context.Background(), stateKey{}, st)
	if e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	if f := e.call(ctx, st, ent, p.Export, p.Fuel()); f != nil {
		return nil, f.opError(st.console)
	}
	outs := make([]asl.Artifact, p.Outputs)
	for i, b := range st.outputs {
		if b == nil {
			b = []byte{}
		}
		outs[i] = asl.Artifact{Bytes: b}
	}
	return outs, nil
}

// call runs the entry on an instance at the state _initialize leaves
// (started from the entry's snapshot when it has one that covers the
// call's fuel, else instantiated and initialised), and returns the
// deterministic failure, if any. Operational failures panic.
func (e *Engine) call(ctx context.Context, st *callState, ent *entry, export string, fuel uint64) *failure {
	var in *instance
	var f *failure
	if s := ent.snap.Load(); s != nil && fuel > s.fuelUsed && !e.fresh {
		in, f = e.fromSnapshot(ctx, st, ent, s, fuel)
	} else {
		in, f = e.initialize(ctx, st, ent, fuel)
	}
	if f != nil {
		return f
	}
	ended := false
	defer func() {
		if ended {
			e.park(st, in)
		} else {
			in.mod.Close(context.Background())
		}
	}()
	res, err := in.function(export).Call(ctx)
	if err != nil {
		return classify(ctx, st, err, "running the entry")
	}
	if st.oper != nil {
		panic(st.oper)
	}
	ended = true
	switch code := uint32(res[0]); {
	case code == 0:
		return nil
	case code <= 0xFFFF:
		msg := st.errMsg
		if !st.hasMsg {
			msg = fmt.Appendf(nil, "module failed with status %d", code)
		}
		return &failure{code: ModuleCodeBase | code, msg: string(msg)}
	default:
		return fail(StatusBadReturn, "entry returned %d, want 0 to 65535", int32(code))
	}
}

// initialize instantiates the module for the call st, sets the fuel
// counter, runs _initialize if the module exports it (SPECS.md §20.3 step
// 9) and then takes the entry's snapshot if it has none yet. The tables
// (their effective maxima when the code has a table.grow, else their
// minima) and the memory's minimum are reserved before the instance is
// created.
func (e *Engine) initialize(ctx context.Context, st *callState, ent *entry, fuel uint64) (*instance, *failure) {
	var memMin uint64
	if ent.info.hasMemory {
		memMin = uint64(ent.info.memMin) * 65536
	}
	start := ent.info.tableReserve()*TableElementBytes + memMin
	if err := e.reserve(start, 0, "creating the instance"); err != nil {
		panic(err)
	}
	st.held, st.memHeld = start, memMin
	mod, err := e.instantiate(ctx, st, ent)
	if err != nil {
		return nil, classify(ctx, st, err, "instantiating the module")
	}
	ok := false
	defer func() {
		if !ok {
			mod.Close(context.Background())
		}
	}()
	in := newInstance(ent, mod, st)
	in.fuel.Set(fuel)
	st.fuel, st.budget, st.stack = in.fuel, fuel, in.stack
	if ent.info.hasInitialize() {
		if _, err := in.function(InitializeExport).Call(ctx); err != nil {
			return nil, classify(ctx, st, err, "running _initialize")
		}
	}
	if st.oper != nil {
		panic(st.oper)
	}
	e.takeSnapshot(st, in)
	ok = true
	return in, nil
}

// instantiate creates the call's instance, its memory allocated through
// the call's allocator. A failure of that allocator while the instance is
// created (the system refused the memory) is operational.
func (e *Engine) instantiate(ctx context.Context, st *callState, ent *entry) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(abort); ok && st.oper != nil {
				panic(st.oper)
			}
			panic(r)
		}
	}()
	return e.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, allocator(st)), ent.cm, moduleConfig)
}

// moduleConfig instantiates anonymously, runs no start function (a start
// section is rejected; _initialize is called explicitly) and gives wazero a
// constant random source: the module never reaches wazero's own system
// context (WASI is this package's), and seeding wazero's default fake
// source cost about a fifth of a trivial call.
var moduleConfig = wazero.NewModuleConfig().WithName("").WithStartFunctions().WithRandSource(zeroReader{})

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// trapCodes maps the runtime's trap texts to status codes.
var trapCodes = map[string]uint32{
	"unreachable":                   StatusTrapUnreachable,
	"out of bounds memory access":   StatusTrapMemoryOutOfBounds,
	"integer divide by zero":        StatusTrapDivideByZero,
	"integer overflow":              StatusTrapIntegerOverflow,
	"invalid conversion to integer": StatusTrapInvalidConversion,
	"invalid table access":          StatusTrapTableOutOfBounds,
	"indirect call type mismatch":   StatusTrapIndirectCallType,
}

// TrapMessage is the diagnostic text of each trap status code.
var TrapMessage = map[uint32]string{
	StatusTrapUnreachable:       "trap: unreachable",
	StatusTrapMemoryOutOfBounds: "trap: out of bounds memory access",
	StatusTrapDivideByZero:      "trap: integer divide by zero",
	StatusTrapIntegerOverflow:   "trap: integer overflow",
	StatusTrapInvalidConversion: "trap: invalid conversion to integer",
	StatusTrapTableOutOfBounds:  "trap: invalid table access",
	StatusTrapIndirectCallType:  "trap: indirect call type mismatch",
}

// classify turns a runtime error into the call's deterministic failure, or
// panics with an operational one.
func classify(ctx context.Context, st *callState, err error, what string) *failure {
	if st.oper != nil {
		panic(st.oper)
	}
	if st.fail != nil {
		return st.fail
	}
	if ctx.Err() != nil {
		panic(&OperationalError{Reason: what + ": the call ran past its time bound", Err: ctx.Err()})
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if fmt.Sprintf("%T", e) != "*wasmruntime.Error" {
			continue
		}
		if e.Error() == "unreachable" && st.fuel != nil && st.fuel.Get() == 0 {
			return fail(StatusFuelExhausted, "fuel exhausted: the call used all its %d units", st.budget)
		}
		if e.Error() == "unreachable" && st.stack != nil && uint32(st.stack.Get()) > MaxStackUnits {
			return fail(StatusStackExhausted, "stack exhausted: the calls in progress would use more than %d units", MaxStackUnits)
		}
		if code, ok := trapCodes[e.Error()]; ok {
			return fail(code, "%s", TrapMessage[code])
		}
		if e.Error() == "stack overflow" {
			panic(&OperationalError{Reason: what + ": the runtime's stack ran out", Err: err})
		}
	}
	panic(&OperationalError{Reason: what, Err: err})
}
