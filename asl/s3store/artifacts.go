package s3store

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// headerLen is the length of the ArtifactBytes prefix of h (SPECS.md §3.1).
func headerLen(h asl.Header) int64 {
	if h.HasTag {
		return 13
	}
	return 9
}

// readHeader reads the ArtifactBytes prefix from r: a short or malformed
// prefix is damage.
func readHeader(r io.Reader) (asl.Header, error) {
	var b [13]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return asl.Header{}, err
	}
	var h asl.Header
	rest := b[1:9]
	switch b[0] {
	case 0:
	case 1:
		h.HasTag = true
		rest = b[1:13]
	default:
		return asl.Header{}, fmt.Errorf("has_type_tag is 0x%02x: %w", b[0], asl.ErrIntegrity)
	}
	if _, err := io.ReadFull(r, rest); err != nil {
		return asl.Header{}, err
	}
	if h.HasTag {
		h.Tag = asl.TypeTag(binary.BigEndian.Uint32(rest[:4]))
		rest = rest[4:]
	}
	h.Size = binary.BigEndian.Uint64(rest)
	return h, nil
}

// Fetch implements asl.Fetcher: one GET of the artifact's object, whose
// ArtifactBytes are re-hashed under ref (SPECS.md §6.2). An artifact up to
// 256 KiB is verified before the reader is returned; a larger one streams
// and its final Read fails with asl.ErrIntegrity, withholding its last
// bytes, when the object is damaged or cut short. With Options.CacheDir,
// verified copies are kept on local disk and served from there after the
// same check (SPECS.md §6.7, "Local cache").
func (s *Store) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	if err := checkRef(ref); err != nil {
		return nil, asl.Header{}, fmt.Errorf("s3store: fetch: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, asl.Header{}, err
	}
	if s.mem != nil {
		return s.memFetch(ctx, ref)
	}
	if s.cache != nil {
		return s.cachedFetch(ctx, ref)
	}
	return s.fetch(ctx, ref)
}

// fetch is Fetch from the bucket: from the pack this process knows to
// hold ref, else from its loose object, else, after learning the packs
// written since (refreshPacks), from one of those (SPECS.md §6.7,
// "Reading").
func (s *Store) fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	type fetched struct {
		rc  io.ReadCloser
		hdr asl.Header
	}
	f, err := packedOrLoose(s, ctx, ref,
		func(l artLoc) (fetched, error) {
			rc, hdr, err := s.fetchPacked(ctx, ref, l)
			return fetched{rc, hdr}, err
		},
		func() (fetched, error) {
			rc, hdr, err := s.fetchLoose(ctx, ref)
			return fetched{rc, hdr}, err
		})
	return f.rc, f.hdr, err
}

// fetchLoose is fetch from the artifact's own object.
func (s *Store) fetchLoose(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	key := s.ArtifactKey(ref)
	body, info, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, asl.Header{}, s.errorf("fetch", key, ref, err)
	}
	fail := func(err error) (io.ReadCloser, asl.Header, error) {
		body.Close()
		return nil, asl.Header{}, err
	}
	// The object's length (Content-Length) is known: one shorter than any
	// header is damage; bytes it promised that do not arrive are a
	// transport failure (an I/O error), never damage.
	if info.Size < 9 {
		return fail(fmt.Errorf("s3store: fetch s3://%s/%s (%s): object is %d bytes, shorter than any ArtifactBytes: %w",
			s.bucket, key, ref, info.Size, asl.ErrIntegrity))
	}
	head := make([]byte, min(info.Size, manifestHead))
	if _, err := io.ReadFull(body, head); err != nil {
		return fail(s.errorf("fetch", key, ref, err))
	}
	if isZObject(head) {
		return s.fetchZ(ref, key, head, body, info.Size)
	}
	if isManifest(head) {
		m, err := s.readManifest(ctx, ref, key, head, body, info.Size)
		body.Close()
		if err != nil {
			return nil, asl.Header{}, err
		}
		rc, err := s.fetchLarge(ctx, ref, key, m)
		if err != nil {
			return nil, asl.Header{}, err
		}
		return rc, m.hdr, nil
	}
	hdr, err := readHeader(bytes.NewReader(head))
	if err != nil {
		return fail(s.damaged("fetch", key, ref, err))
	}
	if uint64(info.Size) != uint64(headerLen(hdr))+hdr.Size {
		return fail(fmt.Errorf("s3store: fetch s3://%s/%s (%s): object is %d bytes, its header says %d: %w",
			s.bucket, key, ref, info.Size, uint64(headerLen(hdr))+hdr.Size, asl.ErrIntegrity))
	}
	payload := io.MultiReader(bytes.NewReader(head[headerLen(hdr):]), body)
	vr, err := asl.VerifyReader(ref, hdr, payload)
	if err != nil {
		return fail(err)
	}
	fr := &fetchReader{s: s, vr: vr, body: body, key: key, ref: ref, size: hdr.Size, wholeHdr: hdr}
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

