package trace

import (
	"context"
	"fmt"
	"slices"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
)

// Links are the references a trace ties together. The surface supplies
// them: ProgramRef, InputRefs and ParamsRef as requested, ExecResultRef as
// returned when it stored the result artifact (which it stores first).
type Links struct {
	ProgramRef    asl.Reference
	InputRefs     []asl.Reference
	ParamsRef     asl.Reference // meaningful only when HasParams
	HasParams     bool
	ExecResultRef asl.Reference
}

// Builder turns the pel.NodeEvents of one Exec_DAG run into a Trace. Pass it
// as the Observer of pel.ExecDAG, then call Finish. It derives each node
// output's Reference under the hash the surface stores artifacts with, so
// the output refs of root nodes equal the surface's output refs. A Builder
// is for one run and one goroutine, and Finish is called once: the trace
// takes the Builder's records without a copy (a run of a million nodes
// holds a million of them).
type Builder struct {
	hash    asl.HashID
	records []NodeRecord
	// refs holds the records' output references, refsChunk at a time,
	// rather than one small allocation per node.
	refs []asl.Reference
}

const refsChunk = 4096

var _ pel.Observer = (*Builder)(nil)

// NewBuilder returns a Builder deriving output references with hash, which
// must be registered.
func NewBuilder(hash asl.HashID) (*Builder, error) {
	if _, ok := asl.LookupHash(hash); !ok {
		return nil, fmt.Errorf("trace builder: hash id 0x%04x: %w", uint16(hash), asl.ErrUnsupported)
	}
	return &Builder{hash: hash}, nil
}

// ObserveNode records one node event, deriving its output references from
// ev.Outputs (or, when they are absent, from ev.Values, which must then be
// in memory: use ObserveRefs for ropes that read a store).
func (b *Builder) ObserveNode(ev pel.NodeEvent) {
	var refs []asl.Reference
	switch {
	case len(ev.Outputs) > 0:
		refs = make([]asl.Reference, len(ev.Outputs))
		for i, out := range ev.Outputs {
			refs[i] = asl.MustDerive(b.hash, out) // hash checked in NewBuilder
		}
	case len(ev.Values) > 0:
		refs = make([]asl.Reference, len(ev.Values))
		for i, v := range ev.Values {
			ref, err := v.Ref(context.Background(), b.hash)
			if err != nil {
				panic(fmt.Sprintf("trace builder: node %d output %d: %v (use ObserveRefs)", ev.NodeID, i, err))
			}
			refs[i] = ref
		}
	}
	b.ObserveRefs(ev, refs)
}

// ObserveRefs records one node event whose output references the caller
// derived (under the Builder's hash) as refs; ev.Outputs and ev.Values
// are not read.
func (b *Builder) ObserveRefs(ev pel.NodeEvent, refs []asl.Reference) {
	rec := NodeRecord{
		NodeID:      ev.NodeID,
		Op:          ev.Op,
		Status:      ev.Status,
		StatusCode:  ev.StatusCode,
		Diagnostics: slices.Clone(ev.Diagnostics),
	}
	if len(refs) > 0 {
		if cap(b.refs)-len(b.refs) < len(refs) {
			b.refs = make([]asl.Reference, 0, max(refsChunk, len(refs)))
		}
		at := len(b.refs)
		b.refs = append(b.refs, refs...)
		rec.OutputRefs = b.refs[at:len(b.refs):len(b.refs)]
	}
	b.records = append(b.records, rec)
}

// Hash is the hash id the Builder derives output references with.
func (b *Builder) Hash() asl.HashID { return b.hash }

// Finish returns the trace of the run whose result is res, handing it the
// records observed (the Builder is spent afterwards). It fails if the
// observed events and res are inconsistent (see Trace.Validate) or a link is
// the zero Reference.
func (b *Builder) Finish(l Links, res pel.ExecutionResultValue) (Trace, error) {
	t := Trace{
		SchemeRef:     res.SchemeRef,
		ProgramRef:    l.ProgramRef,
		InputRefs:     slices.Clone(l.InputRefs),
		ParamsRef:     l.ParamsRef,
		HasParams:     l.HasParams,
		ExecResultRef: l.ExecResultRef,
		Status:        res.Status,
		StatusCode:    res.Summary.StatusCode,
		Nodes:         b.records,
	}
	b.records, b.refs = nil, nil
	if !l.HasParams {
		t.ParamsRef = asl.Reference{}
	}
	if err := t.Validate(); err != nil {
		return Trace{}, err
	}
	return t, nil
}
