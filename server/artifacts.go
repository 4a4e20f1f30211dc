package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/pel"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, struct {
		Status string `json:"status"`
	}{"ok"})
}

func (s *Server) meta(w http.ResponseWriter, r *http.Request) error {
	m := httpstore.Meta{API: httpstore.APIName, Version: s.version, SchemeRef: pel.SchemeRefDAG1.String(),
		Limits: httpstore.Limits{
			MaxArtifactBytes: s.limits.MaxArtifactBytes, MaxBatchBytes: s.limits.MaxBatchBytes,
			MaxBatchCount: s.limits.MaxBatchCount, MaxJSONBytes: s.limits.MaxJSONBytes,
			MaxConcurrentRuns: s.limits.MaxConcurrentRuns, RunTimeoutMillis: s.limits.RunTimeout.Milliseconds(),
			MaxListLimit: s.limits.MaxListLimit,
		}}
	for _, h := range asl.Hashes() {
		m.Hashes = append(m.Hashes, httpstore.HashJSON{ID: uint16(h.ID), Name: h.Short, DigestLen: h.DigestLen})
		if h.ID == s.store.DefaultHash() {
			m.DefaultHash = h.Short
		}
	}
	m.Scopes = []string{}
	if s.auth == nil {
		m.Scopes = scopeSet(0xff).names()
	} else if _, sc, err := s.auth.Check(r.Header.Get("Authorization")); err == nil {
		m.Scopes = sc.names()
	}
	return writeJSON(w, m)
}

// parseRefParam parses the {ref} path segment; malformed text is 400.
func parseRefParam(r *http.Request) (asl.Reference, error) {
	text := r.PathValue("ref")
	ref, err := asl.ParseReference(text)
	if err != nil {
		return asl.Reference{}, &httpError{http.StatusBadRequest, httpstore.CodeBadReference, err.Error()}
	}
	return ref, nil
}

// hashParam resolves the ?hash= query parameter; empty means def.
func hashParam(r *http.Request, def asl.HashID) (asl.HashID, error) {
	name := r.URL.Query().Get("hash")
	if name == "" {
		return def, nil
	}
	alg, err := asl.HashByName(name)
	if err != nil {
		return 0, &httpError{http.StatusBadRequest, httpstore.CodeUnsupported, fmt.Sprintf("hash %q: %v", name, err)}
	}
	return alg.ID, nil
}

// errDigestMismatch: the bytes of a put do not hash to X-Amduat-Expect-Ref.
var errDigestMismatch = errors.New("digest mismatch")

// expectReader hashes a put body as the store reads it, and turns the end
// of a body that does not hash to the expected reference into an error, so
// the store's Put fails and nothing is stored.
type expectReader struct {
	r      io.Reader
	h      *asl.Hasher
	expect asl.Reference
}

func (e *expectReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.h.Write(p[:n])
	if err == io.EOF {
		if got, serr := e.h.Sum(); serr != nil || got != e.expect {
			return n, fmt.Errorf("body hashes to %s, not to %s %s: %w", got, httpstore.HeaderExpectRef, e.expect, errDigestMismatch)
		}
	}
	return n, err
}

// bodyReader reads a request body and marks its failures as the client's.
// Each read extends the connection's read deadline by the idle timeout, so
// a body that keeps flowing may take as long as it needs and a stalled one
// is cut off.
type bodyReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
}

// errIdle marks a body that made no progress within the idle timeout.
var errIdle = errors.New("no progress within the idle timeout")

func (s *Server) body(w http.ResponseWriter, r *http.Request, limit int64) *bodyReader {
	return &bodyReader{r: http.MaxBytesReader(w, r.Body, limit), rc: http.NewResponseController(w), idle: s.limits.IdleTimeout}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		var me *http.MaxBytesError
		if errors.As(err, &me) {
			return n, err
		}
		if isTimeout(err) {
			err = fmt.Errorf("%w: %w", errIdle, err)
		}
		return n, &bodyError{err}
	}
	return n, err
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// idleWriter extends the connection's write deadline before each write.
type idleWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	idle time.Duration
}

