package plan

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/plan/effect"
)

// TagEffectRequest is the type tag of EFFECT-REQUEST/1 (SPECS.md §22.6),
// the artifact a receipt names as its request.
const TagEffectRequest asl.TypeTag = 0x80000005

// EffectRequest is what one effect step asks of its executor, the same for
// every attempt (§22.6): the effect kind, its canonical params, its inputs
// resolved to artifacts (sorted by name) and its idempotency key. The
// attempt number is not part of it, so every attempt's receipt names the
// same request.
type EffectRequest struct {
	Kind   string
	Params []byte // canonical JSON (§22.4)
	Inputs []effect.Input
	Key    string
}

// RequestOf returns the EffectRequest of an executor's request, dropping
// its attempt number.
func RequestOf(r effect.Request) EffectRequest {
	return EffectRequest{Kind: r.Kind, Params: r.Params, Inputs: r.Inputs, Key: r.Key}
}

// Encode returns the EffectRequestBytes of r (§22.6), inputs sorted by
// name, refusing (wrapping ErrInvalidRecord) what DecodeEffectRequest
// refuses.
func (r EffectRequest) Encode() ([]byte, error) {
	if err := CheckIdent(r.Kind); err != nil {
		return nil, fmt.Errorf("%w: effect request: kind %v", ErrInvalidRecord, err)
	}
	if len(r.Params) > MaxParams {
		return nil, fmt.Errorf("%w: effect request: params of %d bytes exceed %d", ErrInvalidRecord, len(r.Params), MaxParams)
	}
	if err := checkCanonicalParams(r.Params); err != nil {
		return nil, fmt.Errorf("%w: effect request: %v", ErrInvalidRecord, err)
	}
	ins, err := sortNamed(inputsToNamed(r.Inputs), "input", CheckIdent)
	if err != nil {
		return nil, fmt.Errorf("%w: effect request: %v", ErrInvalidRecord, err)
	}
	if err := checkText(r.Key, MaxKey, true, true); err != nil {
		return nil, fmt.Errorf("%w: effect request: key %v", ErrInvalidRecord, err)
	}
	w := enc.Writer{}
	w.U8(1)
	w.Bytes32([]byte(r.Kind))
	w.Bytes32(r.Params)
	appendNamed(&w, ins)
	w.Bytes32([]byte(r.Key))
	return w.Buf, nil
}

// Artifact returns the EFFECT-REQUEST/1 artifact (tag TagEffectRequest).
func (r EffectRequest) Artifact() (asl.Artifact, error) {
	b, err := r.Encode()
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(TagEffectRequest, b), nil
}

// DecodeEffectRequest parses EffectRequestBytes under the rules of §22.6;
// an error is an *enc.DecodeError naming the field and its offset.
func DecodeEffectRequest(b []byte) (EffectRequest, error) {
	r := enc.NewReader(b)
	if err := checkVersion(r); err != nil {
		return EffectRequest{}, err
	}
	var q EffectRequest
	var err error
	if q.Kind, err = readText(r, "kind", CheckIdent); err != nil {
		return EffectRequest{}, err
	}
	off := r.Offset()
	params := r.Bytes32("params")
	if r.Err() != nil {
		return EffectRequest{}, r.Err()
	}
	if len(params) > MaxParams {
		return EffectRequest{}, r.FailAt(off, "params", "%d bytes exceed %d", len(params), MaxParams)
	}
	if err := checkCanonicalParams(params); err != nil {
		return EffectRequest{}, r.FailAt(off, "params", "%v", err)
	}
	q.Params = []byte(string(params))
	ins, err := readNamed(r, "input", CheckIdent)
	if err != nil {
		return EffectRequest{}, err
	}
	q.Inputs = namedToInputs(ins)
	if q.Key, err = readText(r, "key", func(s string) error { return checkText(s, MaxKey, true, true) }); err != nil {
		return EffectRequest{}, err
	}
	if err := r.Done(); err != nil {
		return EffectRequest{}, err
	}
	return q, nil
}

