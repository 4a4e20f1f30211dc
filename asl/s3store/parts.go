package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// A large artifact (payload above the part size) is stored as part objects
// and a manifest (SPECS.md §6.7, "Large artifacts"): the payload is cut
// into parts of PartSize bytes (the last one shorter), each part is an
// object PREFIX p/DD/SHA256HEX named by the SHA-256 of its bytes, and the
// object at the artifact's key is a manifest naming the parts in order.

// manifestMagic opens every manifest: "amds3mf" and the manifest version.
// Its first byte ('a') is no has_type_tag value, so a manifest is never
// taken for ArtifactBytes (whose first byte is 0x00 or 0x01).
var manifestMagic = [8]byte{'a', 'm', 'd', 's', '3', 'm', 'f', 1}

const (
	// largeParallel bounds the part uploads and downloads one large put or
	// get has in flight; it holds largeParallel+1 parts in memory.
	largeParallel = 3
	// maxParts bounds the parts of one manifest (a manifest of 2^20 parts
	// is 32 MiB).
	maxParts = 1 << 20
	// manifestHead is enough bytes of an object to read a manifest's
	// fixed fields (magic, the longest header, part size, count).
	manifestHead = 8 + 13 + 8 + 4
)

// manifest is a decoded manifest object.
type manifest struct {
	hdr      asl.Header
	partSize uint64
	digests  [][32]byte
	// codecs[i] is part i's form (manifest version 2, compress.go):
	// codecRaw at PartKey, codecZstd at ZPartKey. Nil (version 1): every
	// part raw.
	codecs []uint8
}

// Part forms (manifest version 2).
const (
	codecRaw  = 0
	codecZstd = 1
)

// manifestLen is the length of a manifest of version 1 (32 bytes a part)
// or 2 (33: a codec byte and the digest).
func manifestLen(hdr asl.Header, count int, version ...byte) int {
	per := 32
	if len(version) > 0 && version[0] == 2 {
		per = 33
	}
	return 8 + int(headerLen(hdr)) + 12 + per*count
}

// version is 2 when a part is compressed, else 1 (what layout 2 wrote).
func (m *manifest) version() byte {
	for _, c := range m.codecs {
		if c != codecRaw {
			return 2
		}
	}
	return 1
}

func (m *manifest) codec(i int) uint8 {
	if m.codecs == nil {
		return codecRaw
	}
	return m.codecs[i]
}

func (m *manifest) encode() []byte {
	v := m.version()
	b := make([]byte, 0, manifestLen(m.hdr, len(m.digests), v))
	b = append(b, manifestMagic[:7]...)
	b = append(b, v)
	b = m.hdr.AppendHeader(b)
	b = binary.BigEndian.AppendUint64(b, m.partSize)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.digests)))
	for i, d := range m.digests {
		if v == 2 {
			b = append(b, m.codec(i))
		}
		b = append(b, d[:]...)
	}
	return b
}

// partLen is the length of part i.
func (m *manifest) partLen(i int) int {
	if i < len(m.digests)-1 {
		return int(m.partSize)
	}
	return int(m.hdr.Size - uint64(i)*m.partSize)
}

// partCount is the number of parts of a payload of size bytes.
func partCount(size, partSize uint64) uint64 {
	// Not (size+partSize-1)/partSize: that sum wraps for sizes near 2^64,
	// and a manifest claiming 2^64-1 bytes in no parts would decode.
	n := size / partSize
	if size%partSize != 0 {
		n++
	}
	return n
}

// isManifest says whether an object beginning with b is a manifest.
func isManifest(b []byte) bool {
	return len(b) > 0 && b[0] == manifestMagic[0] && !isZObject(b)
}