func (s *Server) writer(w http.ResponseWriter) *idleWriter {
	return &idleWriter{w: w, rc: http.NewResponseController(w), idle: s.limits.IdleTimeout}
}

func (iw *idleWriter) Write(p []byte) (int, error) {
	iw.rc.SetWriteDeadline(time.Now().Add(iw.idle))
	return iw.w.Write(p)
}

// putArtifact is POST /v1/artifacts (SPECS.md §18.4).
func (s *Server) putArtifact(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength < 0 {
		return &httpError{http.StatusLengthRequired, httpstore.CodeLengthRequired, "POST /v1/artifacts needs Content-Length (the artifact's size)"}
	}
	if r.ContentLength > s.limits.MaxArtifactBytes {
		return &httpError{http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge,
			fmt.Sprintf("artifact of %d bytes is above the server's limit of %d", r.ContentLength, s.limits.MaxArtifactBytes)}
	}
	tag, hasTag, err := httpstore.ParseTypeTag(r.Header.Get(httpstore.HeaderTypeTag))
	if err != nil {
		return badRequest("%v", err)
	}
	hdr := asl.Header{Size: uint64(r.ContentLength), Tag: tag, HasTag: hasTag}
	var expect asl.Reference
	if t := r.Header.Get(httpstore.HeaderExpectRef); t != "" {
		if expect, err = asl.ParseReference(t); err != nil {
			return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, fmt.Sprintf("%s: %v", httpstore.HeaderExpectRef, err)}
		}
	}
	def := s.store.DefaultHash()
	if !expect.IsZero() {
		def = expect.HashID()
	}
	id, err := hashParam(r, def)
	if err != nil {
		return err
	}
	if !expect.IsZero() && expect.HashID() != id {
		return badRequest("%s %s uses hash id 0x%04x, but hash=%s asks for 0x%04x", httpstore.HeaderExpectRef, expect, uint16(expect.HashID()), r.URL.Query().Get("hash"), uint16(id))
	}
	var body io.Reader = s.body(w, r, r.ContentLength)
	if !expect.IsZero() {
		h, err := asl.NewHasher(id, hdr)
		if err != nil {
			return err
		}
		body = &expectReader{r: body, h: h, expect: expect}
	}
	ref, err := s.store.Put(r.Context(), id, hdr, body)
	if err != nil {
		return err
	}
	if indexed(hdr) && int64(hdr.Size) <= s.limits.MaxBatchBytes {
		if err := s.indexStored(r.Context(), id, ref); err != nil {
			return err
		}
	}
	s.metrics.puts.Add(1)
	s.metrics.putBytes.Add(float64(hdr.Size))
	s.evict.touch(ref)
	s.evict.wrote(int64(hdr.Size), false)
	w.Header().Set(httpstore.HeaderRef, ref.String())
	return writeJSON(w, httpstore.PutResponse{Ref: ref, Size: hdr.Size})
}

// indexed says whether artifacts with header h imply derived index entries
// (SPECS.md §6.5): traces and TGK/1 edges. A put of one through the server
// writes them, as a run or an import on the store itself would, so that a
// run copied to a server (amduat copy --closure) is found there whole.
func indexed(h asl.Header) bool {
	return h.HasTag && (h.Tag == asl.TagPELTraceDAG1 || h.Tag == asl.TagTGK1EdgeV1)
}

// indexStored writes the derived index entries of the stored artifact ref
// (read back whole: the caller bounds it by max_batch_bytes).
func (s *Server) indexStored(ctx context.Context, id asl.HashID, ref asl.Reference) error {
	a, err := asl.Get(ctx, s.store, ref, s.limits.MaxBatchBytes)
	if err != nil {
		return err
	}
	if entries := closure.IndexEntries(ref, a); len(entries) > 0 {
		_, err = s.store.PutIndexed(ctx, id, []asl.Artifact{a}, entries)
	}
	return err
}

