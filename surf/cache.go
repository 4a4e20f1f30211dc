package surf

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/trace"
)

// Index spaces of the action cache (SPECS.md §14.6).
const (
	// ActionIndexSpace maps a request key (32 bytes) to the result that
	// request produced, with its trace and outputs (ActionEntry).
	ActionIndexSpace = "surf.action"
	// ConfigIndexSpace holds surface configuration; key "cache-salt" holds
	// the action cache salt.
	ConfigIndexSpace = "surf.config"
	saltKey          = "cache-salt"
)

// requestKeyDomain separates request keys from every other SHA-256 input.
const requestKeyDomain = "AMDUAT/SURF-REQUEST-KEY/1"

// RequestKey derives the action-cache key of a request (SPECS.md §14.6):
// SHA-256 of RequestKeyBytes =
//
//	domain bytes32 ("AMDUAT/SURF-REQUEST-KEY/1") || scheme_ref EncodedRef ||
//	program_ref EncodedRef || list<input_ref EncodedRef> ||
//	params_ref OptionalEncodedRef || hash_id u16 ||
//	max_nodes u64 || max_output_bytes u64 || salt bytes32
//
// where scheme_ref is the effective scheme (SchemeRef_DAG_1 when the request
// leaves it zero) and hash_id is the hash the run stores artifacts under.
func RequestKey(req Request, hash asl.HashID, salt []byte) [32]byte {
	w := enc.Writer{}
	w.Bytes32([]byte(requestKeyDomain))
	w.Buf = asl.AppendEncodedRef(w.Buf, req.scheme())
	w.Buf = asl.AppendEncodedRef(w.Buf, req.ProgramRef)
	w.Buf = appendRefList(w.Buf, req.InputRefs)
	w.Buf = asl.AppendOptionalEncodedRef(w.Buf, req.ParamsRef, req.HasParams)
	w.U16(uint16(hash))
	w.U64(req.Limits.MaxNodes)
	w.U64(req.Limits.MaxOutputBytes)
	w.Bytes32(salt)
	return sha256.Sum256(w.Buf)
}

// Salt returns the store's action-cache salt (empty when never set).
func Salt(ctx context.Context, s asl.Store) ([]byte, error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return nil, nil
	}
	v, _, err := ix.LookupIndex(ctx, ConfigIndexSpace, []byte(saltKey))
	return v, err
}

// SaltMemo remembers the action-cache salt a store was last read with
// (SPECS.md §14.6), so that a run can look its entry up under it while it
// reads the salt again. It only saves time: every run still reads the
// salt, and an answer found under a remembered salt that the read shows
// changed is discarded. The zero value remembers nothing; it is safe for
// concurrent use.
type SaltMemo struct {
	mu    sync.Mutex
	salt  []byte
	known bool
}

// get returns the remembered salt, if any.
func (m *SaltMemo) get() ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.salt, m.known
}

// set remembers salt, which the caller no longer modifies.
func (m *SaltMemo) set(salt []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.salt, m.known = salt, true
}

// SetSalt replaces the store's action-cache salt. Every entry recorded under
// another salt is disowned: later runs miss it and recompute (the remedy for
// a poisoned cache).
func SetSalt(ctx context.Context, s asl.Store, salt []byte) error {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return fmt.Errorf("action cache salt: the store has no index: %w", asl.ErrUnsupported)
	}
	_, err := ix.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{{Space: ConfigIndexSpace, Key: []byte(saltKey), Value: salt}})
	return err
}

