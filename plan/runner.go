package plan

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/surf"
)

// Clock is the runner's time: when events happen and how backoffs wait.
// Tests give one that advances without sleeping.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// KeyHonouring is the optional capability of an effect.Executor whose
// provider deduplicates requests by the key it is sent, so that a call
// whose outcome is unknown may be repeated with the same key (SPECS.md
// §24.7). An executor without it is assumed not to.
type KeyHonouring = effect.KeyHonouring

// honoursKeys reports whether exe declares that it honours keys.
func honoursKeys(exe effect.Executor) bool {
	k, ok := exe.(KeyHonouring)
	return ok && k.HonoursKeys()
}

// Options configure a Runner.
type Options struct {
	// Hash derives the references of the records the runner stores; zero
	// means HASH-ASL1-256.
	Hash asl.HashID
	// Surface configures the surface PEL steps run on, exactly as `pel
	// run` does (its operation registry, budgets); its Hash is Hash.
	// Verify re-runs them on a surface with the same options, without the
	// action cache and the run log.
	Surface surf.Options
	// Executors perform effect steps, by their Name. A step whose kind no
	// executor performs fails with policy_denied.
	Executors []effect.Executor
	// Clock is the runner's time; nil means the wall clock.
	Clock Clock
	// Writer names this runner in the events it appends (metadata),
	// followed by a nonce of this Runner's; empty means host-pid-nonce.
	Writer string
	// CallTimeout bounds one effect call; zero means 5 minutes.
	CallTimeout time.Duration
	// PolicyDigest is the digest of the policy in force (SPECS.md §23.1,
	// policy.Digest), the one Executors were made from. Every
	// step_started event records it (reason "POLICY <digest>", §24.3) and
	// Verify names a policy that changed since (§24.9); empty records
	// nothing and checks nothing.
	PolicyDigest string
}

// Runner drives executions of plans (SPECS.md §24). Every decision is
// taken on a fold of the ledger and recorded by appending one event, so a
// Runner holds no state a crash could lose: Run resumes from the ledger
// alone. Several runners may drive the same execution; an append that loses
// the race for its sequence number is decided again. A step in the
// running state is taken for a crashed attempt: at most one live runner
// per execution is assumed while a call is in flight (SPECS.md §24.7).
type Runner struct {
	st      Store
	ledger  *Ledger
	surf    *surf.Surface
	verify  *surf.Surface
	execs   map[string]effect.Executor
	clock   Clock
	writer  string
	hash    asl.HashID
	timeout time.Duration
	policy  string // the digest of the policy in force, or ""
}

// NewRunner returns a Runner over st.
func NewRunner(st Store, opts Options) (*Runner, error) {
	if opts.Hash == 0 {
		opts.Hash = asl.HashSHA256
	}
	r := &Runner{st: st, ledger: NewLedger(st, opts.Hash), clock: opts.Clock,
		writer: opts.Writer, hash: opts.Hash, timeout: opts.CallTimeout, policy: opts.PolicyDigest, execs: map[string]effect.Executor{}}
	so := opts.Surface
	so.Hash = opts.Hash
	r.surf = surf.New(st, so)
	so.NoCache, so.NoLog, so.NodeMemo, so.Progress = true, true, false, nil
	r.verify = surf.New(st, so)
	if r.clock == nil {
		r.clock = realClock{}
	}
	if r.timeout == 0 {
		r.timeout = 5 * time.Minute
	}
	// Every Runner's name ends in a nonce of its own, whatever Writer
	// says: two runners must never write the same step_started bytes, or
	// both would find their event at the contested sequence number (a pin
	// re-made to the same reference succeeds) and both would call.
	var b [6]byte
	_, _ = rand.Read(b[:])
	if r.writer == "" {
		host, _ := os.Hostname()
		r.writer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	} else {
		r.writer += "-" + hex.EncodeToString(b[:])
	}
	for _, e := range opts.Executors {
		if _, dup := r.execs[e.Name()]; dup {
			return nil, fmt.Errorf("runner: two executors named %q", e.Name())
		}
		r.execs[e.Name()] = e
	}
	return r, nil
}

// Ledger returns the runner's ledger.
func (r *Runner) Ledger() *Ledger { return r.ledger }

