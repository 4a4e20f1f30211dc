package conformance

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/amduat/amduat/enc"
)

// Check verifies the implementation against one vector of its kind. It
// returns nil when the implementation produces exactly what the vector
// expects, and otherwise an error saying what differs.
type Check func(ctx context.Context, v Vector) error

var (
	regMu  sync.RWMutex
	checks = map[string]Check{}
)

// Register installs the check for a vector kind. It is meant to be called
// from init functions; registering a kind twice panics.
func Register(kind string, c Check) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := checks[kind]; dup {
		panic("conformance: kind registered twice: " + kind)
	}
	checks[kind] = c
}

// Kinds lists the registered kinds in sorted order.
func Kinds() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(checks))
	for k := range checks {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lookupCheck(kind string) (Check, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	c, ok := checks[kind]
	return c, ok
}

// Result is the outcome of one vector.
type Result struct {
	ID     string `json:"id"`
	File   string `json:"file"`
	Kind   string `json:"kind"`
	Spec   string `json:"spec"`
	Pass   bool   `json:"pass"`
	Reason string `json:"reason,omitempty"` // why it failed; empty on pass
}

// Summary counts the outcomes of a run.
type Summary struct {
	Files  int `json:"files"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// String is the closing line of a run: "N passed, N failed".
func (s Summary) String() string { return fmt.Sprintf("%d passed, %d failed", s.Passed, s.Failed) }

// Run loads the vector files of fsys and checks every vector in order,
// calling report (if non-nil) once per vector. A vector whose kind has no
// registered check fails. The error is non-nil only when the files cannot be
// loaded or ctx is cancelled; failing vectors are counted in the Summary.
func Run(ctx context.Context, fsys fs.FS, report func(Result)) (Summary, error) {
	files, err := Load(fsys)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Files: len(files)}
	for _, f := range files {
		for _, v := range f.Vectors {
			if err := ctx.Err(); err != nil {
				return sum, err
			}
			res := Result{ID: v.ID, File: f.Name, Kind: v.Kind, Spec: v.Spec, Pass: true}
			if err := runOne(ctx, v); err != nil {
				res.Pass = false
				res.Reason = oneLine(err.Error())
				sum.Failed++
			} else {
				sum.Passed++
			}
			if report != nil {
				report(res)
			}
		}
	}
	return sum, nil
}

// RunDir is Run over the vector files in directory dir.
func RunDir(ctx context.Context, dir string, report func(Result)) (Summary, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return Summary{}, err
	}
	if !st.IsDir() {
		return Summary{}, fmt.Errorf("%s is not a directory", dir)
	}
	return Run(ctx, os.DirFS(dir), report)
}

func runOne(ctx context.Context, v Vector) (err error) {
	c, ok := lookupCheck(v.Kind)
	if !ok {
		return fmt.Errorf("unknown kind %q", v.Kind)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check panicked: %v", p)
		}
	}()
	return c(ctx, v)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Reject is the "reject" member of an expectation: the input must be refused.
// Field and Offset are those of the enc.DecodeError the decoder reports (the
// offset counts bytes from the start of the input). Offset is absent when the
// rejection is not a byte-level decode error (for example a malformed text
// form); Class, when present, names the error class the rejection belongs to
// ("ERR_INTEGRITY").
type Reject struct {
	Field  string `json:"field"`
	Offset *int   `json:"offset,omitempty"`
	Class  string `json:"class,omitempty"`
}

// RejectOf describes err as a Reject, for generators: the field and offset
// of the enc.DecodeError it wraps, or fallbackField without offset when it
// wraps none; Class is the first of classes whose sentinel err wraps.
func RejectOf(err error, fallbackField string, classes ...ClassErr) *Reject {
	r := &Reject{Field: fallbackField}
	var de *enc.DecodeError
	if errors.As(err, &de) {
		off := de.Offset
		r.Field, r.Offset = de.Field, &off
	}
	for _, c := range classes {
		if errors.Is(err, c.Err) {
			r.Class = c.Name
			break
		}
	}
	return r
}

// ClassErr pairs an error class name used in vectors with its sentinel.
type ClassErr struct {
	Name string
	Err  error
}

// CheckReject verifies that err is the rejection want describes: err is
// non-nil; when want has an Offset, err wraps an enc.DecodeError with that
// field and offset; when it has none, err wraps no enc.DecodeError; when want
// has a Class, err wraps the matching sentinel from classes.
func CheckReject(err error, want *Reject, classes ...ClassErr) error {
	if err == nil {
		return fmt.Errorf("accepted, want rejection at %s", want.where())
	}
	var de *enc.DecodeError
	hasDE := errors.As(err, &de)
	switch {
	case want.Offset != nil && !hasDE:
		return fmt.Errorf("rejected with %q, want a decode error at %s", err, want.where())
	case want.Offset != nil && (de.Field != want.Field || de.Offset != *want.Offset):
		return fmt.Errorf("rejected at %s@%d (%v), want %s", de.Field, de.Offset, err, want.where())
	case want.Offset == nil && hasDE:
		return fmt.Errorf("rejected at %s@%d (%v), want a rejection of the %s without byte offset", de.Field, de.Offset, err, want.Field)
	}
	if want.Class != "" {
		found := false
		for _, c := range classes {
			if c.Name == want.Class {
				found = true
				if !errors.Is(err, c.Err) {
					return fmt.Errorf("rejected with %q, which is not %s", err, want.Class)
				}
			}
		}
		if !found {
			return fmt.Errorf("vector names unknown error class %q", want.Class)
		}
	}
	return nil
}

func (r *Reject) where() string {
	if r.Offset == nil {
		return r.Field
	}
	return fmt.Sprintf("%s@%d", r.Field, *r.Offset)
}
