// Package httpfx is the built-in http effect (SPECS.md §23.2): one HTTP
// request per attempt to a host the policy allows, its body streamed from
// an input artifact, the step's idempotency key sent as Idempotency-Key, and
// the answer's status, headers and body stored as artifacts.
//
// Every failure is classified (§23.4): the host is checked against the
// policy before any connection; a failure before a connection carried any
// byte of the request is retryable or final by its cause; a failure after
// it, for a method that is not idempotent (POST, PATCH, ...), is an unknown
// outcome, because the server may have acted on it. The executor never
// retries and never follows a redirect (a 3xx answer is observed as is, so
// a redirect cannot lead to a host the policy does not allow).
package httpfx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/internal/fxutil"
	"github.com/amduat/amduat/plan/effect/policy"
)

// Kind is the effect kind of this executor.
const Kind = "http"

// Version is recorded in every receipt of this executor; it changes when
// what the executor stores for the same answer changes.
const Version = "amduat-httpfx/1"

// maxHeaderBytes bounds the response's status line and headers.
const maxHeaderBytes = 1 << 20

// Params are the http effect's params (§23.2).
type Params struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body names the input whose bytes are the request body; empty: none.
	Body string `json:"body,omitempty"`
	// Expect lists the statuses that are a success; empty: 200-299.
	Expect []int `json:"expect,omitempty"`
	// TimeoutMillis may lower, never raise, the policy's time limit.
	TimeoutMillis int64 `json:"timeout_ms,omitempty"`
}

// Executor performs http effects under a policy.
type Executor struct {
	pol *policy.Policy
	// tlsConfig is nil in production (the system roots); tests set it.
	tlsConfig *tls.Config
}

// New returns the http executor under pol.
func New(pol *policy.Policy) *Executor { return &Executor{pol: pol} }

// WithTLSConfig returns a copy of x that uses cfg for https connections
// (a test's own certificate authority).
func (x *Executor) WithTLSConfig(cfg *tls.Config) *Executor {
	return &Executor{pol: x.pol, tlsConfig: cfg}
}

func (x *Executor) Name() string    { return Kind }
func (x *Executor) Version() string { return Version }

// HonoursKeys is true: every request carries the step's key as
// Idempotency-Key, and a provider that implements the header deduplicates
// by it. Whether a given provider does is the plan author's claim, which
// the step's effect class and gate already express.
func (x *Executor) HonoursKeys() bool { return true }

var _ effect.KeyHonouring = (*Executor)(nil)

// forbidden are the request headers a plan may not set: the transport owns
// them, or the executor sets them itself.
var forbidden = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true,
	"Proxy-Connection": true, "Proxy-Authorization": true, "Idempotency-Key": true,
}