// parseManifestHead decodes the fixed fields of a manifest from its first
// bytes and checks them against the object's total length; it returns the
// header, part size and count. Every rejection wraps asl.ErrIntegrity.
func parseManifestHead(b []byte, total int64) (asl.Header, uint64, int, error) {
	if len(b) < 8 || !bytes.Equal(b[:7], manifestMagic[:7]) || (b[7] != 1 && b[7] != 2) {
		return asl.Header{}, 0, 0, fmt.Errorf("object starts with %x, neither ArtifactBytes nor a manifest: %w", b[:min(len(b), 8)], asl.ErrIntegrity)
	}
	v := b[7]
	hdr, err := readHeader(bytes.NewReader(b[8:]))
	if err != nil {
		if !errors.Is(err, asl.ErrIntegrity) {
			err = fmt.Errorf("manifest ends inside its header: %w", asl.ErrIntegrity)
		}
		return asl.Header{}, 0, 0, err
	}
	o := 8 + int(headerLen(hdr))
	if len(b) < o+12 {
		return asl.Header{}, 0, 0, fmt.Errorf("manifest of %d bytes ends before its part count: %w", len(b), asl.ErrIntegrity)
	}
	ps := binary.BigEndian.Uint64(b[o:])
	count := binary.BigEndian.Uint32(b[o+8:])
	switch {
	case ps == 0:
		return asl.Header{}, 0, 0, fmt.Errorf("manifest part size is 0: %w", asl.ErrIntegrity)
	case hdr.Size == 0 || uint64(count) != partCount(hdr.Size, ps):
		return asl.Header{}, 0, 0, fmt.Errorf("manifest has %d parts of %d bytes for a payload of %d bytes: %w", count, ps, hdr.Size, asl.ErrIntegrity)
	case count > maxParts:
		return asl.Header{}, 0, 0, fmt.Errorf("manifest has %d parts, more than %d: %w", count, maxParts, asl.ErrIntegrity)
	case total != int64(manifestLen(hdr, int(count), v)):
		return asl.Header{}, 0, 0, fmt.Errorf("manifest is %d bytes, its fields say %d: %w", total, manifestLen(hdr, int(count), v), asl.ErrIntegrity)
	}
	return hdr, ps, int(count), nil
}

