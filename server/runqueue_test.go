package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/report"
)

// runBody is the JSON of a run of the test program over two fresh inputs.
func runBody(t *testing.T, ts *httptest.Server) []byte {
	t.Helper()
	prog := putProgram(t, ts)
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("queued, ")})
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("then run\n")})
	a := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("queued, ")))
	b := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("then run\n")))
	body, err := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: []asl.Reference{a, b}, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// postRun posts body to /v1/pel/run; safe to call from any goroutine.
func postRun(ts *httptest.Server, body []byte) (reply, error) {
	resp, err := ts.Client().Post(ts.URL+"/v1/pel/run", "application/json", bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}, err
}

// waits returns a channel that receives once per run that starts waiting
// in s's run queue.
func waits(s *Server) <-chan struct{} {
	ch := make(chan struct{}, 64)
	s.runs.onWait = func() { ch <- struct{}{} }
	return ch
}

// TestRunQueueAdmitsAll: with one run slot held, more runs than slots
// wait in the queue instead of being refused, and all succeed once the
// slot frees.
func TestRunQueueAdmitsAll(t *testing.T) {
	t.Parallel()
	const runs = 6
	s, ts, _ := newTestServer(t, Config{Limits: Limits{MaxConcurrentRuns: 1, RunQueueLength: runs}})
	body := runBody(t, ts)
	waiting := waits(s)
	release, _, err := s.runs.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		r   reply
		err error
	}
	done := make(chan res, runs)
	for range runs {
		go func() {
			r, err := postRun(ts, body)
			done <- res{r, err}
		}()
	}
	for range runs {
		<-waiting
	}
	if q := s.runs.queued(); q != runs {
		t.Fatalf("%d runs queued, want %d", q, runs)
	}
	m := do(t, ts, call{method: "GET", path: "/metrics"})
	if want := fmt.Sprintf("amduat_run_queue_length %d", runs); !bytes.Contains(m.body, []byte(want)) {
		t.Errorf("metrics lack %q", want)
	}
	release()
	for range runs {
		r := <-done
		if r.err != nil || r.r.status != http.StatusOK {
			t.Fatalf("queued run: %v %d %s", r.err, r.r.status, r.r.body)
		}
	}
	if a, q := s.runs.running(), s.runs.queued(); a != 0 || q != 0 {
		t.Fatalf("after the runs: %d running, %d queued", a, q)
	}
	m = do(t, ts, call{method: "GET", path: "/metrics"})
	for _, want := range []string{"amduat_run_queue_length 0", fmt.Sprintf("amduat_run_queue_capacity %d", runs), fmt.Sprintf("amduat_run_queue_wait_seconds_count %d", runs)} {
		if !bytes.Contains(m.body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestRunQueueRefuses: a run that finds the queue full gets 429, one whose
// wait expires 503, both with Retry-After; a run still queued is served
// once the slot frees.
func TestRunQueueRefuses(t *testing.T) {
	t.Parallel()
	s, ts, _ := newTestServer(t, Config{Limits: Limits{MaxConcurrentRuns: 1, RunQueueLength: 1, RunQueueWait: time.Hour}})
	body := runBody(t, ts)
	waiting := waits(s)
	release, _, err := s.runs.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan reply, 1)
	go func() {
		r, err := postRun(ts, body)
		if err != nil {
			r = reply{body: []byte(err.Error())}
		}
		queued <- r
	}()
	<-waiting
	r := do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body})
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || errorCode(t, r) != httpstore.CodeTooManyRequests {
		t.Fatalf("full queue: %d %v %s", r.status, r.header, r.body)
	}
	release()
	if r := <-queued; r.status != http.StatusOK {
		t.Fatalf("queued run: %d %s", r.status, r.body)
	}

	// A wait that expires: 503 with Retry-After.
	s2, ts2, _ := newTestServer(t, Config{Limits: Limits{MaxConcurrentRuns: 1, RunQueueWait: time.Millisecond}})
	body2 := runBody(t, ts2)
	release2, _, err := s2.runs.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	r = do(t, ts2, call{method: "POST", path: "/v1/pel/run", body: body2})
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || errorCode(t, r) != httpstore.CodeUnavailable {
		t.Fatalf("expired wait: %d %v %s", r.status, r.header, r.body)
	}
	m := do(t, ts2, call{method: "GET", path: "/metrics"})
	if want := `amduat_run_queue_refused_total{reason="timeout"} 1`; !bytes.Contains(m.body, []byte(want)) {
		t.Errorf("metrics lack %q", want)
	}
}

// TestRunQueueHandsOn: a queued run whose client goes away leaves the
// queue, and a slot released to nobody returns to the pool.
func TestRunQueueHandsOn(t *testing.T) {
	t.Parallel()
	q := newRunQueue(1, 2, time.Hour)
	waiting := make(chan struct{}, 2)
	q.onWait = func() { waiting <- struct{}{} }
	rel, _, err := q.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() { _, _, err := q.acquire(ctx); gone <- err }()
	next := make(chan func(), 1)
	<-waiting
	go func() {
		r, _, err := q.acquire(t.Context())
		if err != nil {
			r = func() {}
		}
		next <- r
	}()
	<-waiting
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait = %v", err)
	}
	rel()
	rel() // a second call does nothing
	r := <-next
	if a, n := q.running(), q.queued(); a != 1 || n != 0 {
		t.Fatalf("%d running, %d queued; want the second waiter running", a, n)
	}
	r()
	if a := q.running(); a != 0 {
		t.Fatalf("%d running after every release", a)
	}
}

// TestClientWaitsOutBusyServer: the client retries a 429 (Retry-After)
// past its Retries count while its context has a deadline, and succeeds
// once a slot frees.
func TestClientWaitsOutBusyServer(t *testing.T) {
	t.Parallel()
	s, ts, _ := newTestServer(t, Config{Limits: Limits{MaxConcurrentRuns: 1, RunQueueLength: -1}})
	body := runBody(t, ts)
	var req report.RunRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 16)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		s.Handler().ServeHTTP(rec, r)
		if rec.status == http.StatusTooManyRequests {
			refused <- struct{}{}
		}
	}))
	defer front.Close()
	c, err := httpstore.Open(t.Context(), front.URL, httpstore.Options{Retries: 1, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	release, _, err := s.runs.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var rep report.Run
		done <- c.DoJSON(ctx, http.MethodPost, "/v1/pel/run", true, req, &rep)
	}()
	// Two refusals: more than Retries (1) allows without a deadline.
	<-refused
	<-refused
	release()
	if err := <-done; err != nil {
		t.Fatalf("run after the slot freed: %v", err)
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