// Errors of the Go API.
var (
	ErrNotWaiting = errors.New("step is not waiting for approval")
	ErrNeedsForce = errors.New("the step's outcome is unknown: a call may have reached the world; retry it with force only after checking")
	ErrNotRetry   = errors.New("step cannot be retried")
	ErrFinished   = errors.New("execution finished")
)

// Submit stores sub and starts its execution; the execution id is the
// reference of the stored submission, so submitting the same submission
// again attaches to the existing execution (attached is true) whatever its
// state (SPECS.md §24.1).
func (r *Runner) Submit(ctx context.Context, sub Submission) (id asl.Reference, attached bool, err error) {
	if sub.Mode == 0 {
		sub.Mode = Gated
	}
	p, err := r.loadPlan(ctx, sub.Plan)
	if err != nil {
		return asl.Reference{}, false, err
	}
	for _, in := range sub.Inputs {
		if !bindsInput(p, in.Name) {
			return asl.Reference{}, false, fmt.Errorf("submit: input %q: no step of plan %s has an input of that name bound to an artifact: %w", in.Name, sub.Plan, ErrUnboundInput)
		}
	}
	a, err := sub.Artifact()
	if err != nil {
		return asl.Reference{}, false, fmt.Errorf("submit: %w", err)
	}
	id, err = r.ledger.put(ctx, a)
	if err != nil {
		return asl.Reference{}, false, fmt.Errorf("submit: %w", err)
	}
	first, err := r.ledger.pin(ctx, EventPinName(id, 1))
	if err != nil {
		return id, false, fmt.Errorf("submit: %w", err)
	}
	if !first.IsZero() {
		return id, true, nil
	}
	_, err = r.ledger.Append(ctx, r.event(Event{Type: EventSubmitted, Execution: id, Seq: 1}))
	if errors.Is(err, ErrConflict) {
		return id, true, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("submit: %w", err)
	}
	return id, false, nil
}

// event stamps ev with the runner's time.
func (r *Runner) event(ev Event) Event {
	ev.Time = r.clock.Now().UnixNano()
	return ev
}

// bindsInput reports whether a step of p binds an input named name to a
// stored artifact: what a submission's input of that name replaces.
func bindsInput(p *Plan, name string) bool {
	for _, st := range p.Steps {
		for _, b := range st.Inputs {
			if b.Name == name && b.Step == "" {
				return true
			}
		}
	}
	return false
}

// ErrUnboundInput is wrapped when a submission names an input no step binds.
var ErrUnboundInput = errors.New("input bound by no step")

func (r *Runner) loadPlan(ctx context.Context, ref asl.Reference) (*Plan, error) {
	a, err := asl.Get(ctx, r.st, ref, 1<<26)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", ref, err)
	}
	p, err := DecodePlanArtifact(a)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", ref, err)
	}
	return &p, nil
}

// Status folds the ledger of execution id.
func (r *Runner) Status(ctx context.Context, id asl.Reference) (*Execution, error) {
	evs, refs, err := r.ledger.Events(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("execution %s: no ledger: %w", id, asl.ErrNotFound)
	}
	a, err := asl.Get(ctx, r.st, id, 1<<24)
	if err != nil {
		return nil, fmt.Errorf("execution %s: submission: %w", id, err)
	}
	sub, err := DecodeSubmissionArtifact(a)
	if err != nil {
		return nil, fmt.Errorf("execution %s: submission: %w", id, err)
	}
	p, err := r.loadPlan(ctx, sub.Plan)
	if err != nil {
		return nil, fmt.Errorf("execution %s: %w", id, err)
	}
	return Fold(id, sub, p, evs, refs)
}

// Log returns the events of execution id in order, with their references.
func (r *Runner) Log(ctx context.Context, id asl.Reference) ([]Event, []asl.Reference, error) {
	return r.ledger.Events(ctx, id)
}

