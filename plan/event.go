package plan

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/plan/effect"
)

// TagSubmission is the type tag of SUBMISSION/1 (SPECS.md §22.8): a
// request to run a plan, whose reference is the execution id.
const TagSubmission asl.TypeTag = 0x80000006

// Mode says which effects a submission may call (issue 21, seed 004 §7.7).
type Mode uint8

const (
	DryRun    Mode = 1 // evaluate PEL steps, list the effects that would be called, call none
	DraftOnly Mode = 2 // call no external_send effect
	Gated     Mode = 3 // every external_send waits for approval (the default)
	Auto      Mode = 4 // gates only where the plan declares them
)

// String returns the mode's name as the command line writes it.
func (m Mode) String() string {
	switch m {
	case DryRun:
		return "dry-run"
	case DraftOnly:
		return "draft-only"
	case Gated:
		return "gated"
	case Auto:
		return "auto"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode parses a mode's name.
func ParseMode(s string) (Mode, error) {
	for m := DryRun; m <= Auto; m++ {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want dry-run, draft-only, gated or auto)", s)
}

// Submission is a request to run a plan (§22.8). Its reference is the
// execution id: the same plan with the same inputs, mode and label is the
// same execution (request-level idempotency, seed 004 §7.3.1), so a second
// submit attaches to the first. Inputs are named artifacts the submitter
// supplies (sorted by name; their meaning is the runner's); Label, empty
// by default, is how a caller asks for a new execution of the same request.
type Submission struct {
	Plan   asl.Reference
	Mode   Mode
	Inputs []effect.Input
	Label  string
}

// Encode returns the SubmissionBytes of s (§22.8).
func (s Submission) Encode() ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: submission: %s", ErrInvalidRecord, fmt.Sprintf(format, args...))
	}
	if s.Plan.IsZero() {
		return bad("no plan reference")
	}
	if s.Mode < DryRun || s.Mode > Auto {
		return bad("unknown mode 0x%02x", uint8(s.Mode))
	}
	ins, err := sortNamed(inputsToNamed(s.Inputs), "input", CheckIdent)
	if err != nil {
		return bad("%v", err)
	}
	if err := checkText(s.Label, MaxName, false, true); err != nil {
		return bad("label %v", err)
	}
	w := enc.Writer{}
	w.U8(1)
	w.Buf = asl.AppendEncodedRef(w.Buf, s.Plan)
	w.U8(uint8(s.Mode))
	appendNamed(&w, ins)
	w.Bytes32([]byte(s.Label))
	return w.Buf, nil
}

// Artifact returns the SUBMISSION/1 artifact (tag TagSubmission).
func (s Submission) Artifact() (asl.Artifact, error) {
	b, err := s.Encode()
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(TagSubmission, b), nil
}

// ExecutionID returns the execution id of s under hash id h: the reference
// of its artifact.
func (s Submission) ExecutionID(h asl.HashID) (asl.Reference, error) {
	a, err := s.Artifact()
	if err != nil {
		return asl.Reference{}, err
	}
	return asl.Derive(h, a)
}

// DecodeSubmission parses SubmissionBytes under the rules of §22.8.
func DecodeSubmission(b []byte) (Submission, error) {
	r := enc.NewReader(b)
	if err := checkVersion(r); err != nil {
		return Submission{}, err
	}
	var s Submission
	var err error
	if s.Plan, err = asl.ReadEncodedRef(r, "plan"); err != nil {
		return Submission{}, err
	}
	m, err := readFlag(r, "mode", func(v uint8) bool { return v >= uint8(DryRun) && v <= uint8(Auto) })
	if err != nil {
		return Submission{}, err
	}
	s.Mode = Mode(m)
	ins, err := readNamed(r, "input", CheckIdent)
	if err != nil {
		return Submission{}, err
	}
	s.Inputs = namedToInputs(ins)
	if s.Label, err = readText(r, "label", func(x string) error { return checkText(x, MaxName, false, true) }); err != nil {
		return Submission{}, err
	}
	if err := r.Done(); err != nil {
		return Submission{}, err
	}
	return s, nil
}

// DecodeSubmissionArtifact decodes a SUBMISSION/1 artifact.
func DecodeSubmissionArtifact(a asl.Artifact) (Submission, error) {
	b, err := artifactBytes(a, TagSubmission, "submission")
	if err != nil {
		return Submission{}, err
	}
	return DecodeSubmission(b)
}

// Refs returns the references a submission contributes to reachability
// (§19.6): its plan, then its inputs in name order.
func (s Submission) Refs() []asl.Reference {
	out := make([]asl.Reference, 0, 1+len(s.Inputs))
	out = append(out, s.Plan)
	for _, in := range s.Inputs {
		out = append(out, in.Ref)
	}
	return out
}

// EventType is what an event of the ledger records (§22.9).
type EventType uint8