// idempotent methods may be sent again without changing the world more
// than once (RFC 9110 §9.2.2).
func idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func validValue(s string) bool {
	for _, c := range []byte(s) {
		if c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

// parse checks params and returns the request's pieces. Every failure is
// final: InvalidInput for the request, PolicyDenied for the host.
func (x *Executor) parse(req effect.Request) (Params, *url.URL, *policy.Host, error) {
	var p Params
	if err := fxutil.DecodeParams(Kind, req.Params, &p); err != nil {
		return p, nil, nil, err
	}
	if !validToken(p.Method) || strings.ToUpper(p.Method) != p.Method {
		return p, nil, nil, fxutil.Invalid("http params: method %q is not an upper-case token", p.Method)
	}
	if p.Method == "CONNECT" {
		return p, nil, nil, fxutil.Invalid("http params: method CONNECT is not allowed")
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return p, nil, nil, fxutil.Invalid("http params: url: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return p, nil, nil, fxutil.Invalid("http params: url %q: scheme must be http or https", p.URL)
	}
	if u.Host == "" || u.Opaque != "" {
		return p, nil, nil, fxutil.Invalid("http params: url %q has no host", p.URL)
	}
	if u.User != nil {
		return p, nil, nil, fxutil.Invalid("http params: url %q holds credentials; credentials never belong in a plan", p.URL)
	}
	if u.Fragment != "" || strings.Contains(p.URL, "#") {
		return p, nil, nil, fxutil.Invalid("http params: url %q has a fragment", p.URL)
	}
	for name, v := range p.Headers {
		if !validToken(name) {
			return p, nil, nil, fxutil.Invalid("http params: headers: %q is not a header name", name)
		}
		if forbidden[http.CanonicalHeaderKey(name)] || strings.HasPrefix(http.CanonicalHeaderKey(name), "Proxy-") {
			return p, nil, nil, fxutil.Invalid("http params: headers: %q is set by the executor or the transport", name)
		}
		if !validValue(v) {
			return p, nil, nil, fxutil.Invalid("http params: headers: %q: value holds CR, LF or NUL", name)
		}
	}
	for i, s := range p.Expect {
		if s < 100 || s > 999 {
			return p, nil, nil, fxutil.Invalid("http params: expect[%d]: %d is not a status", i, s)
		}
	}
	if p.TimeoutMillis < 0 {
		return p, nil, nil, fxutil.Invalid("http params: timeout_ms: %d is negative", p.TimeoutMillis)
	}
	if !validValue(req.Key) {
		return p, nil, nil, fxutil.Invalid("http: idempotency key holds CR, LF or NUL")
	}
	host, err := x.pol.AllowHTTP(u.Scheme, u.Hostname(), u.Port())
	if err != nil {
		return p, nil, nil, &effect.Error{Class: effect.PolicyDenied, Msg: err.Error()}
	}
	return p, u, host, nil
}

// Call performs one attempt. Its outputs are "body", "headers" and
// "status" (§23.2). A failure by status also returns the stored answer in
// the observation, so that a receipt can point at what the server said.
func (x *Executor) Call(ctx context.Context, st effect.Store, req effect.Request) (effect.Observation, error) {
	obs := effect.Observation{Start: time.Now()}
	p, u, host, err := x.parse(req)
	if err != nil {
		obs.End = time.Now()
		return obs, err
	}
	limit := time.Duration(host.TimeoutMillis) * time.Millisecond
	if p.TimeoutMillis > 0 && time.Duration(p.TimeoutMillis)*time.Millisecond < limit {
		limit = time.Duration(p.TimeoutMillis) * time.Millisecond
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	var body io.ReadCloser = http.NoBody
	var size int64
	if p.Body != "" {
		in, ok := fxutil.FindInput(req, p.Body)
		if !ok {
			obs.End = time.Now()
			return obs, fxutil.Invalid("http params: body: no input named %q", p.Body)
		}
		rc, hdr, err := st.Fetch(cctx, in.Ref)
		if err != nil {
			obs.End = time.Now()
			return obs, &effect.Error{Class: effect.DependencyUnavailable, Msg: fmt.Sprintf("http: body input %q (%s): %v", p.Body, in.Ref, err)}
		}
		body, size = rc, int64(hdr.Size)
		if size == 0 {
			rc.Close()
			body = http.NoBody
		}
	}
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { sent.Store(true) }}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(cctx, trace), p.Method, u.String(), body)
	if err != nil {
		body.Close()
		obs.End = time.Now()
		return obs, fxutil.Invalid("http: %v", err)
	}
	hreq.ContentLength = size
	for name, v := range p.Headers {
		hreq.Header.Set(name, v)
	}
	if hreq.Header.Get("User-Agent") == "" {
		hreq.Header.Set("User-Agent", Version)
	}
	if req.Key != "" {
		hreq.Header.Set("Idempotency-Key", req.Key)
	}
	tr := &http.Transport{
		Proxy:                  nil, // the policy names the hosts reached; no proxy from the environment
		DialContext:            (&net.Dialer{}).DialContext,
		DisableKeepAlives:      true, // a fresh connection: the transport never replays a request on a reused one
		DisableCompression:     true, // the body is stored as the server sent it
		MaxResponseHeaderBytes: maxHeaderBytes,
		TLSClientConfig:        x.tlsConfig,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(hreq)
	if err != nil {
		obs.End = time.Now()
		return obs, transportError(ctx, err, sent.Load(), p.Method, u)
	}
	defer resp.Body.Close()

	statusRef, err := fxutil.PutBytes(ctx, st, []byte(strconv.Itoa(resp.StatusCode)))
	if err != nil {
		obs.End = time.Now()
		return obs, storeError(err, p.Method)
	}
	hj, err := canonicalHeaders(resp.Header)
	if err != nil {
		obs.End = time.Now()
		return obs, err
	}
	headersRef, err := fxutil.PutBytes(ctx, st, hj)
	if err != nil {
		obs.End = time.Now()
		return obs, storeError(err, p.Method)
	}
	partial := []effect.Output{{Name: "headers", Ref: headersRef}, {Name: "status", Ref: statusRef}}
	bodyRef, n, err := fxutil.Spool(cctx, st, resp.Body, host.MaxResponseBytes)
	obs.End = time.Now()
	if err != nil {
		obs.Outputs = partial
		if errors.Is(err, fxutil.ErrLimit) {
			return obs, &effect.Error{Class: effect.LimitExceeded, Msg: fmt.Sprintf("http %s %s: response body longer than the policy's max_response_bytes %d", p.Method, u.Redacted(), host.MaxResponseBytes)}
		}
		// The answer began: the server has the request. A broken body
		// leaves the observation incomplete, not the outcome unknown, for
		// an idempotent method; for any other, a person decides.
		return obs, transportError(ctx, fmt.Errorf("reading the body after %d bytes: %w", n, err), true, p.Method, u)
	}
	obs.Outputs = []effect.Output{{Name: "body", Ref: bodyRef}, partial[0], partial[1]}
	if expected(p.Expect, resp.StatusCode) {
		return obs, nil
	}
	return obs, statusError(resp, p.Method, u, obs.End)
}

func expected(list []int, status int) bool {
	if len(list) == 0 {
		return status >= 200 && status <= 299
	}
	for _, s := range list {
		if s == status {
			return true
		}
	}
	return false
}

// canonicalHeaders encodes a response's headers as canonical JSON: an object
// from lower-case names, sorted, to arrays of values in the order received.
func canonicalHeaders(h http.Header) ([]byte, error) {
	m := make(map[string][]string, len(h))
	for name, vs := range h {
		lower := strings.ToLower(name)
		m[lower] = append(m[lower], vs...)
	}
	b, err := fxutil.Canonical(m)
	if err != nil {
		return nil, fmt.Errorf("http: encoding headers: %w", err)
	}
	return b, nil
}

// statusError classifies an answer whose status the params do not expect.
func statusError(resp *http.Response, method string, u *url.URL, now time.Time) error {
	code := resp.StatusCode
	msg := fmt.Sprintf("http %s %s: status %d", method, u.Redacted(), code)
	e := &effect.Error{Msg: msg}
	switch {
	case code == http.StatusTooManyRequests:
		e.Class = effect.RateLimited
		e.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), now)
	case code == http.StatusRequestTimeout:
		e.Class = effect.NetworkTimeout
	case code >= 500 && code <= 599:
		e.Class = effect.ProviderUnavailable
		e.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), now)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		e.Class = effect.AuthForbidden
	default:
		// Other 4xx, and 1xx or 3xx answers the params did not expect.
		e.Class = effect.InvalidInput
	}
	return e
}

