// Package trace implements PEL/TRACE-DAG/1 and its encoding
// ENC/PEL-TRACE-DAG/1 (SPECS.md §13): a per-node record of one Exec_DAG
// run, stored as an artifact tagged TYPE_TAG_PEL_TRACE_DAG_1 (0x00000102).
//
// A trace links the run's inputs (scheme_ref, program_ref, input_refs,
// optional params_ref) to its execution result (exec_result_ref: the
// result artifact is stored first, so it cannot name the trace) and lists,
// in canonical node order, every node Exec_DAG reached: its id, operation,
// status and output references, plus the diagnostics of the node at which
// execution stopped. Nodes after a failing node, and every node of a
// program rejected before evaluation, are not listed.
//
// Invariants (checked by Validate, Encode and Decode): statuses follow the
// PEL/1-CORE rules (pel.CheckStatus); only the last record may be non-OK,
// only OK records have outputs and only the last record has diagnostics;
// the last record's status agrees with the overall status.
package trace

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
)

// Trace is a PEL/TRACE-DAG/1 value (SPECS.md §13.1).
type Trace struct {
	SchemeRef     asl.Reference
	ProgramRef    asl.Reference
	InputRefs     []asl.Reference
	ParamsRef     asl.Reference // meaningful only when HasParams
	HasParams     bool
	ExecResultRef asl.Reference
	Status        pel.ExecutionStatus
	StatusCode    uint32
	Nodes         []NodeRecord
}

// NodeRecord is what the trace keeps of one reached node.
type NodeRecord struct {
	NodeID      pel.NodeID
	Op          pel.OperationID
	Status      pel.ExecutionStatus
	StatusCode  uint32
	OutputRefs  []asl.Reference
	Diagnostics []pel.DiagnosticEntry
}

// Minimum encoded sizes for count checks.
const (
	minRefSize    = 4 + 2                         // EncodedRef with a bare hash id
	minRecordSize = 4 + 4 + 1 + 4 + 1 + 4 + 4 + 4 // id, name len, 1-byte name, version, status, code, output count, diag count
)

