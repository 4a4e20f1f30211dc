package s3store

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transient answers (SPECS.md §6.7, "Retries"). A server that is starting,
// overloaded or briefly failing says so with one of these error codes; the
// request is sound and is sent again after a pause, whatever
// Options.MaxRetries says (MaxRetries bounds the retries of failures to
// reach the server at all: a refused or broken connection).
var transientCodes = map[string]bool{
	// Amazon S3 ("Amazon S3 error best practices": retry InternalError,
	// slow down on SlowDown; the error code list).
	"InternalError":      true, // 500
	"ServiceUnavailable": true, // 503
	"SlowDown":           true, // 503
	"RequestTimeout":     true, // 400 on S3, 503 on MinIO
	// MinIO (cmd/api-errors.go): a server whose object layer, IAM or
	// bucket metadata is still loading after a start, and its throttles.
	"XMinioServerNotInitialized":         true, // 503
	"XMinioIAMNotInitialized":            true, // 503
	"XMinioBucketMetadataNotInitialized": true, // 503
	"SlowDownRead":                       true, // 503
	"SlowDownWrite":                      true, // 503
	"ServerBusy":                         true, // 503
	"TooManyRequests":                    true, // 429
}

// transientStatus: statuses that are transient when the answer carries no
// error code (a HEAD request's answer has no body; a proxy's has no XML).
func transientStatus(status int) bool {
	switch status {
	case http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// transientFor bounds how long one request is retried on transient
// answers: a failure bound for a server that stays unavailable, long
// enough for a server under load to finish starting. (A variable so a
// test can shorten it.)
var transientFor = time.Minute

// unreadableFor bounds the retries of SlowDownRead, MinIO's answer when it
// cannot gather enough readable copies of an object (cmd/api-errors.go:
// errErasureReadQuorum; "Resource requested is unreadable"): a drive
// offline or timing out under load, which passes, or a copy that fails
// its bitrot checks, which does not (on one drive, one damaged copy). The
// code and message are the same for both, so only persistence tells them
// apart: a SlowDownRead still answered after unreadableFor is reported as
// damage (errorf, unreadableCode) without keeping its reader waiting a
// minute.
var unreadableFor = 3 * time.Second

// damagedCode is the error code this transport gives an answer that says
// the object store's stored copy is damaged (see damageAnswer): an
// InternalError whose cause names a checksum or decoding failure, or a
// SlowDownRead that persisted for unreadableFor. The client library
// retries InternalError and SlowDownRead, and 500 and 503, whatever their
// cause, with pauses of up to a second, MaxRetries times: for an answer
// that stays the same, that is seconds spent before reporting damage.
const damagedCode = "XAmduatStoredCopyDamaged"

const (
	// transientFirst and transientCap: the backoff starts at
	// transientFirst and doubles up to transientCap, each pause drawn
	// between half and all of it.
	transientFirst = 50 * time.Millisecond
	transientCap   = 2 * time.Second
	// replayMax: request bodies up to this size are kept so the request
	// can be sent again; a larger body (a part of a large artifact) is
	// sent once, and the client library's own retries (at most
	// MaxRetries) apply to it.
	replayMax = 1 << 20
	// errorBodyMax bounds the error document read to find its code.
	errorBodyMax = 64 << 10
)

// retryTransport sends a request again when the answer is transient, and
// when the object store refuses the connection (a server restarting),
// for up to reachWait.
type retryTransport struct {
	next http.RoundTripper

	reachWait time.Duration
	waitLog   io.Writer  // told once per outage
	waiting   sync.Mutex // guards told
	told      bool       // waitLog was told of an outage not yet over

	// gaveUp holds, by method and URL, the requests this transport
	// stopped retrying, and when: the client library sends such an answer
	// again itself (up to MaxRetries times), and those sends pass through
	// at once, so that a server that stays unavailable costs a minute,
	// not a minute per library retry.
	mu     sync.Mutex
	gaveUp map[string]time.Time
}

func (rt *retryTransport) recentlyGaveUp(key string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	t, ok := rt.gaveUp[key]
	return ok && time.Since(t) < transientFor
}

func (rt *retryTransport) giveUp(key string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.gaveUp == nil || len(rt.gaveUp) >= 1024 {
		rt.gaveUp = map[string]time.Time{}
	}
	rt.gaveUp[key] = time.Now()
}

func (rt *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	replayable := req.Body == nil || req.Body == http.NoBody
	if !replayable && req.ContentLength >= 0 && req.ContentLength <= replayMax {
		b, err := io.ReadAll(io.LimitReader(req.Body, replayMax+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body, replayable = b, true
	}
	key := req.Method + " " + req.URL.String()
	if !replayable || rt.recentlyGaveUp(key) {
		if body != nil {
			r := req.Clone(req.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
			return rt.next.RoundTrip(r)
		}
		return rt.next.RoundTrip(req)
	}
	var start time.Time
	for attempt := 0; ; attempt++ {
		r := req
		if body != nil {
			r = req.Clone(req.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
		resp, err := rt.next.RoundTrip(r)
		if err != nil && refused(err) && rt.reachWait > 0 {
			if attempt == 0 || start.IsZero() {
				start = time.Now()
			}
			if time.Since(start) < rt.reachWait {
				rt.tell(req.URL.Host)
				if werr := pause(req, attempt, rt.reachWait-time.Since(start)); werr != nil {
					return nil, werr
				}
				continue
			}
			return nil, fmt.Errorf("the object store at %s refused connections for %v (--s3-wait): %w", req.URL.Host, rt.reachWait, err)
		}
		if err == nil {
			rt.reached()
		}
		if err != nil || !mayBeTransient(resp.StatusCode) {
			return resp, err
		}
		head, rerr := io.ReadAll(io.LimitReader(resp.Body, errorBodyMax))
		isTransient, code := transient(resp, head)
		if rerr == nil && !isTransient && code == "InternalError" {
			// transient refused it as damage (damagedMessage).
			resp.Body.Close()
			return damageAnswer(resp, head), nil
		}
		if rerr != nil || !isTransient {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
			return resp, nil
		}
		if attempt == 0 {
			start = time.Now()
		}
		bound := transientFor
		if code == "SlowDownRead" {
			bound = unreadableFor
		}
		if attempt > 0 && time.Since(start) >= bound {
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(head))
			if code == "SlowDownRead" {
				return damageAnswer(resp, head), nil
			}
			rt.giveUp(key)
			return resp, nil
		}
		resp.Body.Close()
		if err := pause(req, attempt, bound-time.Since(start)); err != nil {
			return nil, err
		}
	}
}

// pause waits before attempt+1: from transientFirst doubling to
// transientCap, each drawn between half and all of it, and never past left
// (the last attempt at the bound, not a pause past it) or the request's
// context.
func pause(req *http.Request, attempt int, left time.Duration) error {
	wait := min(transientFirst<<min(attempt, 16), transientCap)
	wait = wait/2 + rand.N(wait/2+1)
	if left < wait {
		wait = max(left, 0)
	}
	t := time.NewTimer(wait)
	select {
	case <-req.Context().Done():
		t.Stop()
		return req.Context().Err()
	case <-t.C:
		return nil
	}
}

// refused reports whether err is a refused connection: nothing listens
// at the endpoint (a server stopped or restarting), so the request was
// never received and can be sent again.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// tell says once per outage what the requests wait for.
func (rt *retryTransport) tell(host string) {
	rt.waiting.Lock()
	defer rt.waiting.Unlock()
	if rt.told || rt.waitLog == nil {
		return
	}
	rt.told = true
	fmt.Fprintf(rt.waitLog, "amduat: the object store at %s refuses connections (restarting?): waiting up to %v for it (--s3-wait)\n", host, rt.reachWait)
}

// reached ends an outage told of.
func (rt *retryTransport) reached() {
	rt.waiting.Lock()
	rt.told = false
	rt.waiting.Unlock()
}

// mayBeTransient: statuses whose answer may be transient (S3's
// RequestTimeout is a 400).
func mayBeTransient(status int) bool {
	return status == http.StatusBadRequest || transientStatus(status)
}

// transient reports whether an error answer is transient: its error code
// (from the XML document, or MinIO's x-minio-error-code header when there
// is no body) is one of transientCodes, or it has none and its status is
// transient.
func transient(resp *http.Response, body []byte) (bool, string) {
	code, msg := answerCode(resp, body)
	if code == "InternalError" && damagedMessage(msg) {
		return false, code // damage stays damage however often it is read
	}
	if code != "" {
		return transientCodes[code], code
	}
	return transientStatus(resp.StatusCode), code
}

// damageAnswer rewrites an error answer that reports the object store's
// copy of an object damaged into one the client library does not retry
// (status 422, code damagedCode in the x-minio-error-code header, which
// the library prefers to the document's), keeping the original code and
// message in x-minio-error-desc ("CODE: MESSAGE") for errorf to name.
// head is the answer's body, read already.
func damageAnswer(resp *http.Response, head []byte) *http.Response {
	code, msg := answerCode(resp, head)
	r := *resp
	r.StatusCode = http.StatusUnprocessableEntity
	r.Status = "422 " + http.StatusText(http.StatusUnprocessableEntity)
	r.Header = resp.Header.Clone()
	r.Header.Set("x-minio-error-code", damagedCode)
	r.Header.Set("x-minio-error-desc", code+": "+msg)
	r.Body = io.NopCloser(bytes.NewReader(head))
	return &r
}

// answerCode is the error code and message of an error answer: the XML
// document's, else MinIO's x-minio-error-code and x-minio-error-desc
// headers (a HEAD's answer has no body).
func answerCode(resp *http.Response, body []byte) (code, msg string) {
	code, msg = resp.Header.Get("x-minio-error-code"), strings.Trim(resp.Header.Get("x-minio-error-desc"), `"`)
	if len(bytes.TrimSpace(body)) > 0 {
		var doc struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}
		if xml.Unmarshal(body, &doc) == nil && doc.Code != "" {
			code, msg = doc.Code, doc.Message
		}
	}
	return code, msg
}
