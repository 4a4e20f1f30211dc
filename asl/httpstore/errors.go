package httpstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
)

// ErrProtocol marks a response that breaks HTTP API v1 (SPECS.md §18): a
// body that is not the JSON the route promises, a missing Content-Length, a
// listing out of order. It is an operational error, not a store error: a
// response whose bytes or references disagree with what the client hashes
// is asl.ErrIntegrity instead.
var ErrProtocol = errors.New("HTTP API v1 protocol violation")

// ErrClosed: the client was used after Close.
var ErrClosed = errors.New("httpstore: client closed")

// Error is a non-2xx response of the API (SPECS.md §18.2). Its message
// names the method, the URL (never a token), the reference when the request
// concerns one that the URL does not show, the HTTP status and the error
// code, e.g.
//
//	GET http://127.0.0.1:8080/v1/artifacts/0001…: 404 ERR_NOT_FOUND: …
//
// Unwrap maps the codes that name store errors (SPECS.md §6.3) back to the
// asl sentinels: ERR_NOT_FOUND to asl.ErrNotFound; ERR_INTEGRITY,
// digest_mismatch and bad_reference (a malformed reference is an integrity
// error, §5.2) to asl.ErrIntegrity; ERR_UNSUPPORTED to asl.ErrUnsupported.
// Every other code is an operational error that keeps its Status.
type Error struct {
	Method string
	URL    string // without user info; tokens travel in a header only
	// Ref is the reference the request concerns when the URL does not
	// show it (a put, a batch member); zero otherwise.
	Ref    asl.Reference
	Status int
	// Code is the error body's code (the Code* constants); "" when the
	// body was not an API error body (a proxy's page, say).
	Code    string
	Message string
	// RetryAfter is the server's Retry-After, zero when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", e.Method, e.URL)
	if !e.Ref.IsZero() {
		fmt.Fprintf(&b, "%s: ", e.Ref)
	}
	fmt.Fprintf(&b, "%d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	} else if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		b.WriteString(" (set AMDUAT_TOKEN to a bearer token the server accepts)")
	case http.StatusForbidden:
		// The server's message names the missing scope; the hint says so
		// only when it does not.
		if strings.Contains(e.Message, "scope") {
			b.WriteString(" (set AMDUAT_TOKEN to a token that has it)")
		} else {
			b.WriteString(" (the token lacks the scope this request needs; set AMDUAT_TOKEN to a token that has it)")
		}
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Unwrap returns the asl sentinel the code names, or nil.
func (e *Error) Unwrap() error { return sentinel(e.Code) }

func sentinel(code string) error {
	switch code {
	case CodeNotFound:
		return asl.ErrNotFound
	case CodeIntegrity, CodeDigestMismatch, CodeBadReference:
		return asl.ErrIntegrity
	case CodeUnsupported:
		return asl.ErrUnsupported
	}
	return nil
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// parseErrorBody turns an error response's body into a code and a message.
// A body that is not an API error body yields code "" and its first line
// (bounded, valid UTF-8) as the message.
func parseErrorBody(body []byte) (code, msg string) {
	var eb ErrorBody
	if err := json.Unmarshal(body, &eb); err == nil && (eb.Code != "" || eb.Error != "") {
		return eb.Code, clip(eb.Error)
	}
	s := strings.TrimSpace(string(body))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return "", clip(s)
}

// clip bounds a server-supplied message to 512 bytes of valid UTF-8.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= 512 {
		return s
	}
	s = s[:512]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// responseError reads (a bounded part of) a non-2xx response, closes its
// body and returns the *Error that describes it.
func responseError(method, u string, ref asl.Reference, resp *http.Response, now time.Time) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	code, msg := parseErrorBody(body)
	return &Error{
		Method: method, URL: u, Ref: ref, Status: resp.StatusCode,
		Code: code, Message: msg,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), now),
	}
}