// damaged classifies an error met reading an object's bytes: an object
// cut short is asl.ErrIntegrity; a failing connection stays an I/O error.
func (s *Store) damaged(op, key string, ref asl.Reference, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("s3store: %s s3://%s/%s (%s): object ends inside its header: %w", op, s.bucket, key, ref, asl.ErrIntegrity)
	}
	if errors.Is(err, asl.ErrIntegrity) {
		return fmt.Errorf("s3store: %s s3://%s/%s (%s): %w", op, s.bucket, key, ref, err)
	}
	return s.errorf(op, key, ref, err)
}

type fetchReader struct {
	s    *Store
	vr   io.Reader
	body io.ReadCloser
	key  string
	ref  asl.Reference
	size uint64
	read uint64
	// lr and hdr are set for a large artifact (a manifest's parts).
	lr  *largeReader
	hdr asl.Header
	// wholeHdr is the header of a whole object (its length locates a
	// payload byte in the object).
	wholeHdr asl.Header
	// written is set when WriteTo delivered the whole payload, verified:
	// a Read after it is at the end (asl.ExpectEnd), not a fresh read of
	// the parts through vr.
	written bool
}

// WriteTo implements io.WriterTo (io.Copy uses it): a large artifact
// read from its start goes chunk by chunk with no copy (largeReader), any
// other through Read.
func (f *fetchReader) WriteTo(w io.Writer) (int64, error) {
	if f.lr != nil && f.read == 0 {
		n, err := f.writeTo(w)
		f.written = err == nil
		return n, err
	}
	return io.Copy(w, struct{ io.Reader }{f})
}

func (f *fetchReader) Read(p []byte) (int, error) {
	if f.written {
		return 0, io.EOF
	}
	n, err := f.vr.Read(p)
	f.read += uint64(n)
	var loc located
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.As(err, &loc):
		return n, err
	case errors.Is(err, asl.ErrIntegrity):
		return n, fmt.Errorf("s3store: fetch s3://%s/%s: %w", f.s.bucket, f.key, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The object store promised the bytes (Content-Length): a body
		// cut short is the connection's failure, an I/O error, unless
		// the object store cut it because it found its copy damaged
		// there (MinIO stops a body at a block that fails its bitrot
		// check): a read of the next byte says which.
		if f.lr == nil {
			if perr := f.s.probe(f.key, f.ref, int64(headerLen(f.hdrOf()))+int64(f.read)); errors.Is(perr, asl.ErrIntegrity) {
				return n, fmt.Errorf("s3store: fetch s3://%s/%s (%s): body ended after %d of %d payload bytes: %w", f.s.bucket, f.key, f.ref, f.read, f.size, perr)
			}
		}
		return n, fmt.Errorf("s3store: fetch s3://%s/%s (%s): connection ended after %d of %d payload bytes: %w",
			f.s.bucket, f.key, f.ref, f.read, f.size, err)
	default:
		return n, fmt.Errorf("s3store: fetch s3://%s/%s (%s): reading at payload byte %d: %w", f.s.bucket, f.key, f.ref, f.read, err)
	}
}

// located is an error that names its object already (a part's).
type located struct{ error }

func (l located) Unwrap() error { return l.error }

func (f *fetchReader) Close() error { return f.body.Close() }

