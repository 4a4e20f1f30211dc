package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/report"
)

func init() {
	addPlanCommand(newPlanBuildCmd)
	addPlanCommand(newPlanSubmitCmd)
	addPlanCommand(newPlanRunCmd)
	addPlanCommand(newPlanStatusCmd)
	addPlanCommand(newPlanLogCmd)
	addPlanCommand(newPlanApproveCmd)
	addPlanCommand(newPlanRejectCmd)
	addPlanCommand(newPlanCancelCmd)
	addPlanCommand(newPlanRetryCmd)
	addPlanCommand(newPlanVerifyCmd)
	addPlanCommand(newPlanLsCmd)
}

// planActor is who the command line records as the author of a decision
// (as pins record "local").
const planActor = "local"

func newPlanBuildCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "build FILE.json",
		Short: "Store a plan written in its JSON form and print its reference",
		Long: `Read a plan in its JSON form (SPECS.md §22; "-" reads standard input),
check it (every effect step declares its class, gate, retry, cache and key;
no cycle; no unknown step) and store it as a PLAN/1 artifact. Prints the
plan's reference; --json prints {"plan_ref": REF}.

` + planExitCodeHelp,
		Example: `  amduat plan build fetch-count-post.json`,
		Args:    rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			src, err := a.readFileLimited(args[0], 64<<20, "plan")
			if err != nil {
				return err
			}
			art, err := planBuild(src)
			if err != nil {
				return fail(exitUsage, args[0], err)
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			ref, err := asl.PutArtifact(c.Context(), s, s.DefaultHash(), art)
			if err != nil {
				return failAuto(args[0], err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					PlanRef asl.Reference `json:"plan_ref"`
				}{ref})
			}
			a.printf("%s\n", ref)
			return nil
		},
	}
}

// runPlan drives execution id and reports its status with the exit code
// of that status.
func (a *app) runPlan(ctx context.Context, r *plan.Runner, id asl.Reference, attached *bool) error {
	x, err := r.Run(ctx, id)
	if err != nil {
		return planErr(id.String(), err)
	}
	if err := a.printPlanStatus(x, attached); err != nil {
		return err
	}
	if code := planExitCode(x.Status); code != exitOK {
		return exitStatus(code)
	}
	return nil
}

func newPlanSubmitCmd(a *app) *cobra.Command {
	var (
		inputs     []string
		modeArg    string
		wait       bool
		policyPath string
	)
	c := &cobra.Command{
		Use:   "submit PLANREF [--input NAME=REF]... [--mode gated|auto|draft-only|dry-run] [--wait] [--policy FILE]",
		Short: "Start an execution of a stored plan (or attach to the same one)",
		Long: `Store a submission (the plan, the bindings of its free inputs given with
--input NAME=REF, the mode) and start its execution. The execution id is the
submission's reference: submitting the same plan with the same inputs and
mode again attaches to the existing execution, finished or not, and reports
it ("attached": true).

Without --wait it prints the execution id (--json: the status object) and
returns: drive it with amduat plan run ID. With --wait it runs the
execution in this process until it completes or needs a person, prints its
status as amduat plan status does, and exits with the status's code.
--policy FILE is the policy that allows the hosts, commands and executors
effect steps may use (SPECS.md §23).

` + planExitCodeHelp,
		Example: `  id=$(amduat plan submit "$plan" --input doc=$ref)
  amduat plan submit "$plan" --input doc=$ref --mode auto --wait --policy policy.json`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			pref, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			mode, err := plan.ParseMode(modeArg)
			if err != nil {
				return usageErr(fmt.Errorf("--mode: %w", err))
			}
			sub := plan.Submission{Plan: pref, Mode: mode}
			for _, in := range inputs {
				name, refText, ok := strings.Cut(in, "=")
				if !ok || name == "" {
					return usagef("--input %q: want NAME=REF", in)
				}
				ref, err := a.parseRef(refText)
				if err != nil {
					return err
				}
				sub.Inputs = append(sub.Inputs, effect.Input{Name: name, Ref: ref})
			}
			return a.withPlanRunner(c, false, policyPath, func(r *plan.Runner) error {
				id, attached, err := r.Submit(c.Context(), sub)
				if err != nil {
					return planErr(args[0], err)
				}
				if wait {
					return a.runPlan(c.Context(), r, id, &attached)
				}
				if a.jsonOut {
					x, err := r.Status(c.Context(), id)
					if err != nil {
						return planErr(id.String(), err)
					}
					return a.printPlanStatus(x, &attached)
				}
				a.printf("%s\n", id)
				return nil
			})
		},
	}
	f := c.Flags()
	f.StringArrayVar(&inputs, "input", nil, "bind the plan's free input NAME to the artifact REF (repeatable)")
	f.StringVar(&modeArg, "mode", "gated", "gated, auto, draft-only or dry-run")
	f.BoolVar(&wait, "wait", false, "run the execution here until it completes or needs a person")
	f.StringVar(&policyPath, "policy", "", "policy file allowing hosts, commands and executors (SPECS.md §23)")
	return c
}