// decodeManifest decodes a whole manifest object.
func decodeManifest(b []byte) (*manifest, error) {
	hdr, ps, count, err := parseManifestHead(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	m := &manifest{hdr: hdr, partSize: ps, digests: make([][32]byte, count)}
	o := 8 + int(headerLen(hdr)) + 12
	if b[7] == 2 {
		m.codecs = make([]uint8, count)
		for i := range m.digests {
			e := b[o+33*i:]
			if e[0] != codecRaw && e[0] != codecZstd {
				return nil, fmt.Errorf("manifest part %d has codec %d: %w", i, e[0], asl.ErrIntegrity)
			}
			m.codecs[i] = e[0]
			copy(m.digests[i][:], e[1:33])
		}
		if m.version() != 2 {
			// Canonical form: a manifest with no compressed part is
			// written as version 1.
			return nil, fmt.Errorf("manifest version 2 names no compressed part: %w", asl.ErrIntegrity)
		}
		return m, nil
	}
	for i := range m.digests {
		copy(m.digests[i][:], b[o+32*i:])
	}
	return m, nil
}

// PartKey is the object key of the part whose bytes have SHA-256 digest d
// (SPECS.md §6.7): PREFIX p/DD/HEX, DD the digest's first byte.
func (s *Store) PartKey(d [32]byte) string {
	h := hex.EncodeToString(d[:])
	return s.prefix + "p/" + h[:2] + "/" + h
}

// bufPool hands out at most n buffers of size bytes, allocated on first
// use and then reused, so a large put or get holds at most n parts.
type bufPool struct {
	free chan []byte
	left int
	size int
	mu   sync.Mutex
}

func newBufPool(n, size int) *bufPool {
	return &bufPool{free: make(chan []byte, n), left: n, size: size}
}

func (p *bufPool) get(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.free:
		return b, nil
	default:
	}
	p.mu.Lock()
	if p.left > 0 {
		p.left--
		p.mu.Unlock()
		return make([]byte, p.size), nil
	}
	p.mu.Unlock()
	select {
	case b := <-p.free:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *bufPool) put(b []byte) { p.free <- b[:cap(b)] }

// putLarge streams a payload above the part size: the calling goroutine
// reads it part by part and hashes it whole, while up to largeParallel
// goroutines hash each part and PUT it under its own key. Once every part
// is acknowledged and the stream has yielded exactly hdr.Size bytes, the
// manifest is written at the artifact's key with If-None-Match: *; that
// PUT makes the artifact visible, so an interrupted put leaves only parts
// no manifest names (removed by Sweep).
func (s *Store) putLarge(ctx context.Context, h *asl.Hasher, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	ps := s.opts.PartSize
	n := partCount(hdr.Size, ps)
	if n > maxParts {
		return asl.Reference{}, fmt.Errorf("s3store: put: %d bytes would be %d parts of %d, more than %d: %w", hdr.Size, n, ps, maxParts, asl.ErrUnsupported)
	}
	m := &manifest{hdr: hdr, partSize: ps, digests: make([][32]byte, n), codecs: make([]uint8, n)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pool := newBufPool(largeParallel+1, int(ps))
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	setErr := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	sem := make(chan struct{}, largeParallel)
	readErr := func() error {
		for i := range m.digests {
			buf, err := pool.get(ctx)
			if err != nil {
				return err
			}
			buf = buf[:m.partLen(i)]
			if _, err := io.ReadFull(r, buf); err != nil {
				return payloadErr(hdr, err)
			}
			h.Write(buf)
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			wg.Add(1)
			go func() {
				defer func() { pool.put(buf); <-sem; wg.Done() }()
				m.digests[i] = sha256.Sum256(buf)
				var err error
				m.codecs[i], err = s.putPartCompressed(ctx, m.digests[i], buf) // compress.go
				if err != nil {
					setErr(err)
				}
			}()
		}
		return noMore(r, hdr)
	}()
	if readErr != nil {
		cancel()
	}
	wg.Wait()
	if readErr != nil && (firstErr == nil || !errors.Is(readErr, context.Canceled)) {
		return asl.Reference{}, readErr
	}
	if firstErr != nil {
		return asl.Reference{}, firstErr
	}
	ref, err := h.Sum()
	if err != nil {
		return asl.Reference{}, err
	}
	return ref, s.putManifest(ctx, ref, m.encode())
}

// putPart writes one part under its key, signed with its digest (the
// library does not hash it again; the object store checks the body
// against it). The PUT is unconditional: the key
// names the bytes, so it rewrites identical bytes, and it refreshes the
// part's modification time, which keeps Sweep from removing a part a put
// still relies on (and repairs a damaged part).
func (s *Store) putPart(ctx context.Context, d [32]byte, b []byte) error {
	key := s.PartKey(d)
	po := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: true}
	withChecksum(&po, b, hex.EncodeToString(d[:]))
	_, err := s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), "", hex.EncodeToString(d[:]), po)
	if err != nil {
		return s.errorf("put part", key, asl.Reference{}, err)
	}
	return nil
}

// putManifest writes the manifest of ref with If-None-Match: *. When the
// key exists it reads as many bytes as the manifest has plus one: the same
// manifest means the artifact is stored; anything else (an old-layout
// object, a damaged one) is replaced by the manifest, whose parts have just
// been acknowledged, so a re-put repairs a damaged large artifact.
func (s *Store) putManifest(ctx context.Context, ref asl.Reference, mb []byte) error {
	key := s.ArtifactKey(ref)
	po := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	withChecksum(&po, mb, "")
	po.SetMatchETagExcept("*")
	for attempt := range 6 {
		_, err := s.core.Client.PutObject(ctx, s.bucket, key, bytes.NewReader(mb), int64(len(mb)), po)
		switch {
		case err == nil:
			return nil
		case alreadyExists(err):
			same, err := s.sameObject(ctx, key, mb)
			if err != nil {
				return s.errorf("put (read existing manifest)", key, ref, err)
			}
			if same {
				return s.refresh(ctx, ref, key, mb, "", false)
			}
			return s.refresh(ctx, ref, key, mb, "", true) // replace it (gc.go)
		case code(err) == "ConditionalRequestConflict":
			if err := sleepCtx(ctx, attempt); err != nil {
				return err
			}
			continue
		default:
			return s.errorf("put (manifest)", key, ref, err)
		}
	}
	return fmt.Errorf("s3store: put (manifest) s3://%s/%s (%s): gave up after concurrent writes", s.bucket, key, ref)
}

