package httpstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/amduat/amduat/asl"
)

// Defaults of Options.
const (
	DefaultRetries      = 4
	DefaultRetryBase    = 100 * time.Millisecond
	DefaultRetryMaxWait = 30 * time.Second
	DefaultBatchBytes   = 64 << 20
	DefaultBatchCount   = 4096
	DefaultPageSize     = 1000
)

// maxJSONResponse bounds a JSON response the client decodes.
const maxJSONResponse = 64 << 20

// Options configures Open. The zero value is valid.
type Options struct {
	// Token is sent as "Authorization: Bearer TOKEN" (SPECS.md §18.1)
	// when not empty. It never appears in an error message.
	Token string
	// HTTPClient carries the requests; nil means a client of the
	// package's own (a clone of http.DefaultTransport, no overall timeout:
	// artifacts stream for as long as they need, bound them with the
	// context). Close closes its idle connections only when it is the
	// package's own.
	HTTPClient *http.Client
	// Retries is how many times an idempotent request is retried after a
	// connection error or a 429 or 503 response: 0 means
	// DefaultRetries, negative means never. A 429 or 503 (the server is
	// busy or restarting: load it asks the client to wait out) is retried
	// beyond Retries while the request's context has a deadline and the
	// next wait ends before it (SPECS.md §18.9).
	Retries int
	// RetryBase is the wait before the first retry; it doubles at each
	// retry, with jitter (a wait lies between half and all of it): 0 means
	// DefaultRetryBase.
	RetryBase time.Duration
	// RetryMaxWait caps one wait: 0 means DefaultRetryMaxWait. A server's
	// Retry-After is honoured when it asks for longer than the backoff; a
	// Retry-After beyond RetryMaxWait ends the retries with the error.
	RetryMaxWait time.Duration
	// BatchBytes and BatchCount bound one POST /v1/artifacts/batch of
	// PutBatch (its frames' bytes, its artifacts): 0 means
	// DefaultBatchBytes (64 MiB) and DefaultBatchCount (4,096); the
	// server's limits (Meta.Limits) lower them further.
	BatchBytes int64
	BatchCount int
	// PageSize is the limit Enumerate and ScanIndex ask for per page: 0
	// means DefaultPageSize, lowered to the server's max_list_limit; at
	// least 2.
	PageSize int
}

// Client is an asl.Store, and a read-only asl.Indexer, over HTTP API v1
// (SPECS.md §18) of an `amduat serve` server. It never trusts the server
// (DESIGN: "a client never trusts what it reads"):
//
//   - Fetch hashes every byte it returns under the requested reference;
//     bytes that do not hash to it, a size or type tag header that
//     disagrees with them, or a body cut short are asl.ErrIntegrity, never
//     wrong bytes (SPECS.md §6.2). Artifacts up to fetchWholeMax are
//     verified before any byte is returned; larger ones stream and fail
//     their final Read.
//   - Put and PutBatch compute every reference themselves and fail with
//     asl.ErrIntegrity when the server acknowledges another one.
//   - Stat, Enumerate and the index routes check that what comes back
//     names what was asked, in the promised order.
//
// What the client cannot check is presence: an artifact the server claims
// to hold (POST /v1/artifacts/missing) is not uploaded again.
//
// Errors wrap asl.ErrNotFound, asl.ErrIntegrity and asl.ErrUnsupported as
// SPECS.md §6.3 says; a non-2xx response is an *Error. Requests are retried
// as Options says, only when they are idempotent (every store request is:
// puts in a content-addressed store are) and their body can be sent again.
// A Client is safe for concurrent use.
type Client struct {
	base   *url.URL // scheme, host and path prefix (no trailing slash)
	token  string
	hc     *http.Client
	ownHC  bool
	meta   Meta
	hash   asl.HashID
	closed atomic.Bool

	retries    int
	noRetry    bool // Options.Retries < 0
	retryBase  time.Duration
	retryMax   time.Duration
	batchBytes int64
	batchCount int
	pageSize   int

	rngMu sync.Mutex
	rng   *rand.Rand
}

var (
	_ asl.Store   = (*Client)(nil)
	_ asl.Indexer = (*Client)(nil)
)

