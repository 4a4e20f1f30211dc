package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
)

// The JSON objects of plan executions (SPECS.md §16.8, §18.12): what
// `amduat --json plan status|log|ls` print and what the server's plan
// routes return. An event's time is metadata (SPECS.md §24.3): it is the
// only time these objects show.

// PlanStatus is an execution's fold.
type PlanStatus struct {
	Exec      asl.Reference     `json:"exec"`
	Plan      asl.Reference     `json:"plan"`
	Mode      string            `json:"mode"`
	Status    string            `json:"status"`
	Events    uint64            `json:"events"`
	Steps     []PlanStep        `json:"steps"`
	Outputs   []plan.StepOutput `json:"outputs"`
	BlockedOn []plan.Blocker    `json:"blocked_on"`
	Attached  *bool             `json:"attached,omitempty"`
}

// PlanStep is one step of a PlanStatus.
type PlanStep struct {
	ID       string          `json:"step_id"`
	State    string          `json:"state"`
	Attempts uint32          `json:"attempts"`
	Class    string          `json:"error_class,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Receipts []asl.Reference `json:"receipts"`
	Decision string          `json:"decided_by,omitempty"`
}

// NewPlanStatus returns the object of x; lists are never null.
func NewPlanStatus(x *plan.Execution) PlanStatus {
	j := PlanStatus{Exec: x.ID, Plan: x.Submission.Plan, Mode: x.Submission.Mode.String(), Status: x.Status.String(),
		Events: x.Seq, Outputs: x.Outputs(), BlockedOn: x.BlockedOn, Steps: []PlanStep{}}
	if j.Outputs == nil {
		j.Outputs = []plan.StepOutput{}
	}
	if j.BlockedOn == nil {
		j.BlockedOn = []plan.Blocker{}
	}
	for _, s := range x.Steps {
		sj := PlanStep{ID: s.ID, State: s.State.String(), Attempts: s.Attempts, Reason: s.Reason, Receipts: RefList(s.Receipts), Decision: s.Decision}
		if s.Class != 0 {
			sj.Class = s.Class.String()
		}
		j.Steps = append(j.Steps, sj)
	}
	return j
}

// PlanEvent is one event of a ledger.
type PlanEvent struct {
	Seq     uint64          `json:"seq"`
	Ref     asl.Reference   `json:"ref"`
	Type    string          `json:"type"`
	Step    string          `json:"step_id,omitempty"`
	Attempt uint32          `json:"attempt,omitempty"`
	Receipt *asl.Reference  `json:"receipt,omitempty"`
	Outputs []effect.Output `json:"outputs,omitempty"`
	Class   string          `json:"error_class,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Actor   string          `json:"actor,omitempty"`
	Time    string          `json:"time"`
}

// NewPlanEvent returns the object of ev, stored under ref.
func NewPlanEvent(ev plan.Event, ref asl.Reference) PlanEvent {
	j := PlanEvent{Seq: ev.Seq, Ref: ref, Type: ev.Type.String(), Step: ev.Step, Attempt: ev.Attempt, Outputs: ev.Outputs,
		Reason: ev.Reason, Actor: ev.Actor, Time: time.Unix(0, ev.Time).UTC().Format(time.RFC3339Nano)}
	if !ev.Receipt.IsZero() {
		r := ev.Receipt
		j.Receipt = &r
	}
	if ev.ErrorClass != 0 {
		j.Class = ev.ErrorClass.String()
	}
	return j
}

// Text is the log line: SEQ TIME TYPE [STEP] [attempt N] [class C] [by
// ACTOR] [receipt REF] [REASON]; printable makes the free texts safe for
// a terminal.
func (j PlanEvent) Text(printable func(string) string) string {
	parts := []string{fmt.Sprint(j.Seq), j.Time, j.Type}
	if j.Step != "" {
		parts = append(parts, j.Step)
	}
	if j.Attempt != 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", j.Attempt))
	}
	if j.Class != "" {
		parts = append(parts, "class "+j.Class)
	}
	if j.Actor != "" {
		parts = append(parts, "by "+j.Actor)
	}
	if j.Receipt != nil {
		parts = append(parts, "receipt "+j.Receipt.String())
	}
	if j.Reason != "" {
		parts = append(parts, printable(j.Reason))
	}
	return strings.Join(parts, " ")
}

// PlanLog is a ledger, or the part of it after a sequence number.
type PlanLog struct {
	Exec   asl.Reference `json:"exec"`
	Status string        `json:"status"`
	Events []PlanEvent   `json:"events"`
}

// PlanList is the executions of a store, in ascending order of ids.
type PlanList struct {
	Executions []PlanStatus `json:"executions"`
}

// PlanBuilt answers a plan build: the stored plan's reference.
type PlanBuilt struct {
	PlanRef asl.Reference `json:"plan_ref"`
}

// PlanInput binds a plan's free input to an artifact in a submission.
type PlanInput struct {
	Name string        `json:"name"`
	Ref  asl.Reference `json:"ref"`
}

// PlanSubmitRequest is the body of a submission: the plan, its inputs in
// the order given, the mode ("" for gated) and a label.
type PlanSubmitRequest struct {
	PlanRef asl.Reference `json:"plan_ref"`
	Inputs  []PlanInput   `json:"inputs,omitempty"`
	Mode    string        `json:"mode,omitempty"`
	Label   string        `json:"label,omitempty"`
}

// PlanDecisionRequest is the body of approve, reject and retry: the step,
// reject's reason, retry's force.
type PlanDecisionRequest struct {
	Step   string `json:"step_id"`
	Reason string `json:"reason,omitempty"`
	Force  bool   `json:"force,omitempty"`
}
