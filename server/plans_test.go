package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect/policy"
	"github.com/amduat/amduat/plan/effect/registry"
	"github.com/amduat/amduat/report"
)

// keyCounter is a loopback service that counts the calls of each
// Idempotency-Key.
type keyCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (k *keyCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.calls[r.Header.Get("Idempotency-Key")]++
	k.mu.Unlock()
	w.Write([]byte("posted\n"))
}

func (k *keyCounter) snapshot() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]int{}
	for key, n := range k.calls {
		out[key] = n
	}
	return out
}

// TestPlanRoutes drives a gated plan through the routes: build, submit,
// the background worker stopping at the gate, approval by a token with
// the approve scope, the call made once, attach, verify, refusals by scope
// and by state, the log's long poll and the counters.
func TestPlanRoutes(t *testing.T) {
	t.Parallel()
	svc := &keyCounter{calls: map[string]int{}}
	loop := httptest.NewServer(svc)
	t.Cleanup(loop.Close)
	host := strings.TrimPrefix(loop.URL, "http://")
	pol, err := policy.Parse([]byte(fmt.Sprintf(`{"version":1,"http":{"hosts":[{"host":%q,"schemes":["http"]}]}}`, host)))
	if err != nil {
		t.Fatal(err)
	}
	execs, err := registry.Executors(pol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { registry.Close(execs) })

	file := filepath.Join(t.TempDir(), "tokens.json")
	tok := map[string]map[string]string{}
	for name, scopes := range map[string][]string{"runner": {"read", "write", "run"}, "planner": {"read", "write", "plan"}, "approver": {"read", "approve"}} {
		text, err := AddToken(file, name, scopes)
		if err != nil {
			t.Fatal(err)
		}
		tok[name] = map[string]string{"Authorization": "Bearer " + text}
	}
	auth, err := LoadAuth(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Auth: auth, Plans: &PlanConfig{Workers: 1, Rescan: -1}}
	// The runner needs the store newTestServer creates: build it lazily.
	s, ts, st := newTestServerWith(t, cfg, func(st asl.Store) *PlanConfig {
		r, err := plan.NewRunner(st.(plan.Store), plan.Options{Executors: execs})
		if err != nil {
			t.Fatal(err)
		}
		c := *cfg.Plans
		c.Runner = r
		return &c
	})
	_ = s
	concat, err := pel.SeedArtifact(pel.SeedConcat)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, concat)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := asl.PutArtifact(t.Context(), st, asl.HashSHA256, asl.Untagged([]byte("hello ")))
	b, _ := asl.PutArtifact(t.Context(), st, asl.HashSHA256, asl.Untagged([]byte("world")))
	planJSON := fmt.Sprintf(`{"steps":[
 {"id":"count","inputs":{"0":%q,"1":%q},"pel":{"program":%q}},
 {"id":"post","inputs":{"body":{"step":"count","output":"0"}},
  "effect":{"kind":"http","params":{"method":"POST","url":"%s/post","body":"body"},"class":"external_send","gate":"none",
            "retry":{"max_attempts":3,"base_ms":100,"cap_ms":1000},"cache":"none"}}]}`, a, b, prog, loop.URL)

	if r := do(t, ts, call{method: "POST", path: "/v1/plans", body: []byte(planJSON), header: tok["approver"]}); r.status != 403 {
		t.Fatalf("build without write: %d %s", r.status, r.body)
	}
	r := do(t, ts, call{method: "POST", path: "/v1/plans", body: []byte(planJSON), header: tok["planner"]})
	var built report.PlanBuilt
	if r.status != 200 || json.Unmarshal(r.body, &built) != nil {
		t.Fatalf("build: %d %s", r.status, r.body)
	}
	if r := do(t, ts, call{method: "POST", path: "/v1/plans", body: []byte(`{"steps":[{"id":"x","effect":{"kind":"http"}}]}`), header: tok["planner"]}); r.status != 400 {
		t.Fatalf("build of an invalid plan: %d %s", r.status, r.body)
	}
	sub, _ := json.Marshal(report.PlanSubmitRequest{PlanRef: built.PlanRef})
	if r := do(t, ts, call{method: "POST", path: "/v1/plans/executions", body: sub, header: tok["runner"]}); r.status != 403 || errorCode(t, r) != "forbidden" {
		t.Fatalf("submit with run but not plan: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "POST", path: "/v1/plans/executions", body: sub, header: tok["planner"]})
	var x report.PlanStatus
	if r.status != 200 || json.Unmarshal(r.body, &x) != nil || x.Attached == nil || *x.Attached {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	exec := "/v1/plans/executions/" + x.Exec.String()

	// Follow the log until the gate is requested.
	lg := followLog(t, ts, exec, tok["approver"], "gate_requested")
	if n := len(svc.snapshot()); n != 0 {
		t.Fatalf("%d keys called before approval", n)
	}
	approve := []byte(`{"step_id":"post"}`)
	if r := do(t, ts, call{method: "POST", path: exec + "/approve", body: approve, header: tok["planner"]}); r.status != 403 {
		t.Fatalf("approve with plan but not approve: %d %s", r.status, r.body)
	}
	if r := do(t, ts, call{method: "POST", path: exec + "/approve", body: []byte(`{"step_id":"count"}`), header: tok["approver"]}); r.status != 409 || errorCode(t, r) != CodePlanRefused {
		t.Fatalf("approve of a step not waiting: %d %s", r.status, r.body)
	}
	if r := do(t, ts, call{method: "POST", path: exec + "/approve", body: approve, header: tok["approver"]}); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	lg = followLog(t, ts, exec, tok["approver"], "completed")
	var approvedBy string
	for _, ev := range lg {
		if ev.Type == "approved" {
			approvedBy = ev.Actor
		}
	}
	if approvedBy != "approver" {
		t.Fatalf("approved by %q, want the token's name", approvedBy)
	}
	calls := svc.snapshot()
	if len(calls) != 1 {
		t.Fatalf("calls per key = %v, want one key called once", calls)
	}
	for k, n := range calls {
		if n != 1 {
			t.Fatalf("key %q called %d times", k, n)
		}
	}

	r = do(t, ts, call{method: "POST", path: "/v1/plans/executions", body: sub, header: tok["planner"]})
	if json.Unmarshal(r.body, &x) != nil || x.Attached == nil || !*x.Attached || x.Status != "completed" {
		t.Fatalf("second submit: %d %s", r.status, r.body)
	}
	if r := do(t, ts, call{method: "POST", path: exec + "/cancel", header: tok["planner"]}); r.status != 409 || errorCode(t, r) != CodePlanRefused {
		t.Fatalf("cancel of a completed execution: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "POST", path: exec + "/verify", header: tok["runner"]})
	var rep struct{ OK bool }
	if r.status != 200 || json.Unmarshal(r.body, &rep) != nil || !rep.OK {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "GET", path: "/v1/plans/executions", header: tok["approver"]})
	var ls report.PlanList
	if r.status != 200 || json.Unmarshal(r.body, &ls) != nil || len(ls.Executions) != 1 || ls.Executions[0].Status != "completed" {
		t.Fatalf("ls: %d %s", r.status, r.body)
	}
	if r := do(t, ts, call{method: "GET", path: "/v1/plans/executions/" + prog.String(), header: tok["approver"]}); r.status != 404 {
		t.Fatalf("status of no execution: %d %s", r.status, r.body)
	}
	// The run's outcome is counted after its last event is written.
	s.waitPlanRunsCounted("completed", 1)
	r = do(t, ts, call{method: "GET", path: "/metrics", header: tok["approver"]})
	for _, want := range []string{
		`amduat_plan_events_total{type="completed"} 1`,
		`amduat_plan_step_transitions_total{state="succeeded"} 2`,
		`amduat_plan_step_transitions_total{state="waiting_approval"} 1`,
		`amduat_plan_runs_total{outcome="completed"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// waitPlanRunsCounted waits until the plan workers have counted n runs
// of the given outcome in amduat_plan_runs_total: a worker counts a run
// after the run's last event is in the log, so a client that saw the
// event may read the metrics before the count (TestPlanRoutes failed so
// under load).
func (s *Server) waitPlanRunsCounted(outcome string, n int) {
	p := s.plans
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.counted[outcome] < n {
		p.countedCond.Wait()
	}
}

// followLog asks for the log after the last event it has, waiting, until
// an event of type until arrives; it returns every event.
func followLog(t *testing.T, ts *httptest.Server, exec string, h map[string]string, until string) []report.PlanEvent {
	t.Helper()
	var evs []report.PlanEvent
	for range 100 {
		r := do(t, ts, call{method: "GET", path: fmt.Sprintf("%s/log?after=%d&wait=10", exec, len(evs)), header: h})
		var lg report.PlanLog
		if r.status != 200 || json.Unmarshal(r.body, &lg) != nil {
			t.Fatalf("log: %d %s", r.status, r.body)
		}
		for _, ev := range lg.Events {
			if ev.Seq != uint64(len(evs)+1) {
				t.Fatalf("log after %d gave seq %d", len(evs), ev.Seq)
			}
			evs = append(evs, ev)
			if ev.Type == until {
				return evs
			}
		}
	}
	t.Fatalf("no %s event in the log: %+v", until, evs)
	return nil
}

// newTestServerWith serves a fresh embedded store with the plan
// configuration plans returns for it; the workers stop before the store
// closes.
func newTestServerWith(t testing.TB, cfg Config, plans func(asl.Store) *PlanConfig) (*Server, *httptest.Server, *pebblestore.Store) {
	t.Helper()
	st, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	cfg.Plans = plans(st)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts, st
}
