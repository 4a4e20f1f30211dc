package plan

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/tgk"
)

// fixture is one store, one service and one runner over them.
type fixture struct {
	t     *testing.T
	st    Store
	svc   *service
	exe   *testExec
	clock *testClock
	r     *Runner
	ctx   context.Context
}

type storeKind struct {
	name string
	open func(t *testing.T) Store
}

var storeKinds = []storeKind{
	{"memstore", func(t *testing.T) Store { return newMemPinned() }},
	{"pebble", func(t *testing.T) Store {
		s := newPebble(t, t.TempDir())
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"pebble-prefix", func(t *testing.T) Store {
		s := newPebble(t, t.TempDir())
		t.Cleanup(func() { s.Close() })
		return prefixPebble{s}
	}},
}

// callTimeout is the fixtures' CallTimeout: no call of theirs nears it,
// however loaded the machine (a call writing to a Pebble store overran
// 200 ms under load). hangTimeout is the runner's CallTimeout in the two
// tests that script a hang, which waits it out.
const (
	callTimeout = time.Minute
	hangTimeout = time.Second
)

func newFixture(t *testing.T, st Store, honours bool) *fixture {
	f := &fixture{t: t, st: st, svc: startService(t), clock: newTestClock(), ctx: context.Background()}
	f.exe = &testExec{name: "svc", version: "1.0", url: f.svc.url, honours: honours}
	f.r = f.runner(f.exe)
	return f
}

func (f *fixture) runner(exes ...effect.Executor) *Runner {
	return f.runnerTimeout(callTimeout, exes...)
}

func (f *fixture) runnerTimeout(timeout time.Duration, exes ...effect.Executor) *Runner {
	r, err := NewRunner(f.st, Options{Executors: exes, Clock: f.clock, CallTimeout: timeout, Writer: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) submit(p *Plan, mode Mode, url string) asl.Reference {
	f.t.Helper()
	pref := putPlan(f.t, f.st, p)
	id, attached, err := f.r.Submit(f.ctx, Submission{Plan: pref, Mode: mode, Inputs: []effect.Input{{Name: "url", Ref: putBytes(f.t, f.st, url)}}})
	if err != nil {
		f.t.Fatal(err)
	}
	if attached {
		f.t.Fatalf("first submission attached to %s", id)
	}
	return id
}

func (f *fixture) run(id asl.Reference, want ExecStatus) *Execution {
	f.t.Helper()
	x, err := f.r.Run(f.ctx, id)
	if err != nil {
		f.t.Fatalf("run: %v", err)
	}
	if x.Status != want {
		f.t.Fatalf("status %s, want %s; steps %s; blocked on %v", x.Status, want, stepStates(x), x.BlockedOn)
	}
	return x
}

func stepStates(x *Execution) string {
	var b []string
	for _, s := range x.Steps {
		b = append(b, s.ID+"="+s.State.String())
	}
	return strings.Join(b, " ")
}

func (f *fixture) wantStates(x *Execution, want string) {
	f.t.Helper()
	if got := stepStates(x); got != want {
		f.t.Fatalf("steps %s, want %s", got, want)
	}
}

func (f *fixture) totalCalls() int {
	f.svc.mu.Lock()
	defer f.svc.mu.Unlock()
	n := 0
	for _, c := range f.svc.calls {
		n += c
	}
	return n
}

// TestGatedApproveReplay runs the walkthrough's plan in the default mode:
// it stops waiting on the send's gate with the fetched document and the
// count as its partial value, runs to completion once approved, attaches a
// second submission, and replays with no call and identical bytes.
func TestGatedApproveReplay(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds {
		t.Run(sk.name, func(t *testing.T) {
			f := newFixture(t, sk.open(t), false)
			p := demoPlan(t, f.st, GateNone)
			id := f.submit(p, Gated, "doc-1")
			x := f.run(id, ExecWaiting)
			f.wantStates(x, "count=succeeded fetch=succeeded post=waiting_approval")
			if len(x.BlockedOn) != 1 || x.BlockedOn[0].Step != "post" || x.BlockedOn[0].Reason != ReasonRequiresApproval {
				t.Fatalf("blocked on %+v", x.BlockedOn)
			}
			if outs := x.Outputs(); len(outs) != 2 {
				t.Fatalf("partial value %+v, want fetch's body and count's output", outs)
			}
			if n := f.totalCalls(); n != 1 {
				t.Fatalf("%d calls before approval, want 1 (fetch)", n)
			}
			// Running again changes nothing and calls nothing.
			seq := x.Seq
			x = f.run(id, ExecWaiting)
			if x.Seq != seq || f.totalCalls() != 1 {
				t.Fatalf("a second run appended %d events and called %d times", x.Seq-seq, f.totalCalls()-1)
			}
			if _, err := f.r.Approve(f.ctx, id, "fetch", "alice"); !errors.Is(err, ErrNotWaiting) {
				t.Fatalf("approving a step that is not gated: %v", err)
			}
			x, err := f.r.Approve(f.ctx, id, "post", "alice")
			if err != nil {
				t.Fatal(err)
			}
			s, _ := x.Step("post")
			if !s.Approved || s.Decision != "alice" {
				t.Fatalf("post after approve: %+v", s)
			}
			x = f.run(id, ExecCompleted)
			if n := f.totalCalls(); n != 2 {
				t.Fatalf("%d calls, want 2", n)
			}
			wantEffectEdge(t, f, x, "fetch")
			// The approval is a receipt, and the event names actor and time.
			var approved Event
			for _, ev := range x.Events {
				if ev.Type == EventApproved {
					approved = ev
				}
			}
			rc, err := f.r.Ledger().Receipt(f.ctx, approved.Receipt)
			if err != nil || rc.Kind != ApprovalReceipt || rc.Actor != "alice" || approved.Time == 0 {
				t.Fatalf("approval receipt %+v %v, event %+v", rc, err, approved)
			}
			// Request-level idempotency: the same submission attaches.
			id2, attached, err := f.r.Submit(f.ctx, x.Submission)
			if err != nil || !attached || id2 != id {
				t.Fatalf("resubmit: %s attached=%v %v", id2, attached, err)
			}
			replays(t, f, id, 100)
		})
	}
}

// replays verifies execution id n times with executors that fail the test
// when called, and demands identical reports.
func replays(t *testing.T, f *fixture, id asl.Reference, n int) {
	t.Helper()
	calls := f.totalCalls()
	rv := f.runner(failingExec{t, "svc", "1.0"})
	var first []byte
	for i := 0; i < n; i++ {
		rep, err := rv.Verify(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK {
			t.Fatalf("replay %d: %+v", i, rep)
		}
		b, _ := json.Marshal(rep)
		if first == nil {
			first = b
		} else if string(b) != string(first) {
			t.Fatalf("replay %d differs:\n%s\n%s", i, b, first)
		}
	}
	if got := f.totalCalls(); got != calls {
		t.Fatalf("replays made %d calls", got-calls)
	}
	t.Logf("%d replays, 0 calls, identical reports", n)
}

// TestModes: dry-run calls nothing and lists the effects; draft-only
// calls everything but the external_send; auto calls all.
func TestModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode   Mode
		status ExecStatus
		states string
		calls  int
		reason string
	}{
		{DryRun, ExecPartial, "count=skipped fetch=blocked post=skipped", 0, ReasonDryRun},
		{DraftOnly, ExecPartial, "count=succeeded fetch=succeeded post=blocked", 1, ReasonDraftOnly},
		{Auto, ExecCompleted, "count=succeeded fetch=succeeded post=succeeded", 2, ""},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			f := newFixture(t, newMemPinned(), false)
			id := f.submit(demoPlan(t, f.st, GateNone), tc.mode, "doc")
			x := f.run(id, tc.status)
			f.wantStates(x, tc.states)
			if n := f.totalCalls(); n != tc.calls {
				t.Fatalf("%d calls, want %d", n, tc.calls)
			}
			if tc.reason != "" {
				found := false
				for _, b := range x.BlockedOn {
					found = found || b.Reason == tc.reason
				}
				if !found {
					t.Fatalf("blocked on %+v, want a %s", x.BlockedOn, tc.reason)
				}
				if last := x.Events[len(x.Events)-1]; last.Type != EventPartial {
					t.Fatalf("last event %s, want partial", last.Type)
				}
			}
		})
	}
}