// Open connects to the server at baseURL (e.g. "http://127.0.0.1:8080",
// optionally with a path prefix) and reads GET /v1/meta. It fails, saying
// so, when the URL does not answer as an amduat API v1 server, and with an
// error wrapping asl.ErrUnsupported when the server's default hash is not
// one this client knows.
func Open(ctx context.Context, baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("httpstore: open %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("httpstore: open %q: want an http:// or https:// URL with a host", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("httpstore: open %q: the base URL takes no query or fragment", u.Redacted())
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{
		base: u, token: opts.Token, hc: opts.HTTPClient,
		retries: opts.Retries, retryBase: opts.RetryBase, retryMax: opts.RetryMaxWait,
		batchBytes: opts.BatchBytes, batchCount: opts.BatchCount, pageSize: opts.PageSize,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x616d64756174)),
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		c.hc, c.ownHC = &http.Client{Transport: tr}, true
	}
	switch {
	case c.retries == 0:
		c.retries = DefaultRetries
	case c.retries < 0:
		c.retries, c.noRetry = 0, true
	}
	if c.retryBase <= 0 {
		c.retryBase = DefaultRetryBase
	}
	if c.retryMax <= 0 {
		c.retryMax = DefaultRetryMaxWait
	}
	if c.batchBytes <= 0 {
		c.batchBytes = DefaultBatchBytes
	}
	if c.batchCount <= 0 {
		c.batchCount = DefaultBatchCount
	}
	if c.pageSize <= 0 {
		c.pageSize = DefaultPageSize
	}

	if err := c.DoJSON(ctx, http.MethodGet, PathMeta, true, nil, &c.meta); err != nil {
		c.Close()
		var he *Error
		if !errors.Is(err, ErrProtocol) && (!errors.As(err, &he) || he.Code != "") {
			// No answer, or an API error body: an amduat server that
			// refused (401 …), or none reached.
			return nil, fmt.Errorf("httpstore: open %s: %w", u.Redacted(), err)
		}
		return nil, fmt.Errorf("httpstore: open %s: not an amduat HTTP API v1 server (GET %s failed): %w", u.Redacted(), PathMeta, err)
	}
	if c.meta.API != APIName {
		c.Close()
		return nil, fmt.Errorf("httpstore: open %s: GET %s says api %q, want %q: not an amduat HTTP API v1 server", u.Redacted(), PathMeta, c.meta.API, APIName)
	}
	alg, err := asl.HashByName(c.meta.DefaultHash)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("httpstore: open %s: server's default hash: %w", u.Redacted(), err)
	}
	c.hash = alg.ID
	l := c.meta.Limits
	if l.MaxBatchBytes > 0 {
		c.batchBytes = min(c.batchBytes, l.MaxBatchBytes)
	}
	if l.MaxBatchCount > 0 {
		c.batchCount = min(c.batchCount, l.MaxBatchCount)
	}
	if l.MaxListLimit > 0 {
		c.pageSize = min(c.pageSize, l.MaxListLimit)
	}
	c.pageSize = max(c.pageSize, 2)
	// A frame's length is a u32 (§18.4).
	c.batchBytes = min(c.batchBytes, 1<<31)
	return c, nil
}

// Meta returns what GET /v1/meta said when the client was opened.
func (c *Client) Meta() Meta { return c.meta }

// DefaultHash returns the server's default hash (Meta.DefaultHash).
func (c *Client) DefaultHash() asl.HashID { return c.hash }

// URL returns the base URL, without user info.
func (c *Client) URL() string { return c.base.Redacted() }

// Close releases the client's idle connections. Requests in flight are not
// interrupted (cancel their contexts); later requests fail with ErrClosed.
func (c *Client) Close() error {
	c.closed.Store(true)
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// Request is one API call for Do. Path is relative to the base URL and may
// carry a query ("/v1/pel/run?x=y"); Query is added to it.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	// Body is sent with its Content-Length (none when nil); being in
	// memory, it can be sent again on a retry.
	Body []byte
	// Ref, when not zero, is named in error messages.
	Ref asl.Reference
	// Idempotent requests are retried (Options.Retries). Say so only when
	// sending the request twice has the effect of sending it once.
	Idempotent bool
}

// Do sends r with the client's authentication, retries and error mapping,
// and returns the response when its status is 2xx; the caller closes its
// body. Any other status is an *Error (its body read and closed). It is the
// transport the other routes of API v1 (POST /v1/pel/run, …) share with the
// store methods.
func (c *Client) Do(ctx context.Context, r Request) (*http.Response, error) {
	rq := &request{method: r.Method, path: r.Path, query: r.Query, header: r.Header, ref: r.Ref, idempotent: r.Idempotent}
	if r.Body != nil {
		rq.setBytes(r.Body)
	}
	return c.do(ctx, rq)
}

