package aslutil

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/amduat/amduat/asl"
)

// Filter selects artifacts by type tag and size for List and Usage. The
// zero Filter selects everything.
type Filter struct {
	// Tag, when HasTag, keeps only artifacts whose header carries this tag.
	// Untagged, when set, keeps only untagged artifacts (HasTag must be
	// false then).
	HasTag   bool
	Tag      asl.TypeTag
	Untagged bool
	// MinSize and MaxSize bound the payload size; MaxSize 0 means no bound.
	MinSize uint64
	MaxSize uint64
	HasMax  bool
}

// Match reports whether in passes the filter.
func (f Filter) Match(in asl.Info) bool {
	if f.HasTag && (!in.HasTag || in.Tag != f.Tag) {
		return false
	}
	if f.Untagged && in.HasTag {
		return false
	}
	if in.Size < f.MinSize {
		return false
	}
	if f.HasMax && in.Size > f.MaxSize {
		return false
	}
	return true
}

// List visits, in ascending ReferenceBytes order, every stored artifact
// that f selects, streaming: memory does not grow with the store (SPECS.md
// §16.3 ls).
func List(ctx context.Context, e asl.Enumerator, f Filter, fn func(asl.Info) error) error {
	return e.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
		if !f.Match(in) {
			return nil
		}
		return fn(in)
	})
}

// TagUsage is one row of a Usage summary: the artifacts of one type tag.
type TagUsage struct {
	HasTag bool
	Tag    asl.TypeTag
	// Count is the number of artifacts, Bytes the sum of their payload
	// sizes, StoredBytes the sum of the stored sizes of those whose backend
	// reported one, and UnknownStored counts the others.
	Count         uint64
	Bytes         uint64
	StoredBytes   uint64
	UnknownStored uint64
}

// UsageSummary is what Usage reports: totals and one row per type tag,
// untagged first, then tags in ascending order.
type UsageSummary struct {
	Total  TagUsage
	ByTag  []TagUsage
	ByHash map[asl.HashID]uint64
}

func (u *TagUsage) add(in asl.Info) {
	u.Count++
	u.Bytes += in.Size
	if in.StoredSize >= 0 {
		u.StoredBytes += uint64(in.StoredSize)
	} else {
		u.UnknownStored++
	}
}

// Usage sums counts and logical and stored bytes by type tag over every
// artifact f selects, in one streaming pass (memory: one row per distinct
// tag).
func Usage(ctx context.Context, e asl.Enumerator, f Filter) (UsageSummary, error) {
	rows := map[[2]uint64]*TagUsage{}
	sum := UsageSummary{ByHash: map[asl.HashID]uint64{}}
	err := List(ctx, e, f, func(in asl.Info) error {
		k := [2]uint64{0, uint64(in.Tag)}
		if in.HasTag {
			k[0] = 1
		} else {
			k[1] = 0
		}
		r := rows[k]
		if r == nil {
			r = &TagUsage{HasTag: in.HasTag, Tag: in.Tag}
			if !in.HasTag {
				r.Tag = 0
			}
			rows[k] = r
		}
		r.add(in)
		sum.Total.add(in)
		sum.ByHash[in.Ref.HashID()]++
		return nil
	})
	if err != nil {
		return UsageSummary{}, err
	}
	for _, r := range rows {
		sum.ByTag = append(sum.ByTag, *r)
	}
	sort.Slice(sum.ByTag, func(i, j int) bool {
		a, b := sum.ByTag[i], sum.ByTag[j]
		if a.HasTag != b.HasTag {
			return !a.HasTag
		}
		return a.Tag < b.Tag
	})
	return sum, nil
}

// MinPrefixDigits is the shortest abbreviated reference ResolvePrefix
// accepts: 8 hex digits (the 4 of the hash id and 4 of the digest).
const MinPrefixDigits = 8

// MaxCandidates bounds how many matches an ambiguous prefix reports.
const MaxCandidates = 10

// ErrAmbiguous is wrapped by the error of a prefix that names more than
// one stored artifact.
var ErrAmbiguous = errors.New("ambiguous reference prefix")

// AmbiguousError lists (up to MaxCandidates of) the references an
// abbreviated reference matches.
type AmbiguousError struct {
	Prefix     string
	Candidates []asl.Reference
	More       bool // more than MaxCandidates matched
}

func (e *AmbiguousError) Error() string {
	s := make([]string, len(e.Candidates))
	for i, c := range e.Candidates {
		s[i] = c.String()
	}
	if e.More {
		return fmt.Sprintf("%q matches more than %d stored artifacts: %s, …", e.Prefix, len(e.Candidates), strings.Join(s, ", "))
	}
	return fmt.Sprintf("%q matches %d stored artifacts: %s", e.Prefix, len(e.Candidates), strings.Join(s, ", "))
}