// TestStepGate: a step's own approval gate holds even in auto mode.
func TestStepGateAuto(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	id := f.submit(demoPlan(t, f.st, GateApproval), Auto, "doc")
	f.wantStates(f.run(id, ExecWaiting), "count=succeeded fetch=succeeded post=waiting_approval")
}

// TestReject: a rejected gate fails its step with REJECTED; the execution
// ends partial with what it has.
func TestReject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	id := f.submit(demoPlan(t, f.st, GateNone), Gated, "doc")
	f.run(id, ExecWaiting)
	if _, err := f.r.Reject(f.ctx, id, "post", "bob", "wrong recipient"); err != nil {
		t.Fatal(err)
	}
	x := f.run(id, ExecPartial)
	f.wantStates(x, "count=succeeded fetch=succeeded post=failed_final")
	if len(x.BlockedOn) != 1 || x.BlockedOn[0].Reason != ReasonRejected || !strings.Contains(x.BlockedOn[0].Detail, "wrong recipient") {
		t.Fatalf("blocked on %+v", x.BlockedOn)
	}
	if f.totalCalls() != 1 {
		t.Fatalf("%d calls, want 1", f.totalCalls())
	}
}

// TestRetryByClass injects 5xx, 429 with Retry-After, timeouts and final
// failures on the fetch step and checks what is retried, how often and
// after which recorded backoff.
func TestRetryByClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		script  []string
		status  ExecStatus
		calls   int
		minWait time.Duration
		class   effect.ErrorClass
	}{
		{"503-then-ok", []string{"503", "503", "ok"}, ExecCompleted, 3, 100 * time.Millisecond, 0},
		{"429-retry-after", []string{"429:3", "ok"}, ExecCompleted, 2, 2 * time.Second, 0},
		{"timeout-then-ok", []string{"hang", "ok"}, ExecCompleted, 2, 50 * time.Millisecond, 0},
		{"503-exhausted", []string{"503", "503", "503", "503"}, ExecPartial, 3, 0, effect.ProviderUnavailable},
		{"403-final", []string{"403", "ok"}, ExecPartial, 1, 0, effect.AuthForbidden},
		{"400-final", []string{"400"}, ExecPartial, 1, 0, effect.InvalidInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, newMemPinned(), false)
			p := demoPlan(t, f.st, GateNone)
			id := f.submit(p, Auto, "doc-"+tc.name)
			x0, err := f.r.Status(f.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			key, _ := x0.Key(1)
			f.svc.setScript(key, tc.script...)
			if tc.script[0] == "hang" {
				f.r = f.runnerTimeout(hangTimeout, f.exe)
			}
			x := f.run(id, tc.status)
			if calls, _ := f.svc.count(key); calls != tc.calls {
				t.Fatalf("fetch called %d times, want %d", calls, tc.calls)
			}
			if f.clock.slept < tc.minWait {
				t.Fatalf("waited %v, want at least %v", f.clock.slept, tc.minWait)
			}
			s, _ := x.Step("fetch")
			if tc.class != 0 && (s.State != StateFailedFinal || s.Class != tc.class) {
				t.Fatalf("fetch %s class %s, want failed_final %s", s.State, s.Class, tc.class)
			}
			if len(s.Receipts) != tc.calls {
				t.Fatalf("%d receipts for %d attempts", len(s.Receipts), tc.calls)
			}
			// A failed attempt's receipt names the answer's body
			// (SPECS.md §22.7): why it failed is in the store.
			for k, ref := range s.Receipts {
				rc, err := f.r.Ledger().Receipt(f.ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				act := tc.script[k]
				if rc.Outcome == Succeeded || act == "hang" {
					continue
				}
				if len(rc.Outputs) != 1 || rc.Outputs[0].Name != "body" {
					t.Fatalf("attempt %d (%s): receipt outputs %+v, want the body", k+1, act, rc.Outputs)
				}
				if a, err := asl.Get(f.ctx, f.st, rc.Outputs[0].Ref, 1<<10); err != nil || string(a.Bytes) != "scripted "+act {
					t.Fatalf("attempt %d: stored body %q, %v; want %q", k+1, a.Bytes, err, "scripted "+act)
				}
			}
			if tc.name == "403-final" {
				// A person's retry starts the budget again.
				if _, err := f.r.Retry(f.ctx, id, "fetch", "carol", false); err != nil {
					t.Fatal(err)
				}
				f.run(id, ExecCompleted)
			}
		})
	}
}