// Event types. Plan-level types have no step; step-level types name one.
const (
	EventSubmitted          EventType = 1  // plan-level: the first event of every execution
	EventStepReady          EventType = 2  // its dependencies succeeded
	EventStepStarted        EventType = 3  // claimed, durably, before the call (Attempt)
	EventStepSucceeded      EventType = 4  // with its outputs, and the receipt for an effect
	EventStepFailed         EventType = 5  // final: ErrorClass and Reason say why
	EventGateRequested      EventType = 6  // waits for a person
	EventApproved           EventType = 7  // Actor, and the approval receipt
	EventRejected           EventType = 8  // Actor, and the rejection receipt
	EventPartial            EventType = 9  // plan-level: ended without completing
	EventCompleted          EventType = 10 // plan-level: every step succeeded
	EventCancelled          EventType = 11 // plan-level (Actor)
	EventStepUnknownOutcome EventType = 12 // the call may have reached the world; waits for a person
	EventRetryScheduled     EventType = 13 // a retryable failure; the next attempt is Attempt
	EventStepSkipped        EventType = 14 // will not run (a dependency failed, a mode forbids it); Reason says why
	EventRetryRequested     EventType = 15 // a person asked to retry (retry --force after an unknown outcome); Actor
	EventResumed            EventType = 16 // plan-level: a runner took the execution up again
)

var eventNames = [...]string{
	EventSubmitted:          "submitted",
	EventStepReady:          "step_ready",
	EventStepStarted:        "step_started",
	EventStepSucceeded:      "step_succeeded",
	EventStepFailed:         "step_failed",
	EventGateRequested:      "gate_requested",
	EventApproved:           "approved",
	EventRejected:           "rejected",
	EventPartial:            "partial",
	EventCompleted:          "completed",
	EventCancelled:          "cancelled",
	EventStepUnknownOutcome: "step_unknown_outcome",
	EventRetryScheduled:     "retry_scheduled",
	EventStepSkipped:        "step_skipped",
	EventRetryRequested:     "retry_requested",
	EventResumed:            "resumed",
}

// String returns the type's name as the ledger prints it.
func (t EventType) String() string {
	if t >= 1 && int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Valid reports whether t is a listed type.
func (t EventType) Valid() bool { return t >= 1 && int(t) < len(eventNames) }

// PlanLevel reports whether t concerns the whole execution (no step).
func (t EventType) PlanLevel() bool {
	switch t {
	case EventSubmitted, EventPartial, EventCompleted, EventCancelled, EventResumed:
		return true
	}
	return false
}

// Event is one entry of an execution's ledger (PLAN-EVENT/1, §22.9). Seq
// counts from 1; the first event (Seq 1) is submitted and has no Parent,
// every later one names the event before it, so an execution's events
// form one chain whose head names them all. Time is metadata (Unix
// nanoseconds), never part of a key; it is in the bytes, so two events
// are two artifacts.
type Event struct {
	Execution  asl.Reference // the SUBMISSION/1 artifact
	Seq        uint64
	Parent     asl.Reference // zero for Seq 1
	Type       EventType
	Step       string // empty for plan-level types
	Attempt    uint32 // the attempt concerned, 0 when none
	Receipt    asl.Reference
	Outputs    []effect.Output
	ErrorClass effect.ErrorClass
	Reason     string
	Actor      string
	Time       int64
}

// check reports the first rule of §22.9 that e breaks, as (field, reason).
func (e Event) check() (string, string) {
	switch {
	case !e.Type.Valid():
		return "event_type", fmt.Sprintf("unknown value 0x%02x", uint8(e.Type))
	case e.Seq == 0:
		return "seq", "sequence numbers count from 1"
	case e.Seq == 1 && !e.Parent.IsZero():
		return "parent.has_ref", "the first event has no parent"
	case e.Seq > 1 && e.Parent.IsZero():
		return "parent.has_ref", "an event after the first names its parent"
	case (e.Seq == 1) != (e.Type == EventSubmitted):
		return "event_type", "the first event, and only it, is submitted"
	case e.Type.PlanLevel() && e.Step != "":
		return "step", fmt.Sprintf("a %s event names no step", e.Type)
	case !e.Type.PlanLevel() && e.Step == "":
		return "step", fmt.Sprintf("a %s event names its step", e.Type)
	case e.Type == EventStepFailed && e.ErrorClass == 0:
		return "error_class", "step_failed needs an error class"
	case e.Type == EventRetryScheduled && !e.ErrorClass.Retryable():
		return "error_class", fmt.Sprintf("retry_scheduled needs a retryable class (got %s)", e.ErrorClass)
	}
	return "", ""
}

// Encode returns the EventBytes of e (§22.9), outputs sorted by name,
// refusing (wrapping ErrInvalidRecord) what DecodeEvent refuses.
func (e Event) Encode() ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: event: %s", ErrInvalidRecord, fmt.Sprintf(format, args...))
	}
	if e.Execution.IsZero() {
		return bad("no execution reference")
	}
	if e.Step != "" {
		if err := CheckIdent(e.Step); err != nil {
			return bad("step %v", err)
		}
	}
	outs, err := sortNamed(outputsToNamed(e.Outputs), "output", CheckOutputName)
	if err != nil {
		return bad("%v", err)
	}
	if !validErrorClass(uint8(e.ErrorClass)) {
		return bad("unknown error class 0x%02x", uint8(e.ErrorClass))
	}
	if err := checkText(e.Reason, MaxText, false, false); err != nil {
		return bad("reason %v", err)
	}
	if err := checkText(e.Actor, MaxName, false, true); err != nil {
		return bad("actor %v", err)
	}
	if field, why := e.check(); field != "" {
		return bad("%s: %s", field, why)
	}
	w := enc.Writer{}
	w.U8(1)
	w.Buf = asl.AppendEncodedRef(w.Buf, e.Execution)
	w.U64(e.Seq)
	w.Buf = asl.AppendOptionalEncodedRef(w.Buf, e.Parent, !e.Parent.IsZero())
	w.U8(uint8(e.Type))
	w.Bytes32([]byte(e.Step))
	w.U32(e.Attempt)
	w.Buf = asl.AppendOptionalEncodedRef(w.Buf, e.Receipt, !e.Receipt.IsZero())
	appendNamed(&w, outs)
	w.U8(uint8(e.ErrorClass))
	w.Bytes32([]byte(e.Reason))
	w.Bytes32([]byte(e.Actor))
	w.U64(uint64(e.Time))
	return w.Buf, nil
}

