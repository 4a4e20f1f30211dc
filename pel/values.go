package pel

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
)

// PEL1Version is the only pel1_version this implementation produces and
// accepts (SPECS.md §8).
const PEL1Version uint16 = 1

// ExecutionStatus is the PEL/1-CORE status of an execution (SPECS.md §8).
type ExecutionStatus uint8

const (
	StatusOK                ExecutionStatus = 0
	StatusSchemeUnsupported ExecutionStatus = 1
	StatusInvalidProgram    ExecutionStatus = 2
	StatusInvalidInputs     ExecutionStatus = 3
	StatusRuntimeFailed     ExecutionStatus = 4
)

var statusNames = [...]string{"OK", "SCHEME_UNSUPPORTED", "INVALID_PROGRAM", "INVALID_INPUTS", "RUNTIME_FAILED"}

func (s ExecutionStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("STATUS_%d", uint8(s))
}

// Valid reports whether s is one of the five defined statuses.
func (s ExecutionStatus) Valid() bool { return s <= StatusRuntimeFailed }

// Kind is the error kind the seed's §0 mapping assigns to s.
func (s ExecutionStatus) Kind() ExecutionErrorKind { return ExecutionErrorKind(s) }

// ExecutionErrorKind classifies a failure (SPECS.md §8).
type ExecutionErrorKind uint8

const (
	KindNone    ExecutionErrorKind = 0
	KindScheme  ExecutionErrorKind = 1
	KindProgram ExecutionErrorKind = 2
	KindInputs  ExecutionErrorKind = 3
	KindRuntime ExecutionErrorKind = 4
)

var kindNames = [...]string{"NONE", "SCHEME", "PROGRAM", "INPUTS", "RUNTIME"}

func (k ExecutionErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("KIND_%d", uint8(k))
}

// Valid reports whether k is one of the five defined kinds.
func (k ExecutionErrorKind) Valid() bool { return k <= KindRuntime }

// Core status codes (SPECS.md §8): the status_code that goes with each
// non-runtime status.
const (
	CodeOK                uint32 = 0
	CodeSchemeUnsupported uint32 = 1
	CodeInvalidProgram    uint32 = 2
	CodeInvalidInputs     uint32 = 3
)

// ExecutionErrorSummary is the (kind, status_code) pair of a result.
type ExecutionErrorSummary struct {
	Kind       ExecutionErrorKind
	StatusCode uint32
}

// DiagnosticEntry is one deterministic diagnostic (SPECS.md §8).
type DiagnosticEntry = opreg.Diagnostic

// ExecutionResultValue is the PEL/1-CORE result of one execution (SPECS.md
// §8). Valid values satisfy CheckStatus(Status, Summary.Kind,
// Summary.StatusCode) and have PEL1Version 1 and a non-zero SchemeRef.
type ExecutionResultValue struct {
	PEL1Version uint16
	Status      ExecutionStatus
	SchemeRef   asl.Reference
	Summary     ExecutionErrorSummary
	Diagnostics []DiagnosticEntry
}

// CheckStatus enforces the status ↔ kind ↔ status_code rules (seed §0,
// SPECS.md §8): kind is the status's kind; OK has code 0, SCHEME_UNSUPPORTED
// 1, INVALID_PROGRAM 2, INVALID_INPUTS 3; RUNTIME_FAILED has a code that is
// not 0, 2 or 3.
func CheckStatus(s ExecutionStatus, k ExecutionErrorKind, code uint32) error {
	if !s.Valid() {
		return fmt.Errorf("status %d is not a defined ExecutionStatus", uint8(s))
	}
	if k != s.Kind() {
		return fmt.Errorf("status %s requires kind %s, got %s", s, s.Kind(), k)
	}
	switch s {
	case StatusRuntimeFailed:
		if code == CodeOK || code == CodeInvalidProgram || code == CodeInvalidInputs {
			return fmt.Errorf("status %s requires a status_code other than 0, 2 and 3, got %d", s, code)
		}
	default:
		if code != uint32(s) {
			return fmt.Errorf("status %s requires status_code %d, got %d", s, uint32(s), code)
		}
	}
	return nil
}

// Validate checks the invariants that EncodeResultValue and
// DecodeResultValue enforce.
func (v ExecutionResultValue) Validate() error {
	if v.PEL1Version != PEL1Version {
		return fmt.Errorf("pel1_version %d is not %d", v.PEL1Version, PEL1Version)
	}
	if v.SchemeRef.IsZero() {
		return fmt.Errorf("scheme_ref is the zero reference")
	}
	if err := CheckStatus(v.Status, v.Summary.Kind, v.Summary.StatusCode); err != nil {
		return err
	}
	for i, d := range v.Diagnostics {
		if uint64(len(d.Message)) > 0xFFFFFFFF {
			return fmt.Errorf("diagnostic %d: message longer than 2^32-1 bytes", i)
		}
	}
	return nil
}

