package httpstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
)

// fetchWholeMax is the largest artifact Fetch reads and verifies whole
// before it returns a reader; larger ones stream, verified at the end
// (SPECS.md §6.2).
const fetchWholeMax = 256 << 10

// checkRef refuses, before any request, what no store can answer: the zero
// reference (malformed: ErrIntegrity) and an unregistered hash id, which
// this client could not verify (ErrUnsupported, SPECS.md §6.3).
func checkRef(ref asl.Reference) error {
	if ref.IsZero() {
		return fmt.Errorf("reference is zero: %w", asl.ErrIntegrity)
	}
	if !ref.Known() {
		return fmt.Errorf("%s: hash id 0x%04x is not registered: %w", ref, uint16(ref.HashID()), asl.ErrUnsupported)
	}
	return nil
}

// Fetch implements asl.Fetcher over GET /v1/artifacts/REF. The bytes are
// hashed under ref whatever the server says: an artifact up to 256 KiB is
// verified before the reader is returned; a larger one streams, and its
// final Read fails with asl.ErrIntegrity (withholding its last bytes) when
// the bytes, the Content-Length or the type tag header disagree with ref.
// A body cut short (the server aborts a response when it finds the
// artifact damaged) wraps both asl.ErrIntegrity and io.ErrUnexpectedEOF.
func (c *Client) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	if err := checkRef(ref); err != nil {
		return nil, asl.Header{}, fmt.Errorf("fetch: %w", err)
	}
	// The body is re-hashed below, whatever the server checked.
	rq := &request{method: http.MethodGet, path: PathArtifact + ref.String(), idempotent: true,
		header: http.Header{"Accept-Encoding": {"identity"}, HeaderVerify: {VerifyClient}}}
	resp, err := c.do(ctx, rq)
	if err != nil {
		return nil, asl.Header{}, err
	}
	shown := c.redact(rq.path, nil)
	fail := func(err error) (io.ReadCloser, asl.Header, error) {
		resp.Body.Close()
		return nil, asl.Header{}, fmt.Errorf("GET %s: %w", shown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("status %d, want 200: %w", resp.StatusCode, ErrProtocol))
	}
	hdr, err := parseArtifactHeaders(resp.Header, resp.ContentLength, ref)
	if err != nil {
		return fail(err)
	}
	if lim := c.meta.Limits.MaxArtifactBytes; lim > 0 && hdr.Size > uint64(lim) {
		return fail(fmt.Errorf("Content-Length %d passes the server's own max_artifact_bytes %d: %w", hdr.Size, lim, ErrProtocol))
	}
	vr, err := asl.VerifyReader(ref, hdr, resp.Body)
	if err != nil {
		return fail(err)
	}
	fr := &fetchReader{vr: vr, body: resp.Body, shown: shown, size: hdr.Size}
	fr.probe = func(off uint64) error { return c.probeByte(ctx, ref, off) }
	if hdr.Size > fetchWholeMax {
		return fr, hdr, nil
	}
	defer fr.Close()
	buf, err := asl.ReadWhole(fr, hdr.Size)
	if err != nil {
		return nil, asl.Header{}, err
	}
	return io.NopCloser(bytes.NewReader(buf)), hdr, nil
}

// fetchReader is the body of a streamed Fetch: verified by vr, errors
// named by the request.
type fetchReader struct {
	vr    io.Reader
	body  io.ReadCloser
	shown string
	size  uint64
	read  uint64
	// probe reads the payload byte at an offset on a new request.
	probe func(off uint64) error
}

// probeByte asks again for the payload byte at off of ref (a Range
// request), after a body broke off there: asl.ErrIntegrity when the server
// reports the artifact damaged, or answers and cannot send that one byte
// either (the same byte failing twice, the second time on a response of
// one byte, is the stored copy, not the network); nil when the byte
// arrives (the connection failed); the request's error otherwise.
func (c *Client) probeByte(ctx context.Context, ref asl.Reference, off uint64) error {
	rq := &request{method: http.MethodGet, path: PathArtifact + ref.String(), idempotent: true,
		header: http.Header{"Accept-Encoding": {"identity"}, "Range": {fmt.Sprintf("bytes=%d-%d", off, off)}}}
	resp, err := c.do(ctx, rq)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The server took the request and closed the connection without
		// an answer, after the client's retries: it fails at that byte.
		return fmt.Errorf("the server cannot send byte %d (%v): %w", off, err, asl.ErrIntegrity)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if n == 0 && (err == nil || errors.Is(err, io.ErrUnexpectedEOF)) {
		return fmt.Errorf("the server cannot send byte %d: %w", off, asl.ErrIntegrity)
	}
	if err != nil {
		return err
	}
	return nil
}

