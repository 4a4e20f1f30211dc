package httpstore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/amduat/amduat/asl"
)

// Routes of HTTP API v1 that the store client uses (SPECS.md §18). The
// server registers the same constants.
const (
	PathMeta      = "/v1/meta"
	PathArtifacts = "/v1/artifacts"            // POST: put one; GET: list
	PathArtifact  = "/v1/artifacts/"           // GET, HEAD: PathArtifact + REF
	PathBatch     = "/v1/artifacts/batch"      // POST: framed batch (§18.4)
	PathMissing   = "/v1/artifacts/missing"    // POST: which refs are absent
	PathBatchRead = "/v1/artifacts/batch-read" // POST: many small artifacts in one answer (§18.4)
	PathIndex     = "/v1/index/"               // GET: PathIndex + SPACE [+ "/" + KEYHEX]
)

// Headers of API v1.
const (
	// HeaderTypeTag carries an artifact's type tag: "0x" and 1 to 8 hex
	// digits on a request, exactly "0x%08x" on a response; absent means
	// untagged.
	HeaderTypeTag = "X-Amduat-Type-Tag"
	// HeaderExpectRef, on a put, is the reference the client computed; the
	// server refuses the put with 422 digest_mismatch when the bytes do not
	// hash to it, and stores nothing.
	HeaderExpectRef = "X-Amduat-Expect-Ref"
	// HeaderRef, on a response, names the artifact the body belongs to.
	HeaderRef = "X-Amduat-Ref"
	// HeaderVerify, on a GET of a whole artifact, with the value
	// VerifyClient, says that the client checks the payload's digest
	// itself: the server may then stream a large artifact checking each
	// chunk but not the whole digest (SPECS.md §18.4).
	HeaderVerify = "X-Amduat-Verify"
	// VerifyClient is the value of HeaderVerify.
	VerifyClient = "client"
)

// Media types of API v1.
const (
	ContentTypeArtifact  = "application/vnd.amduat.artifact"            // ArtifactBytes (§3.1)
	ContentTypeBatch     = "application/vnd.amduat.artifact-batch"      // frames (§18.4)
	ContentTypeBatchRead = "application/vnd.amduat.artifact-batch-read" // batch-read entries (§18.4)
	ContentTypeJSON      = "application/json"
	ContentTypeOctets    = "application/octet-stream"
)

// Error codes of the error body {"error": MESSAGE, "code": CODE} (§18.2).
// The first three name the store errors of SPECS.md §6.3; a client maps them
// back to asl.ErrNotFound, asl.ErrIntegrity and asl.ErrUnsupported.
const (
	CodeNotFound        = "ERR_NOT_FOUND"
	CodeIntegrity       = "ERR_INTEGRITY"
	CodeUnsupported     = "ERR_UNSUPPORTED"
	CodeBadRequest      = "bad_request"
	CodeBadReference    = "bad_reference"
	CodeDigestMismatch  = "digest_mismatch"
	CodeLengthRequired  = "length_required"
	CodeTooLarge        = "too_large"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeTooManyRequests = "too_many_requests"
	CodeUnavailable     = "unavailable"
	CodeTimeout         = "timeout"
	CodeNoSpace         = "no_space"
	CodeIO              = "io"
	CodeInternal        = "internal" // a run's internal failure (SPECS.md §12.8); nothing stored
	CodeNoRoute         = "no_route"
	CodeMethod          = "method_not_allowed"
	CodeRangeNotSatisf  = "range_not_satisfiable"
)

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// PutResponse answers POST /v1/artifacts.
type PutResponse struct {
	Ref  asl.Reference `json:"ref"`
	Size uint64        `json:"size"`
}

// RefsBody is the request of POST /v1/artifacts/missing and the response of
// POST /v1/artifacts/batch: references in order.
type RefsBody struct {
	Refs []asl.Reference `json:"refs"`
}

// MissingResponse answers POST /v1/artifacts/missing: the absent references,
// in request order, each once per occurrence in the request.
type MissingResponse struct {
	Missing []asl.Reference `json:"missing"`
}

// InfoJSON is the stat object (GET /v1/artifacts/REF?format=info, list
// entries); the same fields as `amduat stat --json` (SPECS.md §16.3).
type InfoJSON struct {
	Ref         asl.Reference `json:"ref"`
	Size        uint64        `json:"size"`
	TypeTag     *uint32       `json:"type_tag"`
	StoredSize  int64         `json:"stored_size"`
	Compression string        `json:"compression"`
}