// TestUnknownOutcome: an external_send whose call may have reached the
// world is never called again without retry --force.
func TestUnknownOutcome(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	p := demoPlan(t, f.st, GateNone)
	id := f.submit(p, Auto, "doc")
	// Hang the post's first call: the client gives up, and whether the
	// service acted is unknown to it.
	x := f.runUntilPostKey(id)
	f.svc.setScript(x, "hang", "ok")
	f.r = f.runnerTimeout(hangTimeout, f.exe)
	xs := f.run(id, ExecWaiting)
	f.wantStates(xs, "count=succeeded fetch=succeeded post=unknown_outcome")
	if c, _ := f.svc.count(x); c != 1 {
		t.Fatalf("post called %d times, want 1", c)
	}
	f.run(id, ExecWaiting)
	if c, _ := f.svc.count(x); c != 1 {
		t.Fatalf("a second run called post again (%d)", c)
	}
	if _, err := f.r.Retry(f.ctx, id, "post", "dave", false); !errors.Is(err, ErrNeedsForce) {
		t.Fatalf("retry without force: %v", err)
	}
	if _, err := f.r.Retry(f.ctx, id, "post", "dave", true); err != nil {
		t.Fatal(err)
	}
	f.run(id, ExecCompleted)
	if c, _ := f.svc.count(x); c != 2 {
		t.Fatalf("post called %d times after retry --force, want 2", c)
	}
}

