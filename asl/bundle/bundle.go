// Package bundle reads and writes BUNDLE/1 files (SPECS.md §19): a single
// stream of artifacts with their references, a small header, and a trailer
// listing the roots, that `amduat export` writes and `amduat import` reads.
//
// Both directions stream with bounded memory: the writer copies each
// payload from a reader, and the reader hands each payload out as a reader
// that verifies it against the entry's reference, so an artifact whose
// bytes do not hash to its reference is never returned whole. A decode
// error names the field, its byte offset and the entry (index and
// reference) being read.
package bundle

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// Magic opens every bundle: the ASCII bytes "AMDUATBN".
const Magic = "AMDUATBN"

// Version is the only version this package reads and writes.
const Version = 1

// HeaderLen is the length of the header: magic, version u16, flags u16.
const HeaderLen = 12

// Entry tags.
const (
	tagEnd      = 0x00
	tagArtifact = 0x01
)

// MaxRefLen bounds ref_len in a bundle (2 bytes of hash id and at most 255
// digest bytes), so a reader never allocates for a huge claimed length.
const MaxRefLen = 257

// ErrTruncated is wrapped by the error of a bundle that ends early.
var ErrTruncated = errors.New("bundle ends early")

// Error is a bundle decode failure: the field, its offset from the start
// of the bundle, and, inside an entry, the entry's index and reference. It
// wraps enc.ErrMalformed and, where one applies, the class: asl.ErrIntegrity
// (bytes that do not hash to their reference, a wrong trailer digest),
// asl.ErrUnsupported (a reference under an unregistered hash id, another
// version), or ErrTruncated; every error but ErrUnsupported also wraps
// asl.ErrIntegrity.
type Error struct {
	Field  string
	Offset int64
	Entry  int64 // -1 outside an entry
	Ref    asl.Reference
	Reason string
	Class  error
}

func (e *Error) Error() string {
	where := ""
	if e.Entry >= 0 {
		where = fmt.Sprintf("entry %d", e.Entry)
		if !e.Ref.IsZero() {
			where += " (" + e.Ref.String() + ")"
		}
		where += ": "
	}
	s := fmt.Sprintf("bundle: %s%s at offset %d: %s", where, e.Field, e.Offset, e.Reason)
	if e.Class != nil {
		s += ": " + e.Class.Error()
	}
	return s
}

// Unwrap gives enc.ErrMalformed, the class, and asl.ErrIntegrity for every
// failure that is not ErrUnsupported: a bundle that is malformed, damaged
// or cut short is damaged data.
func (e *Error) Unwrap() []error {
	out := []error{enc.ErrMalformed}
	if e.Class != nil {
		out = append(out, e.Class)
	}
	if e.Class != asl.ErrUnsupported && e.Class != asl.ErrIntegrity {
		out = append(out, asl.ErrIntegrity)
	}
	return out
}

// digester accumulates the trailer digest: SHA-256 of every byte of the
// bundle before the digest, except the entries' payload bytes.
type digester struct{ h hash.Hash }

func newDigester() digester { return digester{sha256.New()} }

// Writer writes a bundle. Call Add for each artifact, then Close with the
// roots. A Writer is not safe for concurrent use.
type Writer struct {
	w       *bufio.Writer
	d       digester
	entries uint64
	err     error
	closed  bool
	scratch []byte
}

// NewWriter writes the header to w and returns a Writer.
func NewWriter(w io.Writer) (*Writer, error) {
	bw := &Writer{w: bufio.NewWriterSize(w, 256<<10), d: newDigester()}
	h := append([]byte(Magic), 0, Version, 0, 0)
	if err := bw.meta(h); err != nil {
		return nil, err
	}
	return bw, nil
}

// meta writes bytes that the trailer digest covers.
func (w *Writer) meta(b []byte) error {
	if w.err != nil {
		return w.err
	}
	w.d.h.Write(b)
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("bundle: writing: %w", err)
	}
	return w.err
}