// sameObject says whether the object at key is exactly b, reading at most
// len(b)+1 bytes of it.
func (s *Store) sameObject(ctx context.Context, key string, b []byte) (bool, error) {
	var o minio.GetObjectOptions
	o.SetRange(0, int64(len(b)))
	body, _, h, err := s.core.GetObject(ctx, s.bucket, key, o)
	if err != nil {
		if code(err) == "NoSuchKey" || code(err) == "InvalidRange" {
			return false, nil
		}
		return false, err
	}
	defer body.Close()
	got, err := io.ReadAll(io.LimitReader(body, int64(len(b))+1))
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, b) && contentTotal(h, int64(len(got))) == int64(len(b)), nil
}

// contentTotal is the object length a ranged GET's Content-Range gives,
// or def.
func contentTotal(h interface{ Get(string) string }, def int64) int64 {
	if cr := h.Get("Content-Range"); cr != "" {
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
				return n
			}
		}
	}
	return def
}

func sleepCtx(ctx context.Context, attempt int) error {
	t := timeAfter(attempt)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t:
		return nil
	}
}

// fetchLarge reads the artifact a manifest describes. One goroutine opens
// the GETs of the parts in order, up to largeParallel ahead of the one
// being read, so that the object store sends the next parts while this
// one is read; each part's length is checked against the manifest when its
// GET answers (a missing or resized part is asl.ErrIntegrity before any of
// its bytes are returned). A second goroutine reads the bodies into chunks
// (readChunks of chunkSize, reused); the caller's goroutine hashes the
// payload whole under ref (asl.VerifyReader) as it takes the chunks, so
// receiving and hashing run on both cores. Bytes that do not hash to ref
// fail the final Read with asl.ErrIntegrity, withholding the last bytes.
func (s *Store) fetchLarge(ctx context.Context, ref asl.Reference, key string, m *manifest) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	lr := &largeReader{cancel: cancel, chunks: make(chan chunk, readChunks), free: make(chan []byte, readChunks)}
	for range readChunks {
		lr.free <- make([]byte, chunkSize)
	}
	slots := make([]chan partResult, len(m.digests))
	for i := range slots {
		slots[i] = make(chan partResult, 1)
	}
	ahead := make(chan struct{}, largeParallel)
	lr.wg.Add(2)
	go func() { // opener
		defer lr.wg.Done()
		for i := range m.digests {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			body, err := s.openPartOf(ctx, ref, m, i) // compress.go
			if err != nil {
				err = located{err}
			}
			slots[i] <- partResult{body: body, err: err}
			if err != nil {
				return
			}
		}
	}()
	go func() { // reader
		defer lr.wg.Done()
		defer close(lr.chunks)
		for i := range m.digests {
			var r partResult
			select {
			case r = <-slots[i]:
			case <-ctx.Done():
				return
			}
			if r.err != nil {
				lr.chunks <- chunk{err: r.err}
				return
			}
			err := s.pumpPart(ctx, lr, ref, m, i, r.body)
			<-ahead
			if err != nil {
				lr.chunks <- chunk{err: located{fmt.Errorf("s3store: fetch part %d (s3://%s/%s) of %s: %w", i, s.bucket, s.partKeyOf(m, i), ref, err)}}
				return
			}
		}
	}()
	// Bodies opened but never read are closed once both goroutines end.
	lr.drain = func() {
		for _, c := range slots {
			select {
			case r := <-c:
				if r.body != nil {
					r.body.Close()
				}
			default:
			}
		}
	}
	vr, err := asl.VerifyReader(ref, m.hdr, lr)
	if err != nil {
		lr.Close()
		return nil, err
	}
	return &fetchReader{s: s, vr: vr, body: lr, key: key, ref: ref, size: m.hdr.Size, lr: lr, hdr: m.hdr}, nil
}