// RetryAfter parses a Retry-After value (RFC 9110 §10.2.3): delay-seconds,
// or an HTTP-date taken relative to now. It returns 0 for an absent or
// malformed value and for a date in the past.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil || !t.After(now) {
		return 0
	}
	return t.Sub(now).Truncate(time.Second)
}

func storeError(err error, method string) error {
	// The server answered: the outcome is known, only the observation could
	// not be kept. A non-idempotent call is not repeated for it.
	if idempotent(method) {
		return fmt.Errorf("http: storing the answer: %w", err)
	}
	return fmt.Errorf("http: storing the answer of a %s: %w (%w)", method, err, effect.ErrUnknownOutcome)
}

// transportError classifies a failure of the exchange itself (§23.4).
func transportError(parent context.Context, err error, sent bool, method string, u *url.URL) error {
	where := fmt.Sprintf("http %s %s", method, u.Redacted())
	timeout := errors.Is(err, context.DeadlineExceeded)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		timeout = true
	}
	canceled := parent.Err() != nil && errors.Is(parent.Err(), context.Canceled)
	if !sent {
		switch {
		case canceled:
			return fmt.Errorf("%s: canceled before connecting: %w", where, parent.Err())
		case timeout:
			return &effect.Error{Class: effect.NetworkTimeout, Msg: fmt.Sprintf("%s: no connection within the time limit: %v", where, err)}
		}
		return &effect.Error{Class: effect.DependencyUnavailable, Msg: fmt.Sprintf("%s: %s: %v", where, dialCause(err), err)}
	}
	class := effect.ProviderUnavailable
	if timeout {
		class = effect.NetworkTimeout
	}
	if idempotent(method) {
		if canceled {
			return fmt.Errorf("%s: canceled: %w", where, parent.Err())
		}
		return &effect.Error{Class: class, Msg: fmt.Sprintf("%s: after the request was sent: %v", where, err)}
	}
	return effect.Unknown(class, fmt.Sprintf("%s: after the request was (possibly) sent: %v", where, err))
}

func dialCause(err error) string {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		return "name not resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	}
	return "cannot connect"
}
