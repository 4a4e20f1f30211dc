package bundle

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// Entry is one artifact of a bundle, as Reader.Next returns it; its payload
// is read from the Reader.
type Entry struct {
	Index  uint64        // 0-based position among the bundle's entries
	Offset int64         // offset of the entry's tag byte
	Ref    asl.Reference // the reference the bundle gives; the payload is checked against it
	Header asl.Header
}

// Reader reads a bundle as a stream (SPECS.md §19.3). Next returns each
// entry in turn; Read reads the current entry's payload, and its last Read
// fails with an error wrapping asl.ErrIntegrity, withholding the final
// bytes, when the payload does not hash to the entry's reference. After the
// last entry Next verifies the trailer (entry count, digest, end of input)
// and returns io.EOF; Roots is then valid. Memory stays bounded whatever the
// bundle's size: payloads are never buffered whole, and no allocation
// follows a claimed length or count before the bytes are there.
type Reader struct {
	r   *bufio.Reader
	off int64
	d   digester

	cur      Entry
	inEntry  bool
	left     uint64 // payload bytes of the current entry not yet read
	h        *asl.Hasher
	perr     error // sticky payload error
	verified bool

	payloadLenOff, payloadOff int64
	entries                   uint64
	roots                     []asl.Reference
	done                      bool
	err                       error // sticky error of Next
	buf                       [MaxRefLen]byte
}

// NewReader reads and checks the header.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{r: bufio.NewReaderSize(r, 256<<10), d: newDigester()}
	var h [HeaderLen]byte
	if err := br.full(h[:8], "magic", -1); err != nil {
		return nil, err
	}
	if string(h[:8]) != Magic {
		return nil, br.errAt("magic", 0, -1, fmt.Sprintf("want %q, got %q", Magic, h[:8]), nil)
	}
	if err := br.full(h[8:10], "version", -1); err != nil {
		return nil, err
	}
	if v := binary.BigEndian.Uint16(h[8:10]); v != Version {
		return nil, br.errAt("version", 8, -1, fmt.Sprintf("version %d is not supported (want %d)", v, Version), asl.ErrUnsupported)
	}
	if err := br.full(h[10:12], "flags", -1); err != nil {
		return nil, err
	}
	if f := binary.BigEndian.Uint16(h[10:12]); f != 0 {
		return nil, br.errAt("flags", 10, -1, fmt.Sprintf("flags 0x%04x: no flag is defined, want 0x0000", f), nil)
	}
	return br, nil
}

func (r *Reader) errAt(field string, off, entry int64, reason string, class error) *Error {
	e := &Error{Field: field, Offset: off, Entry: entry, Reason: reason, Class: class}
	if entry >= 0 {
		e.Ref = r.cur.Ref
	}
	return e
}

// full reads len(b) bytes of a covered (non-payload) field.
func (r *Reader) full(b []byte, field string, entry int64) error {
	start := r.off
	n, err := io.ReadFull(r.r, b)
	r.off += int64(n)
	r.d.h.Write(b[:n])
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return r.errAt(field, start, entry, fmt.Sprintf("need %d bytes, %d remain", len(b), n), ErrTruncated)
		}
		return fmt.Errorf("bundle: reading %s at offset %d: %w", field, start, err)
	}
	return nil
}