// AppendResultValue appends the canonical encoding of v (SPECS.md §8.2):
//
//	pel1_version u16 || status u8 || scheme_ref EncodedRef ||
//	summary.kind u8 || summary.status_code u32 ||
//	list<code u32 || message bytes32>
//
// It fails if v does not Validate.
func AppendResultValue(dst []byte, v ExecutionResultValue) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("execution result: %w", err)
	}
	w := enc.Writer{Buf: dst}
	w.U16(v.PEL1Version)
	w.U8(uint8(v.Status))
	w.Buf = asl.AppendEncodedRef(w.Buf, v.SchemeRef)
	w.U8(uint8(v.Summary.Kind))
	w.U32(v.Summary.StatusCode)
	appendDiagnostics(&w, v.Diagnostics)
	return w.Buf, nil
}

// EncodeResultValue returns the canonical encoding of v.
func EncodeResultValue(v ExecutionResultValue) ([]byte, error) {
	return AppendResultValue(nil, v)
}

// DecodeResultValue parses a standalone encoded ExecutionResultValue
// strictly; trailing bytes are an error. Message bytes alias b.
func DecodeResultValue(b []byte) (ExecutionResultValue, error) {
	r := enc.NewReader(b)
	v, err := ReadResultValue(r)
	if err != nil {
		return ExecutionResultValue{}, err
	}
	if err := r.Done(); err != nil {
		return ExecutionResultValue{}, fmt.Errorf("execution result: %w", err)
	}
	return v, nil
}

// ReadResultValue reads one encoded ExecutionResultValue from r, for
// encodings that embed it. It rejects, naming field and offset: a truncated
// field, pel1_version other than 1, an undefined status or kind, a kind or
// status_code inconsistent with the status, a malformed scheme_ref, a
// diagnostics count or message length past the end.
func ReadResultValue(r *enc.Reader) (ExecutionResultValue, error) {
	var v ExecutionResultValue
	fail := func() (ExecutionResultValue, error) {
		return ExecutionResultValue{}, fmt.Errorf("execution result: %w", r.Err())
	}
	off := r.Offset()
	if v.PEL1Version = r.U16("pel1_version"); r.Err() == nil && v.PEL1Version != PEL1Version {
		r.FailAt(off, "pel1_version", "version %d is not %d", v.PEL1Version, PEL1Version)
	}
	statusOff := r.Offset()
	if v.Status = ExecutionStatus(r.U8("status")); r.Err() == nil && !v.Status.Valid() {
		r.FailAt(statusOff, "status", "value %d is not a defined ExecutionStatus", uint8(v.Status))
	}
	if r.Err() != nil {
		return fail()
	}
	ref, err := asl.ReadEncodedRef(r, "scheme_ref")
	if err != nil {
		return fail()
	}
	v.SchemeRef = ref
	kindOff := r.Offset()
	if v.Summary.Kind = ExecutionErrorKind(r.U8("summary.kind")); r.Err() == nil && v.Summary.Kind != v.Status.Kind() {
		r.FailAt(kindOff, "summary.kind", "kind %d does not match status %s (want %d)", uint8(v.Summary.Kind), v.Status, uint8(v.Status.Kind()))
	}
	codeOff := r.Offset()
	if v.Summary.StatusCode = r.U32("summary.status_code"); r.Err() == nil {
		if err := CheckStatus(v.Status, v.Summary.Kind, v.Summary.StatusCode); err != nil {
			r.FailAt(codeOff, "summary.status_code", "%v", err)
		}
	}
	v.Diagnostics = readDiagnostics(r, "diagnostics")
	if r.Err() != nil {
		return fail()
	}
	return v, nil
}

// AppendDiagnostics appends list<DiagnosticEntry>: count u32, then each
// entry as code u32 || message bytes32. Other encodings (the trace) reuse it.
func AppendDiagnostics(dst []byte, ds []DiagnosticEntry) []byte {
	w := enc.Writer{Buf: dst}
	appendDiagnostics(&w, ds)
	return w.Buf
}

func appendDiagnostics(w *enc.Writer, ds []DiagnosticEntry) {
	w.U32(uint32(len(ds)))
	for _, d := range ds {
		w.U32(d.Code)
		w.Bytes32(d.Message)
	}
}

// ReadDiagnostics reads list<DiagnosticEntry> as AppendDiagnostics writes it.
// Field names in errors are field+".count", field+".code" and
// field+".message". Messages alias the reader's input. A nil slice is
// returned for an empty list.
func ReadDiagnostics(r *enc.Reader, field string) ([]DiagnosticEntry, error) {
	ds := readDiagnostics(r, field)
	return ds, r.Err()
}

func readDiagnostics(r *enc.Reader, field string) []DiagnosticEntry {
	n := r.Count(field+".count", 8)
	if r.Err() != nil || n == 0 {
		return nil
	}
	ds := make([]DiagnosticEntry, n)
	for i := range ds {
		ds[i].Code = r.U32(field + ".code")
		ds[i].Message = r.Bytes32(field + ".message")
		if r.Err() != nil {
			return nil
		}
		if ds[i].Message == nil {
			ds[i].Message = []byte{}
		}
	}
	return ds
}