func newPlanRunCmd(a *app) *cobra.Command {
	var policyPath string
	c := &cobra.Command{
		Use:   "run ID [--policy FILE]",
		Short: "Drive an execution until it completes or needs a person (resumes after a crash)",
		Long: `Drive the execution ID from what its ledger says: run the steps whose
dependencies succeeded, call the effects the mode and the gates allow, retry
retryable failures after their backoff, and stop when the execution is
completed, cancelled, waiting for a person or partial. It reads nothing but
the ledger, so it resumes an execution whose runner was killed: a step cut
off mid-call is called again with the same key when its executor honours
keys, and otherwise becomes unknown_outcome. Prints the status as amduat
plan status does and exits with its code.

` + planExitCodeHelp,
		Example: `  amduat plan run "$id" --policy policy.json`,
		Args:    rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, false, policyPath, func(r *plan.Runner) error {
				return a.runPlan(c.Context(), r, id, nil)
			})
		},
	}
	c.Flags().StringVar(&policyPath, "policy", "", "policy file allowing hosts, commands and executors (SPECS.md §23)")
	return c
}

// withPlanRunner opens the store (read-only when ro) and a runner with the
// executors the policy file at policyPath allows ("" for none), and calls fn.
func (a *app) withPlanRunner(c *cobra.Command, ro bool, policyPath string, fn func(r *plan.Runner) error) (err error) {
	var s backend
	if ro {
		s, err = a.openStoreReadOnly()
	} else {
		s, err = a.openStore()
	}
	if err != nil {
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	r, done, err := a.planRunner(c.Context(), s, policyPath)
	if err != nil {
		return err
	}
	defer done()
	return fn(r)
}

func newPlanStatusCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show an execution's state: steps, outputs, what it is blocked on",
		Long: `Fold the ledger of execution ID and print:

  exec ID
  plan REF mode MODE status STATUS events N
  step ID STATE attempts N [class C] [reason R]     one per step, plan order
  output STEP NAME REF                              every succeeded step's outputs
  blocked_on STEP REASON_CODE DETAIL                what needs a person or failed

STATUS is running, waiting, partial, completed or cancelled; STATE one of
the step states of SPECS.md §24.2. --json prints one object with the same
content. The exit code is 0 whatever the status (see plan run for codes).

` + planExitCodeHelp,
		Example: `  amduat plan status "$id"
  amduat --json plan status "$id"`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, true, "", func(r *plan.Runner) error {
				x, err := r.Status(c.Context(), id)
				if err != nil {
					return planErr(args[0], err)
				}
				return a.printPlanStatus(x, nil)
			})
		},
	}
}

