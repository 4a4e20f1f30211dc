package httpfx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/internal/fxutil"
	"github.com/amduat/amduat/plan/effect/policy"
)

func loopbackPolicy(t *testing.T, extra string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(`{"version":1,"http":{"hosts":[{"host":"127.0.0.1:*","schemes":["http","https"]` + extra + `}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// countingServer is a real loopback HTTP server that counts the
// connections it accepts.
type countingServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingServer(t *testing.T, h http.Handler) *countingServer {
	s := &countingServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func params(t *testing.T, p Params) []byte {
	t.Helper()
	b, err := fxutil.Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func get(t *testing.T, st *memstore.Store, ref asl.Reference) string {
	t.Helper()
	rc, _, err := st.Fetch(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func outputs(t *testing.T, st *memstore.Store, obs effect.Observation) map[string]string {
	m := map[string]string{}
	for _, o := range obs.Outputs {
		m[o.Name] = get(t, st, o.Ref)
	}
	return m
}

func TestStatusClasses(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		status     int
		retryAfter string
		expect     []int
		class      effect.ErrorClass // 0: success
		after      time.Duration     // minimum RetryAfter
		afterMax   time.Duration
	}{
		{name: "200", status: 200},
		{name: "202", status: 202},
		{name: "201 expected", status: 201, expect: []int{201}},
		{name: "404 expected", status: 404, expect: []int{404, 200}},
		{name: "200 not expected", status: 200, expect: []int{201}, class: effect.InvalidInput},
		{name: "429 seconds", status: 429, retryAfter: "7", class: effect.RateLimited, after: 7 * time.Second, afterMax: 7 * time.Second},
		{name: "429 date", status: 429, retryAfter: date, class: effect.RateLimited, after: 60 * time.Second, afterMax: 90 * time.Second},
		{name: "429 none", status: 429, class: effect.RateLimited},
		{name: "429 garbage", status: 429, retryAfter: "soon", class: effect.RateLimited},
		{name: "500", status: 500, class: effect.ProviderUnavailable},
		{name: "502", status: 502, class: effect.ProviderUnavailable},
		{name: "503 retry-after", status: 503, retryAfter: "3", class: effect.ProviderUnavailable, after: 3 * time.Second, afterMax: 3 * time.Second},
		{name: "401", status: 401, class: effect.AuthForbidden},
		{name: "403", status: 403, class: effect.AuthForbidden},
		{name: "400", status: 400, class: effect.InvalidInput},
		{name: "404", status: 404, class: effect.InvalidInput},
		{name: "422", status: 422, class: effect.InvalidInput},
		{name: "408", status: 408, class: effect.NetworkTimeout},
		{name: "302 not followed", status: 302, class: effect.InvalidInput},
	}
	var mu sync.Mutex
	var status int
	var retryAfter string
	var gotKey, gotBody, gotMethod, gotType string
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/elsewhere" {
			t.Errorf("the redirect was followed")
		}
		b, _ := io.ReadAll(r.Body)
		gotKey, gotBody, gotMethod, gotType = r.Header.Get("Idempotency-Key"), string(b), r.Method, r.Header.Get("Content-Type")
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("X-B", "2")
		w.Header().Add("X-A", "1")
		w.Header().Add("X-A", "0")
		if status == 302 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "answer %d", status)
	}))
	x := New(loopbackPolicy(t, ""))
	st := memstore.New()
	ctx := context.Background()
	in, err := fxutil.PutBytes(ctx, st, []byte("hello body"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			status, retryAfter = c.status, c.retryAfter
			mu.Unlock()
			key := "key-" + strconv.Itoa(i)
			req := effect.Request{Kind: Kind, Key: key, Attempt: 1,
				Params: params(t, Params{Method: "POST", URL: srv.URL + "/x?q=1", Headers: map[string]string{"content-type": "text/plain"}, Body: "doc", Expect: c.expect}),
				Inputs: []effect.Input{{Name: "doc", Ref: in}}}
			obs, err := x.Call(ctx, st, req)
			mu.Lock()
			if gotKey != key || gotBody != "hello body" || gotMethod != "POST" || gotType != "text/plain" {
				t.Errorf("server saw key %q body %q method %q type %q", gotKey, gotBody, gotMethod, gotType)
			}
			mu.Unlock()
			out := outputs(t, st, obs)
			if out["status"] != strconv.Itoa(c.status) || out["body"] != fmt.Sprintf("answer %d", c.status) {
				t.Errorf("outputs %q", out)
			}
			if !strings.Contains(out["headers"], `"x-a":["1","0"],"x-b":["2"]`) {
				t.Errorf("headers %s", out["headers"])
			}
			if obs.End.Before(obs.Start) {
				t.Errorf("end %v before start %v", obs.End, obs.Start)
			}
			if c.class == 0 {
				if err != nil {
					t.Fatalf("err %v, want success", err)
				}
				return
			}
			var e *effect.Error
			if !errors.As(err, &e) || e.Class != c.class || effect.IsUnknownOutcome(err) {
				t.Fatalf("err %v, want class %v", err, c.class)
			}
			if e.RetryAfter < c.after || e.RetryAfter > c.afterMax {
				t.Errorf("retry after %v, want %v-%v", e.RetryAfter, c.after, c.afterMax)
			}
		})
	}
}

func TestOutputsAreCanonical(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ae := r.Header.Get("Accept-Encoding"); ae != "" {
			t.Errorf("the request negotiates compression: Accept-Encoding %q", ae)
		}
		if ua := r.Header.Get("User-Agent"); ua != Version {
			t.Errorf("User-Agent %q", ua)
		}
		w.Header()["Date"] = nil
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "<doc & more>")
	}))
	st := memstore.New()
	obs, err := New(loopbackPolicy(t, "")).Call(context.Background(), st, effect.Request{Kind: Kind, Params: params(t, Params{Method: "GET", URL: srv.URL})})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, o := range obs.Outputs {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "body,headers,status" {
		t.Errorf("output names %v", names)
	}
	out := outputs(t, st, obs)
	if want := `{"content-length":["12"],"content-type":["text/plain"]}`; out["headers"] != want {
		t.Errorf("headers %s, want %s", out["headers"], want)
	}
}

func TestPolicyDeniesBeforeConnecting(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name, policy, url string
	}{
		{"other host", `{"host":"example.org"}`, srv.URL},
		{"other port", fmt.Sprintf(`{"host":"127.0.0.1:%d","schemes":["http"]}`, port+1), srv.URL},
		{"default port only", `{"host":"127.0.0.1","schemes":["http"]}`, srv.URL},
		{"scheme", `{"host":"127.0.0.1:*","schemes":["https"]}`, srv.URL},
		{"name not address", `{"host":"localhost:*","schemes":["http"]}`, srv.URL},
		{"wildcard excludes apex", `{"host":"*.example.org:*","schemes":["http"]}`, "http://example.org:1/"},
		{"empty policy", ``, srv.URL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol, err := policy.Parse([]byte(`{"version":1,"http":{"hosts":[` + c.policy + `]}}`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(pol).Call(context.Background(), memstore.New(), effect.Request{Kind: Kind, Key: "k",
				Params: params(t, Params{Method: "POST", URL: c.url})})
			var e *effect.Error
			if !errors.As(err, &e) || e.Class != effect.PolicyDenied || e.Class.Retryable() {
				t.Fatalf("err %v, want policy_denied", err)
			}
		})
	}
	if n := srv.conns.Load(); n != 0 {
		t.Fatalf("%d connections reached the server, want 0", n)
	}
}

func TestInvalidParams(t *testing.T) {
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	cases := map[string]string{
		"empty":          ``,
		"not object":     `[]`,
		"unknown field":  `{"method":"GET","url":"` + srv.URL + `","bodyy":"x"}`,
		"trailing":       `{"method":"GET","url":"` + srv.URL + `"} {}`,
		"lower method":   `{"method":"get","url":"` + srv.URL + `"}`,
		"connect":        `{"method":"CONNECT","url":"` + srv.URL + `"}`,
		"scheme":         `{"method":"GET","url":"ftp://127.0.0.1/"}`,
		"credentials":    `{"method":"GET","url":"http://u:p@127.0.0.1:1/"}`,
		"fragment":       `{"method":"GET","url":"` + srv.URL + `/#x"}`,
		"host header":    `{"method":"GET","url":"` + srv.URL + `","headers":{"host":"x"}}`,
		"key header":     `{"method":"GET","url":"` + srv.URL + `","headers":{"Idempotency-Key":"x"}}`,
		"crlf value":     `{"method":"GET","url":"` + srv.URL + `","headers":{"x-a":"a\r\nb: c"}}`,
		"bad name":       `{"method":"GET","url":"` + srv.URL + `","headers":{"a b":"c"}}`,
		"status":         `{"method":"GET","url":"` + srv.URL + `","expect":[42]}`,
		"missing body":   `{"method":"POST","url":"` + srv.URL + `","body":"nope"}`,
		"negative limit": `{"method":"GET","url":"` + srv.URL + `","timeout_ms":-1}`,
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(loopbackPolicy(t, "")).Call(context.Background(), memstore.New(), effect.Request{Kind: Kind, Params: []byte(p)})
			var e *effect.Error
			if !errors.As(err, &e) || e.Class != effect.InvalidInput {
				t.Fatalf("err %v, want invalid_input", err)
			}
		})
	}
	if n := srv.conns.Load(); n != 0 {
		t.Fatalf("%d connections, want 0", n)
	}
}

func TestBodyLimit(t *testing.T) {
	const limit = 1<<20 + 1<<18 // past the in-memory spool, so the file path runs too
	var size atomic.Int64
	srv := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("z"), int(size.Load())))
	}))
	x := New(loopbackPolicy(t, fmt.Sprintf(`,"max_response_bytes":%d`, limit)))
	for _, n := range []int64{0, 10, limit, limit + 1, 2 * limit} {
		size.Store(n)
		st := memstore.New()
		obs, err := x.Call(context.Background(), st, effect.Request{Kind: Kind, Params: params(t, Params{Method: "GET", URL: srv.URL})})
		if n <= limit {
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if got := outputs(t, st, obs)["body"]; int64(len(got)) != n {
				t.Fatalf("%d bytes: body of %d", n, len(got))
			}
			continue
		}
		var e *effect.Error
		if !errors.As(err, &e) || e.Class != effect.LimitExceeded {
			t.Fatalf("%d bytes: err %v, want limit_exceeded", n, err)
		}
		if out := outputs(t, st, obs); out["status"] != "200" || out["body"] != "" {
			t.Fatalf("%d bytes: partial observation %v", n, obs.Outputs)
		}
	}
}

// rawServer accepts loopback connections and hands each to fn, with a
// channel closed when the test ends.
func rawServer(t *testing.T, fn func(c net.Conn, stop <-chan struct{})) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); fn(c, stop) }()
		}
	}()
	return ln.Addr().String()
}

// readRequest reads one request with its body, so the client has sent it all.
func readRequest(c net.Conn) {
	r, err := http.ReadRequest(bufio.NewReader(c))
	if err == nil {
		io.Copy(io.Discard, r.Body)
	}
}

func TestTransportFailures(t *testing.T) {
	hang := rawServer(t, func(c net.Conn, stop <-chan struct{}) { readRequest(c); <-stop })
	closeAfterRead := rawServer(t, func(c net.Conn, _ <-chan struct{}) { readRequest(c) })
	silent := rawServer(t, func(c net.Conn, stop <-chan struct{}) { <-stop }) // says nothing: a TLS handshake never ends
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()

	cases := []struct {
		name, method, url string
		class             effect.ErrorClass
		unknown           bool
	}{
		{"hang GET", "GET", "http://" + hang, effect.NetworkTimeout, false},
		{"hang POST", "POST", "http://" + hang, effect.NetworkTimeout, true},
		{"hang PUT", "PUT", "http://" + hang, effect.NetworkTimeout, false},
		{"closed after request GET", "GET", "http://" + closeAfterRead, effect.ProviderUnavailable, false},
		{"closed after request POST", "POST", "http://" + closeAfterRead, effect.ProviderUnavailable, true},
		{"closed after request PATCH", "PATCH", "http://" + closeAfterRead, effect.ProviderUnavailable, true},
		{"timeout before sending POST", "POST", "https://" + silent, effect.NetworkTimeout, false},
		{"refused POST", "POST", "http://" + refused, effect.DependencyUnavailable, false},
		{"refused GET", "GET", "http://" + refused, effect.DependencyUnavailable, false},
	}
	x := New(loopbackPolicy(t, ""))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A limit of 3 s (was 300 ms) against a loopback connect and
			// send, which a loaded machine may delay past 300 ms (and so
			// turn a sent request into one timed out before sending); the
			// cases run in parallel, so the waits overlap.
			t.Parallel()
			done := make(chan error, 1)
			go func() {
				_, err := x.Call(context.Background(), memstore.New(), effect.Request{Kind: Kind, Key: "k1",
					Params: params(t, Params{Method: c.method, URL: c.url, TimeoutMillis: 3000})})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a hang bound, not a timing
				t.Fatal("the call did not return")
			}
			if class, unknown := classOf(t, err); class != c.class || unknown != c.unknown {
				t.Fatalf("err %v, want class %v unknown %v", err, c.class, c.unknown)
			}
		})
	}
}

func TestCallerCancel(t *testing.T) {
	got := make(chan struct{}, 2)
	hang := rawServer(t, func(c net.Conn, stop <-chan struct{}) { readRequest(c); got <- struct{}{}; <-stop })
	x := New(loopbackPolicy(t, ""))
	for _, c := range []struct {
		method  string
		unknown bool
	}{{"GET", false}, {"POST", true}} {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-got; cancel() }()
		_, err := x.Call(ctx, memstore.New(), effect.Request{Kind: Kind, Params: params(t, Params{Method: c.method, URL: "http://" + hang})})
		if !errors.Is(err, context.Canceled) && !effect.IsUnknownOutcome(err) {
			t.Errorf("%s: err %v, want canceled", c.method, err)
		}
		if effect.IsUnknownOutcome(err) != c.unknown {
			t.Errorf("%s: err %v, unknown outcome want %v", c.method, err, c.unknown)
		}
		cancel()
	}
}

func TestDialCauses(t *testing.T) {
	u := mustURL("http://nowhere.invalid/")
	err := transportError(context.Background(), &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}}, false, "POST", u)
	var e *effect.Error
	if !errors.As(err, &e) || e.Class != effect.DependencyUnavailable || !strings.Contains(e.Msg, "name not resolved") {
		t.Fatalf("err %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"120":                           120 * time.Second,
		" 5 ":                           5 * time.Second,
		"-3":                            0,
		"1.5":                           0,
		"99999999999":                   0,
		"Fri, 02 Jan 2026 03:05:05 GMT": 60 * time.Second,
		"Fri, 02 Jan 2026 03:00:00 GMT": 0,
		"tomorrow":                      0,
	} {
		if got := RetryAfter(v, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestHonoursKeys(t *testing.T) {
	var x effect.Executor = New(policy.Empty())
	k, ok := x.(effect.KeyHonouring)
	if !ok || !k.HonoursKeys() || x.Name() != "http" || x.Version() == "" {
		t.Fatal("the http executor must declare that it honours keys")
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// classOf returns the class an error names and whether it is an unknown
// outcome; an unknown outcome must never also be an *effect.Error.
func classOf(t *testing.T, err error) (effect.ErrorClass, bool) {
	t.Helper()
	var e *effect.Error
	var ue *effect.UnknownError
	isErr, isUnknown := errors.As(err, &e), errors.As(err, &ue)
	if isErr && effect.IsUnknownOutcome(err) {
		t.Fatalf("%v: an unknown outcome that is also an *effect.Error would be retried by class", err)
	}
	switch {
	case isErr:
		return e.Class, false
	case isUnknown:
		return ue.Class, true
	}
	return 0, effect.IsUnknownOutcome(err)
}
