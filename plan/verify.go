package plan

import (
	"context"
	"fmt"

	"github.com/amduat/amduat/asl"
)

// VerifyStep is what Verify found for one step.
type VerifyStep struct {
	Step       string        `json:"step_id"`
	Kind       string        `json:"kind"` // "pel" or the effect kind
	State      string        `json:"state"`
	Recorded   asl.Reference `json:"recorded,omitempty"`   // PEL: the result recorded; effect: the last receipt
	Recomputed asl.Reference `json:"recomputed,omitempty"` // PEL: the result of the re-run
	OK         bool          `json:"ok"`
	Problem    string        `json:"problem,omitempty"`
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Exec   asl.Reference `json:"exec"`
	Status string        `json:"status"`
	Events int           `json:"events"`
	Steps  []VerifyStep  `json:"steps"`
	OK     bool          `json:"ok"`
}

// Verify replays execution id (SPECS.md §24.8) without calling any
// effect: it folds the ledger (every event present, chained and a legal
// transition), re-runs every PEL step that has a recorded result through
// the surface without its action cache and compares the result
// references (so every output, result and trace byte), reads every
// receipt, checks that every recorded output is stored, and compares each
// receipt's executor version with the current executor's, and the policy
// digest each attempt recorded with the digest of the policy in force
// (Options.PolicyDigest). A difference names the drifted program,
// executor, output or policy.
func (r *Runner) Verify(ctx context.Context, id asl.Reference) (*VerifyReport, error) {
	x, err := r.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{Exec: id, Status: x.Status.String(), Events: len(x.Events), OK: true}
	for i := range x.Steps {
		s, st := x.Steps[i], x.Plan.Steps[i]
		vs := VerifyStep{Step: s.ID, State: s.State.String(), OK: true}
		if st.Kind == PELStep {
			vs.Kind = "pel"
			r.verifyPEL(ctx, x, i, &vs)
		} else {
			vs.Kind = st.Effect
			r.verifyEffect(ctx, x, i, &vs)
		}
		if !vs.OK {
			rep.OK = false
		}
		rep.Steps = append(rep.Steps, vs)
	}
	return rep, nil
}

func (r *Runner) verifyPEL(ctx context.Context, x *Execution, i int, vs *VerifyStep) {
	s, st := x.Steps[i], x.Plan.Steps[i]
	if s.State != StateSucceeded && !(s.State == StateFailedFinal && len(s.Receipts) > 0) {
		return
	}
	if len(s.Receipts) == 0 {
		vs.OK, vs.Problem = false, "no result recorded"
		return
	}
	vs.Recorded = s.Receipts[len(s.Receipts)-1]
	ins, err := x.resolve(i)
	if err != nil {
		vs.OK, vs.Problem = false, err.Error()
		return
	}
	run, err := r.verify.Run(ctx, pelRequest(st, ins))
	if err != nil {
		vs.OK, vs.Problem = false, fmt.Sprintf("re-run of program %s: %v", st.Program, err)
		return
	}
	vs.Recomputed = run.ResultRef
	if run.ResultRef != vs.Recorded {
		vs.OK, vs.Problem = false, fmt.Sprintf("program %s drifted: result %s, recorded %s", st.Program, run.ResultRef, vs.Recorded)
		return
	}
	for k, o := range run.OutputRefs {
		if k >= len(s.Outputs) || s.Outputs[k].Ref != o {
			vs.OK, vs.Problem = false, fmt.Sprintf("program %s: output %d differs from the recorded one", st.Program, k)
			return
		}
	}
}

func (r *Runner) verifyEffect(ctx context.Context, x *Execution, i int, vs *VerifyStep) {
	s, st := x.Steps[i], x.Plan.Steps[i]
	for _, ref := range s.Receipts {
		rc, err := r.ledger.Receipt(ctx, ref)
		if err != nil {
			vs.OK, vs.Problem = false, err.Error()
			return
		}
		vs.Recorded = ref
		if rc.Kind != AttemptReceipt || rc.Effect != st.Effect || rc.Execution == x.ID && rc.Step != s.ID {
			vs.OK, vs.Problem = false, fmt.Sprintf("receipt %s is a %s of %s step %q, not an attempt of this step", ref, rc.Kind, rc.Effect, rc.Step)
			return
		}
		if key, err := x.Key(i); err != nil || key != rc.Key {
			vs.OK, vs.Problem = false, fmt.Sprintf("receipt %s: key %q, the step's inputs give %q (%v)", ref, rc.Key, key, err)
			return
		}
		if ok, err := asl.Has(ctx, r.st, rc.Request); err != nil || !ok {
			vs.OK, vs.Problem = false, fmt.Sprintf("receipt %s: request %s is not stored", ref, rc.Request)
			return
		}
		for _, o := range rc.Outputs {
			if ok, err := asl.Has(ctx, r.st, o.Ref); err != nil || !ok {
				vs.OK, vs.Problem = false, fmt.Sprintf("receipt %s: output %q %s is not stored", ref, o.Name, o.Ref)
				return
			}
		}
		if rc.Outcome == Succeeded {
			exe, ok := r.execs[rc.Executor]
			switch {
			case !ok:
				vs.OK, vs.Problem = false, fmt.Sprintf("executor %s (version %s) of receipt %s is no longer configured", rc.Executor, rc.ExecutorVersion, ref)
			case exe.Version() != rc.ExecutorVersion:
				vs.OK, vs.Problem = false, fmt.Sprintf("executor %s drifted: version %s now, %s in receipt %s", rc.Executor, exe.Version(), rc.ExecutorVersion, ref)
			}
		}
	}
	if vs.OK {
		r.verifyPolicy(x, s.ID, vs)
	}
	if s.State == StateSucceeded {
		for _, o := range s.Outputs {
			if ok, err := asl.Has(ctx, r.st, o.Ref); err != nil || !ok {
				vs.OK, vs.Problem = false, fmt.Sprintf("output %q %s is not stored", o.Name, o.Ref)
				return
			}
		}
	}
}

// verifyPolicy compares the policy digest recorded in each step_started
// event of step with the runner's (SPECS.md §24.9): the first attempt made
// under another policy is named. Events without a digest (written by a
// runner given none) and a runner without one check nothing.
func (r *Runner) verifyPolicy(x *Execution, step string, vs *VerifyStep) {
	if r.policy == "" {
		return
	}
	for _, ev := range x.Events {
		if ev.Type != EventStepStarted || ev.Step != step {
			continue
		}
		code, digest := splitReason(ev.Reason)
		if code != ReasonPolicy || digest == r.policy {
			continue
		}
		vs.OK, vs.Problem = false, fmt.Sprintf("policy changed: digest %s now, %s when attempt %d started (event %d)", r.policy, digest, ev.Attempt, ev.Seq)
		return
	}
}
