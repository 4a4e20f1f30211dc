// Package effect holds the boundary through which the world enters a plan
// (SPECS.md §23): an Executor performs one attempt of one effect request,
// reading its inputs from a store and writing what it observed back into
// it. Exec_DAG never imports this package; the plan layer above the surface
// (package plan) decides when an attempt may be made, records a receipt for
// it and never calls again once a successful receipt exists.
package effect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/amduat/amduat/asl"
)

// Class is an effect step's declared effect class (seed 004): what calling
// it may do to the world. It decides modes and gates, never the call.
type Class uint8

const (
	ReadOnly       Class = 1 // observes the world, changes nothing (an HTTP GET)
	ProduceOutcome Class = 2 // produces something private to the caller (a draft, a local file)
	ExternalSend   Class = 3 // changes the world outside (a POST, a message, a payment)
)

// String returns the class's name as plans write it.
func (c Class) String() string {
	switch c {
	case ReadOnly:
		return "read_only"
	case ProduceOutcome:
		return "produce_outcome"
	case ExternalSend:
		return "external_send"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// ErrorClass is the taxonomy of seed 004 §7.5 for a failed attempt. The
// retryable classes may succeed if tried again later; the final ones never
// will, and a plan never retries them.
type ErrorClass uint8

const (
	// Retryable classes.
	NetworkTimeout        ErrorClass = 1 // the call did not answer in time
	RateLimited           ErrorClass = 2 // the provider asked to slow down (HTTP 429)
	ProviderUnavailable   ErrorClass = 3 // a temporary provider error (HTTP 5xx, 503)
	DependencyUnavailable ErrorClass = 4 // something the call needs is not there yet (connection refused, DNS)
	// Final classes.
	PolicyDenied  ErrorClass = 16 // the policy forbids the host, command or executor
	InvalidInput  ErrorClass = 17 // the request itself is wrong (bad params, HTTP 4xx other than below)
	AuthForbidden ErrorClass = 18 // the provider refused the caller (HTTP 401, 403)
	LimitExceeded ErrorClass = 19 // an output or time limit of the request was passed
	ExecutorFault ErrorClass = 20 // the executor broke its protocol or crashed
)

// Retryable reports whether a failure of class c may be retried.
func (c ErrorClass) Retryable() bool { return c >= 1 && c < 16 }

// String returns the class's name as receipts and the ledger write it.
func (c ErrorClass) String() string {
	switch c {
	case NetworkTimeout:
		return "network_timeout"
	case RateLimited:
		return "rate_limited"
	case ProviderUnavailable:
		return "provider_unavailable"
	case DependencyUnavailable:
		return "dependency_unavailable"
	case PolicyDenied:
		return "policy_denied"
	case InvalidInput:
		return "invalid_input"
	case AuthForbidden:
		return "auth_forbidden"
	case LimitExceeded:
		return "limit_exceeded"
	case ExecutorFault:
		return "executor_fault"
	}
	return fmt.Sprintf("error_class(%d)", uint8(c))
}

// Error is a failed attempt with its class. An Executor returns it (wrapped
// or not) for every failure it can classify; any other error is treated as
// an unknown outcome when the call may have reached the world.
type Error struct {
	Class ErrorClass
	// RetryAfter is the provider's own hint (HTTP Retry-After), zero when none.
	RetryAfter time.Duration
	// Msg is one line naming what failed (the host, the status, the field).
	Msg string
}

func (e *Error) Error() string { return e.Class.String() + ": " + e.Msg }

// ErrUnknownOutcome marks a failure after which the executor cannot say
// whether the world was changed (the connection broke after the request was
// sent). A plan never repeats an external_send that ended this way without
// a person's explicit retry --force.
var ErrUnknownOutcome = errors.New("unknown outcome")

// Input is one artifact handed to an effect, by name.
type Input struct {
	Name string
	Ref  asl.Reference
}

// Request is one attempt of one effect. Kind and Params are what the plan
// declares (Params are canonical JSON, keys sorted); Key is the step's
// idempotency key, the same for every attempt of the same request.
type Request struct {
	Kind    string // "http", "exec", or an executor's name from the policy
	Params  []byte
	Inputs  []Input
	Key     string
	Attempt uint32 // 1 for the first attempt
}

// Output is one named observation, stored in the store before Call returns.
type Output struct {
	Name string
	Ref  asl.Reference
}

// Observation is what a successful attempt saw, every byte of it already
// stored. Start and End are part of the observation, never of a request key.
type Observation struct {
	Outputs    []Output
	Start, End time.Time
}

// Store is what an executor needs of a store: read its inputs, write its
// observations.
type Store interface {
	asl.Fetcher
	asl.Receiver
}

// Executor performs attempts of one kind of effect. Call must not retry on
// its own (the plan retries, by class, and records every attempt), must
// honour ctx's deadline, and must send req.Key to providers that take an
// idempotency key.
type Executor interface {
	// Name is the effect kind this executor performs ("http", "exec", ...).
	Name() string
	// Version names the executor's build; it is recorded in every receipt so
	// that a replay can name a drifted executor.
	Version() string
	Call(ctx context.Context, st Store, req Request) (Observation, error)
}

// KeyHonouring is implemented by an Executor whose provider deduplicates by
// Request.Key (an HTTP server that honours the Idempotency-Key header, an
// external executor whose policy entry says so). After a crash mid-call the
// plan may resume such a step by calling again with the same key; for any
// other executor the step becomes an unknown outcome (SPECS.md §23.6).
type KeyHonouring interface {
	HonoursKeys() bool
}

// IsUnknownOutcome reports whether err says the attempt may or may not have
// reached the world (SPECS.md §23.6).
func IsUnknownOutcome(err error) bool { return errors.Is(err, ErrUnknownOutcome) }

// UnknownError is an unknown outcome that names what happened (a timeout, a
// crash, a protocol violation) by the class it would have had before the
// request left. It wraps ErrUnknownOutcome and deliberately no *Error: a
// plan that classifies failures with errors.As(err, *Error) must never
// retry an unknown outcome by its class.
type UnknownError struct {
	Class ErrorClass
	Msg   string
}

// Unknown returns an *UnknownError for a failure after the request was
// (possibly) delivered.
func Unknown(class ErrorClass, msg string) error { return &UnknownError{Class: class, Msg: msg} }

func (e *UnknownError) Error() string { return "unknown outcome: " + e.Class.String() + ": " + e.Msg }
func (e *UnknownError) Unwrap() error { return ErrUnknownOutcome }

// AppendJSONString appends s as a JSON string in the canonical form of
// SPECS.md §22.4, shared by plan params and every effect's JSON outputs:
// `"` and `\` escaped with a backslash, U+0008, U+0009, U+000A, U+000C,
// U+000D as \b \t \n \f \r, the other controls below U+0020 as \u00xx
// (lowercase hex), every other character as its UTF-8 bytes.
func AppendJSONString(dst []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&15])
			} else {
				dst = append(dst, c)
			}
		}
	}
	return append(dst, '"')
}