func newPlanLogCmd(a *app) *cobra.Command {
	var follow bool
	c := &cobra.Command{
		Use:   "log ID [--follow]",
		Short: "Print an execution's ledger, one event per line",
		Long: `Print the events of execution ID in sequence order:

  SEQ TIME TYPE [STEP] [attempt N] [class C] [by ACTOR] [receipt REF] [REASON]

--json prints {"events": [...]} (seq, ref, type, step_id, attempt, receipt,
outputs, error_class, reason, actor, time). --follow keeps printing new
events as they are appended (every half second) until the execution is
completed or cancelled, or the command is interrupted; with --json it then
prints one event object per line.

` + planExitCodeHelp,
		Example: `  amduat plan log "$id"
  amduat plan log --follow "$id"`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, true, "", func(r *plan.Runner) error {
				seen := 0
				for {
					evs, refs, err := r.Log(c.Context(), id)
					if err != nil {
						return planErr(args[0], err)
					}
					if len(evs) == 0 {
						return fail(exitNotFound, args[0], fmt.Errorf("no such execution: %w", asl.ErrNotFound))
					}
					if !follow {
						out := make([]report.PlanEvent, len(evs))
						for i := range evs {
							out[i] = report.NewPlanEvent(evs[i], refs[i])
						}
						if a.jsonOut {
							return a.printJSON(struct {
								Events []report.PlanEvent `json:"events"`
							}{out})
						}
						for _, e := range out {
							a.printf("%s\n", e.Text(printableString))
						}
						return nil
					}
					end := false
					for i := seen; i < len(evs); i++ {
						e := report.NewPlanEvent(evs[i], refs[i])
						if a.jsonOut {
							if err := a.printJSON(e); err != nil {
								return err
							}
						} else {
							a.printf("%s\n", e.Text(printableString))
						}
						end = end || evs[i].Type == plan.EventCompleted || evs[i].Type == plan.EventCancelled
					}
					seen = len(evs)
					if end {
						return nil
					}
					select {
					case <-c.Context().Done():
						return c.Context().Err()
					case <-time.After(500 * time.Millisecond):
					}
				}
			})
		},
	}
	c.Flags().BoolVar(&follow, "follow", false, "keep printing events until the execution ends")
	return c
}

func newPlanApproveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "approve ID STEP",
		Short: "Approve the gate of a step waiting for approval",
		Long: `Record that the gate of STEP of execution ID is approved: an approval
receipt (who: "local" on the command line, a token's name through the
server; when) and an approved event. The step becomes ready; amduat plan run
ID then calls it. Approving a step that is not waiting is refused (exit 1).
Prints the status as amduat plan status does.

` + planExitCodeHelp,
		Example: `  amduat plan approve "$id" post`,
		Args:    rangeArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, false, "", func(r *plan.Runner) error {
				x, err := r.Approve(c.Context(), id, args[1], planActor)
				if err != nil {
					return planErr(args[1], err)
				}
				return a.printPlanStatus(x, nil)
			})
		},
	}
}

func newPlanRejectCmd(a *app) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "reject ID STEP [--reason TEXT]",
		Short: "Reject the gate of a step waiting for approval",
		Long: `Record that the gate of STEP of execution ID is rejected: a rejection
receipt and a rejected event with who, when and --reason. The step fails
with the reason code REJECTED and is never called; steps that depend on it
are skipped, and the execution ends partial with what it has.

` + planExitCodeHelp,
		Example: `  amduat plan reject "$id" post --reason "wrong recipient"`,
		Args:    rangeArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, false, "", func(r *plan.Runner) error {
				x, err := r.Reject(c.Context(), id, args[1], planActor, reason)
				if err != nil {
					return planErr(args[1], err)
				}
				return a.printPlanStatus(x, nil)
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why (recorded in the receipt and the event)")
	return c
}

func newPlanCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel an execution: no step is started again",
		Long: `Append a cancelled event to execution ID: every step not finished becomes
cancelled and no runner starts anything more. A call already in flight is
not interrupted by this command. Cancelling a finished execution is refused
(exit 1).

` + planExitCodeHelp,
		Example: `  amduat plan cancel "$id"`,
		Args:    rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, false, "", func(r *plan.Runner) error {
				x, err := r.Cancel(c.Context(), id, planActor)
				if err != nil {
					return planErr(args[0], err)
				}
				return a.printPlanStatus(x, nil)
			})
		},
	}
}

