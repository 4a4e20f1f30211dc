package conformance

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/trace"
)

// JSON forms of PEL values in vector files (SPECS.md §7-§14). They are
// language-neutral: references are in text form (§5.2), byte strings are
// lowercase hex, and params are the raw ParamsBytes. Vectors about bytes
// (the codecs) write statuses, kinds, phases and store errors as their
// numbers; vectors about behaviour (exec_dag, surface_run) write their names
// (OK, INVALID_INPUTS, ERR_NOT_FOUND, ...).

// programVec is a Program: nodes in the order given, each input either
// {"input":I} or {"node":N,"output":K}, params as hex of the ParamsBytes.
type programVec struct {
	Nodes []nodeVec `json:"nodes"`
	Roots []rootVec `json:"roots"`
}

type nodeVec struct {
	ID      uint32     `json:"id"`
	Op      string     `json:"op"`
	Version uint32     `json:"version"`
	Inputs  []inputVec `json:"inputs"`
	Params  Hex        `json:"params"`
}

type inputVec struct {
	Input  *uint32 `json:"input,omitempty"`
	Node   *uint32 `json:"node,omitempty"`
	Output *uint32 `json:"output,omitempty"`
}

type rootVec struct {
	Node   uint32 `json:"node"`
	Output uint32 `json:"output"`
}

func programToVec(p pel.Program) programVec {
	v := programVec{Nodes: make([]nodeVec, len(p.Nodes)), Roots: make([]rootVec, len(p.Roots))}
	for i, n := range p.Nodes {
		nv := nodeVec{ID: uint32(n.ID), Op: n.Op.Name, Version: n.Op.Version, Inputs: make([]inputVec, len(n.Inputs)), Params: Hex(n.Params)}
		if nv.Params == nil {
			nv.Params = Hex{}
		}
		for j, in := range n.Inputs {
			if in.Kind == pel.InputExternal {
				nv.Inputs[j] = inputVec{Input: ptr(in.InputIndex)}
			} else {
				nv.Inputs[j] = inputVec{Node: ptr(uint32(in.NodeID)), Output: ptr(in.OutputIndex)}
			}
		}
		v.Nodes[i] = nv
	}
	for k, r := range p.Roots {
		v.Roots[k] = rootVec{Node: uint32(r.NodeID), Output: r.OutputIndex}
	}
	return v
}

func (v programVec) program() (pel.Program, error) {
	var p pel.Program
	for _, nv := range v.Nodes {
		n := pel.Node{ID: pel.NodeID(nv.ID), Op: opreg.OperationID{Name: nv.Op, Version: nv.Version}, Params: []byte(nv.Params)}
		if n.Params == nil {
			n.Params = []byte{}
		}
		for j, in := range nv.Inputs {
			switch {
			case in.Input != nil && in.Node == nil && in.Output == nil:
				n.Inputs = append(n.Inputs, pel.External(*in.Input))
			case in.Input == nil && in.Node != nil && in.Output != nil:
				n.Inputs = append(n.Inputs, pel.FromNode(pel.NodeID(*in.Node), *in.Output))
			default:
				return pel.Program{}, fmt.Errorf("bad vector: node %d input %d: want {\"input\":I} or {\"node\":N,\"output\":K}", nv.ID, j)
			}
		}
		p.Nodes = append(p.Nodes, n)
	}
	for _, r := range v.Roots {
		p.Roots = append(p.Roots, pel.RootRef{NodeID: pel.NodeID(r.Node), OutputIndex: r.Output})
	}
	return p, nil
}

// diagVec is a DiagnosticEntry: the message as text when it is valid UTF-8,
// else as hex ("message_hex"); exactly one of the two is present.
type diagVec struct {
	Code       uint32  `json:"code"`
	Message    *string `json:"message,omitempty"`
	MessageHex *Hex    `json:"message_hex,omitempty"`
}

func diagsToVec(ds []pel.DiagnosticEntry) []diagVec {
	out := make([]diagVec, len(ds))
	for i, d := range ds {
		out[i].Code = d.Code
		if utf8.Valid(d.Message) {
			out[i].Message = ptr(string(d.Message))
		} else {
			out[i].MessageHex = ptr(Hex(d.Message))
		}
	}
	return out
}

func diagsFromVec(vs []diagVec) ([]pel.DiagnosticEntry, error) {
	var out []pel.DiagnosticEntry
	for i, v := range vs {
		d := pel.DiagnosticEntry{Code: v.Code}
		switch {
		case v.Message != nil && v.MessageHex == nil:
			d.Message = []byte(*v.Message)
		case v.Message == nil && v.MessageHex != nil:
			d.Message = []byte(*v.MessageHex)
		default:
			return nil, fmt.Errorf("bad vector: diagnostic %d: want exactly one of message and message_hex", i)
		}
		if d.Message == nil {
			d.Message = []byte{}
		}
		out = append(out, d)
	}
	return out, nil
}