// putBatch is POST /v1/artifacts/batch: frames in, one durable PutBatch.
func (s *Server) putBatch(w http.ResponseWriter, r *http.Request) error {
	// Frames add 4 bytes each to the ArtifactBytes MaxBatchBytes bounds.
	limit := s.limits.MaxBatchBytes + 4*int64(s.limits.MaxBatchCount) + 1
	if r.ContentLength > limit {
		return &httpError{http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge,
			fmt.Sprintf("batch body of %d bytes is above the server's limit of %d ArtifactBytes in %d frames", r.ContentLength, s.limits.MaxBatchBytes, s.limits.MaxBatchCount)}
	}
	id, err := hashParam(r, s.store.DefaultHash())
	if err != nil {
		return err
	}
	weight := r.ContentLength
	if weight < 0 {
		weight = limit
	}
	held, err := s.writes.acquire(r.Context(), weight)
	if err != nil {
		return err
	}
	defer s.writes.release(held)
	var arts []asl.Artifact
	if r.ContentLength >= 0 && r.ContentLength <= held {
		// The body's length is known and within what the write gate holds
		// for this request (so the write buffer still bounds the bodies
		// in memory, SPECS.md §18.8): read it whole in large reads and
		// decode the frames in place (one allocation for the batch, no
		// copy through a buffer). A larger body is read frame by frame,
		// its memory growing with the bytes that arrive.
		buf := make([]byte, r.ContentLength)
		if _, err = io.ReadFull(s.body(w, r, limit), buf); err == nil {
			arts, err = httpstore.DecodeFrames(buf, s.limits.MaxBatchCount, s.limits.MaxBatchBytes)
		}
	} else {
		// Frames are small: read them through a buffer, not one body read
		// (and deadline update) per frame.
		arts, err = httpstore.ReadFrames(bufio.NewReaderSize(s.body(w, r, limit), 64<<10), s.limits.MaxBatchCount, s.limits.MaxBatchBytes)
	}
	switch {
	case errors.Is(err, httpstore.ErrBatchTooLarge):
		return &httpError{http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge, err.Error()}
	case errors.Is(err, httpstore.ErrFrame):
		return badRequest("%v", err)
	case err != nil:
		return err
	}
	var entries []asl.IndexEntry
	for _, a := range arts {
		if indexed(a.Header()) {
			ref, err := asl.Derive(id, a)
			if err != nil {
				return err
			}
			entries = append(entries, closure.IndexEntries(ref, a)...)
		}
	}
	var refs []asl.Reference
	if len(entries) > 0 {
		refs, err = s.store.PutIndexed(r.Context(), id, arts, entries)
	} else {
		refs, err = s.store.PutBatch(r.Context(), id, arts)
	}
	if err != nil {
		return err
	}
	var n int64
	for _, a := range arts {
		n += int64(len(a.Bytes))
	}
	s.metrics.puts.Add(float64(len(arts)))
	s.metrics.putBytes.Add(float64(n))
	s.evict.touch(refs...)
	s.evict.wrote(n, false)
	return writeJSONBytes(w, append(httpstore.AppendRefsJSON(nil, "refs", refs), '\n'))
}

// decodeJSON reads a bounded JSON body strictly into v: unknown fields,
// trailing data and malformed references are 400.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	d := json.NewDecoder(s.body(w, r, s.limits.MaxJSONBytes))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var me *http.MaxBytesError
		var be *bodyError
		if errors.As(err, &me) || errors.As(err, &be) {
			return err
		}
		if errors.Is(err, asl.ErrIntegrity) {
			return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, "JSON body: " + err.Error()}
		}
		return badRequest("JSON body: %v", err)
	}
	if d.More() {
		return badRequest("JSON body: data after the object")
	}
	if _, err := d.Token(); err != io.EOF {
		return badRequest("JSON body: data after the object")
	}
	return nil
}

// missing is POST /v1/artifacts/missing.
func (s *Server) missing(w http.ResponseWriter, r *http.Request) error {
	var req httpstore.RefsBody
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	out := httpstore.MissingResponse{Missing: []asl.Reference{}}
	for i, ref := range req.Refs {
		if ref.IsZero() {
			return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, fmt.Sprintf("refs[%d]: null is not a reference", i)}
		}
		ok, err := asl.Has(r.Context(), s.store, ref)
		if errors.Is(err, asl.ErrUnsupported) {
			// Under an unregistered hash nothing is or can be stored: the
			// reference is reported, not the whole request refused (§18.4).
			ok, err = false, nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		if !ok {
			out.Missing = append(out.Missing, ref)
		}
	}
	s.evict.touch(req.Refs...)
	return writeJSONBytes(w, append(httpstore.AppendRefsJSON(nil, "missing", out.Missing), '\n'))
}