func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// IsAbbreviated reports whether s looks like an abbreviated reference for
// ResolvePrefix: lowercase hex of at least MinPrefixDigits digits,
// optionally followed by "...", "…" or "...SUFFIX"/"…SUFFIX" (SUFFIX: hex
// digits the reference must end with), that is not itself a complete
// reference text.
func IsAbbreviated(s string) bool {
	p, suf, ok := splitAbbrev(s)
	if !ok || len(p) < MinPrefixDigits {
		return false
	}
	if full, ok := fullTextLen(p); ok && len(p)+len(suf) >= full {
		return false // as long as a whole reference: not an abbreviation
	}
	if suf == "" && !strings.ContainsAny(s, ".…") {
		if _, err := asl.ParseReference(s); err == nil {
			return false
		}
	}
	return true
}

// fullTextLen is the length of the text form of a reference under the hash
// id that the prefix p spells, when that id is registered.
func fullTextLen(p string) (int, bool) {
	b, err := hex.DecodeString(p[:4])
	if err != nil {
		return 0, false
	}
	alg, ok := asl.LookupHash(asl.HashID(uint16(b[0])<<8 | uint16(b[1])))
	if !ok {
		return 0, false
	}
	return 4 + 2*alg.DigestLen, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func splitAbbrev(s string) (prefix, suffix string, ok bool) {
	prefix = s
	if i := strings.Index(s, "..."); i >= 0 {
		prefix, suffix = s[:i], s[i+3:]
	} else if i := strings.Index(s, "…"); i >= 0 {
		prefix, suffix = s[:i], s[i+len("…"):]
	}
	if !isHex(prefix) || !isHex(suffix) {
		return "", "", false
	}
	return prefix, suffix, true
}

// ResolvePrefix resolves an abbreviated reference (IsAbbreviated's forms)
// to the one stored artifact it names. It seeks with Enumerate to just
// below the smallest reference the prefix admits and reads only the
// references that start with the prefix (at most MaxCandidates+1 of them
// are kept), so it costs one seek plus one read per match; when the prefix
// is too short to spell a hash id it scans from the start. No match wraps
// asl.ErrNotFound; more than one returns an *AmbiguousError.
func ResolvePrefix(ctx context.Context, e asl.Enumerator, s string) (asl.Reference, error) {
	prefix, suffix, ok := splitAbbrev(s)
	if !ok || len(prefix) < MinPrefixDigits {
		return asl.Reference{}, fmt.Errorf("reference prefix %q: want at least %d lowercase hex digits", s, MinPrefixDigits)
	}
	even := prefix[:len(prefix)&^1]
	pb, _ := hex.DecodeString(even)
	after := seekBelow(pb)
	var matches []asl.Reference
	more := false
	errStop := errors.New("stop")
	err := e.Enumerate(ctx, after, func(in asl.Info) error {
		t := in.Ref.String()
		if !strings.HasPrefix(t, prefix) {
			if t > prefix {
				return errStop
			}
			return nil
		}
		if !strings.HasSuffix(t[len(prefix):], suffix) {
			return nil
		}
		if len(matches) == MaxCandidates {
			more = true
			return errStop
		}
		matches = append(matches, in.Ref)
		return nil
	})
	if err != nil && err != errStop {
		return asl.Reference{}, fmt.Errorf("resolving %q: %w", s, err)
	}
	switch {
	case len(matches) == 0:
		return asl.Reference{}, fmt.Errorf("%q matches no stored artifact: %w", s, asl.ErrNotFound)
	case len(matches) > 1:
		return asl.Reference{}, &AmbiguousError{Prefix: s, Candidates: matches, More: more}
	}
	return matches[0], nil
}

// seekBelow returns a Reference strictly below every reference whose
// ReferenceBytes start with pb, as high as cheaply possible: pb padded to
// the hash's digest length and decremented by one. It falls back to the
// zero Reference (the start) when no such Reference can be built.
func seekBelow(pb []byte) asl.Reference {
	if len(pb) < 2 {
		return asl.Reference{}
	}
	id := asl.HashID(uint16(pb[0])<<8 | uint16(pb[1]))
	alg, ok := asl.LookupHash(id)
	if !ok || len(pb)-2 > alg.DigestLen {
		return asl.Reference{}
	}
	d := make([]byte, alg.DigestLen)
	copy(d, pb[2:])
	// Decrement d as a big-endian number; if it is all zero, nothing of this
	// hash id lies below, so start just below the id (the start).
	i := len(d) - 1
	for i >= 0 && d[i] == 0 {
		d[i] = 0xff
		i--
	}
	if i < 0 {
		return asl.Reference{}
	}
	d[i]--
	ref, err := asl.NewReference(id, d)
	if err != nil {
		return asl.Reference{}
	}
	return ref
}
