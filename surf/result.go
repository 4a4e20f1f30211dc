// Package surf implements PEL/1-SURF, the store-backed execution surface
// (SPECS.md §14): it resolves a program, its inputs and optional params from
// a store by reference, runs Exec_DAG, and stores the outputs, the result
// artifact (ENC/PEL1-RESULT/1, tag 0x00000103) and the trace artifact
// (ENC/PEL-TRACE-DAG/1, tag 0x00000102) in one durable batch.
//
// Write order and links (no reference cycle): the result artifact is built
// first and names the program, inputs, params and outputs; the trace names
// the result (exec_result_ref). The trace is found from the result through
// the store's "surf.trace" index, written in the same batch, and, where a
// store has no index, by scanning trace artifacts (§14.4).
//
// Store failures while resolving (ERR_NOT_FOUND, ERR_INTEGRITY,
// ERR_UNSUPPORTED) become INVALID_PROGRAM or INVALID_INPUTS results with
// store-failure metadata, without calling Exec_DAG. I/O errors and other
// operational failures produce no result: Run returns an error and stores
// nothing, because a result must be a deterministic function of the request.
package surf

import (
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
)

// Phase says which reference of a request failed to resolve (SPECS.md §14.2).
type Phase uint8

const (
	PhaseProgram Phase = 0x01 // the program reference: INVALID_PROGRAM
	PhaseInput   Phase = 0x02 // an input reference: INVALID_INPUTS
	PhaseParams  Phase = 0x03 // the params reference: INVALID_INPUTS
)

func (p Phase) String() string {
	switch p {
	case PhaseProgram:
		return "program"
	case PhaseInput:
		return "input"
	case PhaseParams:
		return "params"
	}
	return fmt.Sprintf("phase-0x%02x", uint8(p))
}

// StoreError is the store error recorded in a result (SPECS.md §14.2).
type StoreError uint8

const (
	StoreErrNotFound    StoreError = 0x01 // ERR_NOT_FOUND
	StoreErrIntegrity   StoreError = 0x02 // ERR_INTEGRITY
	StoreErrUnsupported StoreError = 0x03 // ERR_UNSUPPORTED
)

func (e StoreError) String() string {
	switch e {
	case StoreErrNotFound:
		return "ERR_NOT_FOUND"
	case StoreErrIntegrity:
		return "ERR_INTEGRITY"
	case StoreErrUnsupported:
		return "ERR_UNSUPPORTED"
	}
	return fmt.Sprintf("store-error-0x%02x", uint8(e))
}

// classify maps a store error to the StoreError a result records; ok is
// false for I/O and other operational errors, which produce no result.
func classify(err error) (StoreError, bool) {
	switch {
	case errors.Is(err, asl.ErrNotFound):
		return StoreErrNotFound, true
	case errors.Is(err, asl.ErrIntegrity):
		return StoreErrIntegrity, true
	case errors.Is(err, asl.ErrUnsupported):
		return StoreErrUnsupported, true
	}
	return 0, false
}

// StoreFailure is the store-failure metadata of a result.
type StoreFailure struct {
	Phase      Phase
	InputIndex uint32 // meaningful for PhaseInput only; zero otherwise
	Ref        asl.Reference
	Error      StoreError
}

// Surface diagnostic codes (SPECS.md §14.3). They live in the scheme's
// reserved range below 0x00010000, after pel's table.
const (
	DiagSchemeUnsupported uint32 = 0x0100
	DiagStoreProgram      uint32 = 0x0101
	DiagStoreInput        uint32 = 0x0102
	DiagStoreParams       uint32 = 0x0103
)

// Diagnostic returns the deterministic diagnostic a store failure reports.
func (f StoreFailure) Diagnostic() pel.DiagnosticEntry {
	switch f.Phase {
	case PhaseInput:
		return pel.DiagnosticEntry{Code: DiagStoreInput, Message: fmt.Appendf(nil, "input %d %s: %s", f.InputIndex, f.Ref, f.Error)}
	case PhaseParams:
		return pel.DiagnosticEntry{Code: DiagStoreParams, Message: fmt.Appendf(nil, "params %s: %s", f.Ref, f.Error)}
	default:
		return pel.DiagnosticEntry{Code: DiagStoreProgram, Message: fmt.Appendf(nil, "program %s: %s", f.Ref, f.Error)}
	}
}