func (f *fetchReader) Read(p []byte) (int, error) {
	n, err := f.vr.Read(p)
	f.read += uint64(n)
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The server cuts a response short when it finds the artifact
		// damaged; so does a failing network. A fresh request for the
		// byte where the body broke tells which (probeByte).
		// The last byte too: the server sends it only once the whole
		// payload verified (a digest that fails withholds the tail).
		perr := f.probe(f.read)
		if perr == nil && f.size > 0 {
			perr = f.probe(f.size - 1)
		}
		if !errors.Is(perr, asl.ErrIntegrity) {
			return n, fmt.Errorf("GET %s: body ends after %d of %d bytes, and new requests for byte %d and the last byte got them (%v): the connection failed: %w",
				f.shown, f.read, f.size, f.read, perr, err)
		}
		return n, fmt.Errorf("GET %s: body ends after %d of %d bytes (the server cuts a response short when it finds the artifact damaged): %w: %w",
			f.shown, f.read, f.size, asl.ErrIntegrity, err)
	case errors.Is(err, asl.ErrIntegrity):
		return n, fmt.Errorf("GET %s: %w", f.shown, err)
	default:
		return n, fmt.Errorf("GET %s: reading the body at byte %d: %w", f.shown, f.read, err)
	}
}

// fetchBufs holds WriteTo's read buffers: one read of the body (one
// system call when the socket holds that much) per 256 KiB, where io.Copy
// into io.Discard or a file would read 8 or 32 KiB at a time.
var fetchBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// WriteTo implements io.WriterTo: it reads the body through f.Read (so
// verified, and with the same errors) in pieces of 256 KiB and writes each
// to w. The last piece is written only once the whole payload verified.
func (f *fetchReader) WriteTo(w io.Writer) (int64, error) {
	bp := fetchBufs.Get().(*[]byte)
	defer fetchBufs.Put(bp)
	buf := *bp
	var total int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			k, werr := w.Write(buf[:n])
			total += int64(k)
			if werr == nil && k < n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return total, werr
			}
		}
		switch {
		case err == io.EOF:
			return total, nil
		case err != nil:
			return total, err
		}
	}
}

func (f *fetchReader) Close() error { return f.body.Close() }

// inMemory recognizes the readers whose remaining bytes can be hashed
// before a put and sent again on a retry without reading the caller's
// reader twice: it returns them as a section of a ReaderAt, and a function
// that consumes them from r once the put succeeded.
func inMemory(r io.Reader) (ra io.ReaderAt, off, n int64, consume func(), ok bool) {
	switch v := r.(type) {
	case *bytes.Reader:
		off, _ := v.Seek(0, io.SeekCurrent)
		n := int64(v.Len())
		return v, off, n, func() { v.Seek(off+n, io.SeekStart) }, true
	case *strings.Reader:
		off, _ := v.Seek(0, io.SeekCurrent)
		n := int64(v.Len())
		return v, off, n, func() { v.Seek(off+n, io.SeekStart) }, true
	case *bytes.Buffer:
		b := v.Bytes()
		return bytes.NewReader(b), 0, int64(len(b)), func() { v.Next(len(b)) }, true
	}
	return nil, 0, 0, nil, false
}

