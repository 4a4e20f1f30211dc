package surf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// Mismatch is the first difference replay verification found.
type Mismatch struct {
	// Artifact names what differs: "output[N]", "result" or "trace".
	Artifact string
	// Stored is the reference the store holds (zero if absent); Replayed
	// is the reference the replay produced (zero if it produced none).
	Stored, Replayed asl.Reference
	// Detail says how they differ, e.g. "node 3: status_code 0x00030001 stored, 0x00000000 replayed".
	Detail string
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("%s differs: stored %s, replayed %s: %s", m.Artifact, m.Stored, m.Replayed, m.Detail)
}

// Verification is the outcome of Verify.
type Verification struct {
	ResultRef asl.Reference
	TraceRef  asl.Reference // the stored trace found for the result (zero if none)
	Replayed  *Run          // what the replay computed (not stored)
	Mismatch  *Mismatch     // nil when everything is byte-identical
}

// Verify replays a stored run (SPECS.md §14.8): it loads the result named by
// resultRef, re-executes its request from the stored program, inputs and
// params under the result's hash, and checks that every output, the result
// and the trace are byte-identical to what the store holds. It stores
// nothing. The first difference is reported in this order: outputs by
// index, the result, the trace. An error means verification could not be
// carried out (the result itself is missing or undecodable, or I/O failed).
func (s *Surface) Verify(ctx context.Context, resultRef asl.Reference) (*Verification, error) {
	stored, err := LoadResult(ctx, s.store, resultRef)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", resultRef, err)
	}
	req := Request{SchemeRef: stored.Value.SchemeRef, ProgramRef: stored.ProgramRef, InputRefs: stored.InputRefs,
		ParamsRef: stored.ParamsRef, HasParams: stored.HasParams, Limits: stored.Limits}
	// The replay re-executes every node and writes nothing: no node memo
	// (a poisoned memo would otherwise verify as clean).
	replayer := &Surface{store: s.store, opts: s.opts}
	replayer.opts.Hash = resultRef.HashID()
	replayer.opts.NodeMemo = false
	c, err := replayer.compute(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("verify %s: replay: %w", resultRef, err)
	}
	defer c.close()
	v := &Verification{ResultRef: resultRef, Replayed: c.run}
	if v.TraceRef, err = s.storedTraceRef(ctx, resultRef); err != nil {
		return nil, fmt.Errorf("verify %s: %w", resultRef, err)
	}
	v.Mismatch, err = s.firstMismatch(ctx, stored, resultRef, v.TraceRef, c)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", resultRef, err)
	}
	return v, nil
}

// storedTraceRef is the trace the index names for resultRef, even if that
// trace is damaged, else what a content scan finds, else zero. Errors other
// than "no trace" are operational and returned.
func (s *Surface) storedTraceRef(ctx context.Context, resultRef asl.Reference) (asl.Reference, error) {
	if ref, found, err := indexedTrace(ctx, s.store, resultRef); err != nil || found {
		return ref, err
	}
	ref, err := FindTrace(ctx, s.store, resultRef)
	if err != nil && !errors.Is(err, ErrNoTrace) && missOrError(err) != nil {
		return asl.Reference{}, err
	}
	return ref, nil
}

