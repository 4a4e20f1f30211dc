package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/report"
)

// The plan routes (SPECS.md §18.12): a thin adapter over plan.Runner, as
// `amduat plan` is. Executions run in the background, in the workers of
// planpool.go, never in a request.

// PathPlans is the root of the plan routes.
const PathPlans = "/v1/plans"

// CodePlanRefused is the error code of a decision the execution's state
// does not allow (409): approving a step that is not waiting, retrying an
// unknown outcome without force, cancelling a finished execution.
const CodePlanRefused = "plan_refused"

// PlanConfig configures the plan routes and the background workers.
type PlanConfig struct {
	// Runner runs executions, with the executors the server's policy file
	// allows (never the plan's choice).
	Runner *plan.Runner
	// Workers is how many executions run at once in the background; 0
	// runs none (submitted executions wait for a server that runs them).
	Workers int
	// LeaseTTL is the lease time of executions (plan.LeaseOptions).
	LeaseTTL time.Duration
	// Rescan is how often the workers look for unfinished executions of
	// the store (other servers' too); 0 means one minute, negative never
	// after the start.
	Rescan time.Duration
}

// maxLogWait bounds the wait of a log request (?wait=).
const maxLogWait = 60 * time.Second

// logPoll is how often a waiting log request reads the ledger again: other
// servers append to it too, so no in-process signal would suffice.
const logPoll = 200 * time.Millisecond

func (s *Server) planRoutes() []route {
	return []route{
		{"POST " + PathPlans, scopeWrite, s.planBuild},
		{"GET " + PathPlans + "/executions", scopeRead, s.planList},
		{"POST " + PathPlans + "/executions", scopePlan, s.planSubmit},
		{"GET " + PathPlans + "/executions/{id}", scopeRead, s.planStatus},
		{"GET " + PathPlans + "/executions/{id}/log", scopeRead, s.planLog},
		{"POST " + PathPlans + "/executions/{id}/approve", scopeApprove, s.planApprove},
		{"POST " + PathPlans + "/executions/{id}/reject", scopeApprove, s.planReject},
		{"POST " + PathPlans + "/executions/{id}/cancel", scopePlan, s.planCancel},
		{"POST " + PathPlans + "/executions/{id}/retry", scopePlan, s.planRetry},
		{"POST " + PathPlans + "/executions/{id}/verify", scopeRun, s.planVerify},
	}
}

// planRunner returns the runner, or 501 when this server runs no plans.
func (s *Server) planRunner() (*plan.Runner, error) {
	if s.plans == nil {
		return nil, unsupported("this server runs no plans (its store keeps no pins)")
	}
	return s.plans.runner, nil
}

// planError maps the runner's refusals to their statuses.
func planError(err error) error {
	switch {
	case errors.Is(err, plan.ErrInvalidPlan), errors.Is(err, plan.ErrUnboundInput), errors.Is(err, plan.ErrInvalidRecord):
		return badRequest("%v", err)
	case errors.Is(err, plan.ErrNotWaiting), errors.Is(err, plan.ErrNeedsForce),
		errors.Is(err, plan.ErrNotRetry), errors.Is(err, plan.ErrFinished):
		return &httpError{http.StatusConflict, CodePlanRefused, err.Error()}
	}
	return err
}

// planActor is who a decision records: the token's name, or "anonymous"
// on a server without authentication.
func (s *Server) planActor(r *http.Request) string {
	if s.auth == nil {
		return anonymousActor
	}
	if name, _, err := s.auth.Check(r.Header.Get("Authorization")); err == nil {
		return name
	}
	return anonymousActor
}

func execParam(r *http.Request) (asl.Reference, error) {
	ref, err := asl.ParseReference(r.PathValue("id"))
	if err != nil {
		return asl.Reference{}, &httpError{http.StatusBadRequest, httpstore.CodeBadReference, "execution id: " + err.Error()}
	}
	return ref, nil
}

// planExecution returns the runner and the execution named by the
// request's {id} path value.
func (s *Server) planExecution(r *http.Request) (*plan.Runner, asl.Reference, error) {
	run, err := s.planRunner()
	if err != nil {
		return nil, asl.Reference{}, err
	}
	id, err := execParam(r)
	return run, id, err
}