// Put implements asl.Receiver over POST /v1/artifacts?hash=NAME (SPECS.md
// §18): Content-Length is hdr.Size and the body streams from r, hashed on
// the way. When r holds its bytes in memory (*bytes.Reader,
// *strings.Reader, *bytes.Buffer) the reference is computed first and sent
// as X-Amduat-Expect-Ref, so the server stores nothing that does not hash
// to it, and the body can be sent again on a retry; another reader is
// retried only if the failed attempt never read it. A reader that yields
// fewer or more bytes than hdr.Size fails the put before the server has
// the whole payload, so nothing is stored (SPECS.md §6.1). The reference
// the server acknowledges must be the one the client computed: otherwise
// the error wraps asl.ErrIntegrity and names both.
func (c *Client) Put(ctx context.Context, id asl.HashID, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	alg, ok := asl.LookupHash(id)
	if !ok {
		return asl.Reference{}, fmt.Errorf("put: hash id 0x%04x: %w", uint16(id), asl.ErrUnsupported)
	}
	if err := c.checkSize(hdr.Size); err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	rq := &request{method: http.MethodPost, path: PathArtifacts, query: url.Values{"hash": {alg.Short}},
		header:     http.Header{"Content-Type": {ContentTypeOctets}, "Accept": {ContentTypeJSON}},
		idempotent: true, length: int64(hdr.Size)}
	if t := FormatTypeTag(hdr); t != "" {
		rq.header.Set(HeaderTypeTag, t)
	}
	var (
		want    asl.Reference
		hr      *hashingReader
		consume func()
	)
	if ra, off, n, cons, ok := inMemory(r); ok {
		if uint64(n) != hdr.Size {
			return asl.Reference{}, fmt.Errorf("put: payload is %d bytes, header says %d", n, hdr.Size)
		}
		h, err := asl.NewHasher(id, hdr)
		if err != nil {
			return asl.Reference{}, fmt.Errorf("put: %w", err)
		}
		if _, err := io.Copy(h, io.NewSectionReader(ra, off, n)); err != nil {
			return asl.Reference{}, fmt.Errorf("put: reading payload: %w", err)
		}
		if want, err = h.Sum(); err != nil {
			return asl.Reference{}, fmt.Errorf("put: %w", err)
		}
		rq.replay = func() io.Reader { return io.NewSectionReader(ra, off, n) }
		rq.header.Set(HeaderExpectRef, want.String())
		rq.ref, consume = want, cons
	} else {
		h, err := asl.NewHasher(id, hdr)
		if err != nil {
			return asl.Reference{}, fmt.Errorf("put: %w", err)
		}
		hr = &hashingReader{r: r, h: h, size: hdr.Size}
		if hdr.Size == 0 {
			if err := expectEOF(r, 0); err != nil {
				return asl.Reference{}, fmt.Errorf("put: %w", err)
			}
			hr.done = true
		}
		rq.stream = hr
	}
	var pr PutResponse
	if err := c.doJSON(ctx, rq, &pr); err != nil {
		return asl.Reference{}, err
	}
	if hr != nil {
		if !hr.complete() {
			return asl.Reference{}, fmt.Errorf("POST %s: server acknowledged %s before reading the whole payload: %w",
				c.redact(rq.path, rq.query), pr.Ref, ErrProtocol)
		}
		var err error
		if want, err = hr.h.Sum(); err != nil {
			return asl.Reference{}, fmt.Errorf("put: %w", err)
		}
	}
	if pr.Ref != want || pr.Size != hdr.Size {
		return asl.Reference{}, fmt.Errorf("POST %s: server acknowledged %s (%d bytes), the payload hashes to %s (%d bytes): %w",
			c.redact(rq.path, rq.query), pr.Ref, pr.Size, want, hdr.Size, asl.ErrIntegrity)
	}
	if consume != nil {
		consume()
	}
	return want, nil
}

// checkSize refuses an artifact above the server's limit before sending.
func (c *Client) checkSize(size uint64) error {
	if size > math.MaxInt64 {
		return fmt.Errorf("artifact of %d bytes is too large to send", size)
	}
	if lim := c.meta.Limits.MaxArtifactBytes; lim > 0 && size > uint64(lim) {
		return fmt.Errorf("artifact of %d bytes passes the server's max_artifact_bytes %d", size, lim)
	}
	return nil
}

// hashingReader streams exactly size bytes of r into a put, hashing them.
// It fails (withholding the bytes of that read, so the server never has
// the whole payload) when r ends early or has bytes beyond size.
type hashingReader struct {
	r    io.Reader
	h    *asl.Hasher
	size uint64
	sent uint64
	done bool // size bytes read and r is at EOF
	err  error
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	if hr.err != nil {
		return 0, hr.err
	}
	if hr.done {
		return 0, io.EOF
	}
	left := hr.size - hr.sent
	if uint64(len(p)) > left {
		p = p[:left]
	}
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.sent += uint64(n)
	if hr.sent == hr.size {
		if err := expectEOF(hr.r, hr.size); err != nil {
			hr.err = err
			return 0, err
		}
		hr.done = true
		return n, nil
	}
	switch {
	case err == io.EOF:
		hr.err = fmt.Errorf("payload is %d bytes, header says %d", hr.sent, hr.size)
		return 0, hr.err
	case err != nil:
		hr.err = fmt.Errorf("reading payload at byte %d: %w", hr.sent, err)
		return 0, hr.err
	}
	return n, nil
}

func (hr *hashingReader) complete() bool { return hr.done }