// listArtifacts is GET /v1/artifacts?after=REF&limit=N.
func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var after asl.Reference
	if t := q.Get("after"); t != "" {
		var err error
		if after, err = asl.ParseReference(t); err != nil {
			return &httpError{http.StatusBadRequest, httpstore.CodeBadReference, "after: " + err.Error()}
		}
	}
	limit, err := s.limitParam(r)
	if err != nil {
		return err
	}
	out := httpstore.ListResponse{Artifacts: []httpstore.InfoJSON{}}
	err = s.store.Enumerate(r.Context(), after, func(in asl.Info) error {
		if len(out.Artifacts) == limit {
			last := out.Artifacts[limit-1].Ref
			out.Next = &last
			return errPageFull
		}
		out.Artifacts = append(out.Artifacts, httpstore.NewInfoJSON(in))
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return err
	}
	return writeJSON(w, out)
}

var errPageFull = errors.New("page full")

func (s *Server) limitParam(r *http.Request) (int, error) {
	t := r.URL.Query().Get("limit")
	if t == "" {
		return min(1000, s.limits.MaxListLimit), nil
	}
	n, err := strconv.Atoi(t)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(t, "-") {
		n, err = s.limits.MaxListLimit, nil
	}
	if err != nil || n < 1 {
		return 0, badRequest("limit %q: want an integer of at least 1 (above %d is taken as %d)", t, s.limits.MaxListLimit, s.limits.MaxListLimit)
	}
	// A limit above the maximum is clamped, as a page size usually is: the
	// answer's "next" tells the client to go on (§18.4).
	return min(n, s.limits.MaxListLimit), nil
}

// getArtifact is GET and HEAD /v1/artifacts/REF[?format=raw|artifact|info].
func (s *Server) getArtifact(w http.ResponseWriter, r *http.Request) error {
	ref, err := parseRefParam(r)
	if err != nil {
		return err
	}
	var format string
	if r.URL.RawQuery != "" {
		format = r.URL.Query().Get("format")
	}
	switch format {
	case "", "raw", "artifact", "info":
	default:
		return badRequest("format %q: want raw, artifact or info", format)
	}
	s.evict.touch(ref)
	h := w.Header()
	refText := ref.String()
	etag := `"` + refText + `"`
	if format == "info" || r.Method == http.MethodHead {
		in, err := s.store.Stat(r.Context(), ref)
		if err != nil {
			return err
		}
		if format == "info" {
			return writeJSON(w, httpstore.NewInfoJSON(in))
		}
		setArtifactHeaders(h, refText, in.Header, etag, format)
		size := in.Size
		if format == "artifact" {
			size += uint64(len(in.Header.AppendHeader(nil)))
		} else {
			h.Set("Accept-Ranges", "bytes")
		}
		h.Set("Content-Length", strconv.FormatUint(size, 10))
		w.WriteHeader(http.StatusOK)
		return nil
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == etag || inm == "*") {
		if _, err := s.store.Stat(r.Context(), ref); err != nil {
			return err
		}
		h.Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	fetch := s.store.Fetch
	clientVerifies := false
	if fv, ok := s.store.(forVerifierFetcher); ok && r.Header.Get(httpstore.HeaderVerify) == httpstore.VerifyClient && r.Header.Get("Range") == "" {
		fetch, clientVerifies = fv.FetchForVerifier, true
	}
	rc, hdr, err := fetch(r.Context(), ref)
	if err != nil {
		return err
	}
	defer rc.Close()
	setArtifactHeaders(h, refText, hdr, etag, format)
	if clientVerifies {
		// Bytes only the client's digest vouches for are kept out of
		// shared caches.
		h[keyCacheControl] = []string{cacheControlPrivate}
	}
	out := s.writer(w)
	if format == "artifact" {
		head := hdr.AppendHeader(nil)
		h.Set("Content-Length", strconv.FormatUint(uint64(len(head))+hdr.Size, 10))
		w.WriteHeader(http.StatusOK)
		if _, err := out.Write(head); err != nil {
			return err
		}
		return s.copyOut(out, rc, int64(hdr.Size), true)
	}
	h[keyAcceptRanges] = []string{"bytes"}
	start, n, partial, err := parseRange(r.Header.Get("Range"), hdr.Size)
	if err != nil {
		h.Set("Content-Range", fmt.Sprintf("bytes */%d", hdr.Size))
		return err
	}
	h[keyLength] = []string{strconv.FormatInt(n, 10)}
	if !partial {
		w.WriteHeader(http.StatusOK)
		return s.copyOut(out, rc, n, true)
	}
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+n-1, hdr.Size))
	if _, err := io.CopyN(io.Discard, rc, start); err != nil {
		return fmt.Errorf("%s: skipping to byte %d: %w", ref, start, err)
	}
	w.WriteHeader(http.StatusPartialContent)
	return s.copyOut(out, rc, n, start+n == int64(hdr.Size))
}

