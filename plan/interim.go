package plan

// This file holds the runner's view of the ledger's records (events,
// receipts, submissions) until the codecs of SPECS.md §22 are merged: the
// runner reads and writes them only through recordCodec, so swapping the
// interim JSON codec below for the §22 binary codecs changes no other file.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// EventType names what an event records (SPECS.md §24.3).
type EventType uint8

const (
	EvSubmitted          EventType = 1
	EvStepReady          EventType = 2
	EvStepStarted        EventType = 3
	EvStepSucceeded      EventType = 4
	EvStepFailed         EventType = 5
	EvStepUnknownOutcome EventType = 6
	EvGateRequested      EventType = 7
	EvApproved           EventType = 8
	EvRejected           EventType = 9
	EvStepBlocked        EventType = 10
	EvStepSkipped        EventType = 11
	EvRetryRequested     EventType = 12
	EvPartial            EventType = 13
	EvCompleted          EventType = 14
	EvCancelled          EventType = 15
)

var eventNames = [...]string{
	EvSubmitted:          "submitted",
	EvStepReady:          "step_ready",
	EvStepStarted:        "step_started",
	EvStepSucceeded:      "step_succeeded",
	EvStepFailed:         "step_failed",
	EvStepUnknownOutcome: "step_unknown_outcome",
	EvGateRequested:      "gate_requested",
	EvApproved:           "approved",
	EvRejected:           "rejected",
	EvStepBlocked:        "step_blocked",
	EvStepSkipped:        "step_skipped",
	EvRetryRequested:     "retry_requested",
	EvPartial:            "partial",
	EvCompleted:          "completed",
	EvCancelled:          "cancelled",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// ParseEventType is the inverse of EventType.String.
func ParseEventType(s string) (EventType, bool) {
	for i, n := range eventNames {
		if n == s && n != "" {
			return EventType(i), true
		}
	}
	return 0, false
}

// Mode is an execution's mode (seed 004 §7.7, SPECS.md §24.6).
type Mode uint8

const (
	ModeDryRun    Mode = 1 // pure steps run; effects are listed, none called
	ModeDraftOnly Mode = 2 // no external_send is called: those steps end blocked
	ModeGated     Mode = 3 // every external_send waits for approval (the default)
	ModeAuto      Mode = 4 // only the steps' own gates apply
)

var modeNames = [...]string{ModeDryRun: "dry-run", ModeDraftOnly: "draft-only", ModeGated: "gated", ModeAuto: "auto"}

func (m Mode) String() string {
	if int(m) < len(modeNames) && modeNames[m] != "" {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode reads a mode's name.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if n == s && n != "" {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("mode %q: want dry-run, draft-only, gated or auto", s)
}

// Event is one record of an execution's ledger (SPECS.md §24.3). Seq
// counts from 1; Parent is the reference of event Seq-1 (zero for the
// first). Time and Writer are metadata: they make two writers' events
// distinct and say when, and never enter a key or a result.
type Event struct {
	Type   EventType
	Exec   asl.Reference // the execution id: the Submission's reference
	Seq    uint64
	Parent asl.Reference
	Step   string
	// Attempt numbers the attempts of Step from 1 (started, succeeded,
	// failed, unknown outcome).
	Attempt uint32
	Key     string          // the idempotency key of the attempt (started)
	Receipt asl.Reference   // the attempt's or the decision's receipt
	Outputs []effect.Output // succeeded: the step's outputs by name
	Class   effect.ErrorClass
	// Reason is a reason code (REQUIRES_APPROVAL, DRAFT_ONLY, DRY_RUN,
	// DEPENDENCY_FAILED, REJECTED, ...) followed by text.
	Reason string
	// DelayMillis is the backoff a failed_retryable attempt waits before
	// the step is ready again (from Time).
	DelayMillis uint64
	Force       bool   // retry_requested: --force
	Actor       string // who (approved, rejected, retry, cancel)
	Writer      string // the runner that appended it
	Time        time.Time
}

// Submission is what an execution runs: the plan, the bindings of the
// plan's free inputs, and the mode. Its reference is the execution id, so
// submitting the same thing again attaches to the same execution.
type Submission struct {
	Plan     asl.Reference
	Bindings []effect.Input
	Mode     Mode
}

// Outcome of a receipt.
type Outcome uint8

const (
	OutcomeSucceeded       Outcome = 1
	OutcomeFailedRetryable Outcome = 2
	OutcomeFailedFinal     Outcome = 3
	OutcomeUnknown         Outcome = 4
	OutcomeApproved        Outcome = 5 // a gate decision
	OutcomeRejected        Outcome = 6
)

// Receipt is the record of one attempt of an effect (or of a gate
// decision).
type Receipt struct {
	Exec            asl.Reference
	Step            string
	Kind            string
	Key             string
	Attempt         uint32
	Outcome         Outcome
	Class           effect.ErrorClass
	Message         string
	Outputs         []effect.Output
	Executor        string
	ExecutorVersion string
	Actor           string
	Start, End      time.Time
}

// recordCodec turns the runner's records into artifacts and back.
type recordCodec interface {
	encodeEvent(Event) (asl.Artifact, error)
	decodeEvent(asl.Artifact) (Event, error)
	encodeReceipt(Receipt) (asl.Artifact, error)
	decodeReceipt(asl.Artifact) (Receipt, error)
	encodeSubmission(Submission) (asl.Artifact, error)
	decodeSubmission(asl.Artifact) (Submission, error)
}

// jsonCodec is the interim codec: JSON under the §22 tags. It is replaced
// by the §22 binary codecs at merge.
type jsonCodec struct{}

const tagSubmissionInterim asl.TypeTag = 0x80000005

var errWrongTagInterim = errors.New("wrong type tag")

func jsonArt(tag asl.TypeTag, v any) (asl.Artifact, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Artifact{Bytes: b, Tag: tag, HasTag: true}, nil
}

func jsonDecode(a asl.Artifact, tag asl.TypeTag, v any) error {
	if !a.HasTag || a.Tag != tag {
		return fmt.Errorf("want tag 0x%08x: %w", uint32(tag), errWrongTagInterim)
	}
	// The zero Reference's text "0000" does not parse: read it as absent.
	return json.Unmarshal(bytes.ReplaceAll(a.Bytes, []byte(`"0000"`), []byte("null")), v)
}

func (jsonCodec) encodeEvent(e Event) (asl.Artifact, error) { return jsonArt(TagEvent, e) }
func (jsonCodec) decodeEvent(a asl.Artifact) (e Event, err error) {
	err = jsonDecode(a, TagEvent, &e)
	return
}
func (jsonCodec) encodeReceipt(r Receipt) (asl.Artifact, error) { return jsonArt(TagReceipt, r) }
func (jsonCodec) decodeReceipt(a asl.Artifact) (r Receipt, err error) {
	err = jsonDecode(a, TagReceipt, &r)
	return
}
func (jsonCodec) encodeSubmission(s Submission) (asl.Artifact, error) {
	return jsonArt(tagSubmissionInterim, s)
}
func (jsonCodec) decodeSubmission(a asl.Artifact) (s Submission, err error) {
	err = jsonDecode(a, tagSubmissionInterim, &s)
	return
}

// planCodec reads a stored plan. Until the §22 codec is merged plans are
// stored as JSON of the model under TagPlan.
var decodePlanArtifact = func(a asl.Artifact) (*Plan, error) {
	var p Plan
	if err := jsonDecode(a, TagPlan, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// encodePlanArtifact is decodePlanArtifact's inverse (tests and the
// interim `plan build`).
var encodePlanArtifact = func(p *Plan) (asl.Artifact, error) { return jsonArt(TagPlan, p) }

// InterimBuild stores nothing: it reads a plan written as JSON of the model
// and returns its artifact. It stands for the §22 Build until that lands.
func InterimBuild(src []byte) (asl.Artifact, error) {
	var p Plan
	if err := json.Unmarshal(src, &p); err != nil {
		return asl.Artifact{}, fmt.Errorf("plan JSON: %w", err)
	}
	return encodePlanArtifact(&p)
}
