// Package enc holds the canonical binary primitives every Amduat encoding in
// this project is built from (SPECS.md §2 "Encoding primitives"): fixed-width
// big-endian unsigned integers, length-prefixed octet strings, and a strict
// reader whose errors name the field and the byte offset at which decoding
// failed.
//
// Invariants: a Reader never panics on any input, never allocates for a
// length or count that the remaining input cannot hold, and Done reports
// trailing bytes as an error. enc knows no domain types.
package enc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is the sentinel wrapped by every decode error.
var ErrMalformed = errors.New("malformed encoding")

// DecodeError describes where and why decoding failed.
type DecodeError struct {
	Offset int    // byte offset within the input where the failing field starts
	Field  string // name of the field being decoded
	Reason string // what was expected
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("malformed encoding: %s at offset %d: %s", e.Field, e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrMalformed) hold for every DecodeError.
func (e *DecodeError) Unwrap() error { return ErrMalformed }

// Writer appends canonical big-endian fields to a byte slice.
type Writer struct {
	Buf []byte
}

// U8 appends one byte.
func (w *Writer) U8(v uint8) { w.Buf = append(w.Buf, v) }

// U16 appends v as 2 big-endian bytes.
func (w *Writer) U16(v uint16) { w.Buf = binary.BigEndian.AppendUint16(w.Buf, v) }

// U32 appends v as 4 big-endian bytes.
func (w *Writer) U32(v uint32) { w.Buf = binary.BigEndian.AppendUint32(w.Buf, v) }

// U64 appends v as 8 big-endian bytes.
func (w *Writer) U64(v uint64) { w.Buf = binary.BigEndian.AppendUint64(w.Buf, v) }

// Raw appends b unframed.
func (w *Writer) Raw(b []byte) { w.Buf = append(w.Buf, b...) }

// Bytes32 appends len(b) as u32 followed by b. It panics if len(b) does not
// fit in 32 bits, which is a programming error, never an input error.
func (w *Writer) Bytes32(b []byte) {
	if uint64(len(b)) > 0xFFFFFFFF {
		panic("enc: octet string longer than 2^32-1 bytes")
	}
	w.U32(uint32(len(b)))
	w.Raw(b)
}

// Bytes64 appends len(b) as u64 followed by b.
func (w *Writer) Bytes64(b []byte) {
	w.U64(uint64(len(b)))
	w.Raw(b)
}

// Reader decodes canonical fields from a byte slice. The first error sticks:
// once Err is non-nil every further read returns zero values.
type Reader struct {
	buf []byte
	off int
	err error
}

// NewReader returns a Reader over b. It does not copy b; byte slices returned
// by the reader alias b unless documented otherwise.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Offset is the number of bytes consumed so far.
func (r *Reader) Offset() int { return r.off }

// Remaining is the number of bytes not yet consumed.
func (r *Reader) Remaining() int { return len(r.buf) - r.off }

// Err returns the first error encountered, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records a decode error at the current offset unless one is recorded
// already, and returns the recorded error.
func (r *Reader) Fail(field, format string, args ...any) error {
	return r.FailAt(r.off, field, format, args...)
}

// FailAt records a decode error at offset off unless one is recorded already.
func (r *Reader) FailAt(off int, field, format string, args ...any) error {
	if r.err == nil {
		r.err = &DecodeError{Offset: off, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	return r.err
}

func (r *Reader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.Remaining() {
		r.Fail(field, "need %d bytes, %d remain", n, r.Remaining())
		return nil
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// U8 reads one byte.
func (r *Reader) U8(field string) uint8 {
	b := r.take(1, field)
	if b == nil {
		return 0
	}
	return b[0]
}

// U16 reads a big-endian u16.
func (r *Reader) U16(field string) uint16 {
	b := r.take(2, field)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// U32 reads a big-endian u32.
func (r *Reader) U32(field string) uint32 {
	b := r.take(4, field)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// U64 reads a big-endian u64.
func (r *Reader) U64(field string) uint64 {
	b := r.take(8, field)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Raw reads exactly n bytes.
func (r *Reader) Raw(n int, field string) []byte { return r.take(n, field) }

// Bytes32 reads a u32 length then that many bytes. A length larger than the
// remaining input is rejected before anything is allocated.
func (r *Reader) Bytes32(field string) []byte { return r.prefixed(4, field) }

// Bytes64 reads a u64 length then that many bytes.
func (r *Reader) Bytes64(field string) []byte { return r.prefixed(8, field) }

// prefixed reads a width-byte big-endian length then that many bytes. The
// field name of a truncated prefix is field+" length"; it is built only on
// failure, so the success path does not allocate.
func (r *Reader) prefixed(width int, field string) []byte {
	if r.err != nil {
		return nil
	}
	start := r.off
	if r.Remaining() < width {
		r.Fail(field+" length", "need %d bytes, %d remain", width, r.Remaining())
		return nil
	}
	var n uint64
	if width == 4 {
		n = uint64(binary.BigEndian.Uint32(r.buf[r.off:]))
	} else {
		n = binary.BigEndian.Uint64(r.buf[r.off:])
	}
	r.off += width
	if n > uint64(r.Remaining()) {
		r.FailAt(start, field, "length %d exceeds the %d bytes remaining", n, r.Remaining())
		return nil
	}
	return r.take(int(n), field)
}

// Count reads a u32 element count and checks that the remaining input can
// hold count elements of at least minElem bytes each, so callers can size
// allocations by the returned count safely.
func (r *Reader) Count(field string, minElem int) int {
	start := r.off
	n := r.U32(field)
	if r.err != nil {
		return 0
	}
	if minElem < 1 {
		minElem = 1
	}
	if uint64(n)*uint64(minElem) > uint64(r.Remaining()) {
		r.FailAt(start, field, "count %d needs at least %d bytes, %d remain", n, uint64(n)*uint64(minElem), r.Remaining())
		return 0
	}
	return int(n)
}

// Done returns the first error, or an error if unconsumed bytes remain.
func (r *Reader) Done() error {
	if r.err != nil {
		return r.err
	}
	if r.Remaining() != 0 {
		return r.Fail("end of input", "%d trailing bytes", r.Remaining())
	}
	return nil
}