// forVerifierFetcher is a store that can stream an artifact to a client
// that checks the digest itself (pebblestore.Store.FetchForVerifier): each
// chunk is still checked before its bytes are sent.
type forVerifierFetcher interface {
	FetchForVerifier(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error)
}

// The Cache-Control of an artifact's bytes (SPECS.md §18.4): immutable by
// its reference; private when the server left the digest to the client.
const (
	cacheControlPublic  = "public, max-age=31536000, immutable"
	cacheControlPrivate = "private, max-age=31536000, immutable"
)

// copyBufs holds copyOut's buffers (256 KiB: one write per chunk of the
// store), so that a GET allocates none.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyOut streams exactly n verified bytes of rc to w; toEnd says they are
// the last bytes of the artifact, whose digest is then checked before the
// response counts as complete.
//
// When the n bytes are the rest of the artifact and rc is an io.WriterTo
// (the store's chunked reader), rc writes its verified chunks to w where
// they lie: no copy through a buffer, one write per chunk. A reader that
// would write more than n bytes fails with asl.ErrIntegrity before those
// bytes reach w.
func (s *Server) copyOut(w io.Writer, rc io.Reader, n int64, toEnd bool) error {
	var m int64
	var err error
	if wt, ok := rc.(io.WriterTo); ok && toEnd {
		cw := &capWriter{w: w, left: n}
		m, err = wt.WriteTo(cw)
		if err == nil && cw.over {
			err = fmt.Errorf("stored payload is longer than its header says: %w", asl.ErrIntegrity)
		}
	} else {
		bp := copyBufs.Get().(*[]byte)
		m, err = io.CopyBuffer(w, io.LimitReader(rc, n), *bp)
		copyBufs.Put(bp)
	}
	s.metrics.gets.Add(1)
	s.metrics.getBytes.Add(float64(m))
	if err == nil && m < n {
		err = fmt.Errorf("artifact ended after %d of %d bytes: %w", m, n, asl.ErrIntegrity)
	}
	if err == nil && toEnd {
		// A full response is complete only when its bytes verify.
		err = asl.ExpectEnd(rc)
	}
	return err
}

// capWriter passes at most left bytes to w; a write beyond them is
// refused whole (over is set) so that w never has more than the
// Content-Length of the response.
type capWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, fmt.Errorf("stored payload is longer than its header says: %w", asl.ErrIntegrity)
	}
	n, err := c.w.Write(p)
	c.left -= int64(n)
	return n, err
}

