package surf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/tgk"
	"github.com/amduat/amduat/trace"
)

// TraceIndexSpace is the asl.Indexer space that maps a result's
// ReferenceBytes to its trace's ReferenceBytes (SPECS.md §14.4).
const TraceIndexSpace = "surf.trace"

// Request is one surface run: the scheme, the program, the inputs in order
// and the optional global params, all by reference.
type Request struct {
	SchemeRef  asl.Reference // zero means pel.SchemeRefDAG1
	ProgramRef asl.Reference
	InputRefs  []asl.Reference
	ParamsRef  asl.Reference // meaningful only when HasParams
	HasParams  bool
	// Limits are deterministic bounds (§14.7): exceeding one is a
	// RUNTIME_FAILED result, identical everywhere. They are recorded in the
	// result and are part of the request key.
	Limits pel.Limits
}

// Options configure a Surface.
type Options struct {
	// Hash derives the references of everything the run stores; zero means
	// HASH-ASL1-256. Runs with the same request and hash give the same bytes
	// and references on every backend.
	Hash asl.HashID
	// Registry holds the operations; nil means opreg.Kernel().
	Registry *opreg.Registry
	// MaxArtifact bounds the size of the program, and of any value read
	// into memory for an operation that reads its inputs whole (one without
	// opreg.Operation.RunRope: not the kernel's); zero means
	// asl.DefaultGetLimit. A larger one is an operational error, not a
	// result. Inputs and params are otherwise read from the store as they
	// are used (SPECS.md §14.11), whatever their size.
	MaxArtifact int64
	// NoCache bypasses the action cache (§14.6): the run neither consults
	// nor records it.
	NoCache bool
	// NodeMemo stores every node's outputs as it completes and reuses
	// identical node computations (same operation, params bytes, input and
	// global params references) across runs and programs (§14.10). A run
	// whose process dies part-way resumes from the stored node outputs.
	// Each node costs a durable write, so it is off by default; it needs a
	// store with an index.
	NodeMemo bool
	// NoLog leaves the run out of the run log (SPECS.md §19.7), which a
	// store with an index otherwise keeps.
	NoLog bool
	// Clock gives the time of the run log's records; nil means time.Now.
	// It is never consulted for anything else: runs stay byte-identical.
	Clock func() time.Time
	// MemoryBudget is pel.RunOptions.MemoryBudget (0: none): a run whose
	// declared outputs do not fit fails with pel.ErrOutOfMemory and stores
	// nothing (SPECS.md §12.8).
	MemoryBudget uint64
	// WorkBudget is pel.RunOptions.WorkBudget (0: none): a run whose node
	// outputs would total more bytes fails with pel.ErrWorkBudget and stores
	// nothing (SPECS.md §12.8).
	WorkBudget uint64
	// Progress, if set, is called from the goroutine of Run after each
	// node and as output bytes are streamed into the store.
	Progress func(Progress)
	// Workers is pel.RunOptions.Workers: above 1, operations of nodes whose
	// inputs are ready may run ahead of the canonical order on that many
	// goroutines; no stored byte changes (SPECS.md §12.10).
	Workers int
	// Salts, when set, is shared by the Surfaces of one store (a server
	// makes one per request); nil means one of this Surface's own.
	Salts *SaltMemo
}

// Surface runs programs against a store.
type Surface struct {
	store asl.Store
	opts  Options
}

// New returns a Surface over store.
func New(store asl.Store, opts Options) *Surface {
	if opts.Hash == 0 {
		opts.Hash = asl.HashSHA256
	}
	if opts.Registry == nil {
		opts.Registry = opreg.Kernel()
	}
	if opts.Salts == nil {
		opts.Salts = new(SaltMemo)
	}
	return &Surface{store: store, opts: opts}
}

// Run is what a surface run returns: the stored references, and the values
// they name.
type Run struct {
	ResultRef  asl.Reference
	TraceRef   asl.Reference
	OutputRefs []asl.Reference
	Result     Result
	// Trace is the run's trace. Of an executed run of more than 65,536
	// node records it holds only the header fields (Nodes is nil): the
	// records were streamed into the store as the nodes finished (SPECS.md
	// §14.11); load them with LoadTrace(TraceRef).
	Trace trace.Trace
	// Outputs holds the output artifacts of an executed run whose outputs
	// total at most 16 MiB; it is nil on a cache hit and when the outputs
	// were streamed into the store (fetch OutputRefs instead).
	Outputs []asl.Artifact
	// CacheHit is true when the run was answered from the action cache and
	// nothing was executed.
	CacheHit bool
	// EdgeRef is the TGK/1 provenance edge of the run (§14.9, §17).
	EdgeRef asl.Reference
	// NodesReused counts the nodes answered by the node memo
	// (Options.NodeMemo) instead of being executed.
	NodesReused int
}

