package plan

import (
	"errors"
	"fmt"
)

// StepState is the state of one step of an execution (seed 004 §7.2,
// SPECS.md §24.2). A step's state is never stored: it is what the fold of
// the execution's events gives (fold.go), and every event the fold applies
// must be a transition of the table below.
type StepState uint8

const (
	StatePending         StepState = 1  // waiting for its dependencies
	StateReady           StepState = 2  // dependencies succeeded; may be gated, run or blocked
	StateRunning         StepState = 3  // an attempt was started and has no outcome yet
	StateSucceeded       StepState = 4  // outputs recorded (terminal)
	StateFailedRetryable StepState = 5  // the last attempt failed with a retryable class; waits its backoff
	StateFailedFinal     StepState = 6  // failed with a final class, out of attempts, or rejected
	StateWaitingApproval StepState = 7  // its gate waits for a person
	StateSkipped         StepState = 8  // a dependency cannot succeed
	StateCancelled       StepState = 9  // the execution was cancelled (terminal)
	StateUnknownOutcome  StepState = 10 // a call may or may not have reached the world; a person decides
	StateBlocked         StepState = 11 // the mode forbids the call (dry-run, draft-only)
)

var stateNames = [...]string{
	StatePending:         "pending",
	StateReady:           "ready",
	StateRunning:         "running",
	StateSucceeded:       "succeeded",
	StateFailedRetryable: "failed_retryable",
	StateFailedFinal:     "failed_final",
	StateWaitingApproval: "waiting_approval",
	StateSkipped:         "skipped",
	StateCancelled:       "cancelled",
	StateUnknownOutcome:  "unknown_outcome",
	StateBlocked:         "blocked",
}

// String returns the state's name as status, log and the JSON forms write it.
func (s StepState) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Terminal reports whether no event but a person's retry can move a step
// out of s. Succeeded and Cancelled never move.
func (s StepState) Terminal() bool {
	switch s {
	case StateSucceeded, StateCancelled, StateFailedFinal, StateSkipped, StateBlocked:
		return true
	}
	return false
}

// Transition is one allowed change of a step's state and the event type
// that makes it (SPECS.md §24.2).
type Transition struct {
	From, To StepState
	By       EventType
	Why      string
}

// Transitions is the step state machine: seed 004 §7.2's rules, plus the
// states this project adds for what the seed leaves implicit (unknown
// outcome, blocked by the mode, a person's retry, cancellation). Any pair
// not listed is illegal, and a ledger that records one is refused.
var Transitions = []Transition{
	{StatePending, StateReady, EventStepReady, "every dependency succeeded"},
	{StatePending, StateSkipped, EventStepSkipped, "a dependency failed, was skipped, blocked or cancelled (reason DEPENDENCY_FAILED)"},
	{StatePending, StateCancelled, EventCancelled, "the execution was cancelled"},
	{StateReady, StateWaitingApproval, EventGateRequested, "the gate (or the gated mode) needs a person before the call"},
	{StateReady, StateRunning, EventStepStarted, "an attempt starts (claimed, about to call)"},
	{StateReady, StateSucceeded, EventStepSucceeded, "a PEL step ran, or a successful receipt of the same kind and key is reused"},
	{StateReady, StateFailedFinal, EventStepFailed, "a PEL step's program did not succeed, or the request cannot be formed"},
	{StateReady, StateBlocked, EventStepSkipped, "the mode forbids the call (reason DRY_RUN or DRAFT_ONLY)"},
	{StateReady, StateCancelled, EventCancelled, "the execution was cancelled"},
	{StateRunning, StateSucceeded, EventStepSucceeded, "the attempt succeeded"},
	{StateRunning, StateFailedRetryable, EventRetryScheduled, "the attempt failed with a retryable class and attempts remain"},
	{StateRunning, StateFailedFinal, EventStepFailed, "the attempt failed with a final class, or the last attempt failed"},
	{StateRunning, StateUnknownOutcome, EventStepUnknownOutcome, "the call may have reached the world and cannot be repeated safely"},
	{StateRunning, StateRunning, EventStepStarted, "resumed after a crash with the same key (executors that honour keys, read_only effects)"},
	{StateRunning, StateCancelled, EventCancelled, "the execution was cancelled (the call's receipt is still written)"},
	{StateFailedRetryable, StateReady, EventStepReady, "its backoff passed"},
	{StateFailedRetryable, StateCancelled, EventCancelled, "the execution was cancelled"},
	{StateWaitingApproval, StateReady, EventApproved, "a person approved the call"},
	{StateWaitingApproval, StateFailedFinal, EventRejected, "a person rejected the call"},
	{StateWaitingApproval, StateCancelled, EventCancelled, "the execution was cancelled"},
	{StateUnknownOutcome, StateReady, EventRetryRequested, "a person asked for the call again (retry --force)"},
	{StateUnknownOutcome, StateCancelled, EventCancelled, "the execution was cancelled"},
	{StateFailedFinal, StateReady, EventRetryRequested, "a person asked for another attempt"},
	{StateSkipped, StatePending, EventRetryRequested, "a step it depends on was retried"},
	{StateBlocked, StateCancelled, EventCancelled, "the execution was cancelled"},
}

type transitionKey struct {
	from, to StepState
	by       EventType
}

var transitionSet = func() map[transitionKey]bool {
	m := make(map[transitionKey]bool, len(Transitions))
	for _, t := range Transitions {
		m[transitionKey{t.From, t.To, t.By}] = true
	}
	return m
}()

// CheckTransition returns nil when event type by may move a step from one
// state to another, and an error naming the three otherwise.
func CheckTransition(from, to StepState, by EventType) error {
	if transitionSet[transitionKey{from, to, by}] {
		return nil
	}
	return fmt.Errorf("illegal step transition %s -> %s by %s: %w", from, to, by, ErrIllegalTransition)
}

// ErrIllegalTransition is wrapped when an event would move a step along a
// pair the state machine does not list: a ledger that holds one is damaged
// or was written by a broken runner, and is refused.
var ErrIllegalTransition = errors.New("illegal step transition")