// expectEOF checks that r has nothing after its size bytes.
func expectEOF(r io.Reader, size uint64) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		switch {
		case n > 0:
			return fmt.Errorf("payload is longer than the %d bytes the header says", size)
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("reading payload at byte %d: %w", size, err)
		}
	}
}

// Stat implements asl.Statter over GET /v1/artifacts/REF?format=info; the
// info must name ref (asl.ErrIntegrity otherwise).
func (c *Client) Stat(ctx context.Context, ref asl.Reference) (asl.Info, error) {
	if err := checkRef(ref); err != nil {
		return asl.Info{}, fmt.Errorf("stat: %w", err)
	}
	rq := &request{method: http.MethodGet, path: PathArtifact + ref.String(), query: url.Values{"format": {"info"}},
		idempotent: true, header: http.Header{"Accept": {ContentTypeJSON}}}
	var j InfoJSON
	if err := c.doJSON(ctx, rq, &j); err != nil {
		return asl.Info{}, err
	}
	if j.Ref != ref {
		return asl.Info{}, fmt.Errorf("GET %s: info names %s: %w", c.redact(rq.path, rq.query), j.Ref, asl.ErrIntegrity)
	}
	return j.Info(), nil
}

// compareRefs orders references by ReferenceBytes.
func compareRefs(a, b asl.Reference) int { return bytes.Compare(a.Bytes(), b.Bytes()) }

// Enumerate implements asl.Enumerator over GET /v1/artifacts?after=&limit=,
// a page of Options.PageSize at a time. The listing must ascend strictly
// in ReferenceBytes order after after (ErrProtocol otherwise). It sees
// artifacts stored while it walks only if they sort after its position.
func (c *Client) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	cur := after
	for {
		q := url.Values{"limit": {strconv.Itoa(c.pageSize)}}
		if !cur.IsZero() {
			q.Set("after", cur.String())
		}
		rq := &request{method: http.MethodGet, path: PathArtifacts, query: q, idempotent: true,
			header: http.Header{"Accept": {ContentTypeJSON}}}
		var page ListResponse
		if err := c.doJSON(ctx, rq, &page); err != nil {
			return err
		}
		if len(page.Artifacts) > c.pageSize {
			return fmt.Errorf("GET %s: %d artifacts in a page of %d: %w", c.redact(rq.path, q), len(page.Artifacts), c.pageSize, ErrProtocol)
		}
		for _, j := range page.Artifacts {
			if !cur.IsZero() && compareRefs(j.Ref, cur) <= 0 {
				return fmt.Errorf("GET %s: %s listed after %s: %w", c.redact(rq.path, q), j.Ref, cur, ErrProtocol)
			}
			cur = j.Ref
			if err := fn(j.Info()); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		if compareRefs(*page.Next, cur) < 0 || (len(page.Artifacts) == 0 && compareRefs(*page.Next, cur) <= 0 && !cur.IsZero()) {
			return fmt.Errorf("GET %s: next %s does not advance past %s: %w", c.redact(rq.path, q), page.Next, cur, ErrProtocol)
		}
		cur = *page.Next
	}
}

// missingChunk bounds the references of one POST /v1/artifacts/missing.
const missingChunk = 4096

// Missing asks POST /v1/artifacts/missing which of refs the server does
// not hold, and returns them in request order, once per occurrence. The
// answer must be a subsequence of refs (ErrProtocol otherwise); presence is
// the one thing the client takes on trust.
func (c *Client) Missing(ctx context.Context, refs []asl.Reference) ([]asl.Reference, error) {
	for _, r := range refs {
		if err := checkRef(r); err != nil {
			return nil, fmt.Errorf("missing: %w", err)
		}
	}
	per := missingChunk
	if lim := c.meta.Limits.MaxJSONBytes; lim > 0 {
		// A reference is at most 2+64 bytes in the registry: 132 hex
		// digits, quotes and a comma.
		per = max(1, min(per, int((lim-64)/136)))
	}
	var out []asl.Reference
	for len(refs) > 0 {
		chunk := refs[:min(per, len(refs))]
		refs = refs[len(chunk):]
		rq := &request{method: http.MethodPost, path: PathMissing, idempotent: true,
			header: http.Header{"Accept": {ContentTypeJSON}, "Content-Type": {ContentTypeJSON}}}
		body, err := jsonBody(RefsBody{Refs: chunk})
		if err != nil {
			return nil, err
		}
		rq.setBytes(body)
		var mr MissingResponse
		if err := c.doJSON(ctx, rq, &mr); err != nil {
			return nil, err
		}
		i := 0
		for _, m := range mr.Missing {
			for i < len(chunk) && chunk[i] != m {
				i++
			}
			if i == len(chunk) {
				return nil, fmt.Errorf("POST %s: %s is missing from the answer's order or was never asked: %w", c.redact(rq.path, nil), m, ErrProtocol)
			}
			i++
		}
		out = append(out, mr.Missing...)
	}
	return out, nil
}

