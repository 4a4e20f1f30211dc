package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
)

// httpError is an error with its HTTP status and API error code.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, httpstore.CodeBadRequest, fmt.Sprintf(format, args...)}
}

// bodyError marks a failure to read the request body: the client's
// fault (a short body, a disconnect, an idle timeout), never the store's.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// classify maps an error to its status and code (SPECS.md §18.2).
func classify(err error) (int, string) {
	var he *httpError
	var me *http.MaxBytesError
	var be *bodyError
	switch {
	case errors.As(err, &he):
		return he.status, he.code
	case errors.As(err, &me):
		return http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge
	case errors.Is(err, errDigestMismatch):
		return http.StatusUnprocessableEntity, httpstore.CodeDigestMismatch
	case errors.As(err, &be):
		if errors.Is(err, errIdle) || errors.Is(err, context.DeadlineExceeded) {
			return http.StatusRequestTimeout, httpstore.CodeTimeout
		}
		return http.StatusBadRequest, httpstore.CodeBadRequest
	case errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity):
		return http.StatusNotFound, httpstore.CodeNotFound
	case errors.Is(err, asl.ErrIntegrity):
		return http.StatusInternalServerError, httpstore.CodeIntegrity
	case errors.Is(err, asl.ErrUnsupported):
		return http.StatusNotImplemented, httpstore.CodeUnsupported
	case errors.Is(err, enc.ErrMalformed):
		return http.StatusBadRequest, httpstore.CodeBadRequest
	case errors.Is(err, syscall.ENOSPC):
		return http.StatusInsufficientStorage, httpstore.CodeNoSpace
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, httpstore.CodeTimeout
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, httpstore.CodeUnavailable
	case errors.Is(err, pel.ErrInternal):
		return http.StatusInternalServerError, httpstore.CodeInternal
	}
	return http.StatusInternalServerError, httpstore.CodeIO
}

// writeError writes err as the JSON error body.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	h := w.Header()
	for _, k := range []string{"ETag", "Cache-Control", "Content-Length", "Content-Range", httpstore.HeaderTypeTag, httpstore.HeaderRef} {
		if k == "Content-Range" && status == http.StatusRequestedRangeNotSatisfiable {
			continue // "bytes */SIZE" (RFC 9110 §15.5.17, SPECS.md §18.2)
		}
		h.Del(k)
	}
	h.Set("Content-Type", httpstore.ContentTypeJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	b, _ := json.Marshal(httpstore.ErrorBody{Error: oneLine(err.Error()), Code: code})
	w.Write(append(b, '\n'))
}

// writeJSON writes v with status 200.
func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding response: %w", err)
	}
	return writeJSONBytes(w, append(b, '\n'))
}

func writeJSONBytes(w http.ResponseWriter, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", httpstore.ContentTypeJSON)
	h.Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
}