// Result is a SurfaceExecutionResult (SPECS.md §14.1): the request, the
// PEL/1-CORE result value, the output references and any store failure.
type Result struct {
	ProgramRef      asl.Reference
	InputRefs       []asl.Reference
	ParamsRef       asl.Reference // meaningful only when HasParams
	HasParams       bool
	Limits          pel.Limits // the run's deterministic bounds; zero when unbounded
	Value           pel.ExecutionResultValue
	OutputRefs      []asl.Reference
	StoreFailure    StoreFailure // meaningful only when HasStoreFailure
	HasStoreFailure bool
}

// Validate checks the rules of SPECS.md §14.2: the value is valid; outputs
// only on OK; a store failure only with INVALID_PROGRAM (program phase) or
// INVALID_INPUTS (input and params phases), with a known error code, an input
// index below the number of inputs for the input phase and zero otherwise,
// and the failing reference equal to the requested one.
func (r Result) Validate() error {
	if err := r.Value.Validate(); err != nil {
		return err
	}
	if r.ProgramRef.IsZero() {
		return errors.New("result: program_ref is zero")
	}
	if len(r.OutputRefs) > 0 && r.Value.Status != pel.StatusOK {
		return fmt.Errorf("result: %d output refs with status %s", len(r.OutputRefs), r.Value.Status)
	}
	if !r.HasStoreFailure {
		return nil
	}
	f := r.StoreFailure
	if f.Error < StoreErrNotFound || f.Error > StoreErrUnsupported {
		return fmt.Errorf("result: store_failure.error 0x%02x is undefined", uint8(f.Error))
	}
	var want asl.Reference
	switch f.Phase {
	case PhaseProgram:
		if r.Value.Status != pel.StatusInvalidProgram {
			return fmt.Errorf("result: program store failure with status %s", r.Value.Status)
		}
		want = r.ProgramRef
	case PhaseInput:
		if r.Value.Status != pel.StatusInvalidInputs {
			return fmt.Errorf("result: input store failure with status %s", r.Value.Status)
		}
		if int64(f.InputIndex) >= int64(len(r.InputRefs)) {
			return fmt.Errorf("result: store_failure.input_index %d with %d inputs", f.InputIndex, len(r.InputRefs))
		}
		want = r.InputRefs[f.InputIndex]
	case PhaseParams:
		if r.Value.Status != pel.StatusInvalidInputs || !r.HasParams {
			return fmt.Errorf("result: params store failure with status %s, params present %v", r.Value.Status, r.HasParams)
		}
		want = r.ParamsRef
	default:
		return fmt.Errorf("result: store_failure.phase 0x%02x is undefined", uint8(f.Phase))
	}
	if f.Phase != PhaseInput && f.InputIndex != 0 {
		return fmt.Errorf("result: store_failure.input_index %d outside the input phase", f.InputIndex)
	}
	if f.Ref != want {
		return fmt.Errorf("result: store_failure.ref %s is not the requested %s", f.Ref, want)
	}
	return nil
}

// AppendResult appends ResultBytes (SPECS.md §14.1):
//
//	program_ref EncodedRef || list<input_ref EncodedRef> ||
//	params_ref OptionalEncodedRef ||
//	has_limits u8 [max_nodes u64 || max_output_bytes u64] ||
//	value ExecutionResultValue (§8.2) ||
//	list<output_ref EncodedRef> || has_store_failure u8 [StoreFailure]
//	StoreFailure = phase u8 || input_index u32 || ref EncodedRef || error u8
func AppendResult(dst []byte, r Result) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	dst = asl.AppendEncodedRef(dst, r.ProgramRef)
	dst = appendRefList(dst, r.InputRefs)
	dst = asl.AppendOptionalEncodedRef(dst, r.ParamsRef, r.HasParams)
	if r.Limits == (pel.Limits{}) {
		dst = append(dst, 0)
	} else {
		w := enc.Writer{Buf: append(dst, 1)}
		w.U64(r.Limits.MaxNodes)
		w.U64(r.Limits.MaxOutputBytes)
		dst = w.Buf
	}
	dst, err := pel.AppendResultValue(dst, r.Value)
	if err != nil {
		return nil, err
	}
	dst = appendRefList(dst, r.OutputRefs)
	if !r.HasStoreFailure {
		return append(dst, 0), nil
	}
	w := enc.Writer{Buf: append(dst, 1)}
	w.U8(uint8(r.StoreFailure.Phase))
	w.U32(r.StoreFailure.InputIndex)
	w.Buf = asl.AppendEncodedRef(w.Buf, r.StoreFailure.Ref)
	w.U8(uint8(r.StoreFailure.Error))
	return w.Buf, nil
}