// NewInfoJSON renders in.
func NewInfoJSON(in asl.Info) InfoJSON {
	j := InfoJSON{Ref: in.Ref, Size: in.Size, StoredSize: in.StoredSize, Compression: in.Compression}
	if in.HasTag {
		t := uint32(in.Tag)
		j.TypeTag = &t
	}
	return j
}

// Info converts j back.
func (j InfoJSON) Info() asl.Info {
	in := asl.Info{Ref: j.Ref, StoredSize: j.StoredSize, Compression: j.Compression}
	in.Size = j.Size
	if j.TypeTag != nil {
		in.Tag, in.HasTag = asl.TypeTag(*j.TypeTag), true
	}
	return in
}

// ListResponse answers GET /v1/artifacts?after=REF&limit=N: at most N
// artifacts in ascending ReferenceBytes order after REF; Next is the last
// one when more may follow, else absent.
type ListResponse struct {
	Artifacts []InfoJSON     `json:"artifacts"`
	Next      *asl.Reference `json:"next,omitempty"`
}

// IndexValue answers GET /v1/index/SPACE/KEYHEX.
type IndexValue struct {
	Value string `json:"value"` // lowercase hex
}

// IndexEntryJSON is one entry of an index scan.
type IndexEntryJSON struct {
	Key   string `json:"key"`   // lowercase hex
	Value string `json:"value"` // lowercase hex
}

// IndexScan answers GET /v1/index/SPACE?prefix=HEX&after=HEX&limit=N:
// entries in ascending key order; Next is the last key when more may
// follow.
type IndexScan struct {
	Entries []IndexEntryJSON `json:"entries"`
	Next    string           `json:"next,omitempty"`
}

// HashJSON describes one registered hash in Meta.
type HashJSON struct {
	ID        uint16 `json:"id"`
	Name      string `json:"name"`
	DigestLen int    `json:"digest_len"`
}

// Limits are the server's bounds, reported in Meta (§18.3).
type Limits struct {
	MaxArtifactBytes  int64 `json:"max_artifact_bytes"`
	MaxBatchBytes     int64 `json:"max_batch_bytes"`
	MaxBatchCount     int   `json:"max_batch_count"`
	MaxJSONBytes      int64 `json:"max_json_bytes"`
	MaxConcurrentRuns int   `json:"max_concurrent_runs"`
	RunTimeoutMillis  int64 `json:"run_timeout_ms"`
	MaxListLimit      int   `json:"max_list_limit"`
}

// Meta answers GET /v1/meta.
type Meta struct {
	API         string     `json:"api"` // "amduat/v1"
	Version     string     `json:"version"`
	Hashes      []HashJSON `json:"hashes"`
	DefaultHash string     `json:"default_hash"`
	SchemeRef   string     `json:"scheme_ref"`
	Limits      Limits     `json:"limits"`
	// Scopes lists what the caller's token allows ("read", "write", "run",
	// "admin"); all four when the server has no authentication.
	Scopes []string `json:"scopes"`
}

// APIName is Meta.API for this version of the API.
const APIName = "amduat/v1"

// FormatTypeTag renders a header for HeaderTypeTag ("" when untagged).
func FormatTypeTag(h asl.Header) string {
	if !h.HasTag {
		return ""
	}
	return fmt.Sprintf("0x%08x", uint32(h.Tag))
}

// ParseTypeTag parses a HeaderTypeTag value: "" is untagged, else "0x" or
// "0X" and 1 to 8 hex digits of either case (SPECS.md §18.4).
func ParseTypeTag(s string) (tag asl.TypeTag, has bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok {
		digits, ok = strings.CutPrefix(s, "0X")
	}
	if !ok || len(digits) == 0 || len(digits) > 8 {
		return 0, false, fmt.Errorf("%s %q: want 0x and 1 to 8 hex digits", HeaderTypeTag, s)
	}
	v, err := strconv.ParseUint(digits, 16, 32)
	if err != nil {
		return 0, false, fmt.Errorf("%s %q: want 0x and 1 to 8 hex digits", HeaderTypeTag, s)
	}
	return asl.TypeTag(v), true, nil
}

// minFrame is the length of the smallest ArtifactBytes: has_type_tag (1)
// and bytes_len (8).
const minFrame = 9

// AppendFrame appends one batch frame (§18.4): frame_len (u32, big-endian)
// followed by the artifact's canonical ArtifactBytes, frame_len bytes long.
func AppendFrame(dst []byte, a asl.Artifact) []byte {
	n := a.Header().AppendHeader(nil)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(n)+len(a.Bytes)))
	dst = append(dst, n...)
	return append(dst, a.Bytes...)
}