// Add writes one entry: ref, the header, and exactly hdr.Size bytes from
// payload, which must hash to ref (checked as they are copied; on a
// mismatch Add fails with an error wrapping asl.ErrIntegrity and the
// bundle must be abandoned).
func (w *Writer) Add(ref asl.Reference, hdr asl.Header, payload io.Reader) error {
	return w.add(ref, hdr, payload, true)
}

// AddVerified is Add for a payload that is already checked against ref
// as it is read, such as a reader from asl.Fetcher (SPECS.md §6.2: its
// final Read fails on a mismatch); it skips Add's own hashing.
func (w *Writer) AddVerified(ref asl.Reference, hdr asl.Header, payload io.Reader) error {
	return w.add(ref, hdr, payload, false)
}

func (w *Writer) add(ref asl.Reference, hdr asl.Header, payload io.Reader, check bool) error {
	if w.closed {
		return errors.New("bundle: Add after Close")
	}
	if w.err != nil {
		return w.err
	}
	h, err := asl.NewHasher(ref.HashID(), hdr)
	if err != nil {
		return fmt.Errorf("bundle: entry %d (%s): %w", w.entries, ref, err)
	}
	w.scratch = append(w.scratch[:0], tagArtifact)
	w.scratch = asl.AppendEncodedRef(w.scratch, ref)
	w.scratch = hdr.AppendHeader(w.scratch)
	if err := w.meta(w.scratch); err != nil {
		return err
	}
	var dst io.Writer = w.w
	if check {
		dst = io.MultiWriter(w.w, h)
	}
	// Read one byte past the size so that a verifying reader reaches its
	// end and reports damage.
	n, err := io.Copy(dst, io.LimitReader(payload, int64(hdr.Size)))
	if err == nil && n == int64(hdr.Size) {
		var one [1]byte
		if k, rerr := payload.Read(one[:]); k > 0 {
			err = fmt.Errorf("payload is longer than %d bytes", hdr.Size)
		} else if rerr != nil && rerr != io.EOF {
			err = rerr
		}
	}
	if err != nil {
		w.err = fmt.Errorf("bundle: entry %d (%s): copying payload: %w", w.entries, ref, err)
		return w.err
	}
	if uint64(n) != hdr.Size {
		w.err = fmt.Errorf("bundle: entry %d (%s): payload ended after %d of %d bytes", w.entries, ref, n, hdr.Size)
		return w.err
	}
	if check && !h.Matches(ref) {
		got, _ := h.Sum()
		w.err = fmt.Errorf("bundle: entry %d (%s): bytes hash to %s: %w", w.entries, ref, got, asl.ErrIntegrity)
		return w.err
	}
	w.entries++
	return nil
}

// AddArtifact writes an in-memory artifact under its reference by id.
func (w *Writer) AddArtifact(id asl.HashID, a asl.Artifact) (asl.Reference, error) {
	ref, err := asl.Derive(id, a)
	if err != nil {
		return asl.Reference{}, err
	}
	return ref, w.Add(ref, a.Header(), bytesReader(a.Bytes))
}

// Entries is the number of entries written so far.
func (w *Writer) Entries() uint64 { return w.entries }

// Close writes the end tag and the trailer (roots, entry count, digest) and
// flushes. It does not close the underlying writer.
func (w *Writer) Close(roots []asl.Reference) error {
	if w.closed {
		return errors.New("bundle: Close called twice")
	}
	w.closed = true
	b := []byte{tagEnd}
	ew := enc.Writer{Buf: b}
	ew.U32(uint32(len(roots)))
	b = ew.Buf
	for _, r := range roots {
		b = asl.AppendEncodedRef(b, r)
	}
	ew = enc.Writer{Buf: b}
	ew.U64(w.entries)
	if err := w.meta(ew.Buf); err != nil {
		return err
	}
	if _, err := w.w.Write(w.d.h.Sum(nil)); err != nil {
		return fmt.Errorf("bundle: writing: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("bundle: writing: %w", err)
	}
	return nil
}

type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b} }