const (
	// chunkSize and readChunks: a large get holds readChunks chunks.
	chunkSize  = 1 << 20
	readChunks = 8
)

type partResult struct {
	body io.ReadCloser
	err  error
}

type chunk struct {
	b   []byte
	err error
}

type largeReader struct {
	cancel context.CancelFunc
	chunks chan chunk
	free   chan []byte
	wg     sync.WaitGroup
	drain  func()

	cur  []byte // the rest of the chunk being read
	buf  []byte // its buffer
	err  error
	once sync.Once
}

// pump reads n bytes of body into chunks; it returns how many it passed
// on, all of them or those before the error.
func (l *largeReader) pump(ctx context.Context, body io.Reader, n int64) (int64, error) {
	var done int64
	for n > 0 {
		var b []byte
		select {
		case b = <-l.free:
		case <-ctx.Done():
			return done, ctx.Err()
		}
		b = b[:min(int64(cap(b)), n)]
		k, err := io.ReadFull(body, b)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && k > 0 && !errors.Is(err, asl.ErrIntegrity) {
			// The bytes before the failure are passed on: a resumed
			// read starts after them.
			b = b[:k]
		} else if err != nil {
			l.free <- b
			return done, fmt.Errorf("connection ended %d bytes before the part's end: %w", n, err)
		}
		n -= int64(k)
		done += int64(k)
		select {
		case l.chunks <- chunk{b: b}:
		case <-ctx.Done():
			return done, ctx.Err()
		}
		if err != nil {
			return done, fmt.Errorf("connection ended %d bytes before the part's end: %w", n, err)
		}
	}
	return done, nil
}

// partResumes bounds the ranged re-reads of one raw part whose body broke
// off (SPECS.md §6.7 "Retries").
const partResumes = 3

// pumpPart reads part i (n bytes, its body already open) into chunks. A
// raw part whose body breaks off (the connection's failure, not damage
// the object store reports) is read on from the byte reached with a
// ranged GET, up to partResumes times: the whole payload is hashed under
// ref as it is taken, so a resumed read can add no wrong byte unseen.
func (s *Store) pumpPart(ctx context.Context, lr *largeReader, ref asl.Reference, m *manifest, i int, body io.ReadCloser) error {
	n := int64(m.partLen(i))
	var done int64
	for attempt := 0; ; attempt++ {
		k, err := lr.pump(ctx, body, n-done)
		body.Close()
		done += k
		if err == nil {
			return nil
		}
		if attempt >= partResumes || ctx.Err() != nil || m.codec(i) != codecRaw ||
			errors.Is(err, asl.ErrIntegrity) || !errors.Is(err, io.ErrUnexpectedEOF) && !isNetErr(err) {
			return err
		}
		if body, err = s.openPartRange(ctx, ref, m.digests[i], int(n), i, done); err != nil {
			return err
		}
	}
}

// isNetErr reports a failure of the connection reading a body.
func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// next returns the next chunk whole, to be given back with release; io.EOF
// after the last.
func (l *largeReader) next() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	c, ok := <-l.chunks
	if !ok {
		return nil, io.EOF
	}
	if c.err != nil {
		l.err = c.err
	}
	return c.b, c.err
}

func (l *largeReader) release(b []byte) { l.free <- b[:cap(b)] }

