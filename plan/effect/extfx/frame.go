package extfx

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/amduat/amduat/plan/effect"
)

// Protocol is the protocol name both hellos carry (SPECS.md §23.5).
const Protocol = "amduat-executor/1"

// Frame types.
const (
	TypeHello  = "hello"
	TypeCall   = "call"
	TypeResult = "result"
	TypeError  = "error"
)

// ClassUnknownOutcome is the error class an executor sends when it cannot
// say whether the world was changed.
const ClassUnknownOutcome = "unknown_outcome"

// Bounds on fields of an executor's frames.
const (
	maxNameLen    = 64
	maxVersionLen = 256
	maxMessageLen = 4096
	maxOutputs    = 1024
	// maxRetryAfter is one day in milliseconds.
	maxRetryAfter = 86_400_000
)

// Frame is one line of the protocol: a JSON object whose "type" says which
// fields it holds (§23.5). One struct serves every type; Validate says which
// fields each type requires.
type Frame struct {
	Type string `json:"type"`

	// hello (both directions)
	Protocol string `json:"protocol,omitempty"`
	Executor string `json:"executor,omitempty"` // amduat's hello: the policy's name for the executor
	Name     string `json:"name,omitempty"`     // the executor's hello: its own name
	Version  string `json:"version,omitempty"`  // the executor's hello: its build

	// call, result, error
	ID            uint64          `json:"id,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Params        json.RawMessage `json:"params,omitempty"`
	Key           string          `json:"key,omitempty"`
	Attempt       uint32          `json:"attempt,omitempty"`
	TimeoutMillis int64           `json:"timeout_ms,omitempty"`
	Inputs        []Blob          `json:"inputs,omitempty"`

	// result
	Outputs []Blob `json:"outputs,omitempty"`

	// error
	Class            string `json:"class,omitempty"`
	RetryAfterMillis int64  `json:"retry_after_ms,omitempty"`
	Message          string `json:"message,omitempty"`
}

// Blob is one named artifact inside a frame: its bytes in standard base64
// (RFC 4648 §4, padded) and, for inputs, its reference in hex.
type Blob struct {
	Name string `json:"name"`
	Ref  string `json:"ref,omitempty"`
	Data []byte `json:"data"`
}

// ProtocolError is a frame that breaks the protocol.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "protocol violation: " + e.Msg }

func violation(format string, args ...any) error {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// ErrFrameTooLong is a line longer than the frame limit.
var ErrFrameTooLong = errors.New("frame longer than the limit")

// ReadLine reads one frame's line (without its '\n') of at most limit bytes,
// never holding more than limit+1 bytes of it. A stream that ends inside a
// line is a protocol error; one that ends between lines returns io.EOF.
func ReadLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		n := len(line) + len(chunk)
		if err == nil {
			n-- // the '\n'
		}
		if n > limit {
			return nil, fmt.Errorf("%w of %d bytes", ErrFrameTooLong, limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, violation("the stream ended inside a frame after %d bytes", len(line))
		}
		return nil, err
	}
}

// DecodeFrame decodes one line into a frame: one JSON object in UTF-8, no
// field this section does not define, nothing after the object.
func DecodeFrame(line []byte) (*Frame, error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, violation("an empty line")
	}
	if !utf8.Valid(line) {
		return nil, violation("a line that is not UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	var f Frame
	if err := d.Decode(&f); err != nil {
		return nil, violation("not a frame: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, violation("data after the frame's object")
	}
	return &f, nil
}

// DecodeReply decodes and validates a frame an executor sent: a hello, or a
// result or error answering call id (ignored for a hello).
func DecodeReply(line []byte, id uint64) (*Frame, error) {
	f, err := DecodeFrame(line)
	if err != nil {
		return nil, err
	}
	return f, f.ValidateReply(id)
}

// ValidateReply checks a frame from an executor (§23.5.2): only the fields
// of its type, each within its bounds.
func (f *Frame) ValidateReply(id uint64) error {
	if f.Executor != "" || f.Kind != "" || f.Params != nil || f.Key != "" || f.Attempt != 0 || f.TimeoutMillis != 0 || f.Inputs != nil {
		return violation("a %q frame from an executor holds fields of a call", f.Type)
	}
	switch f.Type {
	case TypeHello:
		if f.Protocol != Protocol {
			return violation("hello: protocol %q, want %q", f.Protocol, Protocol)
		}
		if f.Name == "" || len(f.Name) > maxNameLen || !printable(f.Name) {
			return violation("hello: name must be 1-%d printable bytes", maxNameLen)
		}
		if f.Version == "" || len(f.Version) > maxVersionLen || !printable(f.Version) {
			return violation("hello: version must be 1-%d printable bytes", maxVersionLen)
		}
		if f.ID != 0 || f.Outputs != nil || f.Class != "" || f.RetryAfterMillis != 0 || f.Message != "" {
			return violation("hello: fields of another frame")
		}
		return nil
	case TypeResult, TypeError:
		if f.Protocol != "" || f.Name != "" || f.Version != "" {
			return violation("%s: fields of a hello", f.Type)
		}
		if f.ID != id {
			return violation("%s: id %d answers no call (want %d)", f.Type, f.ID, id)
		}
	default:
		return violation("type %q from an executor (want hello, result or error)", f.Type)
	}
	if f.Type == TypeResult {
		if f.Class != "" || f.RetryAfterMillis != 0 || f.Message != "" {
			return violation("result: fields of an error")
		}
		if len(f.Outputs) > maxOutputs {
			return violation("result: %d outputs, at most %d", len(f.Outputs), maxOutputs)
		}
		seen := map[string]bool{}
		for i, o := range f.Outputs {
			if !ValidName(o.Name) {
				return violation("result: outputs[%d]: name %q: want 1-%d bytes of [A-Za-z0-9_.-]", i, o.Name, maxNameLen)
			}
			if seen[o.Name] {
				return violation("result: outputs[%d]: name %q twice", i, o.Name)
			}
			seen[o.Name] = true
			if o.Ref != "" {
				return violation("result: outputs[%d]: an output has no ref", i)
			}
		}
		return nil
	}
	if f.Outputs != nil {
		return violation("error: outputs")
	}
	if _, ok := ParseClass(f.Class); !ok && f.Class != ClassUnknownOutcome {
		return violation("error: class %q is not a class of §23.4", f.Class)
	}
	if f.RetryAfterMillis < 0 || f.RetryAfterMillis > maxRetryAfter {
		return violation("error: retry_after_ms %d: want 0-%d", f.RetryAfterMillis, maxRetryAfter)
	}
	if len(f.Message) > maxMessageLen {
		return violation("error: message of %d bytes, at most %d", len(f.Message), maxMessageLen)
	}
	return nil
}

// ValidName is the rule for output names: 1-64 bytes of [A-Za-z0-9_.-].
func ValidName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

var classes = []effect.ErrorClass{
	effect.NetworkTimeout, effect.RateLimited, effect.ProviderUnavailable, effect.DependencyUnavailable,
	effect.PolicyDenied, effect.InvalidInput, effect.AuthForbidden, effect.LimitExceeded, effect.ExecutorFault,
}

// ParseClass returns the error class named s (its String form).
func ParseClass(s string) (effect.ErrorClass, bool) {
	for _, c := range classes {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}