// DecodeEffectRequestArtifact decodes an EFFECT-REQUEST/1 artifact.
func DecodeEffectRequestArtifact(a asl.Artifact) (EffectRequest, error) {
	b, err := artifactBytes(a, TagEffectRequest, "effect request")
	if err != nil {
		return EffectRequest{}, err
	}
	return DecodeEffectRequest(b)
}

// Refs returns the references an effect request contributes to
// reachability (§19.6): its inputs, in name order.
func (r EffectRequest) Refs() []asl.Reference {
	out := make([]asl.Reference, 0, len(r.Inputs))
	for _, in := range r.Inputs {
		out = append(out, in.Ref)
	}
	return out
}

// ReceiptKind says what a receipt records (§22.7).
type ReceiptKind uint8

const (
	AttemptReceipt  ReceiptKind = 1 // one attempt of an effect
	ApprovalReceipt ReceiptKind = 2 // a person approved a gated step
	RejectReceipt   ReceiptKind = 3 // a person rejected a gated step
)

// String returns the kind's name as receipts print it.
func (k ReceiptKind) String() string {
	switch k {
	case AttemptReceipt:
		return "attempt"
	case ApprovalReceipt:
		return "approval"
	case RejectReceipt:
		return "rejection"
	}
	return fmt.Sprintf("receipt_kind(%d)", uint8(k))
}

// Outcome is how an attempt ended (§22.7).
type Outcome uint8

const (
	Succeeded       Outcome = 1
	FailedRetryable Outcome = 2 // with a retryable ErrorClass
	FailedFinal     Outcome = 3 // with any ErrorClass: a final one, or a retryable one when no attempt is left
	UnknownOutcome  Outcome = 4 // the call may have reached the world; nobody can say
)

// String returns the outcome's name as receipts print it.
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case FailedRetryable:
		return "failed_retryable"
	case FailedFinal:
		return "failed_final"
	case UnknownOutcome:
		return "unknown_outcome"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// TagReceipt's bytes, RECEIPT/1 (§22.7).

// Receipt is the record of one attempt of an effect, or of a person's
// decision on a gated step (§22.7). Start and End are observation
// metadata (Unix nanoseconds): they are in the receipt's bytes, so two
// attempts never share a receipt, but never in a key or a request.
//
// Rules by kind: an attempt has Attempt ≥ 1, an Outcome, an ErrorClass
// that is 0 for succeeded and unknown_outcome, retryable for
// failed_retryable and any class for failed_final, an Executor name and
// no Actor; an approval or rejection has Attempt 0, Outcome 0,
// ErrorClass 0, no outputs, no executor, and an Actor (the token name).
type Receipt struct {
	Kind            ReceiptKind
	Plan            asl.Reference // the PLAN/1 artifact
	Execution       asl.Reference // the SUBMISSION/1 artifact (§22.8)
	Step            string
	Effect          string        // the effect kind
	Request         asl.Reference // the EFFECT-REQUEST/1 artifact
	Key             string        // the idempotency key
	Attempt         uint32
	Outcome         Outcome
	ErrorClass      effect.ErrorClass
	Message         string // one line or more of UTF-8; empty on success
	Outputs         []effect.Output
	Executor        string
	ExecutorVersion string
	Start, End      int64
	Actor           string
}