// lookupCached returns the run recorded for key if it is valid: the result is
// present, intact, decodes, and answers this very request; each output is
// present and intact; and the trace is present, intact and names the result.
// Anything else is a miss (nil, nil). Errors are operational.
//
// The reads that do not depend on each other are made at once, so that a
// store with a round trip per read (a bucket, SPECS.md §6.7, "Requests per
// operation") pays one of them after an entry of format 2, which names the
// trace and the outputs (result, trace and outputs at once), and two after
// one of format 1 (the result with the trace's index entry, §14.4, then the
// outputs with the trace). Each is read once; the checks are those of §14.6.
func (s *Surface) lookupCached(ctx context.Context, ix asl.Indexer, key [32]byte, req Request) (*Run, error) {
	v, found, err := ix.LookupIndex(ctx, ActionIndexSpace, key[:])
	if err != nil || !found {
		return nil, err
	}
	entry, err := DecodeActionEntry(v)
	if err != nil {
		return nil, nil
	}
	resultRef := entry.Result
	var (
		res           Result
		resErr        error
		traceRef      = entry.Trace
		traceKnown    = entry.HasRun
		traceIndexErr error
		outputs       = entry.Outputs
		wg            sync.WaitGroup
	)
	if entry.HasRun {
		wg.Go(func() { res, resErr = LoadResult(ctx, s.store, resultRef) })
	} else {
		// Format 1: the result names the outputs, and the trace's index
		// entry, read beside it, the trace.
		wg.Go(func() { traceRef, traceKnown, traceIndexErr = indexedTrace(ctx, s.store, resultRef) })
		res, resErr = LoadResult(ctx, s.store, resultRef)
		wg.Wait()
		if resErr != nil {
			return nil, missOrError(resErr)
		}
		if !res.answers(req) {
			return nil, nil
		}
		outputs = res.OutputRefs
	}
	// The trace and the outputs, at once (and the result, for format 2).
	var tr trace.Trace
	var trErr error
	if traceIndexErr == nil && traceKnown {
		wg.Go(func() { tr, trErr = LoadTrace(ctx, s.store, traceRef) })
	}
	outErrs := make([]error, len(outputs))
	sem := make(chan struct{}, lookupParallel)
	for i, ref := range outputs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outErrs[i] = drain(ctx, s.store, ref)
		})
	}
	wg.Wait()
	if resErr != nil {
		return nil, missOrError(resErr)
	}
	if entry.HasRun && (!res.answers(req) || !slices.Equal(res.OutputRefs, outputs)) {
		return nil, nil // format 1 checked its result before reading outputs
	}
	for _, err := range outErrs {
		if err != nil {
			return nil, missOrError(err)
		}
	}
	switch {
	case traceIndexErr != nil:
		return nil, missOrError(fmt.Errorf("trace of %s: %w", resultRef, traceIndexErr))
	case traceKnown && trErr == nil && tr.ExecResultRef == resultRef:
		// The known trace names the result: FindTrace's answer, read once.
	case traceKnown && trErr != nil && (errors.Is(trErr, asl.ErrIntegrity) || errors.Is(trErr, asl.ErrNotFound) || !asl.IsContentError(trErr)):
		return nil, missOrError(fmt.Errorf("trace %s of result %s: %w", traceRef, resultRef, trErr))
	default:
		// No usable trace named: FindTrace searches the store.
		if traceRef, err = FindTrace(ctx, s.store, resultRef); err != nil {
			return nil, missOrError(err)
		}
		if tr, err = LoadTrace(ctx, s.store, traceRef); err != nil {
			return nil, missOrError(err)
		}
	}
	edge, err := runEdge(res, resultRef, traceRef).Artifact()
	if err != nil {
		return nil, err
	}
	return &Run{ResultRef: resultRef, TraceRef: traceRef, OutputRefs: res.OutputRefs, Result: res, Trace: tr,
		CacheHit: true, EdgeRef: asl.MustDerive(resultRef.HashID(), edge)}, nil
}

// ActionEntry is the value of an action-cache entry (SPECS.md §14.6,
// "Record"). Written since format 2: the result, the trace and the outputs
// the run stored with it, as list<EncodedRef> (result, trace, outputs in
// the result's order; at least 2). Format 1, written before, is the
// result's ReferenceBytes alone (HasRun false: the trace is found through
// surf.trace, the outputs through the result).
type ActionEntry struct {
	Result  asl.Reference
	HasRun  bool
	Trace   asl.Reference
	Outputs []asl.Reference
}

// AppendActionEntry appends the format 2 value of a run's entry.
func AppendActionEntry(dst []byte, result, trace asl.Reference, outputs []asl.Reference) []byte {
	return appendRefList(dst, ActionEntry{Result: result, HasRun: true, Trace: trace, Outputs: outputs}.Refs())
}

// DecodeActionEntry parses an action-cache value (SPECS.md §14.6, "Record"):
// exactly one ReferenceBytes of a known hash is format 1; anything else must
// be a format 2 list of at least 2 EncodedRefs with nothing after it.
func DecodeActionEntry(v []byte) (ActionEntry, error) {
	if ref, err := asl.DecodeReference(v); err == nil {
		if _, known := asl.LookupHash(ref.HashID()); known {
			return ActionEntry{Result: ref}, nil
		}
	}
	r := enc.NewReader(v)
	refs, err := readRefList(r, "action")
	if err != nil {
		return ActionEntry{}, fmt.Errorf("action cache entry: %w", err)
	}
	if len(refs) < 2 {
		return ActionEntry{}, fmt.Errorf("action cache entry: %d references, want the result and the trace at least", len(refs))
	}
	if r.Remaining() != 0 {
		return ActionEntry{}, fmt.Errorf("action cache entry: %d trailing bytes", r.Remaining())
	}
	return ActionEntry{Result: refs[0], HasRun: true, Trace: refs[1], Outputs: refs[2:]}, nil
}

// Refs lists every reference the entry names (gc trims the entry when
// one of them is gone, SPECS.md §19.6).
func (e ActionEntry) Refs() []asl.Reference {
	if !e.HasRun {
		return []asl.Reference{e.Result}
	}
	return append([]asl.Reference{e.Result, e.Trace}, e.Outputs...)
}

// lookupParallel bounds the outputs an action-cache hit reads at once.
const lookupParallel = 16

// answers reports whether r is the result of req.
func (r Result) answers(req Request) bool {
	if r.ProgramRef != req.ProgramRef || len(r.InputRefs) != len(req.InputRefs) ||
		r.HasParams != req.HasParams || (r.HasParams && r.ParamsRef != req.ParamsRef) ||
		r.Limits != req.Limits || r.Value.SchemeRef != req.scheme() {
		return false
	}
	for i := range r.InputRefs {
		if r.InputRefs[i] != req.InputRefs[i] {
			return false
		}
	}
	return true
}

// missOrError turns content problems (missing, damaged, undecodable) into a
// cache miss and keeps operational errors.
func missOrError(err error) error {
	if asl.IsContentError(err) || errors.Is(err, ErrNoTrace) {
		return nil
	}
	return err
}

// drain reads ref whole, so that the store verifies it.
func drain(ctx context.Context, f asl.Fetcher, ref asl.Reference) error {
	rc, _, err := f.Fetch(ctx, ref)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}