func newPlanRetryCmd(a *app) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "retry ID STEP [--force]",
		Short: "Try a failed step again (an unknown outcome only with --force)",
		Long: `Record that STEP of execution ID is to be tried again: a step that failed
with a final class, exhausted its attempts or was rejected becomes ready
with a fresh retry budget, and the steps skipped because of it pending.
A step whose outcome is unknown (its call may have reached the world) is
retried only with --force: check first that the world was not changed,
since the call is made again. amduat plan run ID then runs it.

` + planExitCodeHelp,
		Example: `  amduat plan retry "$id" fetch
  amduat plan retry "$id" post --force`,
		Args: rangeArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, false, "", func(r *plan.Runner) error {
				x, err := r.Retry(c.Context(), id, args[1], planActor, force)
				if err != nil {
					return planErr(args[1], err)
				}
				return a.printPlanStatus(x, nil)
			})
		},
	}
	c.Flags().BoolVar(&force, "force", false, "retry a step whose outcome is unknown (it is called again)")
	return c
}

func newPlanVerifyCmd(a *app) *cobra.Command {
	var policyPath string
	c := &cobra.Command{
		Use:   "verify ID [--policy FILE]",
		Short: "Replay an execution without calling anything and compare bytes",
		Long: `Rebuild execution ID from its ledger alone (every event present, chained,
a legal transition), re-run every PEL step through the surface without the
action cache and compare its result reference (so every output, result and
trace byte) with the recorded one, read every receipt and check that every
output is stored, compare each receipt's executor version with the
executor --policy configures now, and compare the policy digest every
attempt recorded with the digest of --policy (without it, the empty
policy's). No effect is called. Prints one line per step:

  ok STEP KIND STATE [REF]
  DIFF STEP KIND STATE PROBLEM       names the drifted program or executor, or the changed policy

--json prints {"exec","status","events","ok","steps":[{"step_id","kind",
"state","recorded","recomputed","ok","problem"}]}. Exit 1 when a step
differs.

` + planExitCodeHelp,
		Example: `  amduat plan verify "$id" --policy policy.json`,
		Args:    rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			id, err := a.parseRef(args[0])
			if err != nil {
				return err
			}
			return a.withPlanRunner(c, false, policyPath, func(r *plan.Runner) error {
				rep, err := r.Verify(c.Context(), id)
				if err != nil {
					return planErr(args[0], err)
				}
				if a.jsonOut {
					if err := a.printJSON(rep); err != nil {
						return err
					}
				} else {
					for _, st := range rep.Steps {
						if st.OK {
							line := fmt.Sprintf("ok %s %s %s", st.Step, st.Kind, st.State)
							if !st.Recorded.IsZero() {
								line += " " + st.Recorded.String()
							}
							a.printf("%s\n", line)
						} else {
							a.printf("DIFF %s %s %s %s\n", st.Step, st.Kind, st.State, printableText([]byte(st.Problem)))
						}
					}
				}
				if !rep.OK {
					return exitStatus(exitNegative)
				}
				return nil
			})
		},
	}
	c.Flags().StringVar(&policyPath, "policy", "", "policy whose executors' versions the receipts are compared with")
	return c
}

func newPlanLsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the executions of the store",
		Long: `Print one line per execution, in ascending order of ids:

  ID STATUS MODE PLAN SUCCEEDED/STEPS

--json prints {"executions": [status objects as amduat plan status --json]}.

` + planExitCodeHelp,
		Example: `  amduat plan ls
  amduat --json plan ls`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			return a.withPlanRunner(c, true, "", func(r *plan.Runner) error {
				xs, err := r.List(c.Context())
				if err != nil {
					return failAuto("", err)
				}
				if a.jsonOut {
					out := make([]report.PlanStatus, len(xs))
					for i, x := range xs {
						out[i] = report.NewPlanStatus(x)
					}
					return a.printJSON(struct {
						Executions []report.PlanStatus `json:"executions"`
					}{out})
				}
				for _, x := range xs {
					n := 0
					for _, s := range x.Steps {
						if s.State == plan.StateSucceeded {
							n++
						}
					}
					a.printf("%s %s %s %s %d/%d\n", x.ID, x.Status, x.Submission.Mode, x.Submission.Plan, n, len(x.Steps))
				}
				return nil
			})
		},
	}
}