// check reports the first rule of §22.7 that r breaks, as (field, reason).
func (r Receipt) check() (string, string) {
	switch r.Kind {
	case AttemptReceipt:
		if r.Attempt == 0 {
			return "attempt", "an attempt receipt counts attempts from 1"
		}
		switch r.Outcome {
		case Succeeded, UnknownOutcome:
			if r.ErrorClass != 0 {
				return "error_class", fmt.Sprintf("an outcome %s has no error class (got %s)", r.Outcome, r.ErrorClass)
			}
		case FailedRetryable:
			if !r.ErrorClass.Retryable() {
				return "error_class", fmt.Sprintf("failed_retryable needs a retryable class (got %s)", r.ErrorClass)
			}
		case FailedFinal:
			if r.ErrorClass == 0 {
				return "error_class", "failed_final needs an error class"
			}
		default:
			return "outcome", fmt.Sprintf("unknown value 0x%02x", uint8(r.Outcome))
		}
		if r.Executor == "" {
			return "executor", "an attempt names its executor"
		}
		if r.Actor != "" {
			return "actor", "an attempt has no actor"
		}
	case ApprovalReceipt, RejectReceipt:
		switch {
		case r.Attempt != 0:
			return "attempt", "a decision is not an attempt (want 0)"
		case r.Outcome != 0:
			return "outcome", "a decision has no outcome (want 0x00)"
		case r.ErrorClass != 0:
			return "error_class", "a decision has no error class"
		case len(r.Outputs) > 0:
			return "output_count", "a decision has no outputs"
		case r.Executor != "" || r.ExecutorVersion != "":
			return "executor", "a decision has no executor"
		case r.Actor == "":
			return "actor", "a decision names its actor"
		}
	default:
		return "receipt_kind", fmt.Sprintf("unknown value 0x%02x", uint8(r.Kind))
	}
	return "", ""
}

// Encode returns the ReceiptBytes of r (§22.7), outputs sorted by name,
// refusing (wrapping ErrInvalidRecord) what DecodeReceipt refuses.
func (r Receipt) Encode() ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: receipt: %s", ErrInvalidRecord, fmt.Sprintf(format, args...))
	}
	switch {
	case r.Plan.IsZero():
		return bad("no plan reference")
	case r.Execution.IsZero():
		return bad("no execution reference")
	case r.Request.IsZero():
		return bad("no request reference")
	}
	if err := CheckIdent(r.Step); err != nil {
		return bad("step %v", err)
	}
	if err := CheckIdent(r.Effect); err != nil {
		return bad("effect kind %v", err)
	}
	if err := checkText(r.Key, MaxKey, true, true); err != nil {
		return bad("key %v", err)
	}
	if !validErrorClass(uint8(r.ErrorClass)) {
		return bad("unknown error class 0x%02x", uint8(r.ErrorClass))
	}
	if err := checkText(r.Message, MaxText, false, false); err != nil {
		return bad("message %v", err)
	}
	outs, err := sortNamed(outputsToNamed(r.Outputs), "output", CheckOutputName)
	if err != nil {
		return bad("%v", err)
	}
	for what, s := range map[string]string{"executor": r.Executor, "executor version": r.ExecutorVersion, "actor": r.Actor} {
		if err := checkText(s, MaxName, false, true); err != nil {
			return bad("%s %v", what, err)
		}
	}
	if field, why := r.check(); field != "" {
		return bad("%s: %s", field, why)
	}
	w := enc.Writer{}
	w.U8(1)
	w.U8(uint8(r.Kind))
	w.Buf = asl.AppendEncodedRef(w.Buf, r.Plan)
	w.Buf = asl.AppendEncodedRef(w.Buf, r.Execution)
	w.Bytes32([]byte(r.Step))
	w.Bytes32([]byte(r.Effect))
	w.Buf = asl.AppendEncodedRef(w.Buf, r.Request)
	w.Bytes32([]byte(r.Key))
	w.U32(r.Attempt)
	w.U8(uint8(r.Outcome))
	w.U8(uint8(r.ErrorClass))
	w.Bytes32([]byte(r.Message))
	appendNamed(&w, outs)
	w.Bytes32([]byte(r.Executor))
	w.Bytes32([]byte(r.ExecutorVersion))
	w.U64(uint64(r.Start))
	w.U64(uint64(r.End))
	w.Bytes32([]byte(r.Actor))
	return w.Buf, nil
}