// FrameLen is the number of bytes AppendFrame appends for a.
func FrameLen(a asl.Artifact) int64 {
	n := int64(4 + 1 + 8 + len(a.Bytes))
	if a.HasTag {
		n += 4
	}
	return n
}

// ErrFrame marks a malformed batch body.
var ErrFrame = errors.New("malformed batch frame")

// ErrBatchTooLarge marks a batch body beyond its count or byte bound.
var ErrBatchTooLarge = errors.New("batch too large")

// ReadFrames decodes a batch body (§18.4) from r: frames until the end of
// the input. It refuses, before allocating for them, a frame shorter than 9
// bytes, a frame whose length passes maxBytes in total, and a frame past
// the maxCount-th; a body that ends inside a frame, and ArtifactBytes that
// do not decode strictly or whose bytes_len disagrees with frame_len, are
// ErrFrame. Errors name the frame index and its byte offset.
func ReadFrames(r io.Reader, maxCount int, maxBytes int64) ([]asl.Artifact, error) {
	return decodeFrames(readerFrames{r}, maxCount, maxBytes)
}

// DecodeFrames decodes a batch body held whole in b, with ReadFrames'
// bounds, rejections and errors. The artifacts' bytes alias b (one
// allocation for the whole batch, none per frame): b must not change while
// they are in use.
func DecodeFrames(b []byte, maxCount int, maxBytes int64) ([]asl.Artifact, error) {
	return decodeFrames(&sliceFrames{b}, maxCount, maxBytes)
}

// frameSource yields a batch body's pieces with io.ReadFull's errors: io.EOF
// when nothing is left, io.ErrUnexpectedEOF when fewer bytes than asked are.
type frameSource interface {
	frameLen(p *[4]byte) error
	frame(n int64) ([]byte, error)
}

type readerFrames struct{ r io.Reader }

func (s readerFrames) frameLen(p *[4]byte) error     { _, err := io.ReadFull(s.r, p[:]); return err }
func (s readerFrames) frame(n int64) ([]byte, error) { return readFrame(s.r, n) }

type sliceFrames struct{ b []byte }

func (s *sliceFrames) frameLen(p *[4]byte) error {
	if len(s.b) == 0 {
		return io.EOF
	}
	if copy(p[:], s.b) < 4 {
		return io.ErrUnexpectedEOF
	}
	s.b = s.b[4:]
	return nil
}

func (s *sliceFrames) frame(n int64) ([]byte, error) {
	if n > int64(len(s.b)) {
		return nil, io.ErrUnexpectedEOF
	}
	p := s.b[:n:n]
	s.b = s.b[n:]
	return p, nil
}

func decodeFrames(src frameSource, maxCount int, maxBytes int64) ([]asl.Artifact, error) {
	var (
		arts  []asl.Artifact
		off   int64
		lenb  [4]byte
		total int64
	)
	for i := 0; ; i++ {
		err := src.frameLen(&lenb)
		if err == io.EOF {
			return arts, nil
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("frame %d at offset %d: body ends inside frame_len: %w", i, off, ErrFrame)
			}
			return nil, fmt.Errorf("frame %d at offset %d: %w", i, off, err)
		}
		flen := int64(binary.BigEndian.Uint32(lenb[:]))
		switch {
		case flen < minFrame:
			return nil, fmt.Errorf("frame %d at offset %d: frame_len %d is below the 9 bytes of the smallest ArtifactBytes: %w", i, off, flen, ErrFrame)
		case i >= maxCount:
			return nil, fmt.Errorf("frame %d at offset %d: more than %d artifacts in one batch: %w", i, off, maxCount, ErrBatchTooLarge)
		case total+flen > maxBytes:
			return nil, fmt.Errorf("frame %d at offset %d: frame_len %d passes the batch bound of %d bytes: %w", i, off, flen, maxBytes, ErrBatchTooLarge)
		}
		buf, err := src.frame(flen)
		if err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return nil, fmt.Errorf("frame %d at offset %d: body ends inside a frame of %d bytes: %w", i, off, flen, ErrFrame)
			}
			return nil, fmt.Errorf("frame %d at offset %d: %w", i, off, err)
		}
		a, err := asl.DecodeArtifact(buf)
		if err != nil {
			return nil, fmt.Errorf("frame %d at offset %d: %v: %w", i, off+4, err, ErrFrame)
		}
		arts = append(arts, a)
		total += flen
		off += 4 + flen
	}
}