// List returns every execution of the store, folded.
func (r *Runner) List(ctx context.Context) ([]*Execution, error) {
	ids, err := r.ledger.Executions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Execution, 0, len(ids))
	for _, id := range ids {
		x, err := r.Status(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// Run drives execution id until it is completed, cancelled, or can go no
// further without a person (waiting) or at all (partial), and returns its
// fold. It may be called again at any time, after a crash too: it reads
// nothing but the ledger.
func (r *Runner) Run(ctx context.Context, id asl.Reference) (*Execution, error) {
	x, err := r.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return x, err
		}
		if x.Status == ExecCompleted || x.Status == ExecCancelled {
			return x, nil
		}
		d, err := r.step(ctx, x)
		if err != nil && !errors.Is(err, ErrConflict) {
			return x, err
		}
		if err == nil && !d.acted && d.wait == 0 {
			// Nothing more to do without a person.
			switch {
			case x.Status == ExecRunning && len(d.blockers) == 0:
				_, err = r.append(ctx, x, Event{Type: EventCompleted})
			case len(d.blockers) == 0 && x.Events[len(x.Events)-1].Type != EventPartial:
				_, err = r.append(ctx, x, Event{Type: EventPartial, Reason: blockersText(x.BlockedOn)})
			default:
				if len(d.blockers) > 0 {
					x.BlockedOn = append(x.BlockedOn, d.blockers...)
					x.Status = ExecWaiting
				}
				return x, nil
			}
			if err != nil && !errors.Is(err, ErrConflict) {
				return x, err
			}
		}
		if err == nil && d.wait > 0 {
			if err := r.clock.Sleep(ctx, d.wait); err != nil {
				return x, err
			}
		}
		if err := r.refresh(ctx, x); err != nil {
			return x, err
		}
	}
}

// refresh applies to x the events appended after its head, looking each
// up by its pin name: the fold is kept across a Run, so a step costs what
// it appends, not a reading of the whole ledger.
func (r *Runner) refresh(ctx context.Context, x *Execution) error {
	for {
		ref, err := r.ledger.pin(ctx, EventPinName(x.ID, x.Seq+1))
		if err != nil {
			return err
		}
		if ref.IsZero() {
			x.derive()
			return nil
		}
		ev, err := r.ledger.Event(ctx, ref)
		if err != nil {
			return err
		}
		if err := x.apply(ev, ref); err != nil {
			return fmt.Errorf("fold %s: event %d (%s) %s: %w", x.ID, ev.Seq, ev.Type, ref, err)
		}
	}
}

func blockersText(bs []Blocker) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, b.Step+":"+b.Reason)
	}
	return strings.Join(parts, " ")
}

// append appends ev as the next event of x.
func (r *Runner) append(ctx context.Context, x *Execution, ev Event) (asl.Reference, error) {
	ev.Execution, ev.Seq, ev.Parent = x.ID, x.Seq+1, x.Head
	return r.ledger.Append(ctx, r.event(ev))
}

// decision is what one step of Run did.
type decision struct {
	acted    bool          // an event was appended
	wait     time.Duration // nothing to do before this wait (a backoff)
	blockers []Blocker     // waits not in the ledger (a key claimed elsewhere)
}

// step takes the first action the fold allows, in plan order.
func (r *Runner) step(ctx context.Context, x *Execution) (decision, error) {
	var d decision
	now := r.clock.Now()
	for i := range x.Steps {
		s := &x.Steps[i]
		st := &x.Plan.Steps[i]
		switch s.State {
		case StatePending:
			if j := x.depFailed(i); j >= 0 {
				dep := x.Steps[j]
				_, err := r.append(ctx, x, Event{Type: EventStepSkipped, Step: s.ID, Reason: ReasonDependencyFailed + " step " + dep.ID + " " + dep.State.String()})
				return decision{acted: true}, err
			}
			if x.depsSucceeded(i) {
				_, err := r.append(ctx, x, Event{Type: EventStepReady, Step: s.ID})
				return decision{acted: true}, err
			}
		case StateReady:
			if st.Kind == PELStep {
				return decision{acted: true}, r.runPEL(ctx, x, i)
			}
			dd, err := r.readyEffect(ctx, x, i)
			if err != nil || dd.acted {
				return dd, err
			}
			d.blockers = append(d.blockers, dd.blockers...)
		case StateRunning:
			return decision{acted: true}, r.resumeRunning(ctx, x, i)
		case StateFailedRetryable:
			if !now.Before(s.ReadyAt) {
				_, err := r.append(ctx, x, Event{Type: EventStepReady, Step: s.ID})
				return decision{acted: true}, err
			}
			if w := s.ReadyAt.Sub(now); d.wait == 0 || w < d.wait {
				d.wait = w
			}
		}
	}
	return d, nil
}

