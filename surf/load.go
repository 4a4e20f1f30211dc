package surf

import (
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/trace"
)

// ErrNoTrace: no trace naming the result is stored.
var ErrNoTrace = errors.New("no trace for result")

// indexedTrace returns the trace the surf.trace index names for resultRef,
// without reading it; found is false when the store has no index, no entry,
// or an entry that is not a reference.
func indexedTrace(ctx context.Context, s asl.Store, resultRef asl.Reference) (asl.Reference, bool, error) {
	ix, ok := s.(asl.Indexer)
	if !ok {
		return asl.Reference{}, false, nil
	}
	v, found, err := ix.LookupIndex(ctx, TraceIndexSpace, resultRef.Bytes())
	if err != nil || !found {
		return asl.Reference{}, false, err
	}
	ref, err := asl.DecodeReference(v)
	return ref, err == nil, nil
}

// LoadResult fetches and decodes the result artifact ref names.
func LoadResult(ctx context.Context, f asl.Fetcher, ref asl.Reference) (Result, error) {
	a, err := asl.Get(ctx, f, ref, 0)
	if err != nil {
		return Result{}, err
	}
	res, err := DecodeResultArtifact(a)
	if err != nil {
		return Result{}, fmt.Errorf("result %s: %w", ref, err)
	}
	return res, nil
}

// LoadTrace fetches and decodes the trace artifact ref names.
func LoadTrace(ctx context.Context, f asl.Fetcher, ref asl.Reference) (trace.Trace, error) {
	a, err := asl.Get(ctx, f, ref, 0)
	if err != nil {
		return trace.Trace{}, err
	}
	t, err := trace.DecodeArtifact(a)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("trace %s: %w", ref, err)
	}
	return t, nil
}

// FindTrace returns the reference of the trace whose exec_result_ref is
// resultRef (SPECS.md §14.4). It asks the store's surf.trace index when the
// store has one: an entry naming a trace that decodes and names resultRef is
// the answer; an entry naming a trace that is damaged or missing is reported
// as that error (the trace exists but cannot be read; scanning would not
// find another). Without an entry, or with one naming some other trace, it
// scans every stored trace artifact, which is slow but needs only content.
func FindTrace(ctx context.Context, s asl.Store, resultRef asl.Reference) (asl.Reference, error) {
	ref, found, err := indexedTrace(ctx, s, resultRef)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("trace of %s: %w", resultRef, err)
	}
	if found {
		t, err := LoadTrace(ctx, s, ref)
		switch {
		case err == nil && t.ExecResultRef == resultRef:
			return ref, nil
		case err != nil && (errors.Is(err, asl.ErrIntegrity) || errors.Is(err, asl.ErrNotFound) || !asl.IsContentError(err)):
			return asl.Reference{}, fmt.Errorf("trace %s of result %s: %w", ref, resultRef, err)
		}
	}
	var hit asl.Reference
	errFound := errors.New("found")
	err = s.Enumerate(ctx, asl.Reference{}, func(info asl.Info) error {
		if !info.HasTag || info.Tag != asl.TagPELTraceDAG1 {
			return nil
		}
		t, err := LoadTrace(ctx, s, info.Ref)
		if err != nil || t.ExecResultRef != resultRef {
			return nil
		}
		hit = info.Ref
		return errFound
	})
	switch {
	case err == errFound:
		return hit, nil
	case err != nil:
		return asl.Reference{}, fmt.Errorf("trace of %s: %w", resultRef, err)
	}
	return asl.Reference{}, fmt.Errorf("result %s: %w", resultRef, ErrNoTrace)
}
