package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
)

// Exit codes (SPECS.md §16). 10-19 are reserved for `amduat pel run`, which
// reports the program's execution status through them, and 20-29 for the
// plan commands that report an execution's status (plan.go).
const (
	exitOK          = 0
	exitNegative    = 1 // a negative answer: has found a missing ref; conformance vectors failed
	exitUsage       = 2 // bad flags or arguments, malformed REF argument
	exitNotFound    = 3 // ERR_NOT_FOUND: no artifact under the reference
	exitIntegrity   = 4 // ERR_INTEGRITY: stored data is damaged (corruption found)
	exitUnsupported = 5 // ERR_UNSUPPORTED: unregistered hash id, unsupported operation
	exitIO          = 6 // I/O or other operational failure
	exitStore       = 7 // no store at --store, or init found one already
	exitInternal    = 8 // internal failure: an operation panicked, a bug, an allocation that failed
	exitInterrupted = 130
)

const exitCodeHelp = `Exit codes:
  0    success
  1    negative answer: has found a missing reference; conformance vectors
       failed; rm refused; pel verify or plan verify found a difference;
       a plan decision refused (approve a step that is not waiting)
  2    usage error: bad flag or argument, malformed reference text, a
       --store URL of an unknown scheme or without a host
  3    not found (ERR_NOT_FOUND)
  4    integrity error (ERR_INTEGRITY): damaged data or store files; verify found corruption
  5    unsupported (ERR_UNSUPPORTED): unregistered hash id
  6    I/O or other operational error; the store is in use by another
       process, or out of space
  7    no store at --store (run amduat init), or --store is a file, or init:
       a store (or anything else) is there already
  8    internal failure (an operation panicked, an allocation failed); nothing was stored
  10-19  reserved for program execution statuses (pel run)
  20-29  reserved for plan execution statuses (plan submit --wait, plan run)
  130  interrupted
  141  (shown by shells) stdout is a pipe whose reader has gone, e.g. | head`

// cliError is a command failure with its exit code and the reference or
// file it concerns.
type cliError struct {
	code    int
	subject string
	err     error
}

func (e *cliError) Error() string { return withSubject(e.subject, e.err) }
func (e *cliError) Unwrap() error { return e.err }

// withSubject prefixes err's message with subject unless the message
// already names it (store errors usually name the reference).
func withSubject(subject string, err error) string {
	msg := err.Error()
	if subject == "" || strings.Contains(msg, subject) {
		return msg
	}
	return subject + ": " + msg
}

// explained is an error whose message says all there is to say while it
// still matches a sentinel with errors.Is (for exit code classification):
// "no store here (…)" rather than "no store here (…): no store".
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// exitStatus ends a command with a code and no error line: the command has
// already printed its result (has with missing refs, verify with failures,
// conformance with failing vectors).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// fail reports err about subject with an explicit exit code.
func fail(code int, subject string, err error) error {
	return &cliError{code: code, subject: subject, err: err}
}

// failAuto reports err about subject with the exit code classify gives.
func failAuto(subject string, err error) error {
	return &cliError{code: classify(err), subject: subject, err: err}
}

// refErr reports a store error about the reference given as arg. A missing
// artifact gets a plain message; other errors keep the store's detail.
func refErr(arg string, err error) error {
	if errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity) {
		return fail(exitNotFound, arg, fmt.Errorf("not stored: %w", asl.ErrNotFound))
	}
	return failAuto(arg, err)
}

// flagValueErr rewrites a bad numeric or duration flag value's error in
// the user's terms ("--max-nodes "-1": want a whole number >= 0") rather
// than the parser's ("strconv.ParseUint: parsing "-1": invalid syntax").
func flagValueErr(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) || ive.GetFlag() == nil {
		return err
	}
	f := ive.GetFlag()
	var want string
	var ne *strconv.NumError
	switch typ := f.Value.Type(); {
	case typ == "duration":
		want = "a duration such as 30s, 5m or 168h"
	case typ == "size":
		want = "a number of bytes that fits a uint64, optionally with K, M, G or T (powers of 1024)"
	case !errors.As(err, &ne):
		return err
	case strings.HasPrefix(typ, "uint"):
		want = "a whole number >= 0"
	case strings.HasPrefix(typ, "int"):
		want = "a whole number"
	case strings.HasPrefix(typ, "float"):
		want = "a number"
	default:
		return err
	}
	if ne != nil && errors.Is(ne.Err, strconv.ErrRange) {
		want += " that fits a " + f.Value.Type()
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, ive.GetValue(), want)
}

// usagef reports a usage error (exit 2).
func usagef(format string, args ...any) error {
	return &cliError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func usageErr(err error) error { return &cliError{code: exitUsage, err: err} }

// classify maps an error to its exit code by the asl and store sentinels.
func classify(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, pel.ErrInternal), isRemoteInternal(err):
		return exitInternal
	case errors.Is(err, asl.ErrIntegrity):
		return exitIntegrity
	case errors.Is(err, asl.ErrNotFound):
		return exitNotFound
	case errors.Is(err, asl.ErrUnsupported):
		return exitUnsupported
	case errors.Is(err, pebblestore.ErrNoStore), errors.Is(err, pebblestore.ErrExists):
		return exitStore
	case errors.Is(err, pebblestore.ErrLocked), errors.Is(err, pebblestore.ErrNoSpace),
		errors.Is(err, pebblestore.ErrReadOnly), errors.Is(err, pebblestore.ErrStale):
		// Operational (SPECS.md §6.6): the store is held by another
		// process, out of space, read-only, or changed under a reader.
		return exitIO
	}
	return exitIO
}

// parseRef parses a REF argument; malformed text is a usage error.
func parseRef(s string) (asl.Reference, error) {
	ref, err := asl.ParseReference(s)
	if err != nil {
		return asl.Reference{}, badRefErr(s, err)
	}
	return ref, nil
}

func parseRefs(args []string) ([]asl.Reference, error) {
	refs := make([]asl.Reference, len(args))
	for i, s := range args {
		r, err := parseRef(s)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}

// minArgs and rangeArgs are cobra argument checks that fail as usage
// errors naming the count wanted and the command's usage line.
func minArgs(n int) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return argCountErr(c, fmt.Sprintf("at least %s", plural(n, "argument")), args)
		}
		return nil
	}
}

func rangeArgs(lo, hi int) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		if len(args) >= lo && len(args) <= hi {
			return nil
		}
		want := fmt.Sprintf("%d to %d arguments", lo, hi)
		switch {
		case hi == 0:
			return argCountErr(c, "no arguments", args)
		case lo == hi:
			want = plural(lo, "argument")
		}
		return argCountErr(c, want, args)
	}
}

// argCountErr: "takes no arguments, got 1 ("x"); usage: amduat init [--hash …]".
func argCountErr(c *cobra.Command, want string, args []string) error {
	got := fmt.Sprint(len(args))
	if len(args) > 0 {
		got += fmt.Sprintf(" (%q)", strings.Join(args, " "))
	}
	return usagef("takes %s, got %s; usage: %s", want, got, c.UseLine())
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// isRemoteInternal reports a server's internal failure of a run (HTTP 500
// "internal", SPECS.md §18.2), which keeps its exit code 8 over the wire.
func isRemoteInternal(err error) bool {
	var he *httpstore.Error
	return errors.As(err, &he) && he.Code == httpstore.CodeInternal
}
