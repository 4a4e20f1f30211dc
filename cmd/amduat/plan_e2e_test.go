package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestPlanCLI drives a plan through the command line: build, submit
// --wait stopping at the gate of an external_send (exit 20), attach on a
// second submit, status/log/ls in text and JSON, refused decisions (exit
// 1), approve then run ending partial because without --policy the empty
// policy denies the host (one attempt, exit 21, policy_denied), retry, cancel, verify, and a
// dry-run whose --input replaces an artifact binding.
func TestPlanCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	a := strings.TrimSpace(c.must(0, "put", c.write("a", []byte("hello "))).stdout)
	b := strings.TrimSpace(c.must(0, "put", c.write("b", []byte("world"))).stdout)
	other := strings.TrimSpace(c.must(0, "put", c.write("o", []byte("bye "))).stdout)
	planJSON := fmt.Sprintf(`{"steps":[
 {"id":"count","inputs":{"0":%q,"1":%q},"pel":{"program":%q}},
 {"id":"post","inputs":{"body":{"step":"count","output":"0"}},
  "effect":{"kind":"http","params":{"method":"POST","url":"http://127.0.0.1:9/"},"class":"external_send","gate":"none",
            "retry":{"max_attempts":3,"base_ms":100,"cap_ms":1000},"cache":"none"}}]}`, a, b, prog)
	pref := strings.TrimSpace(c.must(0, "plan", "build", c.write("plan.json", []byte(planJSON))).stdout)
	var built struct {
		PlanRef string `json:"plan_ref"`
	}
	if r := c.must(0, "--json", "plan", "build", c.write("plan.json", []byte(planJSON))); json.Unmarshal([]byte(r.stdout), &built) != nil || built.PlanRef != pref {
		t.Fatalf("plan build --json: %q", r.stdout)
	}
	c.must(2, "plan", "build", c.write("bad.json", []byte(`{"steps":[{"id":"x","effect":{"kind":"http"}}]}`)))

	r := c.must(20, "plan", "submit", pref, "--wait")
	for _, want := range []string{"status waiting", "step count succeeded", "step post waiting_approval", "blocked_on post REQUIRES_APPROVAL", "output count 0 "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("submit --wait lacks %q:\n%s", want, r.stdout)
		}
	}
	id := strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "exec ")
	var st struct {
		Exec     string `json:"exec"`
		Status   string `json:"status"`
		Attached *bool  `json:"attached"`
		Steps    []struct {
			ID    string `json:"step_id"`
			State string `json:"state"`
			Class string `json:"error_class"`
		} `json:"steps"`
		Outputs   []struct{ Step, Name, Ref string } `json:"outputs"`
		BlockedOn []struct {
			Step   string `json:"step_id"`
			Reason string `json:"reason_code"`
		} `json:"blocked_on"`
	}
	r = c.must(0, "--json", "plan", "submit", pref)
	if json.Unmarshal([]byte(r.stdout), &st) != nil || st.Exec != id || st.Attached == nil || !*st.Attached || st.Status != "waiting" {
		t.Fatalf("second submit: %q", r.stdout)
	}
	r = c.must(0, "--json", "plan", "status", id)
	if json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Outputs) != 1 || len(st.BlockedOn) != 1 || st.BlockedOn[0].Reason != "REQUIRES_APPROVAL" {
		t.Fatalf("status --json: %q", r.stdout)
	}
	r = c.must(0, "plan", "log", id)
	for _, want := range []string{"1 ", " submitted", " step_ready count", " step_succeeded count", " gate_requested post"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("log lacks %q:\n%s", want, r.stdout)
		}
	}
	var lg struct {
		Events []struct {
			Seq  int    `json:"seq"`
			Type string `json:"type"`
		} `json:"events"`
	}
	if r := c.must(0, "--json", "plan", "log", id); json.Unmarshal([]byte(r.stdout), &lg) != nil || len(lg.Events) < 5 || lg.Events[0].Type != "submitted" {
		t.Fatalf("log --json: %q", r.stdout)
	}
	c.must(1, "plan", "approve", id, "count")
	c.must(0, "plan", "approve", id, "post")
	r = c.must(21, "plan", "run", id)
	if !strings.Contains(r.stdout, "step post failed_final attempts 1 class policy_denied") {
		t.Fatalf("run after approve:\n%s", r.stdout)
	}
	r = c.must(0, "plan", "verify", id)
	if !strings.Contains(r.stdout, "ok count pel succeeded") {
		t.Fatalf("verify:\n%s", r.stdout)
	}
	c.must(0, "plan", "retry", id, "post")
	c.must(0, "plan", "cancel", id)
	c.must(1, "plan", "cancel", id)
	c.must(22, "plan", "run", id)
	if r := c.must(0, "plan", "ls"); !strings.Contains(r.stdout, id+" cancelled gated "+pref+" 1/2") {
		t.Fatalf("ls:\n%s", r.stdout)
	}

	// dry-run: the PEL step runs on the replaced input, the effect is
	// listed and not called.
	r = c.must(21, "--json", "plan", "submit", pref, "--mode", "dry-run", "--input", "0="+other, "--wait")
	if json.Unmarshal([]byte(r.stdout), &st) != nil || st.Status != "partial" || st.Steps[1].State != "blocked" || st.BlockedOn[0].Reason != "DRY_RUN" {
		t.Fatalf("dry-run: %q", r.stdout)
	}
	out := st.Outputs[0].Ref
	if got := c.must(0, "get", out).stdout; got != "bye world" {
		t.Fatalf("dry-run output %q, want the replaced input's concatenation", got)
	}
	c.must(2, "plan", "submit", pref, "--input", "nosuch="+other)
	c.must(2, "plan", "submit", pref, "--mode", "sometimes")
	c.must(3, "plan", "status", a)
}