// DoJSON sends in as a JSON body (none when in is nil) to path with method
// and decodes a 2xx JSON response into out (the body is discarded when out
// is nil). idempotent is Request.Idempotent. A response that is not the
// JSON out expects is ErrProtocol; errors are as Do's.
func (c *Client) DoJSON(ctx context.Context, method, path string, idempotent bool, in, out any) error {
	rq := &request{method: method, path: path, idempotent: idempotent, header: http.Header{}}
	rq.header.Set("Accept", ContentTypeJSON)
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", method, c.redact(path, nil), err)
		}
		rq.setBytes(b)
		rq.header.Set("Content-Type", ContentTypeJSON)
	}
	return c.doJSON(ctx, rq, out)
}

func (c *Client) doJSON(ctx context.Context, rq *request, out any) error {
	resp, err := c.do(ctx, rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONResponse))
		return c.bodyErr(rq, err)
	}
	if err := decodeJSON(resp.Body, out); err != nil {
		return fmt.Errorf("%s %s: %w", rq.method, c.redact(rq.path, rq.query), err)
	}
	return nil
}

// decodeJSON decodes one JSON value (at most maxJSONResponse bytes) and
// nothing after it.
//
// A RefsBody or MissingResponse (a batch put's acknowledgement: thousands
// of references) is read whole and parsed without encoding/json when it
// has exactly the server's form (parseRefsJSON); anything else goes
// through encoding/json as every other answer.
func decodeJSON(r io.Reader, out any) error {
	lr := &io.LimitedReader{R: r, N: maxJSONResponse + 1}
	var key string
	var dst *[]asl.Reference
	switch v := out.(type) {
	case *RefsBody:
		key, dst = "refs", &v.Refs
	case *MissingResponse:
		key, dst = "missing", &v.Missing
	}
	if dst != nil {
		b, err := io.ReadAll(lr)
		if err != nil {
			return fmt.Errorf("reading the JSON response: %w", err)
		}
		if lr.N > 0 {
			if refs, ok := parseRefsJSON(b, key); ok {
				*dst = refs
				return nil
			}
		}
		lr = &io.LimitedReader{R: bytes.NewReader(b), N: lr.N}
	}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("JSON response exceeds %d bytes: %w", maxJSONResponse, ErrProtocol)
		}
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syn) || errors.As(err, &typ) || err == io.EOF || err == io.ErrUnexpectedEOF ||
			errors.Is(err, asl.ErrIntegrity) {
			return fmt.Errorf("response is not the JSON API v1 promises: %v: %w", err, ErrProtocol)
		}
		return fmt.Errorf("reading the JSON response: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("response has data after its JSON value: %w", ErrProtocol)
	}
	return nil
}

// request is one call of do: its body is either replayable (bytes, or a
// function that opens the same bytes again) or a stream sent at most once.
type request struct {
	method     string
	path       string
	query      url.Values
	header     http.Header
	ref        asl.Reference
	idempotent bool

	replay func() io.Reader // a fresh reader of the body, each call
	stream io.Reader        // sent once; retried only if never read
	length int64            // Content-Length of replay or stream
}

func (rq *request) setBytes(b []byte) {
	rq.replay = func() io.Reader { return bytes.NewReader(b) }
	rq.length = int64(len(b))
}

// redact renders the URL of path and query for messages: no user info.
func (c *Client) redact(path string, q url.Values) string {
	u, err := c.url(path, q)
	if err != nil {
		return c.base.Redacted() + path
	}
	return u.Redacted()
}

func (c *Client) url(path string, q url.Values) (*url.URL, error) {
	rel, err := url.Parse(path)
	if err != nil || rel.IsAbs() || rel.Host != "" || !strings.HasPrefix(rel.Path, "/") {
		return nil, fmt.Errorf("path %q: want an absolute path of the API", path)
	}
	u := *c.base
	u.Path = c.base.Path + rel.Path
	u.RawPath = ""
	vs := rel.Query()
	for k, v := range q {
		vs[k] = append(vs[k], v...)
	}
	u.RawQuery = vs.Encode()
	return &u, nil
}

// bodyErr names the request in an error that reading a response body gave.
func (c *Client) bodyErr(rq *request, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: reading the response: %w", rq.method, c.redact(rq.path, rq.query), err)
}