// resolve returns the inputs of step i, in the plan's order: an output
// of a succeeded step, or a stored artifact, which the submission's input
// of the same name, if any, replaces (SPECS.md §24.1).
func (x *Execution) resolve(i int) ([]effect.Input, error) {
	st := x.Plan.Steps[i]
	out := make([]effect.Input, 0, len(st.Inputs))
	for _, b := range st.Inputs {
		if b.Step == "" {
			ref := b.Ref
			for _, in := range x.Submission.Inputs {
				if in.Name == b.Name {
					ref = in.Ref
				}
			}
			out = append(out, effect.Input{Name: b.Name, Ref: ref})
			continue
		}
		s, ok := x.Step(b.Step)
		if !ok || s.State != StateSucceeded {
			return nil, fmt.Errorf("input %q: step %q has not succeeded", b.Name, b.Step)
		}
		found := false
		for _, o := range s.Outputs {
			if o.Name == b.Output {
				out = append(out, effect.Input{Name: b.Name, Ref: o.Ref})
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("input %q: step %q has no output %q", b.Name, b.Step, b.Output)
		}
	}
	return out, nil
}

// Key returns the idempotency key of effect step i (SPECS.md §22.5) on
// its resolved inputs: the same for every attempt, recomputed from the
// fold rather than stored.
func (x *Execution) Key(i int) (string, error) {
	ins, err := x.resolve(i)
	if err != nil {
		return "", err
	}
	return StepKey(x.Plan.Steps[i], x.Submission.Plan, ins)
}

// runPEL runs PEL step i through the surface, as `pel run` does (cached,
// verified), and records its outputs, named by their index in decimal, and
// its result reference as the step's receipt.
func (r *Runner) runPEL(ctx context.Context, x *Execution, i int) error {
	st := x.Plan.Steps[i]
	ins, err := x.resolve(i)
	if err != nil {
		_, err := r.append(ctx, x, Event{Type: EventStepFailed, Step: st.ID, ErrorClass: effect.InvalidInput, Reason: ReasonProgramFailed + " " + err.Error()})
		return err
	}
	run, err := r.surf.Run(ctx, pelRequest(st, ins))
	if err != nil {
		return fmt.Errorf("step %q: %w", st.ID, err)
	}
	if run.Result.Value.Status != pel.StatusOK {
		_, err := r.append(ctx, x, Event{Type: EventStepFailed, Step: st.ID, Receipt: run.ResultRef, ErrorClass: effect.InvalidInput,
			Reason: fmt.Sprintf("%s status %s result %s", ReasonProgramFailed, run.Result.Value.Status, run.ResultRef)})
		return err
	}
	outs := make([]effect.Output, len(run.OutputRefs))
	for k, o := range run.OutputRefs {
		outs[k] = effect.Output{Name: strconv.Itoa(k), Ref: o}
	}
	_, err = r.append(ctx, x, Event{Type: EventStepSucceeded, Step: st.ID, Receipt: run.ResultRef, Outputs: outs})
	return err
}

// pelRequest is the surface request of PEL step st: input NAME (a
// decimal index, SPECS.md §22.3) is the program's input of that index.
func pelRequest(st Step, ins []effect.Input) surf.Request {
	req := surf.Request{ProgramRef: st.Program, ParamsRef: st.Params, HasParams: st.HasParams}
	req.InputRefs = make([]asl.Reference, len(ins))
	for k, in := range ins {
		if n, err := strconv.Atoi(in.Name); err == nil && n >= 0 && n < len(ins) {
			k = n
		}
		req.InputRefs[k] = in.Ref
	}
	return req
}

// needsGate reports whether effect step st waits for approval under mode.
func needsGate(st *Step, mode Mode) bool {
	return st.Gate == GateApproval || mode == Gated && st.Class == effect.ExternalSend
}

// claimScope is the execution id for steps that claim per execution (cache
// policy none), zero for global claims.
func claimScope(st *Step, id asl.Reference) asl.Reference {
	if st.Cache == CacheReuse {
		return asl.Reference{}
	}
	return id
}

// attempt is one call about to be made.
type attempt struct {
	i          int
	started    Event
	startedRef asl.Reference
	key        string
	ins        []effect.Input
	request    asl.Reference // the EFFECT-REQUEST/1 artifact
}

// readyEffect decides a ready effect step: blocked by the mode, gated,
// answered by a reused receipt, or claimed and called.
func (r *Runner) readyEffect(ctx context.Context, x *Execution, i int) (decision, error) {
	s, st := &x.Steps[i], &x.Plan.Steps[i]
	acted := decision{acted: true}
	mode := x.Submission.Mode
	switch {
	case mode == DryRun:
		_, err := r.append(ctx, x, Event{Type: EventStepSkipped, Step: s.ID, Reason: ReasonDryRun + " would call " + st.Effect + " (" + st.Class.String() + ")"})
		return acted, err
	case mode == DraftOnly && st.Class == effect.ExternalSend:
		_, err := r.append(ctx, x, Event{Type: EventStepSkipped, Step: s.ID, Reason: ReasonDraftOnly + " external_send " + st.Effect + " is not called in draft-only mode"})
		return acted, err
	case needsGate(st, mode) && !s.Approved:
		_, err := r.append(ctx, x, Event{Type: EventGateRequested, Step: s.ID, Reason: ReasonRequiresApproval})
		return acted, err
	}
	ins, err := x.resolve(i)
	var key string
	if err == nil {
		key, err = StepKey(*st, x.Submission.Plan, ins)
	}
	if err != nil {
		_, err := r.append(ctx, x, Event{Type: EventStepFailed, Step: s.ID, ErrorClass: effect.InvalidInput, Reason: "INVALID_INPUT " + err.Error()})
		return acted, err
	}
	scope := claimScope(st, x.ID)
	if st.Cache == CacheReuse {
		if ok, err := r.reuse(ctx, x, i, key, scope); ok || err != nil {
			return acted, err
		}
	}
	if _, ok := r.execs[st.Effect]; !ok {
		_, err := r.append(ctx, x, Event{Type: EventStepFailed, Step: s.ID, ErrorClass: effect.PolicyDenied, Reason: "POLICY_DENIED no executor for effect " + st.Effect})
		return acted, err
	}
	// The started event carries the runner's name: two runners never
	// write the same bytes, so never both win one sequence number.
	started := r.startedEvent(x, s)
	ref, err := r.ledger.putEvent(ctx, started)
	if err != nil {
		return acted, err
	}
	claim := ClaimPinName(st.Effect, key, scope)
	if err := r.st.Pin(ctx, claim, ref, asl.PinOptions{}); errors.Is(err, asl.ErrPinExists) {
		ours, err := r.claimedBy(ctx, claim, x.ID, s.ID)
		if err != nil {
			return acted, err
		}
		if !ours {
			if ok, err := r.reuse(ctx, x, i, key, scope); ok || err != nil {
				return acted, err
			}
			if !s.Force {
				return decision{blockers: []Blocker{{Step: s.ID, Reason: ReasonKeyClaimed, Detail: "another execution holds " + claim}}}, nil
			}
			if err := r.st.Pin(ctx, claim, ref, asl.PinOptions{Force: true}); err != nil {
				return acted, fmt.Errorf("step %q: claim %s: %w", s.ID, claim, err)
			}
		}
	} else if err != nil {
		return acted, fmt.Errorf("step %q: claim %s: %w", s.ID, claim, err)
	}
	if err := r.ledger.pinEvent(ctx, started, ref); err != nil {
		return acted, err
	}
	return acted, r.call(ctx, x, attempt{i: i, started: started, startedRef: ref, key: key, ins: ins})
}

// ReasonPolicy starts the reason of a step_started event: "POLICY" and
// the lowercase hex digest of the policy in force (SPECS.md §24.3).
const ReasonPolicy = "POLICY"

// startedEvent is the step_started event of the next attempt of step s,
// after x's head. It carries the runner's name, so two runners never write
// the same bytes and never both win one sequence number, and the digest
// of the policy in force (SPECS.md §24.3), so a replay names a changed
// policy (§24.9).
func (r *Runner) startedEvent(x *Execution, s *StepStatus) Event {
	ev := Event{Type: EventStepStarted, Execution: x.ID, Seq: x.Seq + 1, Parent: x.Head, Step: s.ID, Attempt: s.Attempts + 1, Actor: "runner " + r.writer}
	if r.policy != "" {
		ev.Reason = ReasonPolicy + " " + r.policy
	}
	return r.event(ev)
}

// claimedBy reports whether the claim pin names a step_started event of
// step of execution id.
func (r *Runner) claimedBy(ctx context.Context, claim string, id asl.Reference, step string) (bool, error) {
	ref, err := r.ledger.pin(ctx, claim)
	if err != nil || ref.IsZero() {
		return false, err
	}
	ev, err := r.ledger.Event(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", claim, err)
	}
	return ev.Execution == id && ev.Step == step, nil
}

// reuse answers step i from the successful receipt of (kind, key), if
// there is one.
func (r *Runner) reuse(ctx context.Context, x *Execution, i int, key string, scope asl.Reference) (bool, error) {
	st := x.Plan.Steps[i]
	done, err := r.ledger.pin(ctx, DonePinName(st.Effect, key, scope))
	if err != nil || done.IsZero() {
		return false, err
	}
	rc, err := r.ledger.Receipt(ctx, done)
	if err != nil {
		return false, err
	}
	_, err = r.append(ctx, x, Event{Type: EventStepSucceeded, Step: st.ID, Attempt: x.Steps[i].Attempts, Receipt: done, Outputs: rc.Outputs, Reason: "REUSED"})
	return true, err
}

// resumeRunning decides a step found running: its attempt was cut off (a
// crash). A recorded successful receipt ends it; an executor that honours
// keys, or a read_only effect, is called again with the same key; anything
// else becomes an unknown outcome that waits for a person.
func (r *Runner) resumeRunning(ctx context.Context, x *Execution, i int) error {
	s, st := &x.Steps[i], &x.Plan.Steps[i]
	ins, err := x.resolve(i)
	if err != nil {
		return fmt.Errorf("step %q: %w: %w", s.ID, err, ErrBadLedger)
	}
	key, err := StepKey(*st, x.Submission.Plan, ins)
	if err != nil {
		return fmt.Errorf("step %q: %w", s.ID, err)
	}
	scope := claimScope(st, x.ID)
	done, err := r.ledger.pin(ctx, DonePinName(st.Effect, key, scope))
	if err != nil {
		return err
	}
	if !done.IsZero() {
		rc, err := r.ledger.Receipt(ctx, done)
		if err != nil {
			return err
		}
		_, err = r.append(ctx, x, Event{Type: EventStepSucceeded, Step: s.ID, Attempt: s.Attempts, Receipt: done, Outputs: rc.Outputs})
		return err
	}
	exe, ok := r.execs[st.Effect]
	if ok && (honoursKeys(exe) || st.Class == effect.ReadOnly) {
		started := r.startedEvent(x, s)
		ref, err := r.ledger.Append(ctx, started)
		if err != nil {
			return err
		}
		return r.call(ctx, x, attempt{i: i, started: started, startedRef: ref, key: key, ins: ins})
	}
	req, err := r.putRequest(ctx, st, key, ins)
	if err != nil {
		return err
	}
	now := r.clock.Now().UnixNano()
	rc := Receipt{Kind: AttemptReceipt, Plan: x.Submission.Plan, Execution: x.ID, Step: s.ID, Effect: st.Effect, Request: req, Key: key,
		Attempt: s.Attempts, Outcome: UnknownOutcome, Executor: st.Effect,
		Message: "the attempt was cut off mid-call and the executor does not honour keys", Start: now, End: now}
	if ok {
		rc.Executor, rc.ExecutorVersion = exe.Name(), exe.Version()
	}
	ref, err := r.ledger.PutReceipt(ctx, rc, ins)
	if err != nil {
		return err
	}
	_, err = r.append(ctx, x, Event{Type: EventStepUnknownOutcome, Step: s.ID, Attempt: s.Attempts, Receipt: ref, Reason: ReasonUnknownOutcome + " " + rc.Message})
	return err
}

// putRequest stores the EFFECT-REQUEST/1 artifact of step st's call.
func (r *Runner) putRequest(ctx context.Context, st *Step, key string, ins []effect.Input) (asl.Reference, error) {
	a, err := EffectRequest{Kind: st.Effect, Params: st.EffectParams, Inputs: ins, Key: key}.Artifact()
	if err != nil {
		return asl.Reference{}, fmt.Errorf("step %q: request: %w", st.ID, err)
	}
	return r.ledger.put(ctx, a)
}

// call performs the attempt a (its started event already in the ledger),
// writes its receipt, pins a successful one as the answer of (kind, key),
// and appends the attempt's outcome.
func (r *Runner) call(ctx context.Context, x *Execution, a attempt) error {
	st := &x.Plan.Steps[a.i]
	exe := r.execs[st.Effect]
	reqRef, err := r.putRequest(ctx, st, a.key, a.ins)
	if err != nil {
		return err
	}
	req := effect.Request{Kind: st.Effect, Params: st.EffectParams, Inputs: a.ins, Key: a.key, Attempt: a.started.Attempt}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	start := r.clock.Now()
	obs, callErr := exe.Call(cctx, r.st, req)
	cancel()
	end := r.clock.Now()
	if callErr != nil && ctx.Err() != nil {
		// The runner is stopping: as after a crash, the step stays running
		// and the next Run decides it.
		return ctx.Err()
	}
	rc := Receipt{Kind: AttemptReceipt, Plan: x.Submission.Plan, Execution: x.ID, Step: st.ID, Effect: st.Effect, Request: reqRef,
		Key: a.key, Attempt: a.started.Attempt, Executor: exe.Name(), ExecutorVersion: exe.Version(),
		Start: start.UnixNano(), End: end.UnixNano()}
	ev := Event{Step: st.ID, Attempt: a.started.Attempt}
	sinceRetry := x.Steps[a.i].SinceRetry + 1
	fail := func(class effect.ErrorClass, msg string, retryAfter time.Duration) {
		rc.ErrorClass, rc.Message = class, msg
		ev.ErrorClass = class
		if d, retry := Backoff(a.key, sinceRetry, class, st.Retry, retryAfter); retry {
			rc.Outcome = FailedRetryable
			ev.Type, ev.Reason = EventRetryScheduled, fmt.Sprintf("%s %dms %s %s", ReasonRetryIn, d.Milliseconds(), class, msg)
		} else {
			rc.Outcome = FailedFinal
			ev.Type, ev.Reason = EventStepFailed, strings.ToUpper(class.String())+" "+msg
		}
	}
	var ee *effect.Error
	switch {
	case callErr == nil:
		rc.Outcome, rc.Outputs = Succeeded, obs.Outputs
		if !obs.Start.IsZero() {
			rc.Start, rc.End = obs.Start.UnixNano(), obs.End.UnixNano()
		}
		ev.Type, ev.Outputs = EventStepSucceeded, obs.Outputs
	case errors.As(callErr, &ee):
		// What the executor stored of a failed attempt (an HTTP answer's
		// status, headers and body, a command's exit, stdout and stderr,
		// an executor's error frame) is the receipt's evidence of why it
		// failed (SPECS.md §22.7).
		rc.Outputs = obs.Outputs
		if !obs.Start.IsZero() && !obs.End.IsZero() {
			rc.Start, rc.End = obs.Start.UnixNano(), obs.End.UnixNano()
		}
		fail(ee.Class, ee.Msg, ee.RetryAfter)
	case honoursKeys(exe) || st.Class == effect.ReadOnly:
		// The outcome is unknown but calling again with the same key is
		// safe: a retryable failure.
		fail(effect.NetworkTimeout, "outcome unknown, safe to repeat with the same key: "+callErr.Error(), 0)
	default:
		rc.Outcome, rc.Message = UnknownOutcome, callErr.Error()
		ev.Type, ev.Reason = EventStepUnknownOutcome, ReasonUnknownOutcome+" "+callErr.Error()
	}
	ref, err := r.ledger.PutReceipt(ctx, rc, a.ins)
	if err != nil {
		return err
	}
	ev.Receipt = ref
	if rc.Outcome == Succeeded {
		err := r.st.Pin(ctx, DonePinName(st.Effect, a.key, claimScope(st, x.ID)), ref, asl.PinOptions{})
		if err != nil && !errors.Is(err, asl.ErrPinExists) {
			return fmt.Errorf("step %q: receipt %s: %w", st.ID, ref, err)
		}
	}
	// The outcome follows the started event.
	x2 := *x
	x2.Seq, x2.Head = a.started.Seq, a.startedRef
	_, err = r.append(ctx, &x2, ev)
	return err
}

// decide appends a person's decision on execution id, folding again when
// another writer appended first.
func (r *Runner) decide(ctx context.Context, id asl.Reference, mk func(*Execution) (Event, error)) (*Execution, error) {
	for {
		x, err := r.Status(ctx, id)
		if err != nil {
			return nil, err
		}
		ev, err := mk(x)
		if err != nil {
			return x, err
		}
		_, err = r.append(ctx, x, ev)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return x, err
		}
		return r.Status(ctx, id)
	}
}

