package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
)

// ExecStatus is where an execution stands (SPECS.md §24.4).
type ExecStatus uint8

const (
	// ExecRunning: some step can progress without a person.
	ExecRunning ExecStatus = 1
	// ExecWaiting: nothing can progress until a person decides (a gate,
	// an unknown outcome); what it waits for is in BlockedOn.
	ExecWaiting ExecStatus = 2
	// ExecPartial: nothing can progress and some step failed, was blocked
	// by the mode or skipped; the execution holds what it has.
	ExecPartial ExecStatus = 3
	// ExecCompleted: every step succeeded and the completed event is
	// recorded.
	ExecCompleted ExecStatus = 4
	// ExecCancelled: a person cancelled it.
	ExecCancelled ExecStatus = 5
)

var execStatusNames = [...]string{ExecRunning: "running", ExecWaiting: "waiting", ExecPartial: "partial", ExecCompleted: "completed", ExecCancelled: "cancelled"}

func (s ExecStatus) String() string {
	if int(s) < len(execStatusNames) && execStatusNames[s] != "" {
		return execStatusNames[s]
	}
	return fmt.Sprintf("exec_status(%d)", uint8(s))
}

// Reason codes of blocked_on and of failed steps (seed 004 §7.5.3).
const (
	ReasonRequiresApproval = "REQUIRES_APPROVAL"
	ReasonUnknownOutcome   = "UNKNOWN_OUTCOME"
	ReasonDryRun           = "DRY_RUN"
	ReasonDraftOnly        = "DRAFT_ONLY"
	ReasonDependencyFailed = "DEPENDENCY_FAILED"
	ReasonRejected         = "REJECTED"
	ReasonProgramFailed    = "PROGRAM_FAILED"
	ReasonKeyClaimed       = "KEY_CLAIMED"
	// ReasonForce starts the reason of a retry_requested event made with
	// --force.
	ReasonForce = "FORCE"
	// ReasonRetryIn starts the reason of a retry_scheduled event:
	// "RETRY_IN <milliseconds>ms <class> <message>", the backoff the step
	// waits from the event's time (SPECS.md §24.5).
	ReasonRetryIn = "RETRY_IN"
)