// readRef reads an EncodedRef field named prefix ("entry.ref", "roots.ref").
func (r *Reader) readRef(prefix string, entry int64) (asl.Reference, error) {
	start := r.off
	var l [4]byte
	if err := r.full(l[:], prefix+".ref_len", entry); err != nil {
		return asl.Reference{}, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n < 2 {
		return asl.Reference{}, r.errAt(prefix+".ref_len", start, entry, fmt.Sprintf("ref_len %d is below 2", n), nil)
	}
	if n > MaxRefLen {
		return asl.Reference{}, r.errAt(prefix+".ref_len", start, entry, fmt.Sprintf("ref_len %d exceeds %d", n, MaxRefLen), nil)
	}
	b := r.buf[:n]
	if err := r.full(b, prefix+".ref_len", entry); err != nil {
		// The reference bytes are cut short: report at the length prefix,
		// as for any length past the end (§2).
		var be *Error
		if errors.As(err, &be) {
			be.Offset = start
		}
		return asl.Reference{}, err
	}
	ref, err := asl.DecodeReference(b)
	if err != nil {
		var de *enc.DecodeError
		if errors.As(err, &de) {
			return asl.Reference{}, r.errAt(prefix+"."+de.Field, start+4+int64(de.Offset), entry, de.Reason, asl.ErrIntegrity)
		}
		return asl.Reference{}, r.errAt(prefix, start, entry, err.Error(), asl.ErrIntegrity)
	}
	return ref, nil
}

// Next advances to the next entry. It first reads and verifies whatever is
// left of the current entry's payload. At the end tag it reads and checks
// the trailer and returns io.EOF.
func (r *Reader) Next() (Entry, error) {
	if r.err != nil {
		return Entry{}, r.err
	}
	if r.done {
		return Entry{}, io.EOF
	}
	if r.inEntry {
		if _, err := io.Copy(io.Discard, readerFunc(r.Read)); err != nil {
			r.err = err
			return Entry{}, err
		}
	}
	e, err := r.next()
	if err != nil {
		r.err = err
		if err == io.EOF {
			r.err, r.done = nil, true
		}
	}
	return e, err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func (r *Reader) next() (Entry, error) {
	idx := int64(r.entries)
	start := r.off
	r.cur = Entry{Index: r.entries, Offset: start}
	var t [1]byte
	if err := r.full(t[:], "entry.tag", idx); err != nil {
		return Entry{}, err
	}
	switch t[0] {
	case tagEnd:
		return Entry{}, r.trailer()
	case tagArtifact:
	default:
		return Entry{}, r.errAt("entry.tag", start, idx, fmt.Sprintf("tag 0x%02x: want 0x01 (artifact) or 0x00 (end)", t[0]), nil)
	}
	ref, err := r.readRef("entry.ref", idx)
	if err != nil {
		return Entry{}, err
	}
	r.cur.Ref = ref
	if !ref.Known() {
		return Entry{}, r.errAt("entry.ref.hash_id", start+5, idx, fmt.Sprintf("hash id 0x%04x is not registered: the bytes cannot be checked", uint16(ref.HashID())), asl.ErrUnsupported)
	}
	aoff := r.off
	var f [1]byte
	if err := r.full(f[:], "entry.artifact.has_type_tag", idx); err != nil {
		return Entry{}, err
	}
	var hdr asl.Header
	switch f[0] {
	case 0:
	case 1:
		var tb [4]byte
		if err := r.full(tb[:], "entry.artifact.type_tag", idx); err != nil {
			return Entry{}, err
		}
		hdr.HasTag, hdr.Tag = true, asl.TypeTag(binary.BigEndian.Uint32(tb[:]))
	default:
		return Entry{}, r.errAt("entry.artifact.has_type_tag", aoff, idx, fmt.Sprintf("flag 0x%02x: want 0x00 or 0x01", f[0]), nil)
	}
	lenOff := r.off
	var lb [8]byte
	if err := r.full(lb[:], "entry.artifact.bytes length", idx); err != nil {
		return Entry{}, err
	}
	hdr.Size = binary.BigEndian.Uint64(lb[:])
	if hdr.Size > 1<<62 {
		return Entry{}, r.errAt("entry.artifact.bytes", lenOff, idx, fmt.Sprintf("length %d is past any end", hdr.Size), ErrTruncated)
	}
	h, err := asl.NewHasher(ref.HashID(), hdr)
	if err != nil {
		return Entry{}, r.errAt("entry.ref.hash_id", start+5, idx, err.Error(), asl.ErrUnsupported)
	}
	r.cur.Header = hdr
	r.h, r.left, r.inEntry, r.perr, r.verified = h, hdr.Size, true, nil, false
	r.payloadLenOff, r.payloadOff = lenOff, r.off
	return r.cur, nil
}

// Read reads the current entry's payload. The final Read returns io.EOF
// only if the payload hashes to the entry's reference; otherwise it returns
// an *Error wrapping asl.ErrIntegrity, and the last bytes are withheld.
func (r *Reader) Read(p []byte) (int, error) {
	if !r.inEntry {
		return 0, io.EOF
	}
	if r.perr != nil {
		return 0, r.perr
	}
	if r.left == 0 {
		return 0, r.finish()
	}
	if uint64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.off += int64(n)
	r.left -= uint64(n)
	r.h.Write(p[:n])
	if err != nil && !(err == io.EOF && r.left == 0) {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			r.perr = r.errAt("entry.artifact.bytes", r.payloadLenOff, int64(r.cur.Index),
				fmt.Sprintf("length %d: the bundle ends after %d payload bytes", r.cur.Header.Size, r.cur.Header.Size-r.left), ErrTruncated)
		} else {
			r.perr = fmt.Errorf("bundle: entry %d (%s): reading payload: %w", r.cur.Index, r.cur.Ref, err)
		}
		return 0, r.perr
	}
	if r.left == 0 {
		if err := r.verify(); err != nil {
			return 0, err // withhold the final bytes of a damaged artifact
		}
	}
	return n, nil
}

func (r *Reader) verify() error {
	if r.verified {
		return nil
	}
	if !r.h.Matches(r.cur.Ref) {
		got, _ := r.h.Sum()
		r.perr = r.errAt("entry.artifact", r.payloadOff-int64(len(r.cur.Header.AppendHeader(nil))), int64(r.cur.Index),
			fmt.Sprintf("the bytes hash to %s, not to the entry's reference", got), asl.ErrIntegrity)
		return r.perr
	}
	r.verified = true
	return nil
}

func (r *Reader) finish() error {
	if err := r.verify(); err != nil {
		return err
	}
	r.inEntry, r.verified = false, false
	r.entries++
	return io.EOF
}

func (r *Reader) trailer() error {
	var c [4]byte
	if err := r.full(c[:], "roots.count", -1); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(c[:])
	r.roots = r.roots[:0]
	for i := uint32(0); i < n; i++ {
		ref, err := r.readRef("roots.ref", -1)
		if err != nil {
			return err
		}
		r.roots = append(r.roots, ref)
	}
	coff := r.off
	var cb [8]byte
	if err := r.full(cb[:], "entry_count", -1); err != nil {
		return err
	}
	if got := binary.BigEndian.Uint64(cb[:]); got != r.entries {
		return r.errAt("entry_count", coff, -1, fmt.Sprintf("trailer says %d entries, the bundle holds %d", got, r.entries), asl.ErrIntegrity)
	}
	want := r.d.h.Sum(nil)
	doff := r.off
	var d [32]byte
	n2, err := io.ReadFull(r.r, d[:])
	r.off += int64(n2)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return r.errAt("digest", doff, -1, fmt.Sprintf("need 32 bytes, %d remain", n2), ErrTruncated)
		}
		return fmt.Errorf("bundle: reading digest at offset %d: %w", doff, err)
	}
	if !bytes.Equal(d[:], want) {
		return r.errAt("digest", doff, -1, fmt.Sprintf("trailer digest %x, the bundle's bytes give %x", d, want), asl.ErrIntegrity)
	}
	var one [1]byte
	if k, _ := io.ReadFull(r.r, one[:]); k != 0 {
		return r.errAt("end of input", r.off, -1, "bytes follow the trailer", nil)
	}
	return io.EOF
}

// Roots returns the roots the trailer lists; valid once Next returned
// io.EOF.
func (r *Reader) Roots() []asl.Reference { return append([]asl.Reference(nil), r.roots...) }

// Entries is the number of entries whose payload was read and verified.
func (r *Reader) Entries() uint64 { return r.entries }

// Offset is the number of bundle bytes consumed so far.
func (r *Reader) Offset() int64 { return r.off }