// Approve records that actor approved the gate of step: a decision receipt
// and an approved event carrying actor and time. Run then calls it.
func (r *Runner) Approve(ctx context.Context, id asl.Reference, step, actor string) (*Execution, error) {
	return r.gate(ctx, id, step, actor, "", true)
}

// Reject records that actor rejected the gate of step, which then fails
// with the reason code REJECTED.
func (r *Runner) Reject(ctx context.Context, id asl.Reference, step, actor, reason string) (*Execution, error) {
	return r.gate(ctx, id, step, actor, reason, false)
}

func (r *Runner) gate(ctx context.Context, id asl.Reference, step, actor, reason string, approve bool) (*Execution, error) {
	return r.decide(ctx, id, func(x *Execution) (Event, error) {
		s, ok := x.Step(step)
		if !ok {
			return Event{}, fmt.Errorf("execution %s: no step %q", id, step)
		}
		if s.State != StateWaitingApproval {
			return Event{}, fmt.Errorf("execution %s: step %q is %s: %w", id, step, s.State, ErrNotWaiting)
		}
		i := x.index[step]
		st := &x.Plan.Steps[i]
		ins, err := x.resolve(i)
		if err != nil {
			return Event{}, err
		}
		key, err := StepKey(*st, x.Submission.Plan, ins)
		if err != nil {
			return Event{}, err
		}
		req, err := r.putRequest(ctx, st, key, ins)
		if err != nil {
			return Event{}, err
		}
		now := r.clock.Now().UnixNano()
		rc := Receipt{Kind: ApprovalReceipt, Plan: x.Submission.Plan, Execution: id, Step: step, Effect: st.Effect, Request: req, Key: key,
			Actor: actor, Message: reason, Start: now, End: now}
		ev := Event{Type: EventApproved, Step: step, Actor: actor}
		if !approve {
			rc.Kind, ev.Type, ev.Reason = RejectReceipt, EventRejected, reason
		}
		ref, err := r.ledger.PutReceipt(ctx, rc, ins)
		if err != nil {
			return Event{}, err
		}
		ev.Receipt = ref
		return ev, nil
	})
}

