package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect/policy"
	"github.com/amduat/amduat/plan/effect/registry"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/examples"
)

// The demo's plan step (order 87, after wasm run, before verify): the
// README's "Plans" walkthrough (SPECS.md §22-§24) on the demo's store. A
// plan fetches a document over HTTP from a loopback service the demo
// starts, counts its words with the wordcount WebAssembly module as a PEL
// step, and posts the count back as an external_send behind an approval
// gate. The demo runs `amduat plan run` as a child process and kills it
// (SIGKILL) while the fetch is in flight, resumes the execution from its
// ledger, approves the post, runs it to completion and replays it.
func init() { addDemoStep(demoStep{87, "plan", demoPlan}) }

// planDemoDoc is the document the walkthrough's service serves: 9 words.
const planDemoDoc = "The quick brown fox jumps over the lazy dog.\n"

// planDemoService is the walkthrough's loopback service. GET /doc.txt
// answers planDemoDoc, except that the first request of each
// Idempotency-Key stalls until its client goes away (a slow provider: it
// lets the walkthrough kill the runner mid-call, and a runner that is not
// killed gives up at the policy's time limit and retries with the same
// key). POST /count records its body; a key already seen gets the first
// answer again without recording twice, as a provider honouring
// Idempotency-Key does. Every call is logged, one line each.
type planDemoService struct {
	log     func(planDemoCall) // nil: no log
	stalled chan string        // receives the key of the first stalled request
	mu      sync.Mutex
	calls   map[string]int // per method, path and key
	counts  []string       // the bodies POST /count recorded, in order
	once    sync.Once
}

// planDemoCall is one call the service answered, as it logs it.
type planDemoCall struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Key    string `json:"key"`
	Call   int    `json:"call"` // 1 for the first call of this method, path and key
	Answer string `json:"answer"`
}

// text is the log line: METHOD PATH key KEY call N: ANSWER.
func (c planDemoCall) text() string {
	return fmt.Sprintf("%s %s key %s call %d: %s", c.Method, c.Path, c.Key, c.Call, c.Answer)
}

func newPlanDemoService(log func(planDemoCall)) *planDemoService {
	return &planDemoService{log: log, stalled: make(chan string, 1), calls: map[string]int{}}
}

func (s *planDemoService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	id := r.Method + " " + r.URL.Path + " " + key
	s.calls[id]++
	n := s.calls[id]
	s.mu.Unlock()
	logf := func(format string, args ...any) {
		if s.log != nil {
			c := planDemoCall{Method: r.Method, Path: r.URL.Path, Key: key, Call: n, Answer: fmt.Sprintf(format, args...)}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.log(c)
		}
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/doc.txt" && n == 1:
		logf("stalled until the client goes away")
		s.once.Do(func() { s.stalled <- key })
		<-r.Context().Done()
	case r.Method == http.MethodGet && r.URL.Path == "/doc.txt":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, planDemoDoc)
		logf("200, %d bytes", len(planDemoDoc))
	case r.Method == http.MethodPost && r.URL.Path == "/count" && n == 1:
		s.mu.Lock()
		s.counts = append(s.counts, string(body))
		s.mu.Unlock()
		io.WriteString(w, "recorded\n")
		logf("200, recorded %q", body)
	case r.Method == http.MethodPost && r.URL.Path == "/count":
		io.WriteString(w, "recorded\n")
		logf("200, already recorded for this key: not recorded again")
	default:
		http.NotFound(w, r)
		logf("404")
	}
}

// recorded returns the bodies POST /count recorded.
func (s *planDemoService) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.counts...)
}

// callsOf returns how many requests method path with key reached the service.
func (s *planDemoService) callsOf(method, path, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method+" "+path+" "+key]
}

// servePlanDemo serves the walkthrough's service on addr until ctx ends
// (`amduat demo --plan-service ADDR`), logging every call on a's standard
// output: a line of text each, or under --json one JSON object each,
// after a first {"url": URL}.
func servePlanDemo(ctx context.Context, a *app, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(exitIO, addr, err)
	}
	log := func(c planDemoCall) { a.printf("%s\n", c.text()) }
	if a.jsonOut {
		log = func(c planDemoCall) { _ = a.printJSON(c) }
	}
	srv := &http.Server{Handler: newPlanDemoService(log), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	url := "http://" + ln.Addr().String()
	if a.jsonOut {
		if err := a.printJSON(struct {
			URL string `json:"url"`
		}{url}); err != nil {
			return err
		}
	}
	a.printf("plan service on %s: GET /doc.txt, POST /count\n", url)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(exitIO, addr, err)
	}
	return nil
}