// Validate checks t against the invariants in the package documentation.
func (t Trace) Validate() error {
	for _, r := range []struct {
		name string
		ref  asl.Reference
	}{{"scheme_ref", t.SchemeRef}, {"program_ref", t.ProgramRef}, {"exec_result_ref", t.ExecResultRef}} {
		if r.ref.IsZero() {
			return fmt.Errorf("trace: %s is the zero reference", r.name)
		}
	}
	for i, r := range t.InputRefs {
		if r.IsZero() {
			return fmt.Errorf("trace: input_refs[%d] is the zero reference", i)
		}
	}
	if t.HasParams && t.ParamsRef.IsZero() {
		return fmt.Errorf("trace: params_ref is the zero reference")
	}
	if err := pel.CheckStatus(t.Status, t.Status.Kind(), t.StatusCode); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	for i := range t.Nodes {
		if err := t.checkRecord(i); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	if err := t.checkOverall(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

func (t Trace) checkRecord(i int) error {
	return checkRecord(&t.Nodes[i], i == len(t.Nodes)-1)
}

// checkRecord checks one record; last says whether it is the trace's last.
func checkRecord(n *NodeRecord, last bool) error {
	if err := pel.CheckOpName(n.Op.Name); err != nil {
		return fmt.Errorf("node %d: %w", n.NodeID, err)
	}
	if err := checkNodeStatus(n.Status, n.StatusCode); err != nil {
		return fmt.Errorf("node %d: %w", n.NodeID, err)
	}
	switch {
	case n.Status != pel.StatusOK && !last:
		return fmt.Errorf("node %d: status %s on a record that is not the last", n.NodeID, n.Status)
	case n.Status != pel.StatusOK && len(n.OutputRefs) > 0:
		return fmt.Errorf("node %d: status %s with outputs", n.NodeID, n.Status)
	case n.Status == pel.StatusOK && len(n.Diagnostics) > 0:
		return fmt.Errorf("node %d: status OK with diagnostics", n.NodeID)
	}
	for k, r := range n.OutputRefs {
		if r.IsZero() {
			return fmt.Errorf("node %d: output_refs[%d] is the zero reference", n.NodeID, k)
		}
	}
	return nil
}

// checkNodeStatus allows the statuses a node can end with.
func checkNodeStatus(s pel.ExecutionStatus, code uint32) error {
	if s == pel.StatusSchemeUnsupported {
		return fmt.Errorf("node status %s is not allowed", s)
	}
	return pel.CheckStatus(s, s.Kind(), code)
}

// checkOverall relates the last record to the overall status: OK needs
// every record OK; RUNTIME_FAILED needs a last record RUNTIME_FAILED with
// the same code; INVALID_INPUTS and INVALID_PROGRAM allow a last record
// with that status, or none failing (failures before or after node
// evaluation); SCHEME_UNSUPPORTED allows no records.
func (t Trace) checkOverall() error {
	var last *NodeRecord
	if len(t.Nodes) > 0 {
		last = &t.Nodes[len(t.Nodes)-1]
	}
	lastFailed := last != nil && last.Status != pel.StatusOK
	switch t.Status {
	case pel.StatusOK:
		if lastFailed {
			return fmt.Errorf("status OK but node %d has status %s", last.NodeID, last.Status)
		}
	case pel.StatusSchemeUnsupported:
		if len(t.Nodes) > 0 {
			return fmt.Errorf("status %s with %d node records", t.Status, len(t.Nodes))
		}
	case pel.StatusRuntimeFailed:
		if !lastFailed || last.Status != t.Status || last.StatusCode != t.StatusCode {
			return fmt.Errorf("status %s (0x%08x) needs a last node record with the same status and code", t.Status, t.StatusCode)
		}
	case pel.StatusInvalidInputs:
		if lastFailed && last.Status != t.Status || !lastFailed && len(t.Nodes) > 0 {
			return fmt.Errorf("status %s needs no node records or a last record with the same status", t.Status)
		}
	case pel.StatusInvalidProgram:
		if lastFailed && last.Status != t.Status {
			return fmt.Errorf("status %s but the last node record has status %s", t.Status, last.Status)
		}
	}
	return nil
}

// Append appends TraceBytes (SPECS.md §13.2):
//
//	scheme_ref EncodedRef || program_ref EncodedRef || list<input_ref EncodedRef> ||
//	params_ref OptionalEncodedRef || exec_result_ref EncodedRef ||
//	status u8 || status_code u32 || list<NodeRecord>
//	NodeRecord = node_id u32 || op_name bytes32 || op_version u32 ||
//	             status u8 || status_code u32 || list<output_ref EncodedRef> ||
//	             list<code u32 || message bytes32>
//
// It fails if t does not Validate.
func Append(dst []byte, t Trace) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	dst = appendHeader(dst, &t, uint32(len(t.Nodes)))
	for i := range t.Nodes {
		dst = appendRecord(dst, &t.Nodes[i])
	}
	return dst, nil
}

// appendHeader appends the fields of TraceBytes before the records: the
// links, the overall status and node_count.
func appendHeader(dst []byte, t *Trace, count uint32) []byte {
	w := enc.Writer{Buf: dst}
	w.Buf = asl.AppendEncodedRef(w.Buf, t.SchemeRef)
	w.Buf = asl.AppendEncodedRef(w.Buf, t.ProgramRef)
	w.U32(uint32(len(t.InputRefs)))
	for _, r := range t.InputRefs {
		w.Buf = asl.AppendEncodedRef(w.Buf, r)
	}
	w.Buf = asl.AppendOptionalEncodedRef(w.Buf, t.ParamsRef, t.HasParams)
	w.Buf = asl.AppendEncodedRef(w.Buf, t.ExecResultRef)
	w.U8(uint8(t.Status))
	w.U32(t.StatusCode)
	w.U32(count)
	return w.Buf
}

// appendRecord appends one NodeRecord of TraceBytes.
func appendRecord(dst []byte, n *NodeRecord) []byte {
	w := enc.Writer{Buf: dst}
	w.U32(uint32(n.NodeID))
	w.U32(uint32(len(n.Op.Name)))
	w.Buf = append(w.Buf, n.Op.Name...)
	w.U32(n.Op.Version)
	w.U8(uint8(n.Status))
	w.U32(n.StatusCode)
	w.U32(uint32(len(n.OutputRefs)))
	for _, r := range n.OutputRefs {
		w.Buf = asl.AppendEncodedRef(w.Buf, r)
	}
	return pel.AppendDiagnostics(w.Buf, n.Diagnostics)
}

// Encode returns the TraceBytes of t.
func Encode(t Trace) ([]byte, error) { return Append(nil, t) }

// Artifact returns t as a trace artifact: TraceBytes tagged
// TYPE_TAG_PEL_TRACE_DAG_1.
func (t Trace) Artifact() (asl.Artifact, error) {
	b, err := Encode(t)
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(asl.TagPELTraceDAG1, b), nil
}

// Decode parses TraceBytes strictly (SPECS.md §13.3): truncation, counts the
// remaining input cannot hold (checked before allocating), malformed
// references, a has_ref flag other than 0x00/0x01, an op_name that is
// empty, longer than 255 bytes or not UTF-8, an undefined status,
// status/status_code pairs that break pel.CheckStatus, record-order rules
// (see Validate) and trailing bytes are rejected. Diagnostic messages alias
// b.
func Decode(b []byte) (Trace, error) {
	r := enc.NewReader(b)
	t, statusOff, err := read(r)
	if err == nil {
		err = r.Done()
	}
	if err == nil {
		if cerr := t.checkOverall(); cerr != nil {
			err = r.FailAt(statusOff, "status", "%v", cerr)
		}
	}
	if err != nil {
		return Trace{}, fmt.Errorf("trace: %w", err)
	}
	return t, nil
}

// DecodeArtifact checks the trace type tag and decodes a's bytes.
func DecodeArtifact(a asl.Artifact) (Trace, error) {
	if !a.HasTag || a.Tag != asl.TagPELTraceDAG1 {
		return Trace{}, fmt.Errorf("trace: artifact type tag is %s, want 0x%08x", a.Header().TagString(), uint32(asl.TagPELTraceDAG1))
	}
	return Decode(a.Bytes)
}

func readRefs(r *enc.Reader, count, elem string) []asl.Reference {
	n := r.Count(count, minRefSize)
	if r.Err() != nil || n == 0 {
		return nil
	}
	refs := make([]asl.Reference, n)
	for i := range refs {
		ref, err := asl.ReadEncodedRef(r, elem)
		if err != nil {
			return nil
		}
		refs[i] = ref
	}
	return refs
}

func readStatus(r *enc.Reader, field string, node bool) (pel.ExecutionStatus, uint32) {
	off := r.Offset()
	s := pel.ExecutionStatus(r.U8(field))
	codeOff := r.Offset()
	code := r.U32(field + "_code")
	if r.Err() != nil {
		return 0, 0
	}
	if !s.Valid() || node && s == pel.StatusSchemeUnsupported {
		r.FailAt(off, field, "value %d is not an allowed status", uint8(s))
		return 0, 0
	}
	if err := pel.CheckStatus(s, s.Kind(), code); err != nil {
		r.FailAt(codeOff, field+"_code", "%v", err)
	}
	return s, code
}

func read(r *enc.Reader) (Trace, int, error) {
	var t Trace
	t.SchemeRef, _ = asl.ReadEncodedRef(r, "scheme_ref")
	t.ProgramRef, _ = asl.ReadEncodedRef(r, "program_ref")
	t.InputRefs = readRefs(r, "input_count", "input_ref")
	t.ParamsRef, t.HasParams, _ = asl.ReadOptionalEncodedRef(r, "params_ref")
	t.ExecResultRef, _ = asl.ReadEncodedRef(r, "exec_result_ref")
	statusOff := r.Offset()
	t.Status, t.StatusCode = readStatus(r, "status", false)
	nn := r.Count("node_count", minRecordSize)
	if r.Err() != nil {
		return Trace{}, 0, r.Err()
	}
	if nn > 0 {
		t.Nodes = make([]NodeRecord, nn)
	}
	names := map[string]string{}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		recOff := r.Offset()
		n.NodeID = pel.NodeID(r.U32("node_id"))
		nameOff := r.Offset()
		name := r.Bytes32("op_name")
		if r.Err() == nil {
			if err := pel.CheckOpName(string(name)); err != nil {
				r.FailAt(nameOff, "op_name", "%v", err)
			}
		}
		if s, ok := names[string(name)]; ok {
			n.Op.Name = s
		} else {
			n.Op.Name = string(name)
			names[n.Op.Name] = n.Op.Name
		}
		n.Op.Version = r.U32("op_version")
		n.Status, n.StatusCode = readStatus(r, "node_status", true)
		n.OutputRefs = readRefs(r, "output_count", "output_ref")
		n.Diagnostics, _ = pel.ReadDiagnostics(r, "diagnostics")
		if r.Err() != nil {
			return Trace{}, 0, r.Err()
		}
		if err := t.checkRecord(i); err != nil {
			return Trace{}, 0, r.FailAt(recOff, "node_record", "%v", err)
		}
	}
	return t, statusOff, r.Err()
}