// eqDiags compares diagnostics entry by entry, codes and message bytes.
func eqDiags(what string, got []pel.DiagnosticEntry, want []diagVec) error {
	w, err := diagsFromVec(want)
	if err != nil {
		return err
	}
	if len(got) != len(w) {
		return fmt.Errorf("%s: %d diagnostics %v, want %d", what, len(got), diagsToVec(got), len(w))
	}
	for i := range got {
		if got[i].Code != w[i].Code || string(got[i].Message) != string(w[i].Message) {
			return fmt.Errorf("%s: diagnostic %d = 0x%08x %q, want 0x%08x %q", what, i, got[i].Code, got[i].Message, w[i].Code, w[i].Message)
		}
	}
	return nil
}

// refText parses a reference in text form from a vector.
func refText(what, s string) (asl.Reference, error) {
	r, err := asl.ParseReference(s)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("bad vector: %s: %v", what, err)
	}
	return r, nil
}

func refsText(what string, ss []string) ([]asl.Reference, error) {
	var out []asl.Reference
	for i, s := range ss {
		r, err := refText(fmt.Sprintf("%s[%d]", what, i), s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func refsToText(refs []asl.Reference) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

func optRefToText(r asl.Reference, present bool) *string {
	if !present {
		return nil
	}
	return ptr(r.String())
}

func optRefText(what string, s *string) (asl.Reference, bool, error) {
	if s == nil {
		return asl.Reference{}, false, nil
	}
	r, err := refText(what, *s)
	return r, true, err
}

func eqRefs(what string, got []asl.Reference, want []string) error {
	if g := refsToText(got); !slices.Equal(g, want) {
		return fmt.Errorf("%s = %v, want %v", what, g, want)
	}
	return nil
}

// valueVec is an ExecutionResultValue with numeric status and kind.
type valueVec struct {
	PEL1Version uint16    `json:"pel1_version"`
	Status      uint8     `json:"status"`
	SchemeRef   string    `json:"scheme_ref"`
	Kind        uint8     `json:"kind"`
	StatusCode  uint32    `json:"status_code"`
	Diagnostics []diagVec `json:"diagnostics"`
}

func valueToVec(v pel.ExecutionResultValue) valueVec {
	return valueVec{PEL1Version: v.PEL1Version, Status: uint8(v.Status), SchemeRef: v.SchemeRef.String(),
		Kind: uint8(v.Summary.Kind), StatusCode: v.Summary.StatusCode, Diagnostics: diagsToVec(v.Diagnostics)}
}

func (v valueVec) value() (pel.ExecutionResultValue, error) {
	ref, err := refText("scheme_ref", v.SchemeRef)
	if err != nil {
		return pel.ExecutionResultValue{}, err
	}
	ds, err := diagsFromVec(v.Diagnostics)
	if err != nil {
		return pel.ExecutionResultValue{}, err
	}
	return pel.ExecutionResultValue{PEL1Version: v.PEL1Version, Status: pel.ExecutionStatus(v.Status), SchemeRef: ref,
		Summary: pel.ExecutionErrorSummary{Kind: pel.ExecutionErrorKind(v.Kind), StatusCode: v.StatusCode}, Diagnostics: ds}, nil
}

// eqValue compares two values field by field.
func eqValue(what string, got pel.ExecutionResultValue, want valueVec) error {
	g := valueToVec(got)
	switch {
	case g.PEL1Version != want.PEL1Version:
		return fmt.Errorf("%s.pel1_version = %d, want %d", what, g.PEL1Version, want.PEL1Version)
	case g.Status != want.Status || g.Kind != want.Kind || g.StatusCode != want.StatusCode:
		return fmt.Errorf("%s status/kind/code = %d/%d/%d, want %d/%d/%d", what, g.Status, g.Kind, g.StatusCode, want.Status, want.Kind, want.StatusCode)
	case g.SchemeRef != want.SchemeRef:
		return fmt.Errorf("%s.scheme_ref = %s, want %s", what, g.SchemeRef, want.SchemeRef)
	}
	return eqDiags(what+".diagnostics", got.Diagnostics, want.Diagnostics)
}

// traceVec is a Trace with numeric statuses.
type traceVec struct {
	SchemeRef     string         `json:"scheme_ref"`
	ProgramRef    string         `json:"program_ref"`
	InputRefs     []string       `json:"input_refs"`
	ParamsRef     *string        `json:"params_ref"`
	ExecResultRef string         `json:"exec_result_ref"`
	Status        uint8          `json:"status"`
	StatusCode    uint32         `json:"status_code"`
	Nodes         []traceNodeVec `json:"nodes"`
}

type traceNodeVec struct {
	NodeID      uint32    `json:"node_id"`
	Op          string    `json:"op"`
	Version     uint32    `json:"version"`
	Status      uint8     `json:"status"`
	StatusCode  uint32    `json:"status_code"`
	OutputRefs  []string  `json:"output_refs"`
	Diagnostics []diagVec `json:"diagnostics"`
}

func traceToVec(t trace.Trace) traceVec {
	v := traceVec{SchemeRef: t.SchemeRef.String(), ProgramRef: t.ProgramRef.String(), InputRefs: refsToText(t.InputRefs),
		ParamsRef: optRefToText(t.ParamsRef, t.HasParams), ExecResultRef: t.ExecResultRef.String(),
		Status: uint8(t.Status), StatusCode: t.StatusCode, Nodes: make([]traceNodeVec, len(t.Nodes))}
	for i, n := range t.Nodes {
		v.Nodes[i] = traceNodeVec{NodeID: uint32(n.NodeID), Op: n.Op.Name, Version: n.Op.Version, Status: uint8(n.Status),
			StatusCode: n.StatusCode, OutputRefs: refsToText(n.OutputRefs), Diagnostics: diagsToVec(n.Diagnostics)}
	}
	return v
}

func (v traceVec) trace() (trace.Trace, error) {
	var t trace.Trace
	var errs []error
	ref := func(what, s string) asl.Reference {
		r, err := refText(what, s)
		errs = append(errs, err)
		return r
	}
	refs := func(what string, ss []string) []asl.Reference {
		r, err := refsText(what, ss)
		errs = append(errs, err)
		return r
	}
	t.SchemeRef = ref("scheme_ref", v.SchemeRef)
	t.ProgramRef = ref("program_ref", v.ProgramRef)
	t.InputRefs = refs("input_refs", v.InputRefs)
	var err error
	t.ParamsRef, t.HasParams, err = optRefText("params_ref", v.ParamsRef)
	errs = append(errs, err)
	t.ExecResultRef = ref("exec_result_ref", v.ExecResultRef)
	t.Status, t.StatusCode = pel.ExecutionStatus(v.Status), v.StatusCode
	for i, n := range v.Nodes {
		ds, err := diagsFromVec(n.Diagnostics)
		errs = append(errs, err)
		t.Nodes = append(t.Nodes, trace.NodeRecord{NodeID: pel.NodeID(n.NodeID), Op: opreg.OperationID{Name: n.Op, Version: n.Version},
			Status: pel.ExecutionStatus(n.Status), StatusCode: n.StatusCode, OutputRefs: refs(fmt.Sprintf("nodes[%d].output_refs", i), n.OutputRefs),
			Diagnostics: ds})
	}
	return t, errors.Join(errs...)
}

// eqTrace compares a decoded trace with its vector form, every field.
func eqTrace(got trace.Trace, want traceVec) error {
	g := traceToVec(got)
	switch {
	case g.SchemeRef != want.SchemeRef || g.ProgramRef != want.ProgramRef || g.ExecResultRef != want.ExecResultRef:
		return fmt.Errorf("trace refs scheme/program/exec_result = %s/%s/%s, want %s/%s/%s", g.SchemeRef, g.ProgramRef, g.ExecResultRef, want.SchemeRef, want.ProgramRef, want.ExecResultRef)
	case !slices.Equal(g.InputRefs, want.InputRefs):
		return fmt.Errorf("trace input_refs = %v, want %v", g.InputRefs, want.InputRefs)
	case (g.ParamsRef == nil) != (want.ParamsRef == nil) || g.ParamsRef != nil && *g.ParamsRef != *want.ParamsRef:
		return fmt.Errorf("trace params_ref = %v, want %v", deref(g.ParamsRef), deref(want.ParamsRef))
	case g.Status != want.Status || g.StatusCode != want.StatusCode:
		return fmt.Errorf("trace status = %d/%d, want %d/%d", g.Status, g.StatusCode, want.Status, want.StatusCode)
	case len(g.Nodes) != len(want.Nodes):
		return fmt.Errorf("trace has %d node records, want %d", len(g.Nodes), len(want.Nodes))
	}
	for i, n := range g.Nodes {
		w := want.Nodes[i]
		if n.NodeID != w.NodeID || n.Op != w.Op || n.Version != w.Version || n.Status != w.Status || n.StatusCode != w.StatusCode ||
			!slices.Equal(n.OutputRefs, w.OutputRefs) {
			return fmt.Errorf("trace node record %d = %+v, want %+v", i, n, w)
		}
		if err := eqDiags(fmt.Sprintf("trace node record %d", i), got.Nodes[i].Diagnostics, w.Diagnostics); err != nil {
			return err
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// limitsVec is a pair of deterministic bounds (§12.6, §14.7); in a result
// it is null when both are zero (has_limits 0x00).
type limitsVec struct {
	MaxNodes       uint64 `json:"max_nodes"`
	MaxOutputBytes uint64 `json:"max_output_bytes"`
}

func limitsToVec(l pel.Limits) *limitsVec {
	if l == (pel.Limits{}) {
		return nil
	}
	return &limitsVec{MaxNodes: l.MaxNodes, MaxOutputBytes: l.MaxOutputBytes}
}

func (v *limitsVec) limits() pel.Limits {
	if v == nil {
		return pel.Limits{}
	}
	return pel.Limits{MaxNodes: v.MaxNodes, MaxOutputBytes: v.MaxOutputBytes}
}

// storeFailureVec is a surface store failure with numeric phase and error
// (codec vectors).
type storeFailureVec struct {
	Phase      uint8  `json:"phase"`
	InputIndex uint32 `json:"input_index"`
	Ref        string `json:"ref"`
	Error      uint8  `json:"error"`
}

// resultVec is a SurfaceExecutionResult (§14.1).
type resultVec struct {
	ProgramRef   string           `json:"program_ref"`
	InputRefs    []string         `json:"input_refs"`
	ParamsRef    *string          `json:"params_ref"`
	Limits       *limitsVec       `json:"limits"`
	Value        valueVec         `json:"value"`
	OutputRefs   []string         `json:"output_refs"`
	StoreFailure *storeFailureVec `json:"store_failure"`
}

func resultToVec(r surf.Result) resultVec {
	v := resultVec{ProgramRef: r.ProgramRef.String(), InputRefs: refsToText(r.InputRefs), ParamsRef: optRefToText(r.ParamsRef, r.HasParams),
		Limits: limitsToVec(r.Limits), Value: valueToVec(r.Value), OutputRefs: refsToText(r.OutputRefs)}
	if r.HasStoreFailure {
		f := r.StoreFailure
		v.StoreFailure = &storeFailureVec{Phase: uint8(f.Phase), InputIndex: f.InputIndex, Ref: f.Ref.String(), Error: uint8(f.Error)}
	}
	return v
}

func (v resultVec) result() (surf.Result, error) {
	var r surf.Result
	var errs []error
	var err error
	r.ProgramRef, err = refText("program_ref", v.ProgramRef)
	errs = append(errs, err)
	r.InputRefs, err = refsText("input_refs", v.InputRefs)
	errs = append(errs, err)
	r.ParamsRef, r.HasParams, err = optRefText("params_ref", v.ParamsRef)
	errs = append(errs, err)
	r.Limits = v.Limits.limits()
	r.Value, err = v.Value.value()
	errs = append(errs, err)
	r.OutputRefs, err = refsText("output_refs", v.OutputRefs)
	errs = append(errs, err)
	if f := v.StoreFailure; f != nil {
		r.HasStoreFailure = true
		r.StoreFailure = surf.StoreFailure{Phase: surf.Phase(f.Phase), InputIndex: f.InputIndex, Error: surf.StoreError(f.Error)}
		r.StoreFailure.Ref, err = refText("store_failure.ref", f.Ref)
		errs = append(errs, err)
	}
	return r, errors.Join(errs...)
}

func eqResult(got surf.Result, want resultVec) error {
	g := resultToVec(got)
	switch {
	case g.ProgramRef != want.ProgramRef:
		return fmt.Errorf("program_ref = %s, want %s", g.ProgramRef, want.ProgramRef)
	case !slices.Equal(g.InputRefs, want.InputRefs):
		return fmt.Errorf("input_refs = %v, want %v", g.InputRefs, want.InputRefs)
	case (g.ParamsRef == nil) != (want.ParamsRef == nil) || g.ParamsRef != nil && *g.ParamsRef != *want.ParamsRef:
		return fmt.Errorf("params_ref = %v, want %v", deref(g.ParamsRef), deref(want.ParamsRef))
	case (g.Limits == nil) != (want.Limits == nil) || g.Limits != nil && *g.Limits != *want.Limits:
		return fmt.Errorf("limits = %+v, want %+v", g.Limits, want.Limits)
	case !slices.Equal(g.OutputRefs, want.OutputRefs):
		return fmt.Errorf("output_refs = %v, want %v", g.OutputRefs, want.OutputRefs)
	case (g.StoreFailure == nil) != (want.StoreFailure == nil) || g.StoreFailure != nil && *g.StoreFailure != *want.StoreFailure:
		return fmt.Errorf("store_failure = %+v, want %+v", g.StoreFailure, want.StoreFailure)
	}
	return eqValue("value", got.Value, want.Value)
}