// planDemoPlan is the walkthrough's plan in its JSON form (SPECS.md §22.4)
// for a service at base, the wordcount module mod and the program prog.
func planDemoPlan(base string, mod, prog asl.Reference) string {
	return fmt.Sprintf(`{"steps":[
 {"id":"fetch","effect":{"kind":"http","params":{"method":"GET","url":"%[1]s/doc.txt"},
   "class":"read_only","gate":"none","retry":{"max_attempts":3,"base_ms":100,"cap_ms":1000},"cache":"reuse"}},
 {"id":"count","inputs":{"0":"%[2]s","1":{"step":"fetch","output":"body"}},"pel":{"program":"%[3]s"}},
 {"id":"post","inputs":{"body":{"step":"count","output":"0"}},
  "effect":{"kind":"http","params":{"method":"POST","url":"%[1]s/count","body":"body"},
   "class":"external_send","gate":"approval","retry":{"max_attempts":2,"base_ms":100,"cap_ms":1000},"cache":"none"}}]}`,
		base, mod, prog)
}

func demoPlan(ctx context.Context, e *demoEnv) (out []string, err error) {
	id := e.store.DefaultHash()
	mod, err := asl.PutArtifact(ctx, e.store, id, asl.Untagged(examples.Wordcount().Module))
	if err != nil {
		return nil, failAuto("wordcount module", err)
	}
	params, err := wasmop.EncodeParams(demoWasmParams)
	if err != nil {
		return nil, err
	}
	art, err := pel.ProgramArtifact(pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: wasmop.OpID, Inputs: []pel.DagInput{pel.External(0), pel.External(1)}, Params: params}},
		Roots: []pel.RootRef{{NodeID: 1}},
	})
	if err != nil {
		return nil, err
	}
	prog, err := asl.PutArtifact(ctx, e.store, id, art)
	if err != nil {
		return nil, failAuto("wordcount program", err)
	}

	svc := newPlanDemoService(nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fail(exitIO, "127.0.0.1:0", err)
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	polPath := filepath.Join(e.dir, "plan-policy.json")
	polJSON := fmt.Sprintf(`{"version": 1, "http": {"hosts": [{"host": %q, "schemes": ["http"]}]}}`, ln.Addr().String())
	if err := os.WriteFile(polPath, []byte(polJSON+"\n"), 0o644); err != nil {
		return nil, fail(exitIO, polPath, err)
	}
	pol, err := policy.Load(polPath)
	if err != nil {
		return nil, err
	}
	p, err := plan.Build([]byte(planDemoPlan(base, mod, prog)))
	if err != nil {
		return nil, err
	}
	pa, err := p.Artifact()
	if err != nil {
		return nil, err
	}
	pref, err := asl.PutArtifact(ctx, e.store, id, pa)
	if err != nil {
		return nil, failAuto("plan", err)
	}
	out = append(out,
		fmt.Sprintf("service  %s: GET /doc.txt (%d bytes, 9 words; a key's first GET stalls), POST /count", base, len(planDemoDoc)),
		fmt.Sprintf("plan     %s: fetch (http GET, read_only) -> count (wordcount, PEL) -> post (http POST, external_send, approval)", pref))

	withRunner := func(fn func(r *plan.Runner) error) error {
		execs, err := registry.Executors(pol)
		if err != nil {
			return err
		}
		defer registry.Close(execs)
		reg, done, err := newRegistry(ctx, wasmop.Options{CacheDir: filepath.Join(e.storeDir, wasmCacheName)})
		if err != nil {
			return err
		}
		defer done()
		r, err := plan.NewRunner(pebblePlanStore{e.store}, plan.Options{Hash: id, Surface: surf.Options{Registry: reg},
			Executors: execs, PolicyDigest: pol.Digest()})
		if err != nil {
			return err
		}
		return fn(r)
	}
	var exe asl.Reference
	if err := withRunner(func(r *plan.Runner) (err error) {
		exe, _, err = r.Submit(ctx, plan.Submission{Plan: pref, Mode: plan.Gated})
		return err
	}); err != nil {
		return out, failAuto(pref.String(), err)
	}
	out = append(out, fmt.Sprintf("submit   execution %s (mode gated)", exe))

	// `amduat plan run` as a child, killed mid-call: the store is closed
	// here while the child holds it, and opened again after.
	if err := e.store.Close(); err != nil {
		e.store = nil
		return out, failAuto(e.storeDir, err)
	}
	e.store = nil
	pid, key, err := killPlanRunMidCall(ctx, e.storeDir, exe, polPath, svc)
	if s, oerr := pebblestore.Open(e.storeDir, &pebblestore.Options{}); oerr != nil {
		return out, failAuto(e.storeDir, oerr)
	} else {
		e.store = s
	}
	if err != nil {
		return out, err
	}

	var x *plan.Execution
	var rep *plan.VerifyReport
	err = withRunner(func(r *plan.Runner) error {
		x, err = r.Status(ctx, exe)
		if err != nil {
			return err
		}
		if s, _ := x.Step("fetch"); s.State != plan.StateRunning || s.Attempts != 1 {
			return fmt.Errorf("after the kill: step fetch %s attempts %d, want running attempts 1", s.State, s.Attempts)
		}
		out = append(out, fmt.Sprintf("kill -9  plan run (pid %d) while fetch was in flight: the ledger says fetch running, attempt 1", pid))
		if x, err = r.Run(ctx, exe); err != nil {
			return err
		}
		if x.Status != plan.ExecWaiting {
			return fmt.Errorf("resumed run: status %s, want waiting", x.Status)
		}
		counted := planDemoOutput(x, "count")
		out = append(out, fmt.Sprintf("resume   fetch called again with the same Idempotency-Key (%d GETs of key %.12s…), count %s = %q, post waiting for approval",
			svc.callsOf(http.MethodGet, "/doc.txt", key), key, counted, planDemoBytes(ctx, e.store, counted)))
		if _, err := r.Approve(ctx, exe, "post", "demo"); err != nil {
			return err
		}
		if x, err = r.Run(ctx, exe); err != nil {
			return err
		}
		if x.Status != plan.ExecCompleted {
			return fmt.Errorf("run after approval: status %s, want completed (blocked on %v)", x.Status, x.BlockedOn)
		}
		got := svc.recorded()
		if len(got) != 1 || got[0] != "9\n" {
			return fmt.Errorf("the service recorded %q, want one count \"9\\n\"", got)
		}
		out = append(out, fmt.Sprintf("approve  post by demo; run: completed after %d events, the service recorded %q once", x.Seq, got[0]))
		rep, err = r.Verify(ctx, exe)
		return err
	})
	if err != nil {
		return out, failAuto(exe.String(), err)
	}
	if !rep.OK {
		for _, s := range rep.Steps {
			if !s.OK {
				return out, fmt.Errorf("plan verify: step %s: %s", s.Step, s.Problem)
			}
		}
	}
	var recomputed asl.Reference
	for _, s := range rep.Steps {
		if s.Step == "count" {
			recomputed = s.Recomputed
		}
	}
	out = append(out, fmt.Sprintf("verify   %d events folded, count re-run to result %s, no effect called: ok", rep.Events, recomputed))
	return out, nil
}