// Stat implements asl.Statter with one ranged GET of the object's first 13
// bytes: the header from the bytes, the length from Content-Range. The
// payload is not verified; an object whose length disagrees with its
// header is asl.ErrIntegrity.
func (s *Store) Stat(ctx context.Context, ref asl.Reference) (asl.Info, error) {
	if err := checkRef(ref); err != nil {
		return asl.Info{}, fmt.Errorf("s3store: stat: %w", err)
	}
	if err := s.check(); err != nil {
		return asl.Info{}, err
	}
	return packedOrLoose(s, ctx, ref,
		func(l artLoc) (asl.Info, error) { return s.statPacked(ctx, ref, l) },
		func() (asl.Info, error) { return s.stat(ctx, ref, s.ArtifactKey(ref)) })
}

func (s *Store) stat(ctx context.Context, ref asl.Reference, key string) (asl.Info, error) {
	var o minio.GetObjectOptions
	o.SetRange(0, manifestHead-1)
	body, info, h, err := s.core.GetObject(ctx, s.bucket, key, o)
	if err != nil {
		if code(err) == "InvalidRange" { // a zero-length object
			return asl.Info{}, fmt.Errorf("s3store: stat s3://%s/%s (%s): object is empty: %w", s.bucket, key, ref, asl.ErrIntegrity)
		}
		return asl.Info{}, s.errorf("stat", key, ref, err)
	}
	defer body.Close()
	head, err := io.ReadAll(io.LimitReader(body, manifestHead))
	if err != nil {
		return asl.Info{}, s.errorf("stat", key, ref, err)
	}
	total := contentTotal(h, info.Size)
	if isZObject(head) {
		return s.statZ(ref, key, head, total)
	}
	if isManifest(head) {
		hdr, _, _, err := parseManifestHead(head, total)
		if err != nil {
			return asl.Info{}, fmt.Errorf("s3store: stat s3://%s/%s (%s): %w", s.bucket, key, ref, err)
		}
		return asl.Info{Ref: ref, Header: hdr, StoredSize: int64(hdr.Size), Compression: "none"}, nil
	}
	hdr, err := readHeader(bytes.NewReader(head))
	if err != nil {
		return asl.Info{}, s.damaged("stat", key, ref, err)
	}
	if total < 0 || uint64(total) != uint64(headerLen(hdr))+hdr.Size {
		return asl.Info{}, fmt.Errorf("s3store: stat s3://%s/%s (%s): object is %d bytes, its header says %d: %w",
			s.bucket, key, ref, total, uint64(headerLen(hdr))+hdr.Size, asl.ErrIntegrity)
	}
	return asl.Info{Ref: ref, Header: hdr, StoredSize: int64(hdr.Size), Compression: "none"}, nil
}

