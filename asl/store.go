package asl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// Info describes a stored artifact without reading its bytes.
type Info struct {
	Ref Reference
	Header
	// StoredSize is the number of payload bytes the backend keeps after
	// compression, or -1 when the backend cannot tell.
	StoredSize int64
	// Compression names the encoding of the stored payload: "none", "zstd",
	// or "mixed" when a chunked artifact uses both.
	Compression string
}

// Fetcher reads artifacts. The reader yields exactly Header.Size payload
// bytes; bytes are verified before they are returned (SPECS.md §6.2), and a
// mismatch surfaces as an error wrapping ErrIntegrity from Read, never as
// wrong bytes. Callers must Close the reader.
type Fetcher interface {
	Fetch(ctx context.Context, ref Reference) (io.ReadCloser, Header, error)
}

// Receiver stores one artifact, streaming: r must yield exactly hdr.Size
// payload bytes. The artifact is hashed with id; the returned Reference is
// durable when Put returns. Putting an artifact already present is a no-op
// that returns the same Reference.
type Receiver interface {
	Put(ctx context.Context, id HashID, hdr Header, r io.Reader) (Reference, error)
}

// BatchReceiver stores many artifacts with one durability barrier: either
// every artifact is durable when PutBatch returns nil, or the error says the
// batch failed. References are returned in input order.
type BatchReceiver interface {
	PutBatch(ctx context.Context, id HashID, arts []Artifact) ([]Reference, error)
}

// Statter reports what is stored under a reference without verifying bytes.
// A missing artifact is an error wrapping ErrNotFound.
type Statter interface {
	Stat(ctx context.Context, ref Reference) (Info, error)
}

// Enumerator visits every stored artifact in ascending ReferenceBytes order,
// starting after the given reference (the zero Reference starts at the
// beginning). fn returning an error stops the walk with that error.
type Enumerator interface {
	Enumerate(ctx context.Context, after Reference, fn func(Info) error) error
}

// Store is what a backend provides: fetch, receive (single and batched),
// stat and enumerate.
type Store interface {
	Fetcher
	Receiver
	BatchReceiver
	Statter
	Enumerator
}

// PutArtifact stores an in-memory artifact through r.
func PutArtifact(ctx context.Context, r Receiver, id HashID, a Artifact) (Reference, error) {
	return r.Put(ctx, id, a.Header(), bytes.NewReader(a.Bytes))
}

// DefaultGetLimit bounds how large an artifact Get reads into memory.
const DefaultGetLimit = 1 << 30

// Get reads a whole artifact into memory. It refuses artifacts larger than
// limit bytes (use Fetch to stream them); limit <= 0 means DefaultGetLimit.
func Get(ctx context.Context, f Fetcher, ref Reference, limit int64) (Artifact, error) {
	if limit <= 0 {
		limit = DefaultGetLimit
	}
	rc, hdr, err := f.Fetch(ctx, ref)
	if err != nil {
		return Artifact{}, err
	}
	defer rc.Close()
	if hdr.Size > uint64(limit) {
		return Artifact{}, fmt.Errorf("get %s: artifact is %d bytes, above the in-memory limit of %d", ref, hdr.Size, limit)
	}
	buf, err := ReadWhole(rc, hdr.Size)
	if err != nil {
		return Artifact{}, fmt.Errorf("get %s: %w", ref, err)
	}
	return Artifact{Bytes: buf, Tag: hdr.Tag, HasTag: hdr.HasTag}, nil
}

// ReadWhole reads the size payload bytes of a verifying reader (Fetch's,
// VerifyReader's) and then its verdict (ExpectEnd): the bytes are returned
// only once the digest of the whole payload was checked.
func ReadWhole(r io.Reader, size uint64) ([]byte, error) {
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	if err := ExpectEnd(r); err != nil {
		return nil, err
	}
	return buf, nil
}

// ExpectEnd reads past the last payload byte of a verifying reader: nil
// when the reader ends there (io.EOF, its verdict that the digest of the
// whole payload matched), an error wrapping ErrIntegrity when a byte more
// follows, and any other error as it is.
func ExpectEnd(r io.Reader) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	switch {
	case n > 0:
		return fmt.Errorf("stored payload is longer than its header says: %w", ErrIntegrity)
	case err == io.EOF:
		return nil
	}
	return err
}

// Has reports whether ref is stored. Only ErrNotFound yields (false, nil).
func Has(ctx context.Context, s Statter, ref Reference) (bool, error) {
	_, err := s.Stat(ctx, ref)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return false, err
}

// VerifyReader wraps the payload of an artifact so that its digest is checked
// at end of stream: the final Read returns io.EOF only when the bytes hash to
// ref; otherwise it returns an error wrapping ErrIntegrity. Backends that can
// check chunks earlier layer that check below this one.
func VerifyReader(ref Reference, hdr Header, r io.Reader) (io.Reader, error) {
	h, err := NewHasher(ref.HashID(), hdr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return &verifyingReader{ref: ref, h: h, r: r, left: hdr.Size}, nil
}

type verifyingReader struct {
	ref  Reference
	h    *Hasher
	r    io.Reader
	left uint64
	err  error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if uint64(len(p)) > v.left {
		p = p[:v.left]
	}
	n := 0
	if len(p) > 0 {
		var err error
		n, err = v.r.Read(p)
		v.h.Write(p[:n])
		v.left -= uint64(n)
		if err != nil && err != io.EOF {
			v.err = err
			return n, err
		}
		if err == io.EOF && v.left > 0 {
			v.err = fmt.Errorf("%s: stored payload ends %d bytes early: %w", v.ref, v.left, ErrIntegrity)
			return n, v.err
		}
	}
	if v.left == 0 {
		got, err := v.h.Sum()
		if err != nil || got != v.ref {
			v.err = fmt.Errorf("%s: stored bytes hash to %s: %w", v.ref, got, ErrIntegrity)
		} else {
			v.err = io.EOF
		}
		if n > 0 && v.err != io.EOF {
			// Withhold the final bytes of a damaged artifact.
			return 0, v.err
		}
		return n, v.err
	}
	return n, nil
}

// BatchFetcher is an optional capability, discovered by type assertion, of
// a store that reads many small artifacts in one round trip (the HTTP
// client). GetBatch calls fn once per reference, in order, with the
// artifact, verified like any read, or the error of that reference alone
// (ErrNotFound, ErrIntegrity, ...); an error fn returns, or one that
// concerns the whole batch, stops it.
type BatchFetcher interface {
	GetBatch(ctx context.Context, refs []Reference, limit int64, fn func(i int, a Artifact, err error) error) error
}

// GetBatch reads refs through f: in one round trip per batch when f is a
// BatchFetcher, else one Get each. limit bounds each artifact as in Get.
func GetBatch(ctx context.Context, f Fetcher, refs []Reference, limit int64, fn func(i int, a Artifact, err error) error) error {
	if bf, ok := f.(BatchFetcher); ok {
		return bf.GetBatch(ctx, refs, limit, fn)
	}
	for i, ref := range refs {
		a, err := Get(ctx, f, ref, limit)
		if err != nil && !IsContentError(err) {
			return err
		}
		if err := fn(i, a, err); err != nil {
			return err
		}
	}
	return nil
}