func (s *Surface) firstMismatch(ctx context.Context, stored Result, resultRef, traceRef asl.Reference, c *computed) (*Mismatch, error) {
	replayed := c.run
	n := max(len(stored.OutputRefs), len(replayed.OutputRefs))
	for i := 0; i < n; i++ {
		var st, rp asl.Reference
		if i < len(stored.OutputRefs) {
			st = stored.OutputRefs[i]
		}
		if i < len(replayed.OutputRefs) {
			rp = replayed.OutputRefs[i]
		}
		name := fmt.Sprintf("output[%d]", i)
		switch {
		case st.IsZero():
			return &Mismatch{name, st, rp, "the stored result has no such output"}, nil
		case rp.IsZero():
			return &Mismatch{name, st, rp, "the replay produced no such output"}, nil
		case st != rp:
			return &Mismatch{name, st, rp, fmt.Sprintf("replayed bytes (%d) hash differently", c.outputs[i].Size())}, nil
		}
		if m, err := s.checkStored(ctx, name, st, rp); m != nil || err != nil {
			return m, err
		}
	}
	if resultRef != replayed.ResultRef {
		return &Mismatch{"result", resultRef, replayed.ResultRef, diffResult(stored, replayed.Result)}, nil
	}
	if traceRef.IsZero() {
		return &Mismatch{"trace", traceRef, replayed.TraceRef, "no stored trace names the result"}, nil
	}
	if m, err := s.checkStored(ctx, "trace", traceRef, replayed.TraceRef); m != nil || err != nil {
		return m, err
	}
	if traceRef != replayed.TraceRef {
		st, err := LoadTrace(ctx, s.store, traceRef)
		if err != nil {
			return &Mismatch{"trace", traceRef, replayed.TraceRef, fmt.Sprintf("stored trace does not decode: %v", err)}, nil
		}
		rt := replayed.Trace
		if !c.trace.Held {
			// A large replayed trace is spooled, not held: decode it.
			a, err := c.trace.Artifact(uint64(s.maxArtifact()))
			if err == nil {
				rt, err = trace.DecodeArtifact(a)
			}
			if err != nil {
				return &Mismatch{"trace", traceRef, replayed.TraceRef, fmt.Sprintf("%d node records replayed, not compared: %v", c.trace.Count, err)}, nil
			}
		}
		return &Mismatch{"trace", traceRef, replayed.TraceRef, diffTrace(st, rt)}, nil
	}
	return nil, nil
}

// checkStored reads ref whole so the store verifies it; damage or absence is
// a mismatch, other errors are returned.
func (s *Surface) checkStored(ctx context.Context, name string, ref, replayed asl.Reference) (*Mismatch, error) {
	err := drain(ctx, s.store, ref)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, asl.ErrIntegrity):
		return &Mismatch{name, ref, replayed, "the stored artifact is damaged (ERR_INTEGRITY)"}, nil
	case errors.Is(err, asl.ErrNotFound):
		return &Mismatch{name, ref, replayed, "the stored artifact is missing (ERR_NOT_FOUND)"}, nil
	}
	return nil, err
}

func diffResult(a, b Result) string {
	switch {
	case a.Value.Status != b.Value.Status:
		return fmt.Sprintf("status %s stored, %s replayed", a.Value.Status, b.Value.Status)
	case a.Value.Summary != b.Value.Summary:
		return fmt.Sprintf("status_code 0x%08x stored, 0x%08x replayed", a.Value.Summary.StatusCode, b.Value.Summary.StatusCode)
	case a.HasStoreFailure != b.HasStoreFailure || a.StoreFailure != b.StoreFailure:
		return fmt.Sprintf("store failure %+v stored, %+v replayed", a.StoreFailure, b.StoreFailure)
	case !diagsEqual(a.Value.Diagnostics, b.Value.Diagnostics):
		return "diagnostics differ"
	}
	return "encodings differ"
}

func diffTrace(a, b trace.Trace) string {
	for i := 0; i < min(len(a.Nodes), len(b.Nodes)); i++ {
		x, y := a.Nodes[i], b.Nodes[i]
		switch {
		case x.NodeID != y.NodeID:
			return fmt.Sprintf("record %d: node %d stored, node %d replayed", i, x.NodeID, y.NodeID)
		case x.Status != y.Status || x.StatusCode != y.StatusCode:
			return fmt.Sprintf("node %d: status %s/0x%08x stored, %s/0x%08x replayed", x.NodeID, x.Status, x.StatusCode, y.Status, y.StatusCode)
		case len(x.OutputRefs) != len(y.OutputRefs):
			return fmt.Sprintf("node %d: %d outputs stored, %d replayed", x.NodeID, len(x.OutputRefs), len(y.OutputRefs))
		case !diagsEqual(x.Diagnostics, y.Diagnostics):
			return fmt.Sprintf("node %d: diagnostics differ", x.NodeID)
		}
		for j := range x.OutputRefs {
			if x.OutputRefs[j] != y.OutputRefs[j] {
				return fmt.Sprintf("node %d output %d: %s stored, %s replayed", x.NodeID, j, x.OutputRefs[j], y.OutputRefs[j])
			}
		}
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Sprintf("%d node records stored, %d replayed", len(a.Nodes), len(b.Nodes))
	}
	return "header fields differ (links or overall status)"
}

func diagsEqual(a, b []pel.DiagnosticEntry) bool {
	return slices.EqualFunc(a, b, func(x, y pel.DiagnosticEntry) bool {
		return x.Code == y.Code && bytes.Equal(x.Message, y.Message)
	})
}