func appendRefList(dst []byte, refs []asl.Reference) []byte {
	w := enc.Writer{Buf: dst}
	w.U32(uint32(len(refs)))
	for _, ref := range refs {
		w.Buf = asl.AppendEncodedRef(w.Buf, ref)
	}
	return w.Buf
}

// minEncodedRef is the smallest EncodedRef: ref_len u32 plus 2 bytes.
const minEncodedRef = 6

func readRefList(r *enc.Reader, field string) ([]asl.Reference, error) {
	n := r.Count(field+".count", minEncodedRef)
	if r.Err() != nil {
		return nil, r.Err()
	}
	if n == 0 {
		return nil, nil
	}
	refs := make([]asl.Reference, n)
	for i := range refs {
		ref, err := asl.ReadEncodedRef(r, field)
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	return refs, nil
}

// DecodeResult parses ResultBytes strictly: every field rule of §14.1, the
// embedded value's rules (§8.2), a has_store_failure flag other than 0x00
// and 0x01, trailing bytes, and the consistency rules of Validate (reported
// as field "result" at offset 0).
func DecodeResult(b []byte) (Result, error) {
	r := enc.NewReader(b)
	var res Result
	var err error
	if res.ProgramRef, err = asl.ReadEncodedRef(r, "program_ref"); err != nil {
		return Result{}, err
	}
	if res.InputRefs, err = readRefList(r, "input_refs"); err != nil {
		return Result{}, err
	}
	if res.ParamsRef, res.HasParams, err = asl.ReadOptionalEncodedRef(r, "params_ref"); err != nil {
		return Result{}, err
	}
	limitsOff := r.Offset()
	switch flag := r.U8("has_limits"); {
	case r.Err() != nil:
		return Result{}, r.Err()
	case flag == 1:
		res.Limits.MaxNodes = r.U64("limits.max_nodes")
		res.Limits.MaxOutputBytes = r.U64("limits.max_output_bytes")
		if r.Err() != nil {
			return Result{}, r.Err()
		}
		if res.Limits == (pel.Limits{}) {
			return Result{}, r.FailAt(limitsOff, "has_limits", "0x01 with both limits zero (write 0x00)")
		}
	case flag != 0:
		return Result{}, r.FailAt(limitsOff, "has_limits", "value 0x%02x is neither 0x00 nor 0x01", flag)
	}
	if res.Value, err = pel.ReadResultValue(r); err != nil {
		return Result{}, err
	}
	if res.OutputRefs, err = readRefList(r, "output_refs"); err != nil {
		return Result{}, err
	}
	off := r.Offset()
	switch flag := r.U8("has_store_failure"); {
	case r.Err() != nil:
		return Result{}, r.Err()
	case flag == 1:
		res.HasStoreFailure = true
		res.StoreFailure.Phase = Phase(r.U8("store_failure.phase"))
		res.StoreFailure.InputIndex = r.U32("store_failure.input_index")
		if res.StoreFailure.Ref, err = asl.ReadEncodedRef(r, "store_failure.ref"); err != nil {
			return Result{}, err
		}
		res.StoreFailure.Error = StoreError(r.U8("store_failure.error"))
	case flag != 0:
		return Result{}, r.FailAt(off, "has_store_failure", "value 0x%02x is neither 0x00 nor 0x01", flag)
	}
	if err := r.Done(); err != nil {
		return Result{}, err
	}
	if err := res.Validate(); err != nil {
		return Result{}, &enc.DecodeError{Offset: 0, Field: "result", Reason: err.Error()}
	}
	return res, nil
}

// Artifact returns r as a result artifact tagged TYPE_TAG_PEL1_RESULT_1.
func (r Result) Artifact() (asl.Artifact, error) {
	b, err := AppendResult(nil, r)
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(asl.TagPEL1Result1, b), nil
}

// DecodeResultArtifact checks the result type tag and decodes a's bytes.
func DecodeResultArtifact(a asl.Artifact) (Result, error) {
	if !a.HasTag || a.Tag != asl.TagPEL1Result1 {
		return Result{}, fmt.Errorf("artifact type tag %s is not TYPE_TAG_PEL1_RESULT_1 (0x00000103): %w", a.Header().TagString(), enc.ErrMalformed)
	}
	return DecodeResult(a.Bytes)
}