// Artifact returns the PLAN-EVENT/1 artifact (tag TagEvent) of e.
func (e Event) Artifact() (asl.Artifact, error) {
	b, err := e.Encode()
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(TagEvent, b), nil
}

// DecodeEvent parses EventBytes under the rules of §22.9; an error is an
// *enc.DecodeError naming the field and its offset.
func DecodeEvent(b []byte) (Event, error) {
	r := enc.NewReader(b)
	if err := checkVersion(r); err != nil {
		return Event{}, err
	}
	var e Event
	var err error
	offs := map[string]int{}
	mark := func(field string) { offs[field] = r.Offset() }
	if e.Execution, err = asl.ReadEncodedRef(r, "execution"); err != nil {
		return Event{}, err
	}
	mark("seq")
	e.Seq = r.U64("seq")
	mark("parent.has_ref")
	if e.Parent, _, err = asl.ReadOptionalEncodedRef(r, "parent"); err != nil {
		return Event{}, err
	}
	mark("event_type")
	t, err := readFlag(r, "event_type", func(v uint8) bool { return EventType(v).Valid() })
	if err != nil {
		return Event{}, err
	}
	e.Type = EventType(t)
	mark("step")
	if e.Step, err = readText(r, "step", func(s string) error {
		if s == "" {
			return nil
		}
		return CheckIdent(s)
	}); err != nil {
		return Event{}, err
	}
	e.Attempt = r.U32("attempt")
	if e.Receipt, _, err = asl.ReadOptionalEncodedRef(r, "receipt"); err != nil {
		return Event{}, err
	}
	outs, err := readNamed(r, "output", CheckOutputName)
	if err != nil {
		return Event{}, err
	}
	e.Outputs = namedToOutputs(outs)
	mark("error_class")
	c, err := readFlag(r, "error_class", validErrorClass)
	if err != nil {
		return Event{}, err
	}
	e.ErrorClass = effect.ErrorClass(c)
	if e.Reason, err = readText(r, "reason", func(s string) error { return checkText(s, MaxText, false, false) }); err != nil {
		return Event{}, err
	}
	if e.Actor, err = readText(r, "actor", func(s string) error { return checkText(s, MaxName, false, true) }); err != nil {
		return Event{}, err
	}
	e.Time = int64(r.U64("time"))
	if err := r.Done(); err != nil {
		return Event{}, err
	}
	if field, why := e.check(); field != "" {
		return Event{}, r.FailAt(offs[field], field, "%s", why)
	}
	return e, nil
}

// DecodeEventArtifact decodes a PLAN-EVENT/1 artifact.
func DecodeEventArtifact(a asl.Artifact) (Event, error) {
	b, err := artifactBytes(a, TagEvent, "event")
	if err != nil {
		return Event{}, err
	}
	return DecodeEvent(b)
}

// Refs returns the references an event contributes to reachability
// (§19.6), in this order: its parent (when present), its execution (the
// submission), its receipt (when present), each output in name order. The
// head of a ledger therefore reaches every event, receipt and output of
// its execution.
func (e Event) Refs() []asl.Reference {
	out := make([]asl.Reference, 0, 3+len(e.Outputs))
	if !e.Parent.IsZero() {
		out = append(out, e.Parent)
	}
	out = append(out, e.Execution)
	if !e.Receipt.IsZero() {
		out = append(out, e.Receipt)
	}
	for _, o := range e.Outputs {
		out = append(out, o.Ref)
	}
	return out
}
