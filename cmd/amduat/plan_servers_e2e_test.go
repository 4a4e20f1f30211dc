package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/report"
)

var planServersRun atomic.Int32

// callCounter is a loopback service counting the calls of each
// Idempotency-Key.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (k *callCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	k.mu.Lock()
	k.calls[r.Header.Get("Idempotency-Key")]++
	k.mu.Unlock()
	w.Write([]byte("posted\n"))
}

// planPost posts body to url as JSON and decodes the answer into out.
func planPost(t *testing.T, url string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ans, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(ans, out) != nil {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, ans)
	}
}

// TestPlanTwoServers: two `amduat serve` processes on one bucket, each
// with two plan workers; the same N plans (a PEL step, then an
// external_send POST to a loopback service that counts calls per
// Idempotency-Key) are submitted to both, in auto mode. Both servers'
// workers compete for every execution through its lease (SPECS.md §24.7):
// every execution completes, and no key is called twice. The default run
// submits 4 plans (one per worker), AMDUAT_LONG=1 40 (internal/longtest).
func TestPlanTwoServers(t *testing.T) {
	t.Parallel()
	c, _ := bucketCLI(t, fmt.Sprintf("planservers/p%d", planServersRun.Add(1)))
	n := longtest.Logf(t, "plans", 4, 40)
	svc := &callCounter{calls: map[string]int{}}
	loop := httptest.NewServer(svc)
	t.Cleanup(loop.Close)
	pol := c.write("policy.json", fmt.Appendf(nil, `{"version":1,"http":{"hosts":[{"host":%q,"schemes":["http"]}]}}`, strings.TrimPrefix(loop.URL, "http://")))
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	suffix := strings.TrimSpace(c.must(0, "put", c.write("suffix", []byte(" (counted)"))).stdout)
	// The documents in one put: a process per document would test
	// nothing more.
	putArgs := []string{"put"}
	for i := range n {
		putArgs = append(putArgs, c.write(fmt.Sprintf("doc%d", i), fmt.Appendf(nil, "document %d", i)))
	}
	docs := strings.Fields(c.must(0, putArgs...).stdout)
	if len(docs) != n {
		t.Fatalf("put of %d documents printed %q", n, docs)
	}
	var plans []string
	for _, doc := range docs {
		planJSON := fmt.Sprintf(`{"steps":[
 {"id":"count","inputs":{"0":%q,"1":%q},"pel":{"program":%q}},
 {"id":"post","inputs":{"body":{"step":"count","output":"0"}},
  "effect":{"kind":"http","params":{"method":"POST","url":"%s/post","body":"body"},"class":"external_send","gate":"none",
            "retry":{"max_attempts":3,"base_ms":100,"cap_ms":1000},"cache":"none"}}]}`, doc, suffix, prog, loop.URL)
		plans = append(plans, strings.TrimSpace(c.must(0, "plan", "build", c.write("plan.json", []byte(planJSON))).stdout))
	}
	var servers []*killableServe
	for i := range 2 {
		servers = append(servers, launchServeArgs(t, c.store, filepath.Join(c.cwd, fmt.Sprintf("serve%d.log", i)),
			"--plan-policy", pol, "--plan-workers", "2", "--plan-lease", "6s"))
	}
	got := make([][]string, len(servers)) // the ids each server answered
	var wg sync.WaitGroup
	for si, srv := range servers {
		got[si] = make([]string, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, p := range plans {
				var x report.PlanStatus
				planPost(t, srv.url+"/v1/plans/executions", report.PlanSubmitRequest{PlanRef: mustRef(t, p), Mode: "auto"}, &x)
				got[si][i] = x.Exec.String()
			}
		}()
	}
	wg.Wait()
	ids := got[0]
	if !slices.Equal(got[0], got[1]) { // the same id from both: the submission's reference
		t.Fatalf("the two servers answered different execution ids for the same submissions: %v, %v", got[0], got[1])
	}
	for i, id := range ids {
		// Follow the log through either server until the execution ends.
		srv := servers[i%2]
		seen := 0
		for done := false; !done; {
			resp, err := http.Get(fmt.Sprintf("%s/v1/plans/executions/%s/log?after=%d&wait=30", srv.url, id, seen))
			if err != nil {
				t.Fatal(err)
			}
			var lg report.PlanLog
			err = json.NewDecoder(resp.Body).Decode(&lg)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			seen += len(lg.Events)
			switch lg.Status {
			case "completed":
				done = true
			case "running":
			default:
				t.Fatalf("execution %s: %s, want completed (logs: %s, %s)", id, lg.Status, servers[0].log, servers[1].log)
			}
		}
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	dup := 0
	for k, calls := range svc.calls {
		if calls != 1 {
			dup++
			t.Errorf("key %q called %d times", k, calls)
		}
	}
	if len(svc.calls) != n {
		t.Errorf("%d keys called, want %d (one per execution)", len(svc.calls), n)
	}
	t.Logf("two servers, %d plans submitted to both: %d completed, %d keys called, %d called more than once", n, n, len(svc.calls), dup)
	for _, srv := range servers {
		srv.stop(t)
	}
}

func mustRef(t *testing.T, text string) asl.Reference {
	t.Helper()
	ref, err := asl.ParseReference(text)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestPlanServerTakeover: a server killed (SIGKILL) while its worker holds
// an execution's lease and a call is in flight is taken over by another
// server on the same bucket once the lease time has passed since it last
// saw the lease renewed (SPECS.md §24.7, "Leases"): the step cut off
// mid-call is resumed with the same idempotency key (the http effect
// honours keys) and the execution completes.
func TestPlanServerTakeover(t *testing.T) {
	t.Parallel()
	c, _ := bucketCLI(t, fmt.Sprintf("plantakeover/p%d", planServersRun.Add(1)))
	var (
		mu      sync.Mutex
		calls   = map[string]int{}
		arrived = make(chan struct{})
	)
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls[r.Header.Get("Idempotency-Key")]++
		first := len(calls) == 1 && calls[r.Header.Get("Idempotency-Key")] == 1
		mu.Unlock()
		if first {
			close(arrived)
			<-r.Context().Done() // the caller dies first
			return
		}
		w.Write([]byte("posted\n"))
	}))
	t.Cleanup(loop.Close)
	pol := c.write("policy.json", fmt.Appendf(nil, `{"version":1,"http":{"hosts":[{"host":%q,"schemes":["http"]}]}}`, strings.TrimPrefix(loop.URL, "http://")))
	doc := strings.TrimSpace(c.must(0, "put", c.write("doc", []byte("the document"))).stdout)
	planJSON := fmt.Sprintf(`{"steps":[{"id":"post","inputs":{"body":%q},
  "effect":{"kind":"http","params":{"method":"POST","url":"%s/post","body":"body"},"class":"external_send","gate":"none",
            "retry":{"max_attempts":3,"base_ms":100,"cap_ms":1000},"cache":"none"}}]}`, doc, loop.URL)
	pref := strings.TrimSpace(c.must(0, "plan", "build", c.write("plan.json", []byte(planJSON))).stdout)
	a := launchServeArgs(t, c.store, filepath.Join(c.cwd, "a.log"), "--plan-policy", pol, "--plan-workers", "1", "--plan-lease", "4s", "--plan-rescan", "-1s")
	var x report.PlanStatus
	planPost(t, a.url+"/v1/plans/executions", report.PlanSubmitRequest{PlanRef: mustRef(t, pref), Mode: "auto"}, &x)
	<-arrived
	a.kill9(t)
	b := launchServeArgs(t, c.store, filepath.Join(c.cwd, "b.log"), "--plan-policy", pol, "--plan-workers", "1", "--plan-lease", "4s", "--plan-rescan", "1s")
	var lg report.PlanLog
	for seen := 0; lg.Status != "completed"; seen += len(lg.Events) {
		resp, err := http.Get(fmt.Sprintf("%s/v1/plans/executions/%s/log?after=%d&wait=30", b.url, x.Exec, seen))
		if err != nil {
			t.Fatal(err)
		}
		lg = report.PlanLog{}
		err = json.NewDecoder(resp.Body).Decode(&lg)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if lg.Status != "running" && lg.Status != "completed" {
			t.Fatalf("execution %s: %s (logs %s, %s)", x.Exec, lg.Status, a.log, b.log)
		}
	}
	resp, err := http.Get(fmt.Sprintf("%s/v1/plans/executions/%s/log", b.url, x.Exec))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&lg); err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, ev := range lg.Events {
		if ev.Type == "step_started" {
			actors = append(actors, ev.Actor)
		}
	}
	if len(actors) != 2 || actors[0] == actors[1] {
		t.Fatalf("step_started actors %q, want two runners", actors)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 {
		t.Fatalf("calls %v, want one key", calls)
	}
	t.Logf("killed holder taken over: started by %q then %q; the key called %v (the provider deduplicates by it)", actors[0], actors[1], calls)
	b.stop(t)
}