// runEdge is the provenance edge of a run: from the program, the inputs in
// order and the params, to the outputs in order, the result and the trace.
func runEdge(res Result, resultRef, traceRef asl.Reference) tgk.Edge {
	e := tgk.Edge{Type: tgk.EdgeTypePELRun, From: []tgk.Endpoint{{Role: tgk.RoleProgram, Ref: res.ProgramRef}}}
	for _, in := range res.InputRefs {
		e.From = append(e.From, tgk.Endpoint{Role: tgk.RoleInput, Ref: in})
	}
	if res.HasParams {
		e.From = append(e.From, tgk.Endpoint{Role: tgk.RoleParams, Ref: res.ParamsRef})
	}
	for _, out := range res.OutputRefs {
		e.To = append(e.To, tgk.Endpoint{Role: tgk.RoleOutput, Ref: out})
	}
	e.To = append(e.To, tgk.Endpoint{Role: tgk.RoleResult, Ref: resultRef}, tgk.Endpoint{Role: tgk.RoleTrace, Ref: traceRef})
	return e
}

// Run executes req (SPECS.md §14.3): it resolves the program, then each
// input in order, then the params; the first store failure becomes the
// result without calling Exec_DAG. Otherwise it runs Exec_DAG, on ropes
// that read large inputs from the store as they are used (§14.11). Either
// way it stores the outputs, the result and the trace durably, the result
// never before its outputs (small outputs in one batch with the result,
// large ones streamed first), and returns their references. Unless Options.NoCache is set, a valid action
// cache entry for the request (§14.6) answers it without executing anything.
// An error means no result: the request could not be served (I/O failure,
// cancelled context, an artifact above MaxArtifact), and nothing was stored.
func (s *Surface) Run(ctx context.Context, req Request) (*Run, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	start := s.now()
	ix, indexed := s.store.(asl.Indexer)
	cached := indexed && !s.opts.NoCache
	logged := indexed && !s.opts.NoLog
	var key [32]byte
	var salted sync.WaitGroup // a run the cache does not answer needs the key only to log
	var saltErr error
	var salt []byte
	if cached || logged {
		salted.Go(func() {
			if salt, saltErr = Salt(ctx, s.store); saltErr == nil {
				key = RequestKey(req, s.opts.Hash, salt)
				s.opts.Salts.set(salt)
			} else {
				saltErr = fmt.Errorf("surface run: reading the cache salt: %w", saltErr)
			}
		})
	}
	if cached {
		// The entry is looked up under the salt of an earlier run while
		// the salt is read again; the answer stands only if the salt is
		// unchanged, else the lookup is made under the salt read (one
		// round trip less on a bucket, SPECS.md §6.7, "Requests per
		// operation"; §14.6).
		var hit *Run
		var err error
		last, known := s.opts.Salts.get()
		if known {
			hit, err = s.lookupCached(ctx, ix, RequestKey(req, s.opts.Hash, last), req)
		}
		salted.Wait()
		if saltErr == nil && (!known || !bytes.Equal(salt, last)) {
			hit, err = s.lookupCached(ctx, ix, key, req)
		}
		if saltErr != nil {
			return nil, saltErr
		}
		if err != nil {
			return nil, fmt.Errorf("surface run: action cache: %w", err)
		}
		if hit != nil {
			if logged {
				// A hit stores nothing else: its record is written alone.
				e, err := s.logEntry(hit, key, "hit", start)
				if err == nil {
					_, err = ix.PutIndexed(ctx, s.opts.Hash, nil, []asl.IndexEntry{e})
				}
				if err != nil {
					return nil, fmt.Errorf("surface run: run log: %w", err)
				}
			}
			return hit, nil
		}
	}
	// Without the cache, the salt is read while the run computes (one
	// round trip less on a bucket, SPECS.md §6.7, "Requests per
	// operation").
	c, err := s.compute(ctx, req)
	salted.Wait()
	if saltErr != nil {
		if err == nil {
			c.close()
		}
		return nil, saltErr
	}
	if err != nil {
		return nil, err
	}
	defer c.close()
	// A store failure depends on the store's state, not only on the request,
	// so it is never cached.
	var actionKey []byte
	if cached && !c.run.Result.HasStoreFailure {
		actionKey = key[:]
	}
	var extra []asl.IndexEntry
	if logged {
		mode := "miss"
		if s.opts.NoCache {
			mode = "off"
		}
		e, err := s.logEntry(c.run, key, mode, start)
		if err != nil {
			return nil, fmt.Errorf("surface run: %w", err)
		}
		extra = append(extra, e)
	}
	if err := s.persist(ctx, c, actionKey, extra...); err != nil {
		return nil, err
	}
	return c.run, nil
}