// PutBatch implements asl.BatchReceiver. It asks Missing which artifacts
// the server lacks and uploads only those (each once, however often it
// appears) with POST /v1/artifacts/batch, in frames (SPECS.md §18.4) split
// by Options.BatchBytes and BatchCount and the server's limits; an
// artifact too large for a batch alone goes through Put. A batch of more
// than twice presenceSample artifacts is first sampled (freshBatch): a
// fresh one is uploaded whole while it is hashed, so that the client's
// hash overlaps the upload and the server's work. Each request is one
// durable commit on the server, so when PutBatch returns nil every
// artifact is durable; on an error, the requests that succeeded stay
// stored (a put is idempotent: call again). Every reference the server
// acknowledges must be the one computed here (asl.ErrIntegrity
// otherwise). References are returned in input order.
func (c *Client) PutBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, error) {
	alg, ok := asl.LookupHash(id)
	if !ok {
		return nil, fmt.Errorf("put batch: hash id 0x%04x: %w", uint16(id), asl.ErrUnsupported)
	}
	for i, a := range arts {
		if err := c.checkSize(uint64(len(a.Bytes))); err != nil {
			return nil, fmt.Errorf("put batch: artifact %d: %w", i, err)
		}
	}
	if len(arts) == 0 {
		return []asl.Reference{}, ctx.Err()
	}
	fresh, err := c.freshBatch(ctx, id, arts)
	if err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	if fresh {
		return c.putFresh(ctx, id, alg, arts)
	}
	refs := make([]asl.Reference, len(arts))
	var uniq []int // index of the first occurrence of each reference
	seen := make(map[asl.Reference]bool, len(arts))
	for i, a := range arts {
		ref, err := asl.Derive(id, a)
		if err != nil {
			return nil, fmt.Errorf("put batch: artifact %d: %w", i, err)
		}
		refs[i] = ref
		if !seen[ref] {
			seen[ref] = true
			uniq = append(uniq, i)
		}
	}
	ask := make([]asl.Reference, len(uniq))
	for k, i := range uniq {
		ask[k] = refs[i]
	}
	missing, err := c.Missing(ctx, ask)
	if err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	absent := make(map[asl.Reference]bool, len(missing))
	for _, m := range missing {
		absent[m] = true
	}
	send := uniq[:0:0]
	for _, i := range uniq {
		if absent[refs[i]] {
			send = append(send, i)
		}
	}
	if err := c.putGroups(ctx, id, alg, arts, refs, send, nil); err != nil {
		return nil, err
	}
	return refs, nil
}

// putFresh uploads every artifact of a fresh batch (freshBatch) while a
// goroutine hashes them; each request's acknowledgement is checked once
// the hashes are known.
func (c *Client) putFresh(ctx context.Context, id asl.HashID, alg asl.HashAlgorithm, arts []asl.Artifact) ([]asl.Reference, error) {
	refs := make([]asl.Reference, len(arts))
	hashed := make(chan error, 1)
	go func() {
		for i, a := range arts {
			ref, err := asl.Derive(id, a)
			if err != nil {
				hashed <- fmt.Errorf("put batch: artifact %d: %w", i, err)
				return
			}
			refs[i] = ref
		}
		hashed <- nil
	}()
	wait := sync.OnceValue(func() error { return <-hashed })
	all := make([]int, len(arts))
	for i := range all {
		all[i] = i
	}
	err := c.putGroups(ctx, id, alg, arts, refs, all, wait)
	if werr := wait(); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	return refs, nil
}

