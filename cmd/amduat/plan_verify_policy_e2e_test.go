package main

import (
	"strings"
	"testing"
)

// TestPlanVerifyPolicyChanged: every attempt records the digest of the
// policy in force (SPECS.md §24.3), and plan verify under another policy
// names the change and exits 1 (§24.9), while verify under the same one
// (here the empty policy: no --policy on either side) exits 0.
func TestPlanVerifyPolicyChanged(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	planJSON := `{"steps":[{"id":"post","effect":{"kind":"http","params":{"method":"POST","url":"http://127.0.0.1:9/"},
  "class":"external_send","gate":"none","retry":{"max_attempts":1,"base_ms":100,"cap_ms":100},"cache":"none"}}]}`
	pref := strings.TrimSpace(c.must(0, "plan", "build", c.write("plan.json", []byte(planJSON))).stdout)
	r := c.must(21, "plan", "submit", pref, "--mode", "auto", "--wait")
	if !strings.Contains(r.stdout, "step post failed_final attempts 1 class policy_denied") {
		t.Fatalf("submit --wait without a policy:\n%s", r.stdout)
	}
	id := strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "exec ")
	if r := c.must(0, "plan", "log", id); !strings.Contains(r.stdout, "step_started post attempt 1 by runner ") || !strings.Contains(r.stdout, " POLICY ") {
		t.Fatalf("log: the started event records no policy digest:\n%s", r.stdout)
	}
	c.must(0, "plan", "verify", id)
	pol := c.write("policy.json", []byte(`{"version": 1, "http": {"hosts": [{"host": "127.0.0.1:9", "schemes": ["http"]}]}}`))
	r = c.must(1, "plan", "verify", id, "--policy", pol)
	if !strings.Contains(r.stdout, "DIFF post http failed_final policy changed: digest ") || !strings.Contains(r.stdout, " when attempt 1 started (event ") {
		t.Fatalf("verify under another policy:\n%s", r.stdout)
	}
}