// planBuild is POST /v1/plans: a plan's JSON form in, {"plan_ref"} out.
func (s *Server) planBuild(w http.ResponseWriter, r *http.Request) error {
	src, err := io.ReadAll(s.body(w, r, s.limits.MaxJSONBytes))
	if err != nil {
		return err
	}
	p, err := plan.Build(src)
	if err != nil {
		return planError(err)
	}
	art, err := p.Artifact()
	if err != nil {
		return planError(err)
	}
	ref, err := asl.PutArtifact(r.Context(), s.store, s.store.DefaultHash(), art)
	if err != nil {
		return err
	}
	s.metrics.puts.Add(1)
	s.metrics.putBytes.Add(float64(len(art.Bytes)))
	s.evict.touch(ref)
	s.evict.wrote(int64(len(art.Bytes)), false)
	return writeJSON(w, report.PlanBuilt{PlanRef: ref})
}

// planSubmit is POST /v1/plans/executions: the status object of the
// execution, "attached" telling whether it existed. The workers run it.
func (s *Server) planSubmit(w http.ResponseWriter, r *http.Request) error {
	run, err := s.planRunner()
	if err != nil {
		return err
	}
	var req report.PlanSubmitRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.PlanRef.IsZero() {
		return badRequest("plan_ref is required")
	}
	sub := plan.Submission{Plan: req.PlanRef, Label: req.Label}
	if req.Mode != "" {
		if sub.Mode, err = plan.ParseMode(req.Mode); err != nil {
			return badRequest("mode: %v", err)
		}
	}
	for i, in := range req.Inputs {
		if in.Name == "" || in.Ref.IsZero() {
			return badRequest("inputs[%d]: want a name and a reference", i)
		}
		sub.Inputs = append(sub.Inputs, effect.Input{Name: in.Name, Ref: in.Ref})
	}
	id, attached, err := run.Submit(r.Context(), sub)
	if err != nil {
		return planError(err)
	}
	x, err := run.Status(r.Context(), id)
	if err != nil {
		return err
	}
	s.plans.kick(x)
	j := report.NewPlanStatus(x)
	j.Attached = &attached
	return writeJSON(w, j)
}

// planStatus is GET /v1/plans/executions/{id}.
func (s *Server) planStatus(w http.ResponseWriter, r *http.Request) error {
	run, id, err := s.planExecution(r)
	if err != nil {
		return err
	}
	x, err := run.Status(r.Context(), id)
	if err != nil {
		return err
	}
	return writeJSON(w, report.NewPlanStatus(x))
}

// planList is GET /v1/plans/executions.
func (s *Server) planList(w http.ResponseWriter, r *http.Request) error {
	run, err := s.planRunner()
	if err != nil {
		return err
	}
	xs, err := run.List(r.Context())
	if err != nil {
		return err
	}
	out := report.PlanList{Executions: make([]report.PlanStatus, len(xs))}
	for i, x := range xs {
		out.Executions[i] = report.NewPlanStatus(x)
	}
	return writeJSON(w, out)
}