// runUntilPostKey returns the idempotency key the post step of execution
// id will use, computed from a dry fold once its input exists.
func (f *fixture) runUntilPostKey(id asl.Reference) string {
	f.t.Helper()
	// Run a sibling execution in draft-only mode on the same plan and
	// inputs: it computes the same count without calling post.
	x, err := f.r.Status(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	sub := x.Submission
	sub.Mode = DraftOnly
	sib, _, err := f.r.Submit(f.ctx, sub)
	if err != nil {
		f.t.Fatal(err)
	}
	xs := f.run(sib, ExecPartial)
	key, err := xs.Key(2)
	if err != nil {
		f.t.Fatal(err)
	}
	return key
}

// TestReuseAcrossExecutions: a read_only step with cache policy reuse is
// answered from the first execution's receipt.
func TestReuseAcrossExecutions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	p := demoPlan(t, f.st, GateNone)
	id1 := f.submit(p, Auto, "shared-doc")
	f.run(id1, ExecCompleted)
	pref := putPlan(t, f.st, p)
	id2, _, err := f.r.Submit(f.ctx, Submission{Plan: pref, Mode: DraftOnly, Inputs: []effect.Input{{Name: "url", Ref: putBytes(t, f.st, "shared-doc")}}})
	if err != nil {
		t.Fatal(err)
	}
	x := f.run(id2, ExecPartial)
	if f.totalCalls() != 2 {
		t.Fatalf("%d calls, want 2 (the second fetch reused)", f.totalCalls())
	}
	s, _ := x.Step("fetch")
	x1, _ := f.r.Status(f.ctx, id1)
	s1, _ := x1.Step("fetch")
	if s.Receipts[0] != s1.Receipts[0] {
		t.Fatalf("reused receipt %s, first %s", s.Receipts[0], s1.Receipts[0])
	}
}

// TestCancel: a cancelled execution calls nothing more.
func TestCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	id := f.submit(demoPlan(t, f.st, GateNone), Gated, "doc")
	f.run(id, ExecWaiting)
	if _, err := f.r.Cancel(f.ctx, id, "erin"); err != nil {
		t.Fatal(err)
	}
	x := f.run(id, ExecCancelled)
	f.wantStates(x, "count=succeeded fetch=succeeded post=cancelled")
	if _, err := f.r.Approve(f.ctx, id, "post", "erin"); err == nil {
		t.Fatal("approved a cancelled step")
	}
	if _, err := f.r.Cancel(f.ctx, id, "erin"); !errors.Is(err, ErrFinished) {
		t.Fatalf("second cancel: %v", err)
	}
}