// Enumerate implements asl.Enumerator: a ListObjectsV2 walk of PREFIX a/
// from the key of after (S3 lists keys in ascending UTF-8 binary order,
// which is ReferenceBytes order for these keys, SPECS.md §6.7), with a
// Stat of each listed object, Parallel at a time, reported in order. An
// object whose stat finds damage, or a key that is no artifact key, is
// skipped; the walk goes on and then returns every such error joined,
// wrapping asl.ErrIntegrity.
func (s *Store) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	if err := s.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lo := minio.ListObjectsOptions{Prefix: s.prefix + "a/", Recursive: true}
	if !after.IsZero() {
		lo.StartAfter = s.ArtifactKey(after)
	}
	if err := s.refreshPacks(ctx); err != nil {
		return err
	}
	packed := s.packs.packedInfos(after)
	type item struct {
		ref  asl.Reference
		key  string
		info *asl.Info // a packed artifact: from its index, no request
	}
	page := make([]item, 0, 256)
	// Damaged objects are skipped and reported at the end, joined (as
	// pebblestore does with damaged index records), so that verify goes on
	// past them (SPECS.md §16).
	var damaged []error
	flush := func() error {
		infos := make([]asl.Info, len(page))
		errs := make([]error, len(page))
		s.parallel(len(page), func(i int) {
			if page[i].info != nil {
				infos[i] = *page[i].info
				return
			}
			infos[i], errs[i] = s.stat(ctx, page[i].ref, page[i].key)
		})
		for i := range page {
			if errors.Is(errs[i], asl.ErrNotFound) {
				continue // removed between the listing and the stat
			}
			if errors.Is(errs[i], asl.ErrIntegrity) {
				damaged = append(damaged, errs[i])
				continue
			}
			if errs[i] != nil {
				return errs[i]
			}
			if err := fn(infos[i]); err != nil {
				return err
			}
		}
		page = page[:0]
		return nil
	}
	add := func(it item) error {
		page = append(page, it)
		if len(page) == cap(page) {
			return flush()
		}
		return nil
	}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return s.errorf("list", lo.Prefix, asl.Reference{}, obj.Err)
		}
		ref, err := asl.ParseReference(path.Base(obj.Key))
		if err != nil || s.ArtifactKey(ref) != obj.Key {
			damaged = append(damaged, fmt.Errorf("s3store: list s3://%s/%s: key is no artifact key: %w", s.bucket, obj.Key, asl.ErrIntegrity))
			continue
		}
		for len(packed) > 0 && bytes.Compare(packed[0].Ref.Bytes(), ref.Bytes()) <= 0 {
			if packed[0].Ref != ref {
				if err := add(item{ref: packed[0].Ref, info: &packed[0]}); err != nil {
					return err
				}
			}
			packed = packed[1:]
		}
		if err := add(item{ref: ref, key: obj.Key}); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range packed {
		if err := add(item{ref: packed[i].Ref, info: &packed[i]}); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	damaged = append(damaged, s.packs.damage()...)
	if len(damaged) > 0 {
		return fmt.Errorf("s3store: enumerate s3://%s/%sa/: %d damaged objects skipped: %w", s.bucket, s.prefix, len(damaged), errors.Join(damaged...))
	}
	return nil
}

// parallel runs f(0..n-1), at most Parallel at once.
func (s *Store) parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	sem := make(chan struct{}, s.opts.Parallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(i)
		}()
	}
	wg.Wait()
}

// Put implements asl.Receiver. An artifact up to PartSize is read into
// memory, hashed and written with one conditional PUT (If-None-Match: *)
// under its key. A larger one streams, hashed on the way, as
// content-addressed part objects uploaded in parallel, then a manifest at
// its key written last (putLarge; memory: largeParallel+1 parts): nothing
// is visible under an artifact key before every part is (SPECS.md §6.7).
// Put returns once the object store acknowledged every object.
func (s *Store) Put(ctx context.Context, id asl.HashID, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	if err := checkHash(id); err != nil {
		return asl.Reference{}, err
	}
	if err := s.check(); err != nil {
		return asl.Reference{}, err
	}
	if err := ctx.Err(); err != nil {
		return asl.Reference{}, err
	}
	h, err := asl.NewHasher(id, hdr)
	if err != nil {
		return asl.Reference{}, err
	}
	if hdr.Size <= s.opts.PartSize {
		buf := hdr.AppendHeader(make([]byte, 0, uint64(headerLen(hdr))+hdr.Size))
		buf = buf[:cap(buf)]
		payload := buf[headerLen(hdr):]
		if _, err := io.ReadFull(r, payload); err != nil {
			return asl.Reference{}, payloadErr(hdr, err)
		}
		if err := noMore(r, hdr); err != nil {
			return asl.Reference{}, err
		}
		h.Write(payload)
		ref, err := h.Sum()
		if err != nil {
			return asl.Reference{}, err
		}
		if s.packs.young(ref, s.touchAge()) {
			return ref, nil // packed, and younger than the touch age
		}
		if err := s.putObject(ctx, ref, buf); err != nil {
			return ref, err
		}
		s.remember(ref, hdr, payload)
		return ref, nil
	}
	return s.putLarge(ctx, h, hdr, r)
}

func payloadErr(hdr asl.Header, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("s3store: put: payload ends before the %d bytes its header says: %w", hdr.Size, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("s3store: put: reading the payload: %w", err)
}

// noMore checks that r is exhausted (the payload length rule, SPECS.md
// §6.1).
func noMore(r io.Reader, hdr asl.Header) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return fmt.Errorf("s3store: put: payload is longer than the %d bytes its header says", hdr.Size)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("s3store: put: reading the payload: %w", err)
		}
	}
}

