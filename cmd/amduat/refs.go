package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
)

// refReason turns a reference parse error into a plain statement of what is
// wrong, without the error-class word (a malformed argument is a usage
// error, not damaged data).
func refReason(err error) string {
	msg := err.Error()
	msg = strings.TrimSuffix(msg, ": "+asl.ErrIntegrity.Error())
	msg = strings.Replace(msg, "malformed encoding: ", "", 1)
	return msg
}

// badRefErr is the usage error of a REF argument that is not a reference.
func badRefErr(s string, err error) error {
	msg := refReason(err)
	if !strings.HasPrefix(msg, "reference ") {
		msg = fmt.Sprintf("reference %q: %s", s, msg)
	}
	if len(s) >= 4 && len(s) < 68 && len(s)%2 == 0 && isLowerHex(s) {
		msg += fmt.Sprintf(" (an abbreviated reference needs at least %d hex digits)", aslutil.MinPrefixDigits)
	}
	return usageErr(errors.New("bad argument: " + msg))
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// parseRef parses a REF argument. A complete text form parses without the
// store; an abbreviated one (a unique hex prefix of at least 8 digits,
// optionally with "..."/"…" and a suffix, as in the README) is resolved
// against the store, which is opened here and handed to the command's own
// openStore. Malformed text and an ambiguous prefix are usage errors.
// TREE:path (a tree's reference, full or abbreviated, then a path inside
// it, SPECS.md §19.10) is resolved through the store to the reference of
// the entry the path names (resolveTreePath).
func (a *app) parseRef(s string) (asl.Reference, error) {
	if treeArg, path, ok := strings.Cut(s, ":"); ok {
		root, err := a.parseRef(treeArg)
		if err != nil {
			return asl.Reference{}, err
		}
		if a.early == nil {
			st, err := a.openStoreReadOnly()
			if err != nil {
				return asl.Reference{}, err
			}
			a.early = st
		}
		return resolveTreePath(a.context(), a.early, s, root, path)
	}
	ref, perr := asl.ParseReference(s)
	if perr == nil {
		return ref, nil
	}
	if !aslutil.IsAbbreviated(s) {
		return asl.Reference{}, badRefErr(s, perr)
	}
	if a.early == nil {
		st, err := a.openStoreReadOnly()
		if err != nil {
			return asl.Reference{}, err
		}
		a.early = st
	}
	return a.resolveAbbrev(a.early, s)
}

// parseRefIn is parseRef for a command that holds the store already (the
// batch modes reading references from standard input).
func (a *app) parseRefIn(st asl.Enumerator, s string) (asl.Reference, error) {
	if treeArg, path, ok := strings.Cut(s, ":"); ok {
		f, isFetcher := st.(asl.Fetcher)
		if !isFetcher {
			return asl.Reference{}, usagef("bad argument: %q: TREE:path cannot be resolved here", s)
		}
		root, err := a.parseRefIn(st, treeArg)
		if err != nil {
			return asl.Reference{}, err
		}
		return resolveTreePath(a.context(), f, s, root, path)
	}
	ref, perr := asl.ParseReference(s)
	if perr == nil {
		return ref, nil
	}
	if !aslutil.IsAbbreviated(s) {
		return asl.Reference{}, badRefErr(s, perr)
	}
	return a.resolveAbbrev(st, s)
}

func (a *app) resolveAbbrev(st asl.Enumerator, s string) (asl.Reference, error) {
	ref, err := aslutil.ResolvePrefix(a.context(), st, s)
	var amb *aslutil.AmbiguousError
	switch {
	case errors.As(err, &amb):
		return asl.Reference{}, usageErr(fmt.Errorf("bad argument: %w", err))
	case errors.Is(err, asl.ErrNotFound):
		return asl.Reference{}, fail(exitNotFound, s, fmt.Errorf("no stored artifact has this prefix: %w", asl.ErrNotFound))
	case err != nil:
		return asl.Reference{}, failAuto(s, err)
	}
	return ref, nil
}

func (a *app) parseRefs(args []string) ([]asl.Reference, error) {
	refs := make([]asl.Reference, len(args))
	for i, s := range args {
		r, err := a.parseRef(s)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	return refs, nil
}

// takeEarlyStore hands over a store opened while resolving abbreviated
// references, if any.
func (a *app) takeEarlyStore() backend {
	s := a.early
	a.early = nil
	return s
}