// putGroups uploads arts[send...] in frames within the batch limits; an
// artifact too large for a batch alone goes through Put. wait, when not
// nil, must return before refs may be read (putFresh's hashing).
func (c *Client) putGroups(ctx context.Context, id asl.HashID, alg asl.HashAlgorithm, arts []asl.Artifact, refs []asl.Reference, send []int, wait func() error) error {
	var (
		group []int
		size  int64
	)
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		err := c.putFrames(ctx, alg, arts, refs, group, wait)
		group, size = group[:0], 0
		return err
	}
	for _, i := range send {
		fl := FrameLen(arts[i])
		if fl-4 > c.batchBytes {
			if _, err := asl.PutArtifact(ctx, c, id, arts[i]); err != nil {
				return fmt.Errorf("put batch: artifact %d: %w", i, err)
			}
			continue
		}
		if len(group) == c.batchCount || size+fl-4 > c.batchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		group = append(group, i)
		size += fl - 4
	}
	return flush()
}

// putFrames sends arts[group...] as one POST /v1/artifacts/batch and checks
// the references it acknowledges against refs (after wait, when not nil).
func (c *Client) putFrames(ctx context.Context, alg asl.HashAlgorithm, arts []asl.Artifact, refs []asl.Reference, group []int, wait func() error) error {
	sel := make([]asl.Artifact, len(group))
	var length int64
	for k, i := range group {
		sel[k] = arts[i]
		length += FrameLen(arts[i])
	}
	rq := &request{method: http.MethodPost, path: PathBatch, query: url.Values{"hash": {alg.Short}}, idempotent: true,
		header: http.Header{"Content-Type": {ContentTypeBatch}, "Accept": {ContentTypeJSON}},
		replay: func() io.Reader { return &frameReader{arts: sel} }, length: length}
	if len(group) == 1 && wait == nil {
		rq.ref = refs[group[0]]
	}
	var rb RefsBody
	if err := c.doJSON(ctx, rq, &rb); err != nil {
		return fmt.Errorf("put batch: %w", err)
	}
	if len(rb.Refs) != len(group) {
		return fmt.Errorf("put batch: POST %s: server acknowledged %d references for %d artifacts: %w",
			c.redact(rq.path, rq.query), len(rb.Refs), len(group), ErrProtocol)
	}
	if wait != nil {
		if err := wait(); err != nil {
			return err
		}
	}
	for k, i := range group {
		if rb.Refs[k] != refs[i] {
			return fmt.Errorf("put batch: POST %s: artifact %d: server acknowledged %s, the artifact hashes to %s: %w",
				c.redact(rq.path, rq.query), i, rb.Refs[k], refs[i], asl.ErrIntegrity)
		}
	}
	return nil
}

// frameReader yields the batch frames of arts (AppendFrame's bytes)
// without copying the payloads.
type frameReader struct {
	arts    []asl.Artifact
	i       int
	head    []byte
	body    []byte
	scratch [4 + 13]byte
}

// Read fills p with as many frames as fit, so that the transport writes
// the body in large pieces, not one small write per artifact.
func (f *frameReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(f.head) == 0 && len(f.body) == 0 {
			if f.i == len(f.arts) {
				break
			}
			a := f.arts[f.i]
			f.i++
			h := a.Header().AppendHeader(f.scratch[4:4])
			binary.BigEndian.PutUint32(f.scratch[:4], uint32(len(h)+len(a.Bytes)))
			f.head, f.body = f.scratch[:4+len(h)], a.Bytes
		}
		k := copy(p[n:], f.head)
		f.head = f.head[k:]
		n += k
		if len(f.head) == 0 {
			k = copy(p[n:], f.body)
			f.body = f.body[k:]
			n += k
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// presenceSample is how many references, spread evenly over a batch, a
// batch put asks about before it asks about all of them.
const presenceSample = 16

// freshBatch reports whether arts is taken as new. A batch of more than
// twice presenceSample artifacts asks about a sample spread over it (only
// the sample is hashed first): when the server lacks every sampled one,
// the batch is taken as new and all of it is uploaded (the server stores
// an artifact it has once, as any put; at worst a few present ones, or
// repeats within the batch, travel again); otherwise every reference is
// asked about. This is the embedded store's own presence sample (SPECS.md
// §6.4), and it spares a fresh batch a lookup per artifact on the server
// (SPECS.md §18.9).
func (c *Client) freshBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) (bool, error) {
	if len(arts) <= 2*presenceSample {
		return false, nil
	}
	sample := make([]asl.Reference, presenceSample)
	for k := range sample {
		i := k * (len(arts) - 1) / (presenceSample - 1)
		ref, err := asl.Derive(id, arts[i])
		if err != nil {
			return false, fmt.Errorf("artifact %d: %w", i, err)
		}
		sample[k] = ref
	}
	m, err := c.Missing(ctx, sample)
	if err != nil {
		return false, err
	}
	return len(m) == len(sample), nil
}