// bodySHA256 is the hex SHA-256 of the ArtifactBytes of ref when its hash
// is SHA-256 (the digest is that hash, SPECS.md §5.1), else "". Given to
// the client library, it signs the PUT (X-Amz-Content-Sha256, which the
// object store checks against the body received) without hashing the
// bytes a second time.
func bodySHA256(ref asl.Reference) string {
	if ref.HashID() != asl.HashSHA256 {
		return ""
	}
	return hex.EncodeToString(ref.Digest())
}

// differs says whether the object at key is known not to hold b: its
// length differs, or its ETag is a plain MD5 (a single-part PUT's, 32 hex
// digits) other than b's. One HEAD; an object gone meanwhile differs. mod
// is the object's modification time (zero when it differs).
func (s *Store) differs(ctx context.Context, key string, b []byte) (differs bool, mod time.Time, err error) {
	info, err := s.core.Client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if code(err) == "NoSuchKey" {
			return true, time.Time{}, nil
		}
		return false, time.Time{}, err
	}
	if info.Size != int64(len(b)) {
		return true, time.Time{}, nil
	}
	etag := strings.Trim(info.ETag, "\"")
	if len(etag) != 32 {
		return false, info.LastModified, nil
	}
	if _, err := hex.DecodeString(etag); err != nil {
		return false, info.LastModified, nil
	}
	sum := md5.Sum(b)
	if etag != hex.EncodeToString(sum[:]) {
		return true, time.Time{}, nil
	}
	return false, info.LastModified, nil
}

// putObject writes the ArtifactBytes b of ref under its key, unless an
// object is there already (If-None-Match: *; a 412 means the same bytes
// are stored, unless differs finds the object damaged: then it is
// overwritten, so a re-put repairs it). A conflicting concurrent conditional write (409) is retried.
func (s *Store) putObject(ctx context.Context, ref asl.Reference, b []byte) error {
	key := s.ArtifactKey(ref)
	b, sha := encodeObject(ref, b) // compressed where it pays (compress.go)
	po := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableContentSha256: sha != ""}
	withChecksum(&po, b, sha)
	po.SetMatchETagExcept("*")
	var err error
	for attempt := range 6 {
		_, err = s.core.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), "", sha, po)
		if err == nil {
			return nil
		}
		if alreadyExists(err) {
			differs, mod, err := s.differs(ctx, key, b)
			if err != nil {
				return s.errorf("put (stat existing)", key, ref, err)
			}
			if !differs && time.Since(mod) < s.touchAge() {
				// Stored and younger than the touch age: nothing to
				// rewrite (the HEAD that found it gave its age, so
				// refresh need not ask again).
				return nil
			}
			if !differs {
				// Stored: its grace starts again, safe from a
				// collection running meanwhile (SPECS.md §6.7).
				return s.refresh(ctx, ref, key, b, sha, false)
			}
			// Damaged (or of another form): replace it with the bytes
			// just hashed to ref, safe from a collection running
			// meanwhile (gc.go).
			return s.refresh(ctx, ref, key, b, sha, true)
		}
		if code(err) != "ConditionalRequestConflict" {
			break
		}
		if err := sleepCtx(ctx, attempt); err != nil {
			return err
		}
	}
	return s.errorf("put", key, ref, err)
}

// PutBatch implements asl.BatchReceiver: the small artifacts go into
// packs (putPacks; a batch of one small artifact is one loose object, one
// PUT), the large ones stream as parts and a manifest, Parallel at a time.
// When it returns nil every object is acknowledged.
func (s *Store) PutBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, error) {
	return s.putBatch(ctx, id, arts, nil)
}