// The header names of an artifact's response in their canonical form, as
// http.Header.Set would store them ("ETag" is sent as "Etag"): the headers
// of a GET are assigned under them directly, not canonicalized again per
// request.
var (
	keyETag         = textproto.CanonicalMIMEHeaderKey("ETag")
	keyCacheControl = textproto.CanonicalMIMEHeaderKey("Cache-Control")
	keyRef          = textproto.CanonicalMIMEHeaderKey(httpstore.HeaderRef)
	keyTypeTag      = textproto.CanonicalMIMEHeaderKey(httpstore.HeaderTypeTag)
	keyContentType  = textproto.CanonicalMIMEHeaderKey("Content-Type")
	keyNoSniff      = textproto.CanonicalMIMEHeaderKey("X-Content-Type-Options")
	keyAcceptRanges = textproto.CanonicalMIMEHeaderKey("Accept-Ranges")
	keyLength       = textproto.CanonicalMIMEHeaderKey("Content-Length")
)

func setArtifactHeaders(h http.Header, refText string, hdr asl.Header, etag, format string) {
	h[keyETag] = []string{etag}
	h[keyCacheControl] = []string{cacheControlPublic}
	h[keyRef] = []string{refText}
	if t := httpstore.FormatTypeTag(hdr); t != "" {
		h[keyTypeTag] = []string{t}
	}
	if format == "artifact" {
		h[keyContentType] = []string{httpstore.ContentTypeArtifact}
	} else {
		h[keyContentType] = []string{httpstore.ContentTypeOctets}
	}
	h[keyNoSniff] = []string{"nosniff"}
}

// parseRange reads a Range header for an artifact of size bytes (SPECS.md
// §18.4): one range "bytes=A-B", "bytes=A-" or "bytes=-N". An absent
// header, another unit or several ranges give the whole artifact (RFC 9110
// lets a server ignore Range); a range that starts past the end is 416.
func parseRange(v string, size uint64) (start, n int64, partial bool, err error) {
	whole := int64(size)
	spec, ok := strings.CutPrefix(v, "bytes=")
	if v == "" || !ok || strings.Contains(spec, ",") {
		return 0, whole, false, nil
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, whole, false, nil
	}
	unsat := &httpError{http.StatusRequestedRangeNotSatisfiable, httpstore.CodeRangeNotSatisf, fmt.Sprintf("range %q: artifact has %d bytes", v, size)}
	if a == "" {
		k, err := strconv.ParseInt(b, 10, 64)
		if err != nil || k < 0 {
			return 0, whole, false, nil
		}
		if k == 0 || whole == 0 { // an empty artifact has no last bytes: bytes 0--1/0 is no Content-Range
			return 0, 0, false, unsat
		}
		k = min(k, whole)
		return whole - k, k, true, nil
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 {
		return 0, whole, false, nil
	}
	last := whole - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, whole, false, nil
		}
		last = min(last, whole-1)
	}
	if first >= whole {
		return 0, 0, false, unsat
	}
	return first, last - first + 1, true, nil
}

// lookupIndex is GET /v1/index/SPACE/KEYHEX.
func (s *Server) lookupIndex(w http.ResponseWriter, r *http.Request) error {
	space := r.PathValue("space")
	if !httpstore.ValidSpace(space) {
		return badRequest("index space %q: want 1 to 64 characters of [a-z0-9._-]", space)
	}
	key, err := hex.DecodeString(r.PathValue("key"))
	if err != nil {
		return badRequest("index key %q: not hex: %v", r.PathValue("key"), err)
	}
	v, ok, err := s.store.LookupIndex(r.Context(), space, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("index %s key %x: %w", space, key, asl.ErrNotFound)
	}
	return writeJSON(w, httpstore.IndexValue{Value: hex.EncodeToString(v)})
}