func (s *Surface) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return time.Now()
}

// logEntry is the run log record of run (SPECS.md §19.7), timed from start
// to now.
func (s *Surface) logEntry(run *Run, key [32]byte, cache string, start time.Time) (asl.IndexEntry, error) {
	now := s.now()
	v := run.Result.Value
	return LogEntry(LogRecord{Time: now, RequestKey: key, ResultRef: run.ResultRef, ProgramRef: run.Result.ProgramRef,
		Status: v.Status, StatusCode: v.Summary.StatusCode, Cache: cache, Duration: now.Sub(start)})
}

// traceSpool bounds what a run's trace stream holds in memory (the
// defaults of trace.StreamOptions; tests lower them).
var traceSpool trace.StreamOptions

// computed is a run whose artifacts are built and whose references are
// derived, but which is not stored yet.
type computed struct {
	run                          *Run
	outputs                      []*asl.Rope // all outputs
	streamed                     bool        // outputs to stream before the batch (run.Outputs is nil)
	progress                     Progress
	resultArt, traceArt, edgeArt asl.Artifact
	edge                         tgk.Edge
	// trace holds the trace bytes; when its records are in a temporary
	// file, traceArt is empty and the trace is streamed into the store
	// before the batch.
	trace *trace.Spooled
}

// close removes the trace's temporary file, if any.
func (c *computed) close() {
	if c.trace != nil {
		c.trace.Close()
	}
}

