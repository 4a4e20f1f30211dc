package httpstore

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/amduat/amduat/asl"
)

// parseArtifactHeaders reads what the headers of a GET or HEAD of
// /v1/artifacts/REF (SPECS.md §18) claim about the artifact ref: its size
// (contentLength, the parsed Content-Length, which must be known) and its
// type tag (HeaderTypeTag, at most once; absent means untagged). A
// HeaderRef that names another reference is asl.ErrIntegrity; a missing
// length or a malformed header is ErrProtocol.
//
// The header is a claim, not a fact: the caller hashes the body under it
// (asl.VerifyReader), so a size or tag that disagrees with the bytes
// surfaces as asl.ErrIntegrity when the body is read.
func parseArtifactHeaders(h http.Header, contentLength int64, ref asl.Reference) (asl.Header, error) {
	if contentLength < 0 {
		return asl.Header{}, fmt.Errorf("response has no Content-Length: %w", ErrProtocol)
	}
	if vs := h.Values(HeaderRef); len(vs) > 0 {
		if len(vs) > 1 {
			return asl.Header{}, fmt.Errorf("response has %d %s headers: %w", len(vs), HeaderRef, ErrProtocol)
		}
		got, err := asl.ParseReference(strings.TrimSpace(vs[0]))
		if err != nil {
			return asl.Header{}, fmt.Errorf("response %s: %v: %w", HeaderRef, err, ErrProtocol)
		}
		if got != ref {
			return asl.Header{}, fmt.Errorf("response names artifact %s, not the %s requested: %w", got, ref, asl.ErrIntegrity)
		}
	}
	hdr := asl.Header{Size: uint64(contentLength)}
	vs := h.Values(HeaderTypeTag)
	switch len(vs) {
	case 0:
	case 1:
		tag, has, err := ParseTypeTag(strings.TrimSpace(vs[0]))
		if err != nil {
			return asl.Header{}, fmt.Errorf("response: %v: %w", err, ErrProtocol)
		}
		hdr.Tag, hdr.HasTag = tag, has
	default:
		return asl.Header{}, fmt.Errorf("response has %d %s headers: %w", len(vs), HeaderTypeTag, ErrProtocol)
	}
	return hdr, nil
}

// maxRetryAfter bounds the Retry-After the client parses; larger values are
// clamped (and end the retries, see Options.RetryMaxWait).
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter parses a Retry-After value: delay-seconds or an HTTP
// date (RFC 9110 §10.2.3). Anything else, and a date in the past, is zero.
func parseRetryAfter(s string, now time.Time) time.Duration {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(s)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	switch {
	case d <= 0:
		return 0
	case d > maxRetryAfter:
		return maxRetryAfter
	}
	return d
}