// TestVerifyDrift: a replay names an executor whose version changed.
func TestVerifyDrift(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	id := f.submit(demoPlan(t, f.st, GateNone), Auto, "doc")
	f.run(id, ExecCompleted)
	rv := f.runner(failingExec{t, "svc", "2.0"})
	rep, err := rv.Verify(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK {
		t.Fatal("a drifted executor verified")
	}
	found := false
	for _, s := range rep.Steps {
		found = found || strings.Contains(s.Problem, "executor svc drifted: version 2.0 now, 1.0")
	}
	if !found {
		t.Fatalf("report %+v names no drift", rep)
	}
}

// TestVerifyPolicyChanged: every step_started event records the digest of
// the policy in force, and a replay under another policy names it
// (SPECS.md §24.9); under the same policy it verifies.
func TestVerifyPolicyChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	const was, now = "1111111111111111111111111111111111111111111111111111111111111111", "2222222222222222222222222222222222222222222222222222222222222222"
	verifier := func(digest string) *Runner {
		r, err := NewRunner(f.st, Options{Executors: []effect.Executor{failingExec{t, "svc", "1.0"}}, Clock: f.clock, PolicyDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var err error
	if f.r, err = NewRunner(f.st, Options{Executors: []effect.Executor{f.exe}, Clock: f.clock, CallTimeout: callTimeout, PolicyDigest: was}); err != nil {
		t.Fatal(err)
	}
	id := f.submit(demoPlan(t, f.st, GateNone), Auto, "doc")
	x := f.run(id, ExecCompleted)
	started := 0
	for _, ev := range x.Events {
		if ev.Type == EventStepStarted {
			started++
			if ev.Reason != ReasonPolicy+" "+was {
				t.Fatalf("step_started %q reason %q, want the policy digest", ev.Step, ev.Reason)
			}
		}
	}
	if started == 0 {
		t.Fatal("no step_started event")
	}
	for _, tc := range []struct {
		digest  string
		ok      bool
		problem string
	}{
		{was, true, ""},
		{"", true, ""},
		{now, false, "policy changed: digest " + now + " now, " + was + " when attempt 1 started (event "},
	} {
		rep, err := verifier(tc.digest).Verify(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		found := tc.problem == ""
		for _, s := range rep.Steps {
			found = found || strings.Contains(s.Problem, tc.problem)
		}
		if rep.OK != tc.ok || !found {
			t.Fatalf("verify under policy %q: ok %t, report %+v; want ok %t naming %q", tc.digest, rep.OK, rep, tc.ok, tc.problem)
		}
	}
}

// TestList lists executions with their status.
func TestList(t *testing.T) {
	t.Parallel()
	f := newFixture(t, newMemPinned(), false)
	a := f.submit(demoPlan(t, f.st, GateNone), Auto, "a")
	b := f.submit(demoPlan(t, f.st, GateNone), DryRun, "b")
	f.run(a, ExecCompleted)
	xs, err := f.r.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[asl.Reference]ExecStatus{}
	for _, x := range xs {
		got[x.ID] = x.Status
	}
	if len(got) != 2 || got[a] != ExecCompleted || got[b] != ExecRunning {
		t.Fatalf("list %v", got)
	}
}

// wantEffectEdge checks, on a store that keeps an index, that why(output)
// of step's first output reaches its call: a PLAN_EFFECT edge from the
// attempt's request to its receipt and outputs (SPECS.md §17.1).
func wantEffectEdge(t *testing.T, f *fixture, x *Execution, step string) {
	t.Helper()
	if _, ok := f.st.(asl.Indexer); !ok {
		return
	}
	s, _ := x.Step(step)
	if len(s.Receipts) == 0 || len(s.Outputs) == 0 {
		t.Fatalf("step %s: %d receipts, %d outputs", step, len(s.Receipts), len(s.Outputs))
	}
	rcRef := s.Receipts[len(s.Receipts)-1]
	rc, err := f.r.Ledger().Receipt(f.ctx, rcRef)
	if err != nil {
		t.Fatal(err)
	}
	g, err := tgk.Why(f.ctx, f.st, s.Outputs[0].Ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range g.Edges {
		if e.Type == tgk.EdgeTypePlanEffect &&
			slices.Contains(e.From, tgk.Endpoint{Role: tgk.RoleRequest, Ref: rc.Request}) &&
			slices.Contains(e.To, tgk.Endpoint{Role: tgk.RoleReceipt, Ref: rcRef}) &&
			slices.Contains(e.To, tgk.Endpoint{Role: tgk.RoleOutput, Ref: s.Outputs[0].Ref}) &&
			slices.Contains(g.Order, rc.Request) {
			return
		}
	}
	t.Fatalf("why(%s) of step %s reached %d edges, none the PLAN_EFFECT edge of receipt %s", s.Outputs[0].Ref, step, len(g.Edges), rcRef)
}