// compute resolves and executes req and builds the result and trace. It
// reads the store and writes nothing.
func (s *Surface) compute(ctx context.Context, req Request) (*computed, error) {
	scheme := req.scheme()
	res := Result{ProgramRef: req.ProgramRef, InputRefs: req.InputRefs, ParamsRef: req.ParamsRef, HasParams: req.HasParams, Limits: req.Limits}
	builder, err := trace.NewStream(s.opts.Hash, traceSpool)
	if err != nil {
		return nil, err
	}
	defer builder.Close() // a no-op once Finish passed the spool on
	var outputs []*asl.Rope
	var reused int
	obs := &runObserver{ctx: ctx, b: builder, progress: s.opts.Progress}
	if scheme != pel.SchemeRefDAG1 {
		res.Value = failure(scheme, pel.StatusSchemeUnsupported, pel.DiagnosticEntry{
			Code: DiagSchemeUnsupported, Message: fmt.Appendf(nil, "scheme %s is not supported", scheme)})
	} else {
		program, inputs, params, fail, err := s.resolve(ctx, req)
		if err != nil {
			return nil, err
		}
		if fail != nil {
			status := pel.StatusInvalidInputs
			if fail.Phase == PhaseProgram {
				status = pel.StatusInvalidProgram
			}
			res.Value = failure(scheme, status, fail.Diagnostic())
			res.StoreFailure, res.HasStoreFailure = *fail, true
		} else {
			opts := pel.RunOptions{Limits: req.Limits, Interrupt: obs.interrupt, MemoryBudget: s.opts.MemoryBudget, WorkBudget: s.opts.WorkBudget,
				Context: ctx, MaxMaterialize: s.maxArtifact(), Workers: s.opts.Workers}
			if s.opts.NodeMemo {
				opts.RopeMemo = s.nodeMemo(ctx)
			}
			if len(program.Bytes) >= 4 {
				// node_count, the first field of ProgramBytes (§9.1); only
				// for progress, so an invalid program does no harm.
				obs.p.NodesTotal = int(binary.BigEndian.Uint32(program.Bytes))
			}
			// The plan keeps what it needs of the program bytes, which are
			// dropped before the evaluation (§14.11).
			pl, v, perr := pel.PlanArtifact(s.opts.Registry, program)
			program = asl.Artifact{}
			if pl == nil {
				res.Value, err = v, perr
			} else {
				outputs, res.Value, err = pl.RunRopes(inputs, params, obs, opts)
			}
			if err == nil {
				err = obs.err
			}
			if m, ok := opts.RopeMemo.(*nodeMemo); ok {
				reused = m.hits
				if err == nil {
					err = m.err
				}
			}
			if err != nil {
				return nil, fmt.Errorf("surface run: %w", err)
			}
		}
	}
	res.OutputRefs = make([]asl.Reference, len(outputs))
	for i, out := range outputs {
		// Derived already for the trace (cached).
		if res.OutputRefs[i], err = out.Ref(ctx, s.opts.Hash); err != nil {
			return nil, fmt.Errorf("surface run: output %d: %w", i, err)
		}
	}
	arts, small, err := smallOutputs(ctx, outputs)
	if err != nil {
		return nil, fmt.Errorf("surface run: reading outputs: %w", err)
	}
	c := &computed{run: &Run{Outputs: arts, OutputRefs: res.OutputRefs, Result: res, NodesReused: reused},
		outputs: outputs, streamed: !small, progress: obs.p}
	if c.resultArt, err = res.Artifact(); err != nil {
		return nil, fmt.Errorf("surface run: encoding result: %w", err)
	}
	c.run.ResultRef = asl.MustDerive(s.opts.Hash, c.resultArt)
	c.trace, err = builder.Finish(trace.Links{
		ProgramRef: res.ProgramRef, InputRefs: res.InputRefs,
		ParamsRef: res.ParamsRef, HasParams: res.HasParams,
		ExecResultRef: c.run.ResultRef,
	}, res.Value)
	if err != nil {
		return nil, fmt.Errorf("surface run: building trace: %w", err)
	}
	c.run.Trace, c.run.TraceRef = c.trace.Trace, c.trace.Ref
	if c.trace.InMemory() {
		if c.traceArt, err = c.trace.Artifact(math.MaxUint64); err != nil {
			c.close()
			return nil, fmt.Errorf("surface run: encoding trace: %w", err)
		}
	}
	c.edge = runEdge(res, c.run.ResultRef, c.run.TraceRef)
	if c.edgeArt, err = c.edge.Artifact(); err != nil {
		c.close()
		return nil, fmt.Errorf("surface run: encoding provenance edge: %w", err)
	}
	c.run.EdgeRef = asl.MustDerive(s.opts.Hash, c.edgeArt)
	return c, nil
}

// persist stores outputs, result, trace and provenance edge in one batch,
// with the surf.trace and TGK index entries and, when actionKey is non-nil,
// the action cache entry. Large outputs are streamed into the
// store first, each durable before the batch that names them.
func (s *Surface) persist(ctx context.Context, c *computed, actionKey []byte, extra ...asl.IndexEntry) error {
	run := c.run
	if c.streamed {
		if err := s.streamOutputs(ctx, c.outputs, run.OutputRefs, &c.progress, s.opts.Progress); err != nil {
			return err
		}
	}
	if !c.trace.InMemory() {
		if err := s.streamTrace(ctx, c.trace); err != nil {
			return err
		}
	}
	arts := append(append([]asl.Artifact(nil), run.Outputs...), c.resultArt, c.traceArt, c.edgeArt)
	if !c.trace.InMemory() {
		arts = slices.Delete(arts, len(arts)-2, len(arts)-1)
	}
	var refs []asl.Reference
	var err error
	if ix, ok := s.store.(asl.Indexer); ok {
		entries := []asl.IndexEntry{{Space: TraceIndexSpace, Key: run.ResultRef.Bytes(), Value: run.TraceRef.Bytes()}}
		entries = append(entries, tgk.IndexEntries(c.edge, run.EdgeRef)...)
		if actionKey != nil {
			entries = append(entries, asl.IndexEntry{Space: ActionIndexSpace, Key: actionKey, Value: AppendActionEntry(nil, run.ResultRef, run.TraceRef, run.OutputRefs)})
		}
		entries = append(entries, extra...)
		refs, err = ix.PutIndexed(ctx, s.opts.Hash, arts, entries)
	} else {
		refs, err = s.store.PutBatch(ctx, s.opts.Hash, arts)
	}
	if err != nil {
		return fmt.Errorf("surface run: storing %d artifacts: %w", len(arts), err)
	}
	n := len(run.Outputs)
	traceRef := run.TraceRef
	if c.trace.InMemory() {
		traceRef = refs[n+1]
	}
	if refs[n] != run.ResultRef || traceRef != run.TraceRef || refs[len(refs)-1] != run.EdgeRef {
		return fmt.Errorf("surface run: store returned %s, %s for result and trace, derived %s, %s: %w",
			refs[n], traceRef, run.ResultRef, run.TraceRef, asl.ErrIntegrity)
	}
	return nil
}

