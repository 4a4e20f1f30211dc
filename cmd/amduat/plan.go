package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/policy"
	"github.com/amduat/amduat/plan/effect/registry"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
)

// The `amduat plan` command group (SPECS.md §16.8, §24): build, submit,
// run, status, log, approve, reject, cancel, retry, verify and ls. Every
// subcommand is a thin adapter over plan.Runner; subcommands live in
// plan_*.go and register with addPlanCommand.

func init() { addCommand(newPlanCmd) }

var planFactories []func(*app) *cobra.Command

// addPlanCommand registers a subcommand of `amduat plan`.
func addPlanCommand(f func(*app) *cobra.Command) { planFactories = append(planFactories, f) }

// planExecutors returns the executors of effect steps (SPECS.md §23): http,
// exec and every external executor the policy file at policyPath names,
// and the policy's digest (§23.1), which the runner records in every
// step_started event and verify compares (§24.9). Without --policy the
// empty policy applies, which allows nothing, so an effect step fails with
// policy_denied instead of calling the world.
func planExecutors(policyPath string) ([]effect.Executor, string, error) {
	pol := policy.Empty()
	if policyPath != "" {
		var err error
		if pol, err = policy.Load(policyPath); err != nil {
			return nil, "", err
		}
	}
	execs, err := registry.Executors(pol)
	return execs, pol.Digest(), err
}

// planBuild reads a plan in its JSON form, checks it and returns its
// PLAN/1 artifact (SPECS.md §22).
func planBuild(src []byte) (asl.Artifact, error) {
	p, err := plan.Build(src)
	if err != nil {
		return asl.Artifact{}, err
	}
	return p.Artifact()
}

// Exit codes of the plan commands that drive or wait on an execution
// (submit --wait, run): the execution's status, in the range 20-29
// reserved for them in exitcodes.go.
const (
	exitPlanWaiting   = 20 // waiting for a person: an approval or an unknown outcome
	exitPlanPartial   = 21 // ended without completing: failed, rejected, blocked by the mode
	exitPlanCancelled = 22
)

// planExitCode is the exit code of an execution's status.
func planExitCode(s plan.ExecStatus) int {
	switch s {
	case plan.ExecWaiting:
		return exitPlanWaiting
	case plan.ExecPartial:
		return exitPlanPartial
	case plan.ExecCancelled:
		return exitPlanCancelled
	}
	return exitOK
}

const planExitCodeHelp = `Exit codes:
  0    success; for submit --wait and run: the execution completed
  1    refused: the step is not in a state that allows it (approve a step
       that is not waiting, retry an unknown outcome without --force);
       verify found a difference
  2    usage error
  3    no such execution, plan or reference
  5    the store keeps no pins (plans need them)
  20   submit --wait, run: waiting for a person (an approval, an unknown outcome)
  21   submit --wait, run: partial: a step failed, was rejected or blocked
       by the mode; what it has is printed
  22   submit --wait, run: cancelled
  4, 6-8  operational errors as for every command (amduat --help)
  130  interrupted`

func newPlanCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "plan",
		Short: "Run plans whose steps call the world once, with receipts, gates and replay",
		Long: `A plan (SPECS.md §22) is a DAG of steps: PEL steps, run through the surface
as pel run does, and effect steps (an HTTP call, a command, an external
executor) that touch the world. "build" stores a plan written in JSON;
"submit" starts an execution of it (the execution id is the reference of
the submission, so submitting the same plan with the same inputs and mode
again attaches to it); "run" drives an execution until it completes or
needs a person; "approve" and "reject" decide a gate; "retry" tries a
failed step again; "cancel" stops one; "status", "log" and "ls" show
them; "verify" replays one without calling anything.

An execution's only truth is its ledger: typed events stored as artifacts
and ordered by pins plan/EXEC/NNNNNNNNNNNN (SPECS.md §24.3). Every effect
is claimed before its call and leaves a receipt; a step whose call may
have reached the world and whose executor cannot be asked again safely
becomes unknown_outcome and is never called again without retry --force.

Modes (--mode on submit): gated (default: every external_send waits for
approval), auto (only the plan's own gates), draft-only (no external_send
is called), dry-run (PEL steps run, effects are listed, none is called).

With --store http://… these commands run the plan in this process over the
server's admin routes (an admin token), not through the server's plan
routes: to have the server run a plan with its own policy and workers, use
the routes of SPECS.md §18.12 (amduat serve --help).

` + planExitCodeHelp,
		Example: `  plan=$(amduat plan build fetch-count-post.json)
  id=$(amduat plan submit "$plan" --input 0=$doc)
  amduat plan run "$id" --policy policy.json
  amduat plan approve "$id" post
  amduat plan verify "$id"`,
	}
	for _, f := range planFactories {
		c.AddCommand(f(a))
	}
	return c
}

