package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/plan"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/httpfx"
	"github.com/amduat/amduat/plan/effect/policy"
)

// countingService is a loopback HTTP service that counts the calls it
// receives per Idempotency-Key.
type countingService struct {
	mu    sync.Mutex
	calls map[string]int
	url   string
}

func startCountingService(t testing.TB) *countingService {
	c := &countingService{calls: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.calls[r.Header.Get("Idempotency-Key")]++
		c.mu.Unlock()
		w.Write([]byte("counted\n"))
	}))
	t.Cleanup(ts.Close)
	c.url = ts.URL
	return c
}

func (c *countingService) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.calls {
		n += k
	}
	return n
}

// gatedPlanJSON makes a document with a PEL step and posts it, as an
// external_send behind an approval gate, to URL/count.
const gatedPlanJSON = `{"steps":[
 {"id":"doc","pel":{"program":"PROGRAM"}},
 {"id":"send","inputs":{"body":{"step":"doc","output":"0"}},
  "effect":{"kind":"http","params":{"method":"POST","url":"URL/count","body":"body"},
   "class":"external_send","gate":"approval","retry":{"max_attempts":2,"base_ms":10,"cap_ms":100},"cache":"none"}}
]}`

// planUIFixture is a server with a token file, a plan runner whose http
// effect may reach the counting service, and one execution of
// gatedPlanJSON waiting for the approval of send.
type planUIFixture struct {
	ts     *httptest.Server
	srv    *Server
	runner *plan.Runner
	svc    *countingService
	exec   asl.Reference
	tokens string
	alice  string // read, approve
	bob    string // read
}