// planLog is GET /v1/plans/executions/{id}/log?after=N&wait=SECONDS: the
// events after seq N (all without after). With wait, a request that finds
// no such event waits up to that many seconds (at most 60) for one, and
// answers as soon as one is appended, by this server or another: a
// client follows the log by asking again with the last seq it got.
func (s *Server) planLog(w http.ResponseWriter, r *http.Request) error {
	run, id, err := s.planExecution(r)
	if err != nil {
		return err
	}
	var after uint64
	if t := r.URL.Query().Get("after"); t != "" {
		if after, err = strconv.ParseUint(t, 10, 64); err != nil {
			return badRequest("after %q: want a sequence number", t)
		}
	}
	var wait time.Duration
	if t := r.URL.Query().Get("wait"); t != "" {
		n, err := strconv.ParseUint(t, 10, 32)
		if err != nil {
			return badRequest("wait %q: want seconds, 0 to %d", t, int(maxLogWait.Seconds()))
		}
		wait = min(time.Duration(n)*time.Second, maxLogWait)
	}
	if wait > 0 {
		longRequest(w)
	}
	deadline := time.Now().Add(wait)
	for {
		x, err := run.Status(r.Context(), id)
		if err != nil {
			return err
		}
		if x.Seq > after || !time.Now().Before(deadline) || x.Status == plan.ExecCompleted || x.Status == plan.ExecCancelled {
			out := report.PlanLog{Exec: id, Status: x.Status.String(), Events: []report.PlanEvent{}}
			for i := range x.Events {
				if x.Events[i].Seq > after {
					out.Events = append(out.Events, report.NewPlanEvent(x.Events[i], x.EventRefs[i]))
				}
			}
			return writeJSON(w, out)
		}
		t := time.NewTimer(min(logPoll, time.Until(deadline)))
		select {
		case <-r.Context().Done():
			t.Stop()
			return r.Context().Err()
		case <-t.C:
		}
	}
}

// decision decodes a decision body, makes it with fn and answers the
// status; the workers run the execution again.
func (s *Server) decision(w http.ResponseWriter, r *http.Request, needStep bool, fn func(ctx context.Context, run *plan.Runner, id asl.Reference, req report.PlanDecisionRequest) (*plan.Execution, error)) error {
	run, id, err := s.planExecution(r)
	if err != nil {
		return err
	}
	var req report.PlanDecisionRequest
	if r.ContentLength != 0 {
		if err := s.decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	if needStep && req.Step == "" {
		return badRequest("step_id is required")
	}
	x, err := fn(r.Context(), run, id, req)
	if err != nil {
		return planError(err)
	}
	s.plans.kick(x)
	return writeJSON(w, report.NewPlanStatus(x))
}

// planApprove is POST …/approve {"step_id"}: the token's name is the actor.
func (s *Server) planApprove(w http.ResponseWriter, r *http.Request) error {
	actor := s.planActor(r)
	return s.decision(w, r, true, func(ctx context.Context, run *plan.Runner, id asl.Reference, req report.PlanDecisionRequest) (*plan.Execution, error) {
		return run.Approve(ctx, id, req.Step, actor)
	})
}

// planReject is POST …/reject {"step_id","reason"}.
func (s *Server) planReject(w http.ResponseWriter, r *http.Request) error {
	actor := s.planActor(r)
	return s.decision(w, r, true, func(ctx context.Context, run *plan.Runner, id asl.Reference, req report.PlanDecisionRequest) (*plan.Execution, error) {
		return run.Reject(ctx, id, req.Step, actor, req.Reason)
	})
}

// planCancel is POST …/cancel.
func (s *Server) planCancel(w http.ResponseWriter, r *http.Request) error {
	actor := s.planActor(r)
	return s.decision(w, r, false, func(ctx context.Context, run *plan.Runner, id asl.Reference, _ report.PlanDecisionRequest) (*plan.Execution, error) {
		return run.Cancel(ctx, id, actor)
	})
}

// planRetry is POST …/retry {"step_id","force"}.
func (s *Server) planRetry(w http.ResponseWriter, r *http.Request) error {
	actor := s.planActor(r)
	return s.decision(w, r, true, func(ctx context.Context, run *plan.Runner, id asl.Reference, req report.PlanDecisionRequest) (*plan.Execution, error) {
		return run.Retry(ctx, id, req.Step, actor, req.Force)
	})
}

// planVerify is POST …/verify: the replay of `amduat plan verify`, in a
// run slot (it re-runs PEL steps); a difference is reported with "ok":
// false and status 200, as /v1/pel/verify does.
func (s *Server) planVerify(w http.ResponseWriter, r *http.Request) error {
	run, id, err := s.planExecution(r)
	if err != nil {
		return err
	}
	longRequest(w)
	release, err := s.acquireRun(r.Context())
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel, _ := s.runContext(r.Context(), 0)
	defer cancel()
	rep, err := run.Verify(ctx, id)
	if err != nil {
		return err
	}
	return writeJSON(w, rep)
}