// pebblePlanStore gives the embedded store the plan.PrefixPinner
// capability through its pin index, so reading a ledger costs what it
// returns, not every pin of the store.
type pebblePlanStore struct{ *pebblestore.Store }

func (p pebblePlanStore) PinsWithPrefix(ctx context.Context, prefix string) ([]asl.Pin, error) {
	var out []asl.Pin
	err := p.ScanIndex(ctx, pebblestore.PinSpace, []byte(prefix), func(k, v []byte) error {
		ref, err := asl.DecodeReference(v)
		if err != nil {
			return fmt.Errorf("pin %q: %w: %w", k, asl.ErrIntegrity, err)
		}
		out = append(out, asl.Pin{Name: string(k), Ref: ref})
		return nil
	})
	return out, err
}

// planRunner returns a runner over s with the executors policyPath allows
// and the operations pel run has; call done when finished.
func (a *app) planRunner(ctx context.Context, s backend, policyPath string) (r *plan.Runner, done func(), err error) {
	reg, regDone, err := a.opRegistry(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	r, execDone, err := a.planRunnerWith(s, policyPath, reg)
	if err != nil {
		regDone()
		return nil, nil, err
	}
	return r, func() { execDone(); regDone() }, nil
}

// planRunnerWith returns a runner over s whose PEL steps use reg and whose
// effects are the executors the policy file at policyPath allows ("" for
// none); call done when finished.
func (a *app) planRunnerWith(s backend, policyPath string, reg *opreg.Registry) (r *plan.Runner, done func(), err error) {
	var st plan.Store
	switch v := s.(type) {
	case *pebblestore.Store:
		st = pebblePlanStore{v}
	case plan.Store:
		st = v
	default:
		return nil, nil, fail(exitUnsupported, a.storeDir, fmt.Errorf("plans need a store that keeps pins: %w", asl.ErrUnsupported))
	}
	execs, digest, err := planExecutors(policyPath)
	if err != nil {
		return nil, nil, fail(exitUsage, policyPath, err)
	}
	done = func() { registry.Close(execs) }
	r, err = plan.NewRunner(st, plan.Options{Hash: s.DefaultHash(), Surface: surf.Options{Registry: reg}, Executors: execs, PolicyDigest: digest})
	if err != nil {
		done()
		return nil, nil, fail(exitUsage, policyPath, err)
	}
	return r, done, nil
}

// planErr maps the runner's refusals to exit 1 and the rest by class.
func planErr(subject string, err error) error {
	switch {
	case errors.Is(err, plan.ErrUnboundInput), errors.Is(err, plan.ErrInvalidPlan):
		return fail(exitUsage, subject, err)
	case errors.Is(err, plan.ErrNotWaiting), errors.Is(err, plan.ErrNeedsForce),
		errors.Is(err, plan.ErrNotRetry), errors.Is(err, plan.ErrFinished):
		return fail(exitNegative, subject, err)
	}
	return failAuto(subject, err)
}

// printPlanStatus prints an execution's fold:
//
//	exec ID
//	plan REF mode MODE status STATUS events N
//	step ID STATE attempts N [class C] [reason R]
//	output STEP NAME REF
//	blocked_on STEP REASON_CODE [DETAIL]
func (a *app) printPlanStatus(x *plan.Execution, attached *bool) error {
	if a.jsonOut {
		j := report.NewPlanStatus(x)
		j.Attached = attached
		return a.printJSON(j)
	}
	a.printf("exec %s\n", x.ID)
	if attached != nil && *attached {
		a.printf("attached to an existing execution\n")
	}
	a.printf("plan %s mode %s status %s events %d\n", x.Submission.Plan, x.Submission.Mode, x.Status, x.Seq)
	for _, s := range x.Steps {
		line := fmt.Sprintf("step %s %s attempts %d", s.ID, s.State, s.Attempts)
		if s.Class != 0 {
			line += " class " + s.Class.String()
		}
		if s.Reason != "" {
			line += " reason " + printableText([]byte(s.Reason))
		}
		a.printf("%s\n", line)
	}
	for _, o := range x.Outputs() {
		a.printf("output %s %s %s\n", o.Step, o.Name, o.Ref)
	}
	for _, b := range x.BlockedOn {
		a.printf("blocked_on %s %s %s\n", b.Step, b.Reason, printableText([]byte(b.Detail)))
	}
	return nil
}

// printableString is printableText of a string: free texts of a plan's
// events, safe for a terminal.
func printableString(s string) string { return printableText([]byte(s)) }