// killPlanRunMidCall runs `amduat plan run EXE` on the store in dir as a
// child process, waits until the service stalls the fetch, and kills the
// child with SIGKILL. It returns the child's pid and the fetch's key.
func killPlanRunMidCall(ctx context.Context, dir string, exe asl.Reference, polPath string, svc *planDemoService) (int, string, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, "", fmt.Errorf("plan run as a child: %w", err)
	}
	var childOut strings.Builder
	cmd := exec.Command(self, "--store", dir, "plan", "run", exe.String(), "--policy", polPath)
	cmd.Stdout, cmd.Stderr = &childOut, &childOut
	cmd.Env = append(os.Environ(), "AMDUAT_STORE=")
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("plan run as a child: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case key := <-svc.stalled:
		_ = cmd.Process.Kill()
		<-exited
		return cmd.Process.Pid, key, nil
	case err := <-exited:
		return 0, "", fmt.Errorf("plan run exited before its fetch reached the service (%v): %s", err, childOut.String())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		return 0, "", fmt.Errorf("plan run: no fetch reached the service in 2 minutes: %s", childOut.String())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
		return 0, "", ctx.Err()
	}
}

// planDemoOutput returns the reference of output 0 of step id.
func planDemoOutput(x *plan.Execution, id string) asl.Reference {
	s, _ := x.Step(id)
	if len(s.Outputs) == 0 {
		return asl.Reference{}
	}
	return s.Outputs[0].Ref
}

// planDemoBytes returns the bytes of a small artifact, or its error.
func planDemoBytes(ctx context.Context, st asl.Fetcher, ref asl.Reference) string {
	a, err := asl.Get(ctx, st, ref, 1<<10)
	if err != nil {
		return "(" + strconv.Quote(err.Error()) + ")"
	}
	return string(a.Bytes)
}