// putBatch is PutBatch with index entries, written after every artifact
// is acknowledged (with the last pack's index when that is the last write,
// SPECS.md §6.5).
func (s *Store) putBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) ([]asl.Reference, error) {
	if err := checkHash(id); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	refs := make([]asl.Reference, len(arts))
	for i, a := range arts {
		ref, err := asl.Derive(id, a)
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	seen := make(map[asl.Reference]bool, len(arts))
	var small []packRecord
	var large []int
	for i, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		a := arts[i]
		switch {
		case uint64(len(a.Bytes)) > s.opts.PartSize:
			large = append(large, i)
		case s.packs.young(ref, s.touchAge()):
			// Packed less than the touch age ago: stored, and no
			// collection takes it before its grace (SPECS.md §6.7).
		default:
			small = append(small, packRecord{Ref: ref, Hdr: a.Header(), Payload: a.Bytes})
		}
	}
	if len(small) == 1 && len(large) == 0 && len(entries) == 0 {
		r := small[0]
		if err := s.putObject(ctx, r.Ref, asl.EncodeArtifact(asl.Artifact{Bytes: r.Payload, Tag: r.Hdr.Tag, HasTag: r.Hdr.HasTag})); err != nil {
			return nil, err
		}
		s.remember(r.Ref, r.Hdr, r.Payload)
		return refs, nil
	}
	if len(large) > 0 {
		ctx, cancel := context.WithCancel(ctx)
		errs := make([]error, len(large)+1)
		s.parallel(len(large)+1, func(j int) {
			if j == len(large) {
				if len(small) > 0 {
					errs[j] = s.putPacks(ctx, small, nil)
				}
			} else {
				a := arts[large[j]]
				_, errs[j] = s.putLarge(ctx, mustHasher(id, a.Header()), a.Header(), bytes.NewReader(a.Bytes))
			}
			if errs[j] != nil {
				cancel()
			}
		})
		cancel()
		if err := firstErr(errs); err != nil {
			return nil, err
		}
		small = nil
	}
	if len(small) > 0 || len(entries) > 0 {
		if err := s.putPacks(ctx, small, entries); err != nil {
			return nil, err
		}
	}
	return refs, nil
}

func mustHasher(id asl.HashID, hdr asl.Header) *asl.Hasher {
	h, err := asl.NewHasher(id, hdr)
	if err != nil {
		panic(err)
	}
	return h
}