// writeTo is fetchReader.WriteTo of a large artifact read from its
// start: each chunk is hashed and written as it comes, with no copy; the
// last chunk is written only once the payload hashes to ref (withheld with
// asl.ErrIntegrity otherwise), as VerifyReader does.
func (f *fetchReader) writeTo(w io.Writer) (int64, error) {
	h, err := asl.NewHasher(f.ref.HashID(), f.hdr)
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		b, err := f.lr.next()
		if err == io.EOF {
			if f.read != f.size {
				return n, fmt.Errorf("s3store: fetch s3://%s/%s (%s): parts ended after %d of %d payload bytes: %w", f.s.bucket, f.key, f.ref, f.read, f.size, asl.ErrIntegrity)
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if f.read+uint64(len(b)) > f.size {
			return n, fmt.Errorf("s3store: fetch s3://%s/%s (%s): parts longer than the %d payload bytes: %w", f.s.bucket, f.key, f.ref, f.size, asl.ErrIntegrity)
		}
		h.Write(b)
		f.read += uint64(len(b))
		if f.read == f.size && !h.Matches(f.ref) {
			got, _ := h.Sum()
			return n, fmt.Errorf("s3store: fetch s3://%s/%s: %s: stored bytes hash to %s: %w", f.s.bucket, f.key, f.ref, got, asl.ErrIntegrity)
		}
		k, err := w.Write(b)
		n += int64(k)
		f.lr.release(b)
		if err != nil {
			return n, err
		}
	}
}

func (l *largeReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	for len(l.cur) == 0 {
		if l.buf != nil {
			l.free <- l.buf[:cap(l.buf)]
			l.buf = nil
		}
		c, ok := <-l.chunks
		if !ok {
			return 0, io.EOF
		}
		if c.err != nil {
			l.err = c.err
			return 0, c.err
		}
		l.buf, l.cur = c.b, c.b
	}
	n := copy(p, l.cur)
	l.cur = l.cur[n:]
	return n, nil
}

// Close stops the downloads, waits for them and closes every part body
// opened.
func (l *largeReader) Close() error {
	l.once.Do(func() {
		l.cancel()
		// Unblock the reader goroutine and wait.
		go func() {
			for range l.chunks {
			}
		}()
		l.wg.Wait()
		l.drain()
	})
	return nil
}

// openPart GETs part i (digest d) and checks its length is n.
func (s *Store) openPart(ctx context.Context, ref asl.Reference, d [32]byte, n, i int) (io.ReadCloser, error) {
	return s.openPartRange(ctx, ref, d, n, i, 0)
}

// openPartRange opens raw part i (n bytes) from byte from on: a ranged GET
// when from > 0, whose answer must hold exactly the n-from bytes asked.
func (s *Store) openPartRange(ctx context.Context, ref asl.Reference, d [32]byte, n, i int, from int64) (io.ReadCloser, error) {
	key := s.PartKey(d)
	var opts minio.GetObjectOptions
	if from > 0 {
		if err := opts.SetRange(from, int64(n)-1); err != nil {
			return nil, fmt.Errorf("s3store: fetch part %d of %s from byte %d: %w", i, ref, from, err)
		}
	}
	body, info, _, err := s.core.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		if code(err) == "NoSuchKey" {
			return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): part %d (s3://%s/%s) is missing: %w",
				s.bucket, s.ArtifactKey(ref), ref, i, s.bucket, key, asl.ErrIntegrity)
		}
		return nil, s.errorf(fmt.Sprintf("fetch part %d of %s", i, ref), key, asl.Reference{}, err)
	}
	if info.Size != int64(n)-from {
		body.Close()
		return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): part %d (s3://%s/%s) from byte %d is %d bytes, want %d: %w",
			s.bucket, s.ArtifactKey(ref), ref, i, s.bucket, key, from, info.Size, int64(n)-from, asl.ErrIntegrity)
	}
	return body, nil
}

// readManifest GETs the whole manifest at key (its length total known
// from the first bytes already read).
func (s *Store) readManifest(ctx context.Context, ref asl.Reference, key string, first []byte, body io.Reader, total int64) (*manifest, error) {
	if _, _, _, err := parseManifestHead(first, total); err != nil {
		return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): %w", s.bucket, key, ref, err)
	}
	b := make([]byte, total)
	n := copy(b, first)
	if _, err := io.ReadFull(body, b[n:]); err != nil {
		return nil, s.errorf("fetch (manifest)", key, ref, err)
	}
	m, err := decodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("s3store: fetch s3://%s/%s (%s): %w", s.bucket, key, ref, err)
	}
	return m, nil
}

// timeAfter is the backoff before retry attempt+1 of a conflicting
// conditional write.
func timeAfter(attempt int) <-chan time.Time {
	return time.After(time.Duration(50<<attempt) * time.Millisecond)
}