// scanIndex is GET /v1/index/SPACE?prefix=HEX&after=HEX&limit=N.
func (s *Server) scanIndex(w http.ResponseWriter, r *http.Request) error {
	space := r.PathValue("space")
	if !httpstore.ValidSpace(space) {
		return badRequest("index space %q: want 1 to 64 characters of [a-z0-9._-]", space)
	}
	q := r.URL.Query()
	prefix, err := hex.DecodeString(q.Get("prefix"))
	if err != nil {
		return badRequest("prefix %q: not hex: %v", q.Get("prefix"), err)
	}
	after, err := hex.DecodeString(q.Get("after"))
	if err != nil {
		return badRequest("after %q: not hex: %v", q.Get("after"), err)
	}
	hasAfter := q.Has("after")
	limit, err := s.limitParam(r)
	if err != nil {
		return err
	}
	out := httpstore.IndexScan{Entries: []httpstore.IndexEntryJSON{}}
	visit := func(k, v []byte) error {
		if hasAfter && bytes.Compare(k, after) <= 0 {
			return nil
		}
		if len(out.Entries) == limit {
			out.Next = out.Entries[limit-1].Key
			return errPageFull
		}
		out.Entries = append(out.Entries, httpstore.IndexEntryJSON{Key: hex.EncodeToString(k), Value: hex.EncodeToString(v)})
		return nil
	}
	if seeker, ok := s.store.(asl.IndexSeeker); ok && hasAfter {
		err = seeker.ScanIndexAfter(r.Context(), space, prefix, after, visit)
	} else {
		err = s.store.ScanIndex(r.Context(), space, prefix, visit)
	}
	if err != nil && !errors.Is(err, errPageFull) {
		return err
	}
	return writeJSON(w, out)
}

// batchRead is POST /v1/artifacts/batch-read (SPECS.md §18.4): the
// artifacts of a JSON list of references in one answer, each entry a status
// byte and, when present, a frame. Every artifact is read whole through the
// store's verifying reader before its frame is written, so a damaged one is
// an entry of its own (ReadDamaged), never wrong bytes; the answer holds at
// most MaxBatchBytes of ArtifactBytes, beyond which entries are
// ReadTooLarge and the client fetches those alone.
func (s *Server) batchRead(w http.ResponseWriter, r *http.Request) error {
	var req httpstore.RefsBody
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Refs) > s.limits.MaxBatchCount {
		return &httpError{http.StatusRequestEntityTooLarge, httpstore.CodeTooLarge,
			fmt.Sprintf("%d references in one batch read, above the server's limit of %d", len(req.Refs), s.limits.MaxBatchCount)}
	}
	s.evict.touch(req.Refs...)
	w.Header().Set("Content-Type", httpstore.ContentTypeBatchRead)
	out := bufio.NewWriterSize(s.writer(w), 64<<10)
	budget := s.limits.MaxBatchBytes
	var frame []byte
	var n, bytesOut int64
	for _, ref := range req.Refs {
		a, status, err := s.readSmall(r.Context(), ref, budget)
		if err != nil {
			return err
		}
		frame = append(frame[:0], status)
		if status == httpstore.ReadPresent {
			frame = httpstore.AppendFrame(frame, a)
			budget -= int64(len(frame) - 5)
			n++
			bytesOut += int64(len(a.Bytes))
		}
		if _, err := out.Write(frame); err != nil {
			return err
		}
	}
	s.metrics.gets.Add(float64(n))
	s.metrics.getBytes.Add(float64(bytesOut))
	return out.Flush()
}

// readSmall reads one artifact of a batch read whole, if its ArtifactBytes
// fit in budget. Content errors become the entry's status; other errors
// end the answer.
func (s *Server) readSmall(ctx context.Context, ref asl.Reference, budget int64) (asl.Artifact, byte, error) {
	status := func(err error) (asl.Artifact, byte, error) {
		switch {
		case errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity):
			return asl.Artifact{}, httpstore.ReadNotFound, nil
		case errors.Is(err, asl.ErrIntegrity):
			return asl.Artifact{}, httpstore.ReadDamaged, nil
		case errors.Is(err, asl.ErrUnsupported):
			return asl.Artifact{}, httpstore.ReadUnsupported, nil
		}
		return asl.Artifact{}, 0, fmt.Errorf("%s: %w", ref, err)
	}
	rc, hdr, err := s.store.Fetch(ctx, ref)
	if err != nil {
		return status(err)
	}
	defer rc.Close()
	if int64(len(hdr.AppendHeader(nil)))+int64(hdr.Size) > budget {
		return asl.Artifact{}, httpstore.ReadTooLarge, nil
	}
	buf, err := asl.ReadWhole(rc, hdr.Size)
	if err != nil {
		return status(err)
	}
	return asl.Artifact{Bytes: buf, Tag: hdr.Tag, HasTag: hdr.HasTag}, httpstore.ReadPresent, nil
}