// Artifact returns the RECEIPT/1 artifact (tag TagReceipt) of r.
func (r Receipt) Artifact() (asl.Artifact, error) {
	b, err := r.Encode()
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(TagReceipt, b), nil
}

// DecodeReceipt parses ReceiptBytes under the rules of §22.7; an error is
// an *enc.DecodeError naming the field and its offset.
func DecodeReceipt(b []byte) (Receipt, error) {
	r := enc.NewReader(b)
	if err := checkVersion(r); err != nil {
		return Receipt{}, err
	}
	var x Receipt
	var err error
	offs := map[string]int{}
	mark := func(field string) { offs[field] = r.Offset() }
	mark("receipt_kind")
	k, err := readFlag(r, "receipt_kind", func(v uint8) bool { return v >= 1 && v <= 3 })
	if err != nil {
		return Receipt{}, err
	}
	x.Kind = ReceiptKind(k)
	if x.Plan, err = asl.ReadEncodedRef(r, "plan"); err != nil {
		return Receipt{}, err
	}
	if x.Execution, err = asl.ReadEncodedRef(r, "execution"); err != nil {
		return Receipt{}, err
	}
	if x.Step, err = readText(r, "step", CheckIdent); err != nil {
		return Receipt{}, err
	}
	if x.Effect, err = readText(r, "effect", CheckIdent); err != nil {
		return Receipt{}, err
	}
	if x.Request, err = asl.ReadEncodedRef(r, "request"); err != nil {
		return Receipt{}, err
	}
	if x.Key, err = readText(r, "key", func(s string) error { return checkText(s, MaxKey, true, true) }); err != nil {
		return Receipt{}, err
	}
	mark("attempt")
	x.Attempt = r.U32("attempt")
	mark("outcome")
	o, err := readFlag(r, "outcome", func(v uint8) bool { return v <= uint8(UnknownOutcome) })
	if err != nil {
		return Receipt{}, err
	}
	x.Outcome = Outcome(o)
	mark("error_class")
	c, err := readFlag(r, "error_class", validErrorClass)
	if err != nil {
		return Receipt{}, err
	}
	x.ErrorClass = effect.ErrorClass(c)
	if x.Message, err = readText(r, "message", func(s string) error { return checkText(s, MaxText, false, false) }); err != nil {
		return Receipt{}, err
	}
	mark("output_count")
	outs, err := readNamed(r, "output", CheckOutputName)
	if err != nil {
		return Receipt{}, err
	}
	x.Outputs = namedToOutputs(outs)
	line := func(s string) error { return checkText(s, MaxName, false, true) }
	mark("executor")
	if x.Executor, err = readText(r, "executor", line); err != nil {
		return Receipt{}, err
	}
	if x.ExecutorVersion, err = readText(r, "executor_version", line); err != nil {
		return Receipt{}, err
	}
	x.Start = int64(r.U64("start"))
	x.End = int64(r.U64("end"))
	mark("actor")
	if x.Actor, err = readText(r, "actor", line); err != nil {
		return Receipt{}, err
	}
	if err := r.Done(); err != nil {
		return Receipt{}, err
	}
	if field, why := x.check(); field != "" {
		return Receipt{}, r.FailAt(offs[field], field, "%s", why)
	}
	return x, nil
}

// DecodeReceiptArtifact decodes a RECEIPT/1 artifact.
func DecodeReceiptArtifact(a asl.Artifact) (Receipt, error) {
	b, err := artifactBytes(a, TagReceipt, "receipt")
	if err != nil {
		return Receipt{}, err
	}
	return DecodeReceipt(b)
}

// Refs returns the references a receipt contributes to reachability
// (§19.6), in this order: its request, each output in name order, its
// plan, its execution (the submission).
func (r Receipt) Refs() []asl.Reference {
	out := make([]asl.Reference, 0, 3+len(r.Outputs))
	out = append(out, r.Request)
	for _, o := range r.Outputs {
		out = append(out, o.Ref)
	}
	return append(out, r.Plan, r.Execution)
}