// retryDelay reads the backoff of a retry_scheduled event's reason.
func retryDelay(reason string) (time.Duration, error) {
	code, rest := splitReason(reason)
	ms, _ := splitReason(rest)
	n, err := strconv.ParseUint(strings.TrimSuffix(ms, "ms"), 10, 32)
	if code != ReasonRetryIn || !strings.HasSuffix(ms, "ms") || err != nil {
		return 0, fmt.Errorf("retry_scheduled reason %q: want %s <milliseconds>ms", reason, ReasonRetryIn)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// StepStatus is one step's part of the fold.
type StepStatus struct {
	ID    string
	State StepState
	// Attempts counts every attempt started; SinceRetry those since the
	// last retry_requested, which the retry policy bounds.
	Attempts, SinceRetry uint32
	StartedEvent         asl.Reference   // the last step_started event
	Receipts             []asl.Reference // every attempt's receipt, in order
	Outputs              []effect.Output // succeeded: the outputs by name
	Class                effect.ErrorClass
	Reason               string    // the reason code (and text) of a failure, block or skip
	ReadyAt              time.Time // failed_retryable: when its backoff passes
	Approved             bool      // its gate was approved
	Decision             string    // who approved or rejected it
	Force                bool      // a retry --force was requested and not yet used by an attempt
}

// Blocker is one thing an execution waits for or cannot pass.
type Blocker struct {
	Step   string `json:"step_id"`
	Reason string `json:"reason_code"`
	Detail string `json:"detail,omitempty"`
}

// Execution is the fold of an execution's events (seed 003, "World
// Folding"; SPECS.md §24.4): a pure function of the submission, the plan
// and the events, which resume, status and replay share.
type Execution struct {
	ID         asl.Reference
	Submission Submission
	Plan       *Plan
	Steps      []StepStatus // in plan order
	index      map[string]int
	deps       [][]int // deps[i]: the steps step i depends on
	Head       asl.Reference
	Seq        uint64
	Status     ExecStatus
	BlockedOn  []Blocker
	Events     []Event
	EventRefs  []asl.Reference
}

// ErrBadLedger is wrapped when the events of an execution do not fold:
// a broken chain, an unknown step, an illegal transition.
var ErrBadLedger = errors.New("bad ledger")

// Step returns the status of step id.
func (x *Execution) Step(id string) (*StepStatus, bool) {
	i, ok := x.index[id]
	if !ok {
		return nil, false
	}
	return &x.Steps[i], true
}

// Deps returns the indexes of the steps step i depends on: DependsOn and
// every step an input is bound to.
func (x *Execution) Deps(i int) []int { return x.deps[i] }

// newExecution prepares the fold of plan p.
func newExecution(id asl.Reference, sub Submission, p *Plan) (*Execution, error) {
	x := &Execution{ID: id, Submission: sub, Plan: p, index: make(map[string]int, len(p.Steps))}
	for i, s := range p.Steps {
		if _, dup := x.index[s.ID]; dup {
			return nil, fmt.Errorf("plan: step %q appears twice: %w", s.ID, ErrBadLedger)
		}
		x.index[s.ID] = i
		x.Steps = append(x.Steps, StepStatus{ID: s.ID, State: StatePending})
	}
	x.deps = make([][]int, len(p.Steps))
	for i, s := range p.Steps {
		seen := map[int]bool{}
		add := func(id string) error {
			j, ok := x.index[id]
			if !ok {
				return fmt.Errorf("plan: step %q depends on unknown step %q: %w", s.ID, id, ErrBadLedger)
			}
			if !seen[j] {
				seen[j] = true
				x.deps[i] = append(x.deps[i], j)
			}
			return nil
		}
		for _, d := range s.DependsOn {
			if err := add(d); err != nil {
				return nil, err
			}
		}
		for _, b := range s.Inputs {
			if b.Step != "" {
				if err := add(b.Step); err != nil {
					return nil, err
				}
			}
		}
	}
	return x, nil
}

// Fold computes an execution's state from its events; refs[i] is the
// reference of events[i]. Every event must carry the execution id, the
// next sequence number and the reference of the event before it (the
// first, the submitted event, none), and be a legal transition
// (CheckTransition) of the step it names.
func Fold(id asl.Reference, sub Submission, p *Plan, events []Event, refs []asl.Reference) (*Execution, error) {
	if len(events) != len(refs) {
		return nil, fmt.Errorf("fold: %d events and %d references", len(events), len(refs))
	}
	x, err := newExecution(id, sub, p)
	if err != nil {
		return nil, err
	}
	for i, ev := range events {
		if err := x.apply(ev, refs[i]); err != nil {
			return nil, fmt.Errorf("fold %s: event %d (%s) %s: %w", id, i+1, ev.Type, refs[i], err)
		}
	}
	x.derive()
	return x, nil
}

func (x *Execution) apply(ev Event, ref asl.Reference) error {
	switch {
	case ev.Execution != x.ID:
		return fmt.Errorf("names execution %s: %w", ev.Execution, ErrBadLedger)
	case ev.Seq != x.Seq+1:
		return fmt.Errorf("seq %d, want %d: %w", ev.Seq, x.Seq+1, ErrBadLedger)
	case ev.Parent != x.Head:
		return fmt.Errorf("parent %s, want %s: %w", ev.Parent, x.Head, ErrBadLedger)
	case (ev.Seq == 1) != (ev.Type == EventSubmitted):
		return fmt.Errorf("the submitted event is the first and only the first: %w", ErrBadLedger)
	}
	if x.Status == ExecCancelled || x.Status == ExecCompleted {
		return fmt.Errorf("after the execution %s: %w", x.Status, ErrBadLedger)
	}
	x.Seq, x.Head = ev.Seq, ref
	x.Events = append(x.Events, ev)
	x.EventRefs = append(x.EventRefs, ref)
	switch ev.Type {
	case EventSubmitted, EventPartial, EventResumed:
		return nil
	case EventCompleted:
		for _, s := range x.Steps {
			if s.State != StateSucceeded {
				return fmt.Errorf("completed with step %q %s: %w", s.ID, s.State, ErrBadLedger)
			}
		}
		x.Status = ExecCompleted
		return nil
	case EventCancelled:
		for i := range x.Steps {
			s := &x.Steps[i]
			if CheckTransition(s.State, StateCancelled, EventCancelled) == nil {
				s.State = StateCancelled
			}
		}
		x.Status = ExecCancelled
		return nil
	}
	i, ok := x.index[ev.Step]
	if !ok {
		return fmt.Errorf("unknown step %q: %w", ev.Step, ErrBadLedger)
	}
	s := &x.Steps[i]
	to, err := x.target(i, ev)
	if err != nil {
		return err
	}
	if err := CheckTransition(s.State, to, ev.Type); err != nil {
		return fmt.Errorf("step %q: %w: %w", ev.Step, err, ErrBadLedger)
	}
	s.State = to
	switch ev.Type {
	case EventStepReady:
		if !x.depsSucceeded(i) {
			return fmt.Errorf("step %q ready before its dependencies succeeded: %w", ev.Step, ErrBadLedger)
		}
	case EventStepStarted:
		s.Attempts++
		s.SinceRetry++
		s.StartedEvent, s.Force = ref, false
		if ev.Attempt != s.Attempts {
			return fmt.Errorf("step %q: attempt %d, want %d: %w", ev.Step, ev.Attempt, s.Attempts, ErrBadLedger)
		}
	case EventStepSucceeded:
		s.Outputs, s.Class, s.Reason = ev.Outputs, 0, ""
		if !ev.Receipt.IsZero() {
			s.Receipts = append(s.Receipts, ev.Receipt)
		}
	case EventStepFailed, EventStepUnknownOutcome, EventRetryScheduled:
		s.Class, s.Reason = ev.ErrorClass, ev.Reason
		if !ev.Receipt.IsZero() {
			s.Receipts = append(s.Receipts, ev.Receipt)
		}
		if ev.Type == EventRetryScheduled {
			d, err := retryDelay(ev.Reason)
			if err != nil {
				return fmt.Errorf("step %q: %w: %w", ev.Step, err, ErrBadLedger)
			}
			s.ReadyAt = time.Unix(0, ev.Time).Add(d)
		}
	case EventGateRequested:
		s.Reason = ReasonRequiresApproval
	case EventApproved:
		s.Approved, s.Decision, s.Reason = true, ev.Actor, ""
	case EventRejected:
		s.Decision, s.Reason = ev.Actor, ReasonRejected+" "+ev.Reason
	case EventStepSkipped:
		s.Reason = ev.Reason
	case EventRetryRequested:
		s.SinceRetry, s.Force, s.Class, s.Reason = 0, strings.HasPrefix(ev.Reason, ReasonForce), 0, ""
		x.unskip(i)
	}
	return nil
}

// target is the state event ev moves step i to.
func (x *Execution) target(i int, ev Event) (StepState, error) {
	switch ev.Type {
	case EventStepReady, EventApproved:
		return StateReady, nil
	case EventRetryRequested:
		if x.Steps[i].State == StateSkipped {
			return StatePending, nil
		}
		return StateReady, nil
	case EventStepStarted:
		return StateRunning, nil
	case EventStepSucceeded:
		return StateSucceeded, nil
	case EventStepFailed, EventRejected:
		return StateFailedFinal, nil
	case EventRetryScheduled:
		return StateFailedRetryable, nil
	case EventStepUnknownOutcome:
		return StateUnknownOutcome, nil
	case EventGateRequested:
		return StateWaitingApproval, nil
	case EventStepSkipped:
		if code, _ := splitReason(ev.Reason); code == ReasonDryRun || code == ReasonDraftOnly {
			return StateBlocked, nil
		}
		return StateSkipped, nil
	}
	return 0, fmt.Errorf("event type %s names a step: %w", ev.Type, ErrBadLedger)
}

// unskip moves the skipped steps downstream of step i back to pending: a
// person's retry of i gives them a chance again.
func (x *Execution) unskip(i int) {
	for changed := true; changed; {
		changed = false
		for j := range x.Steps {
			if x.Steps[j].State != StateSkipped {
				continue
			}
			for _, d := range x.deps[j] {
				if d == i || x.Steps[d].State == StatePending {
					x.Steps[j].State, x.Steps[j].Reason = StatePending, ""
					changed = true
					break
				}
			}
		}
	}
}

func (x *Execution) depsSucceeded(i int) bool {
	for _, d := range x.deps[i] {
		if x.Steps[d].State != StateSucceeded {
			return false
		}
	}
	return true
}

// depFailed returns a dependency of step i that can no longer succeed
// without a person, or -1.
func (x *Execution) depFailed(i int) int {
	for _, d := range x.deps[i] {
		switch x.Steps[d].State {
		case StateFailedFinal, StateSkipped, StateBlocked, StateCancelled:
			return d
		}
	}
	return -1
}

// derive sets Status and BlockedOn from the step states.
func (x *Execution) derive() {
	x.BlockedOn = nil
	if x.Status == ExecCompleted || x.Status == ExecCancelled {
		return
	}
	progress, waiting, all := false, false, true
	for i, s := range x.Steps {
		if s.State != StateSucceeded {
			all = false
		}
		switch s.State {
		case StatePending:
			if x.depsSucceeded(i) || x.depFailed(i) >= 0 {
				progress = true
			}
		case StateReady, StateRunning, StateFailedRetryable:
			progress = true
		case StateWaitingApproval:
			waiting = true
			x.BlockedOn = append(x.BlockedOn, Blocker{Step: s.ID, Reason: ReasonRequiresApproval, Detail: "gate-" + s.ID})
		case StateUnknownOutcome:
			waiting = true
			x.BlockedOn = append(x.BlockedOn, Blocker{Step: s.ID, Reason: ReasonUnknownOutcome, Detail: "a call may have reached the world: check it, then retry --force or cancel"})
		case StateBlocked, StateFailedFinal:
			code, detail := splitReason(s.Reason)
			if code == "" {
				code = s.Class.String()
			}
			x.BlockedOn = append(x.BlockedOn, Blocker{Step: s.ID, Reason: code, Detail: detail})
		}
	}
	switch {
	case all || progress:
		x.Status = ExecRunning
	case waiting:
		x.Status = ExecWaiting
	default:
		x.Status = ExecPartial
	}
}

// splitReason splits "CODE text" into its code and text.
func splitReason(r string) (string, string) {
	for i := 0; i < len(r); i++ {
		if r[i] == ' ' {
			return r[:i], r[i+1:]
		}
	}
	return r, ""
}

// Outputs returns the outputs of every succeeded step, in plan order: the
// execution's value, whole or partial (seed 004 §7.5.3).
func (x *Execution) Outputs() []StepOutput {
	var out []StepOutput
	for _, s := range x.Steps {
		if s.State == StateSucceeded {
			for _, o := range s.Outputs {
				out = append(out, StepOutput{Step: s.ID, Name: o.Name, Ref: o.Ref})
			}
		}
	}
	return out
}

// StepOutput is one output of a succeeded step.
type StepOutput struct {
	Step string        `json:"step_id"`
	Name string        `json:"name"`
	Ref  asl.Reference `json:"ref"`
}