func newPlanUIFixture(t testing.TB, withAuth bool) *planUIFixture {
	t.Helper()
	ctx := context.Background()
	f := &planUIFixture{svc: startCountingService(t), tokens: filepath.Join(t.TempDir(), "tokens.json")}
	st, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, err := policy.Parse([]byte(`{"version":1,"http":{"hosts":[{"host":"127.0.0.1:*","schemes":["http"]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.runner, err = plan.NewRunner(st, plan.Options{Executors: []effect.Executor{httpfx.New(pol)}, Writer: "planui-test"}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st, Plans: &PlanConfig{Runner: f.runner}}
	if withAuth {
		if f.alice, err = AddToken(f.tokens, "alice", []string{"read", "approve"}); err != nil {
			t.Fatal(err)
		}
		if f.bob, err = AddToken(f.tokens, "bob", []string{"read"}); err != nil {
			t.Fatal(err)
		}
		if cfg.Auth, err = LoadAuth(f.tokens); err != nil {
			t.Fatal(err)
		}
	}
	if f.srv, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(f.ts.Close)

	prog, err := pel.ProgramFromJSON([]byte(`{"nodes":[{"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"hello, plan\n"}}],"roots":[{"node":1}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	pa, err := pel.ProgramArtifact(prog)
	if err != nil {
		t.Fatal(err)
	}
	progRef, err := asl.PutArtifact(ctx, st, asl.HashSHA256, pa)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build([]byte(strings.NewReplacer("PROGRAM", progRef.String(), "URL", f.svc.url).Replace(gatedPlanJSON)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	planRef, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	if f.exec, _, err = f.runner.Submit(ctx, plan.Submission{Plan: planRef}); err != nil {
		t.Fatal(err)
	}
	x, err := f.runner.Run(ctx, f.exec)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := x.Step("send"); s.State != plan.StateWaitingApproval {
		t.Fatalf("send is %s before any decision, want waiting_approval", s.State)
	}
	return f
}

func (f *planUIFixture) decideURL() string { return "/ui/plans/" + f.exec.String() + "/decide" }

// stepState folds the execution and returns the state of step.
func (f *planUIFixture) stepState(t testing.TB, step string) *plan.StepStatus {
	t.Helper()
	x, err := f.runner.Status(context.Background(), f.exec)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := x.Step(step)
	if !ok {
		t.Fatalf("no step %q", step)
	}
	return s
}

// session signs in with tok through the form and returns the session
// cookie and the CSRF token of the execution page's forms.
func (f *planUIFixture) session(t testing.TB, tok string) (*http.Cookie, string) {
	t.Helper()
	r := do(t, f.ts, call{method: "GET", path: "/ui/login"})
	var csrfC *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == csrfCookie {
			csrfC = c
		}
	}
	if csrfC == nil {
		t.Fatal("the sign-in page set no CSRF cookie")
	}
	form := url.Values{"token": {tok}, "csrf": {f.srv.sessions.csrf("login", csrfC.Value)}}
	r = doNoRedirect(t, f.ts, call{method: "POST", path: "/ui/login", body: []byte(form.Encode()), header: map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Cookie": csrfC.String()}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", r.status, r.body)
	}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie {
			page := do(t, f.ts, call{method: "GET", path: "/ui/plans/" + f.exec.String(), header: map[string]string{"Cookie": c.String()}})
			m := strings.SplitN(string(page.body), `name="csrf" value="`, 2)
			if len(m) != 2 {
				return c, ""
			}
			return c, m[1][:strings.IndexByte(m[1], '"')]
		}
	}
	t.Fatal("signing in set no session cookie")
	return nil, ""
}

// doNoRedirect is do without following redirects.
func doNoRedirect(t testing.TB, ts *httptest.Server, c call) reply {
	t.Helper()
	req, err := http.NewRequest(c.method, ts.URL+c.path, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

func formCall(path string, form url.Values, header map[string]string) call {
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, v := range header {
		h[k] = v
	}
	return call{method: "POST", path: path, body: []byte(form.Encode()), header: h}
}

// TestPlanDecisionRoute checks POST /ui/plans/{exec}/decide behind a token
// file: the CSRF token, the session, the approve scope, the bearer
// token's way in, and what is recorded (SPECS.md §18.7).
func TestPlanDecisionRoute(t *testing.T) {
	t.Parallel()
	f := newPlanUIFixture(t, true)
	aliceC, aliceCSRF := f.session(t, f.alice)
	bobC, bobCSRF := f.session(t, f.bob)
	if aliceCSRF == "" || bobCSRF == "" {
		t.Fatal("a signed-in execution page has no decision forms")
	}
	approve := url.Values{"step": {"send"}, "decision": {"approve"}}
	with := func(v url.Values, csrf string) url.Values {
		out := url.Values{}
		for k, vs := range v {
			out[k] = vs
		}
		out.Set("csrf", csrf)
		return out
	}
	for _, tt := range []struct {
		name   string
		call   call
		status int
		code   string
	}{
		{"no csrf", formCall(f.decideURL(), approve, map[string]string{"Cookie": aliceC.String()}), 403, "forbidden"},
		{"wrong csrf", formCall(f.decideURL(), with(approve, bobCSRF), map[string]string{"Cookie": aliceC.String()}), 403, "forbidden"},
		{"no session", formCall(f.decideURL(), with(approve, aliceCSRF), nil), 403, "forbidden"},
		{"no approve scope", formCall(f.decideURL(), with(approve, bobCSRF), map[string]string{"Cookie": bobC.String()}), 403, "forbidden"},
		{"bearer without approve", formCall(f.decideURL(), approve, map[string]string{"Authorization": "Bearer " + f.bob}), 403, "forbidden"},
		{"bad bearer", formCall(f.decideURL(), approve, map[string]string{"Authorization": "Bearer amduat_nope"}), 401, "unauthorized"},
		{"bad decision", formCall(f.decideURL(), url.Values{"step": {"send"}, "decision": {"maybe"}, "csrf": {aliceCSRF}}, map[string]string{"Cookie": aliceC.String()}), 400, "bad_request"},
		{"bad execution", formCall("/ui/plans/00zz/decide", with(approve, aliceCSRF), map[string]string{"Cookie": aliceC.String()}), 400, "bad_reference"},
		{"unknown step", formCall(f.decideURL(), url.Values{"step": {"nope"}, "decision": {"approve"}, "csrf": {aliceCSRF}}, map[string]string{"Cookie": aliceC.String()}), 404, "ERR_NOT_FOUND"},
		{"unknown execution", formCall("/ui/plans/"+helloRef.String()+"/decide", with(approve, aliceCSRF), map[string]string{"Cookie": aliceC.String()}), 404, "ERR_NOT_FOUND"},
		{"not waiting", formCall(f.decideURL(), url.Values{"step": {"doc"}, "decision": {"approve"}, "csrf": {aliceCSRF}}, map[string]string{"Cookie": aliceC.String()}), 409, codeNotWaiting},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := doNoRedirect(t, f.ts, tt.call)
			if r.status != tt.status || errorCode(t, r) != tt.code {
				t.Fatalf("status %d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Fatalf("Content-Type %q, want JSON", r.header.Get("Content-Type"))
			}
		})
	}
	if s := f.stepState(t, "send"); s.State != plan.StateWaitingApproval {
		t.Fatalf("after refused decisions send is %s", s.State)
	}
	// A bearer token with the approve scope needs no CSRF token.
	r := doNoRedirect(t, f.ts, formCall(f.decideURL(), approve, map[string]string{"Authorization": "Bearer " + f.alice}))
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/plans/"+f.exec.String() {
		t.Fatalf("approve with a bearer token: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	if s := f.stepState(t, "send"); s.State != plan.StateReady || s.Decision != "alice" {
		t.Fatalf("after approving send is %s decided by %q", s.State, s.Decision)
	}
	if f.svc.total() != 0 {
		t.Fatal("approving called the service: only a run calls it")
	}
}

// TestPlanDecisionNoAuth checks the decision forms of a server without a
// token file: the CSRF token is bound to the amduat_csrf cookie the page
// sets, and the decision is recorded as made by "anonymous".
func TestPlanDecisionNoAuth(t *testing.T) {
	t.Parallel()
	f := newPlanUIFixture(t, false)
	page := do(t, f.ts, call{method: "GET", path: "/ui/plans/" + f.exec.String()})
	var bind *http.Cookie
	for _, c := range (&http.Response{Header: page.header}).Cookies() {
		if c.Name == csrfCookie {
			bind = c
		}
	}
	m := strings.SplitN(string(page.body), `name="csrf" value="`, 2)
	if bind == nil || !bind.HttpOnly || bind.SameSite != http.SameSiteStrictMode || len(m) != 2 {
		t.Fatalf("the execution page set cookie %v and has %d forms", bind, len(m)-1)
	}
	csrf := m[1][:strings.IndexByte(m[1], '"')]
	reject := url.Values{"step": {"send"}, "decision": {"reject"}, "reason": {"no"}}
	if r := doNoRedirect(t, f.ts, formCall(f.decideURL(), reject, map[string]string{"Cookie": bind.String()})); r.status != 403 || errorCode(t, r) != "forbidden" {
		t.Fatalf("no csrf: %d %s", r.status, r.body)
	}
	reject.Set("csrf", csrf)
	if r := doNoRedirect(t, f.ts, formCall(f.decideURL(), reject, nil)); r.status != 403 {
		t.Fatalf("no cookie: %d %s", r.status, r.body)
	}
	if r := doNoRedirect(t, f.ts, formCall(f.decideURL(), reject, map[string]string{"Cookie": bind.String()})); r.status != http.StatusSeeOther {
		t.Fatalf("reject: %d %s", r.status, r.body)
	}
	if s := f.stepState(t, "send"); s.State != plan.StateFailedFinal || s.Decision != anonymousActor || s.Reason != "REJECTED no" {
		t.Fatalf("after rejecting send is %s decided by %q reason %q", s.State, s.Decision, s.Reason)
	}
}