// GetBatch implements asl.BatchFetcher: the artifacts packed in one pack
// are read with one ranged GET per run of nearby records (coalesced,
// SPECS.md §6.7, "Reading"), the others one GET each, Parallel requests
// in flight; every record is verified as Fetch does, and fn is called in
// input order with each artifact or the error of that reference alone
// (asl.ErrNotFound, asl.ErrIntegrity, …). limit bounds each artifact as
// in asl.Get. An operational error (I/O, cancellation) stops the batch.
func (s *Store) GetBatch(ctx context.Context, refs []asl.Reference, limit int64, fn func(i int, a asl.Artifact, err error) error) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := s.ensurePacks(ctx); err != nil {
		return err
	}
	if limit <= 0 {
		limit = asl.DefaultGetLimit
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const window = 1024
	for lo := 0; lo < len(refs); lo += window {
		part := refs[lo:min(lo+window, len(refs))]
		arts := make([]asl.Artifact, len(part))
		errs := make([]error, len(part))
		jobs := s.batchJobs(part)
		s.parallel(len(jobs), func(j int) {
			if err := ctx.Err(); err != nil {
				for _, i := range jobs[j].idx {
					errs[i] = err
				}
				return
			}
			s.runBatchJob(ctx, part, jobs[j], limit, arts, errs)
		})
		for i := range part {
			if errs[i] != nil && !asl.IsContentError(errs[i]) {
				return errs[i]
			}
			if err := fn(lo+i, arts[i], errs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// batchJob is one request of GetBatch: a run of records of one pack
// (span set), or one artifact read by Get.
type batchJob struct {
	idx  []int // positions in the batch
	locs []artLoc
	span bool
	from uint64
	to   uint64 // one past the last byte
}

// batchJobs groups refs: the packed ones by pack, in runs of records at
// most coalesceGap apart and coalesceMax long; every other one alone.
func (s *Store) batchJobs(refs []asl.Reference) []batchJob {
	const (
		coalesceGap = 256 << 10
		coalesceMax = 8 << 20
	)
	type packed struct {
		i int
		l artLoc
	}
	byPack := map[string][]packed{}
	var names []string
	var jobs []batchJob
	seen := map[asl.Reference]int{}
	for i, ref := range refs {
		if _, dup := seen[ref]; dup {
			jobs = append(jobs, batchJob{idx: []int{i}})
			continue
		}
		seen[ref] = i
		l, ok := s.packs.lookup(ref)
		if _, _, inMem := s.memGet(ref); !ok || inMem || l.a.Stored == 0 {
			jobs = append(jobs, batchJob{idx: []int{i}})
			continue
		}
		if _, ok := byPack[l.p.name]; !ok {
			names = append(names, l.p.name)
		}
		byPack[l.p.name] = append(byPack[l.p.name], packed{i, l})
	}
	sort.Strings(names)
	for _, name := range names {
		ps := byPack[name]
		sort.Slice(ps, func(a, b int) bool { return ps[a].l.a.Off < ps[b].l.a.Off })
		var cur *batchJob
		for _, p := range ps {
			end := p.l.a.Off + p.l.a.Stored
			if cur == nil || p.l.a.Off > cur.to+coalesceGap || end-cur.from > coalesceMax {
				jobs = append(jobs, batchJob{span: true, from: p.l.a.Off, to: end})
				cur = &jobs[len(jobs)-1]
			}
			cur.idx = append(cur.idx, p.i)
			cur.locs = append(cur.locs, p.l)
			cur.to = max(cur.to, end)
		}
	}
	return jobs
}

// runBatchJob reads one job's artifacts into arts and errs. A span that
// cannot be read (its pack gone, a broken body) falls back to one Get per
// artifact, which classifies each failure as Fetch does.
func (s *Store) runBatchJob(ctx context.Context, refs []asl.Reference, j batchJob, limit int64, arts []asl.Artifact, errs []error) {
	if j.span {
		b, _, err := s.getRange(ctx, s.PackKey(j.locs[0].p.name), int64(j.from), int64(j.to-j.from))
		if err == nil {
			for k, i := range j.idx {
				l := j.locs[k]
				if l.a.Hdr.Size > uint64(limit) {
					errs[i] = fmt.Errorf("get %s: artifact is %d bytes, above the in-memory limit of %d", refs[i], l.a.Hdr.Size, limit)
					continue
				}
				stored := b[l.a.Off-j.from : l.a.Off-j.from+l.a.Stored]
				payload, err := decodeRecord(l, stored)
				if err != nil {
					errs[i] = fmt.Errorf("s3store: fetch s3://%s/%s bytes %d+%d: %w", s.bucket, s.PackKey(l.p.name), l.a.Off, l.a.Stored, err)
					continue
				}
				s.remember(refs[i], l.a.Hdr, payload)
				arts[i] = asl.Artifact{Bytes: payload, Tag: l.a.Hdr.Tag, HasTag: l.a.Hdr.HasTag}
			}
			return
		}
	}
	for _, i := range j.idx {
		arts[i], errs[i] = asl.Get(ctx, s, refs[i], limit)
	}
}

// hdrOf is the header of the artifact read (for a whole object, rebuilt
// from its size: only its length is used).
func (f *fetchReader) hdrOf() asl.Header {
	if f.lr != nil {
		return f.hdr
	}
	return f.wholeHdr
}

// probe reads, on a fresh request, the byte at off of key, where a body
// broke off: ErrIntegrity when the object store says it cannot read its
// data there (an unreadable code), or answers the request and then cannot
// send that one byte (MinIO sends the headers of a ranged read before it
// finds the block damaged): the same byte failing twice, the second time
// on a response of one byte, is the store's copy, not the network.
func (s *Store) probe(key string, ref asl.Reference, off int64) error {
	o := minio.GetObjectOptions{}
	if err := o.SetRange(off, off); err != nil {
		return err
	}
	body, _, _, err := s.core.GetObject(context.Background(), s.bucket, key, o)
	if err != nil {
		return s.errorf("fetch", key, ref, err)
	}
	defer body.Close()
	n, err := io.Copy(io.Discard, body)
	if n == 0 && (err == nil || errors.Is(err, io.ErrUnexpectedEOF)) {
		return fmt.Errorf("the object store cannot send its byte %d (its copy is damaged there, bitrot): %w", off, asl.ErrIntegrity)
	}
	return err
}