// retryStatus reports whether a status is worth retrying: the server is
// overloaded or restarting (429, 503). A 504 is not: the server sends it
// when a run passed its deterministic wall-time bound, which a retry would
// only pass again.
func retryStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// do sends rq, retrying as Options says, and returns a 2xx response.
func (c *Client) do(ctx context.Context, rq *request) (*http.Response, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	u, err := c.url(rq.path, rq.query)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rq.method, err)
	}
	shown := u.Redacted()
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, rq.method, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", rq.method, shown, err)
		}
		for k, v := range rq.header {
			req.Header[k] = v
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		req.Header.Set("User-Agent", "amduat-httpstore/1")
		var once *onceBody
		switch {
		case rq.replay != nil && rq.length == 0:
			req.Body, req.ContentLength = http.NoBody, 0
		case rq.replay != nil:
			req.Body = io.NopCloser(rq.replay())
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(rq.replay()), nil }
			req.ContentLength = rq.length
		case rq.stream != nil && rq.length == 0:
			req.Body, req.ContentLength = http.NoBody, 0
		case rq.stream != nil:
			once = &onceBody{r: rq.stream}
			req.Body, req.ContentLength = once, rq.length
		}
		// canRetry detaches a streamed body that was never read, so that
		// the next attempt may send it instead. Past Retries attempts, only
		// a busy server (busy) under a context deadline is tried again:
		// wait then ends the retries before the deadline.
		canRetry := func(busy bool) bool {
			if !rq.idempotent || c.noRetry {
				return false
			}
			if attempt >= c.retries {
				if _, ok := ctx.Deadline(); !ok || !busy {
					return false
				}
			}
			return once == nil || !once.detach()
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			if ctx.Err() != nil {
				return nil, c.opErr(rq, shown, ctx.Err())
			}
			if rerr := once.failure(); rerr != nil {
				// The caller's reader failed (or broke its header's
				// promise): that is the error, not the connection's.
				return nil, c.opErr(rq, shown, rerr)
			}
			if !canRetry(false) {
				return nil, c.opErr(rq, shown, err)
			}
			if werr := c.wait(ctx, attempt, 0); werr != nil {
				return nil, c.opErr(rq, shown, werr)
			}
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		apiErr := responseError(rq.method, shown, rq.ref, resp, time.Now())
		if !retryStatus(resp.StatusCode) || !canRetry(true) {
			return nil, apiErr
		}
		if apiErr.RetryAfter > c.retryMax {
			return nil, apiErr
		}
		if werr := c.wait(ctx, attempt, apiErr.RetryAfter); werr != nil {
			return nil, fmt.Errorf("%w (while waiting to retry: %w)", apiErr, werr)
		}
	}
}

func (c *Client) opErr(rq *request, shown string, err error) error {
	if !rq.ref.IsZero() && !strings.Contains(shown, rq.ref.String()) {
		return fmt.Errorf("%s %s: %s: %w", rq.method, shown, rq.ref, err)
	}
	return fmt.Errorf("%s %s: %w", rq.method, shown, err)
}

// wait sleeps before retry attempt+1: RetryBase·2^attempt, capped at
// RetryMaxWait, jittered to between half and all of it, and at least
// retryAfter. It returns early with the context's error, and at once with
// context.DeadlineExceeded when the wait would end past the context's
// deadline (the retry could not be sent in time).
func (c *Client) wait(ctx context.Context, attempt int, retryAfter time.Duration) error {
	d := c.retryBase
	for i := 0; i < attempt && d < c.retryMax; i++ {
		d *= 2
	}
	d = min(d, c.retryMax)
	c.rngMu.Lock()
	d = d/2 + time.Duration(c.rng.Int64N(int64(d/2)+1))
	c.rngMu.Unlock()
	d = max(d, retryAfter)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Errorf("a retry in %s would pass the deadline: %w", d.Round(time.Millisecond), context.DeadlineExceeded)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errDetached ends a Read of a body whose request was given up for a retry.
var errDetached = errors.New("request abandoned for a retry")

// onceBody is a streamed request body that can be sent at most once. If a
// request fails before its transport read anything, detach makes any
// later Read of this attempt fail, so the next attempt can send the
// stream from its start. It never closes the caller's reader.
type onceBody struct {
	mu       sync.Mutex
	r        io.Reader
	started  bool
	detached bool
	err      error // the first error of r other than io.EOF
}

func (b *onceBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.detached {
		return 0, errDetached
	}
	b.started = true
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *onceBody) Close() error { return nil }

// failure returns the first error of the caller's reader (nil for a nil b).
func (b *onceBody) failure() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// detach reports whether the body was read, and stops it being read.
func (b *onceBody) detach() (started bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.detached = true
	return b.started
}