// Cancel records that actor cancelled execution id: every step not
// finished becomes cancelled and Run does nothing more.
func (r *Runner) Cancel(ctx context.Context, id asl.Reference, actor string) (*Execution, error) {
	return r.decide(ctx, id, func(x *Execution) (Event, error) {
		if x.Status == ExecCompleted || x.Status == ExecCancelled {
			return Event{}, fmt.Errorf("execution %s is %s: %w", id, x.Status, ErrFinished)
		}
		return Event{Type: EventCancelled, Actor: actor}, nil
	})
}

// Retry records that actor asked for step to be tried again: a step that
// failed finally becomes ready (its retry budget starts again), and so do
// the steps skipped because of it. A step whose outcome is unknown needs
// force: a person states that calling again is what they want.
func (r *Runner) Retry(ctx context.Context, id asl.Reference, step, actor string, force bool) (*Execution, error) {
	return r.decide(ctx, id, func(x *Execution) (Event, error) {
		s, ok := x.Step(step)
		if !ok {
			return Event{}, fmt.Errorf("execution %s: no step %q", id, step)
		}
		switch {
		case x.Status == ExecCancelled || x.Status == ExecCompleted:
			return Event{}, fmt.Errorf("execution %s is %s: %w", id, x.Status, ErrFinished)
		case s.State == StateUnknownOutcome && !force:
			return Event{}, fmt.Errorf("execution %s: step %q: %w", id, step, ErrNeedsForce)
		case s.State != StateUnknownOutcome && s.State != StateFailedFinal:
			return Event{}, fmt.Errorf("execution %s: step %q is %s: %w", id, step, s.State, ErrNotRetry)
		}
		ev := Event{Type: EventRetryRequested, Step: step, Actor: actor}
		if force {
			ev.Reason = ReasonForce
		}
		return ev, nil
	})
}