// frameAllocStep bounds what readFrame allocates ahead of the bytes that
// arrive: a frame_len claims a size, the body has to deliver it.
const frameAllocStep = 1 << 20

// readFrame reads the n bytes of a frame. Memory grows with the bytes
// received, not with the claim of frame_len, so a short body claiming a
// large frame costs at most frameAllocStep.
func readFrame(r io.Reader, n int64) ([]byte, error) {
	if n <= frameAllocStep {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf := make([]byte, 0, frameAllocStep)
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, min(int64(cap(buf)), n-int64(len(buf))))...)[:len(buf)]
		}
		m, err := io.ReadFull(r, buf[len(buf):min(int64(cap(buf)), n)])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// IndexKeyPath is the path of GET /v1/index/SPACE/KEYHEX.
func IndexKeyPath(space string, key []byte) string {
	return PathIndex + space + "/" + hex.EncodeToString(key)
}

// ValidSpace reports whether space may appear in an index path: 1 to 64
// characters of [a-z0-9._-].
func ValidSpace(space string) bool {
	if len(space) == 0 || len(space) > 64 {
		return false
	}
	for i := 0; i < len(space); i++ {
		c := space[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Statuses of a batch-read entry (SPECS.md §18.4): each entry is the status
// byte, and for ReadPresent a frame (AppendFrame) of the artifact.
const (
	ReadPresent     byte = 0 // a frame follows
	ReadNotFound    byte = 1 // not stored
	ReadTooLarge    byte = 2 // stored, but beyond the answer's byte budget: fetch it alone
	ReadDamaged     byte = 3 // the store found it damaged (ERR_INTEGRITY)
	ReadUnsupported byte = 4 // an unregistered hash id (ERR_UNSUPPORTED)
)

// AppendRefsJSON appends {"KEY":["REF",…]}, the bytes encoding/json gives
// for RefsBody (key "refs") or MissingResponse (key "missing"), written
// without reflection; a nil refs is [] (the server never answers null).
// key must need no JSON escaping.
func AppendRefsJSON(dst []byte, key string, refs []asl.Reference) []byte {
	dst = append(dst, `{"`...)
	dst = append(dst, key...)
	dst = append(dst, `":[`...)
	for i, r := range refs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = hex.AppendEncode(dst, r.Bytes())
		dst = append(dst, '"')
	}
	return append(dst, "]}"...)
}

// parseRefText is asl.ParseReference of text, decoding the hex digits of a
// reference of up to 64 bytes on the stack (ParseReference allocates the
// string and its decoded bytes: two of the three allocations of each
// acknowledged reference).
func parseRefText(text []byte) (asl.Reference, error) {
	var raw [64]byte
	if len(text) < 4 || len(text)%2 != 0 || len(text) > 2*len(raw) {
		return asl.ParseReference(string(text))
	}
	for _, c := range text {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return asl.ParseReference(string(text))
		}
	}
	n, err := hex.Decode(raw[:], text)
	if err != nil {
		return asl.ParseReference(string(text))
	}
	return asl.DecodeReference(raw[:n])
}

// parseRefsJSON reads b when it is exactly AppendRefsJSON's form for key,
// followed by nothing but JSON whitespace, with every reference valid;
// ok is false for anything else, which the caller then decodes with
// encoding/json (whose answer, error or value, stands). On the form it
// accepts it gives what encoding/json gives, without its per-byte scan.
func parseRefsJSON(b []byte, key string) (refs []asl.Reference, ok bool) {
	head := `{"` + key + `":[`
	if !bytes.HasPrefix(b, []byte(head)) {
		return nil, false
	}
	b = b[len(head):]
	refs = []asl.Reference{}
	for len(b) > 0 && b[0] != ']' {
		if len(refs) > 0 {
			if b[0] != ',' {
				return nil, false
			}
			b = b[1:]
		}
		if len(b) == 0 || b[0] != '"' {
			return nil, false
		}
		end := bytes.IndexByte(b[1:], '"')
		if end < 0 {
			return nil, false
		}
		text := b[1 : 1+end]
		if bytes.IndexByte(text, '\\') >= 0 {
			return nil, false
		}
		r, err := parseRefText(text)
		if err != nil {
			return nil, false
		}
		refs = append(refs, r)
		b = b[2+end:]
	}
	if !bytes.HasPrefix(b, []byte("]}")) {
		return nil, false
	}
	for _, c := range b[2:] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, false
		}
	}
	return refs, true
}