// streamTrace puts a trace whose records are in a temporary file into the
// store, streaming, durable before the batch that names it (§14.11), and
// checks that the store derived the reference the trace was given.
func (s *Surface) streamTrace(ctx context.Context, sp *trace.Spooled) error {
	ref, err := s.store.Put(ctx, s.opts.Hash, sp.Header(), sp.Open())
	if err != nil {
		return fmt.Errorf("surface run: storing trace: %w", err)
	}
	if ref != sp.Ref {
		return fmt.Errorf("surface run: store returned %s for the trace, derived %s: %w", ref, sp.Ref, asl.ErrIntegrity)
	}
	return nil
}

func (req Request) check() error {
	if req.ProgramRef.IsZero() {
		return errors.New("surface run: a program reference is required")
	}
	for i, ref := range req.InputRefs {
		if ref.IsZero() {
			return fmt.Errorf("surface run: input %d: zero reference", i)
		}
	}
	if req.HasParams && req.ParamsRef.IsZero() {
		return errors.New("surface run: params: zero reference")
	}
	return nil
}

func failure(scheme asl.Reference, status pel.ExecutionStatus, d pel.DiagnosticEntry) pel.ExecutionResultValue {
	// The non-runtime statuses' codes equal their status numbers (§8).
	code := uint32(status)
	return pel.ExecutionResultValue{
		PEL1Version: pel.PEL1Version,
		Status:      status,
		SchemeRef:   scheme,
		Summary:     pel.ExecutionErrorSummary{Kind: status.Kind(), StatusCode: code},
		Diagnostics: []pel.DiagnosticEntry{d},
	}
}

// maxArtifact is Options.MaxArtifact with its default.
func (s *Surface) maxArtifact() int64 {
	if s.opts.MaxArtifact <= 0 {
		return asl.DefaultGetLimit
	}
	return s.opts.MaxArtifact
}

// resolve loads the program (whole, into memory) and verifies the inputs
// and params, each whole once, in that order (§14.11): small ones are kept
// in memory, larger ones become ropes read from the store as they are
// used. A store failure that a result records is returned as fail; any
// other error is returned as err.
func (s *Surface) resolve(ctx context.Context, req Request) (program asl.Artifact, inputs []*asl.Rope, params *asl.Rope, fail *StoreFailure, err error) {
	storeFail := func(phase Phase, index uint32, ref asl.Reference, err error) (*StoreFailure, error) {
		if code, ok := classify(err); ok {
			return &StoreFailure{Phase: phase, InputIndex: index, Ref: ref, Error: code}, nil
		}
		return nil, fmt.Errorf("surface run: resolving %s %s: %w", phase, ref, err)
	}
	if program, err = asl.Get(ctx, s.store, req.ProgramRef, s.opts.MaxArtifact); err != nil {
		fail, err = storeFail(PhaseProgram, 0, req.ProgramRef, err)
		return
	}
	l := &loader{store: s.store}
	inputs = make([]*asl.Rope, len(req.InputRefs))
	for i, ref := range req.InputRefs {
		if inputs[i], err = l.load(ctx, ref); err != nil {
			fail, err = storeFail(PhaseInput, uint32(i), ref, err)
			return
		}
	}
	if req.HasParams {
		if params, err = l.load(ctx, req.ParamsRef); err != nil {
			fail, err = storeFail(PhaseParams, 0, req.ParamsRef, err)
		}
	}
	return
}

// scheme is the effective scheme reference: SchemeRef_DAG_1 when unset.
func (req Request) scheme() asl.Reference {
	if req.SchemeRef.IsZero() {
		return pel.SchemeRefDAG1
	}
	return req.SchemeRef
}
