package asl

import (
	"encoding/hex"
	"fmt"
	"hash"
	"io"

	"github.com/amduat/amduat/enc"
)

// Reference identifies an artifact: a hash id and the digest of the
// artifact's ArtifactBytes under that hash (SPECS.md §5). The digest is held
// in a string so that Reference is comparable with ==. The zero Reference is
// invalid (hash id 0 is reserved) and is what IsZero reports.
type Reference struct {
	hashID HashID
	digest string
}

// NewReference builds a Reference and checks it as DecodeReference would.
func NewReference(id HashID, digest []byte) (Reference, error) {
	ref := Reference{hashID: id, digest: string(digest)}
	if err := ref.check(); err != nil {
		return Reference{}, err
	}
	return ref, nil
}

func (r Reference) check() error {
	if r.hashID == HashReserved {
		return fmt.Errorf("reference: hash_id 0x0000 is reserved: %w", ErrIntegrity)
	}
	if a, ok := LookupHash(r.hashID); ok && len(r.digest) != a.DigestLen {
		return fmt.Errorf("reference: %s digest is %d bytes, want %d: %w", a.Name, len(r.digest), a.DigestLen, ErrIntegrity)
	}
	return nil
}

// HashID returns the reference's hash id.
func (r Reference) HashID() HashID { return r.hashID }

// Digest returns a copy of the digest.
func (r Reference) Digest() []byte { return []byte(r.digest) }

// IsZero reports whether r is the zero (invalid) Reference.
func (r Reference) IsZero() bool { return r == Reference{} }

// Known reports whether r's hash id is registered.
func (r Reference) Known() bool {
	_, ok := LookupHash(r.hashID)
	return ok
}

// Bytes returns the canonical ReferenceBytes: hash_id (u16 BE) || digest.
func (r Reference) Bytes() []byte { return r.AppendBytes(make([]byte, 0, 2+len(r.digest))) }

// AppendBytes appends ReferenceBytes to dst.
func (r Reference) AppendBytes(dst []byte) []byte {
	dst = append(dst, byte(r.hashID>>8), byte(r.hashID))
	return append(dst, r.digest...)
}

// String is the text form: lowercase hex of ReferenceBytes (SPECS.md §5.2).
func (r Reference) String() string { return hex.EncodeToString(r.Bytes()) }

// MarshalText implements encoding.TextMarshaler with the text form.
func (r Reference) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseReference.
func (r *Reference) UnmarshalText(b []byte) error {
	ref, err := ParseReference(string(b))
	if err != nil {
		return err
	}
	*r = ref
	return nil
}

// ParseReference parses the text form: an even number (at least 4) of
// lowercase hex digits encoding valid ReferenceBytes.
func ParseReference(s string) (Reference, error) {
	if len(s) < 4 || len(s)%2 != 0 {
		return Reference{}, badRefText(fmt.Sprintf("reference %q: want an even number (at least 4) of hex digits", s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return Reference{}, badRefText(fmt.Sprintf("reference %q: character %q at position %d is not a lowercase hex digit", s, c, i))
		}
	}
	b, _ := hex.DecodeString(s)
	ref, err := DecodeReference(b)
	if err != nil {
		return Reference{}, fmt.Errorf("reference %q: %w", s, err)
	}
	return ref, nil
}

// MustParseReference is ParseReference for constants; it panics on error.
func MustParseReference(s string) Reference {
	ref, err := ParseReference(s)
	if err != nil {
		panic(err)
	}
	return ref
}

// DecodeReference parses ReferenceBytes strictly (SPECS.md §3.2): at least 2
// bytes, hash id not 0x0000, and for a registered hash id a digest of exactly
// the registered length. An unregistered hash id is accepted with whatever
// digest follows. Errors wrap both enc.ErrMalformed and ErrIntegrity.
func DecodeReference(b []byte) (Reference, error) {
	if len(b) < 2 {
		return Reference{}, malformedRef(&enc.DecodeError{Offset: 0, Field: "hash_id", Reason: fmt.Sprintf("need 2 bytes, %d remain", len(b))})
	}
	id := HashID(uint16(b[0])<<8 | uint16(b[1]))
	if id == HashReserved {
		return Reference{}, malformedRef(&enc.DecodeError{Offset: 0, Field: "hash_id", Reason: "0x0000 is reserved"})
	}
	if a, ok := LookupHash(id); ok && len(b)-2 != a.DigestLen {
		return Reference{}, malformedRef(&enc.DecodeError{Offset: 2, Field: "digest", Reason: fmt.Sprintf("%s digest must be %d bytes, got %d", a.Name, a.DigestLen, len(b)-2)})
	}
	return Reference{hashID: id, digest: string(b[2:])}, nil
}

// badRefText is a malformed reference text: it wraps ErrIntegrity, as
// every malformed reference does, but its message says only what is wrong
// (the answer to it is bad_reference, not damage).
type badRefText string

func (e badRefText) Error() string { return string(e) }
func (e badRefText) Unwrap() error { return ErrIntegrity }

type refError struct{ err *enc.DecodeError }

func (e refError) Error() string   { return e.err.Error() }
func (e refError) Unwrap() []error { return []error{e.err, ErrIntegrity} }

func malformedRef(e *enc.DecodeError) error { return refError{e} }

// AppendEncodedRef appends EncodedRef = ref_len (u32) || ReferenceBytes.
func AppendEncodedRef(dst []byte, r Reference) []byte {
	w := enc.Writer{Buf: dst}
	w.U32(uint32(2 + len(r.digest)))
	return r.AppendBytes(w.Buf)
}

// AppendOptionalEncodedRef appends 0x00, or 0x01 followed by EncodedRef.
func AppendOptionalEncodedRef(dst []byte, r Reference, present bool) []byte {
	if !present {
		return append(dst, 0)
	}
	return AppendEncodedRef(append(dst, 1), r)
}

// ReadEncodedRef reads an EncodedRef (SPECS.md §3.3): ref_len >= 2, within
// the remaining input, framing valid ReferenceBytes.
func ReadEncodedRef(r *enc.Reader, field string) (Reference, error) {
	start := r.Offset()
	n := r.U32(field + ".ref_len")
	if r.Err() != nil {
		return Reference{}, r.Err()
	}
	if n < 2 {
		return Reference{}, r.FailAt(start, field+".ref_len", "ref_len %d is below the minimum 2", n)
	}
	if uint64(n) > uint64(r.Remaining()) {
		return Reference{}, r.FailAt(start, field+".ref_len", "ref_len %d exceeds the %d bytes remaining", n, r.Remaining())
	}
	body := r.Raw(int(n), field)
	ref, err := DecodeReference(body)
	if err != nil {
		var re refError
		if ok := asRefError(err, &re); ok {
			return Reference{}, r.FailAt(start+4+re.err.Offset, field+"."+re.err.Field, "%s", re.err.Reason)
		}
		return Reference{}, r.FailAt(start+4, field, "%v", err)
	}
	return ref, nil
}

func asRefError(err error, out *refError) bool {
	re, ok := err.(refError)
	if ok {
		*out = re
	}
	return ok
}

// ReadOptionalEncodedRef reads has_ref (u8) then, if 0x01, an EncodedRef.
func ReadOptionalEncodedRef(r *enc.Reader, field string) (Reference, bool, error) {
	off := r.Offset()
	switch flag := r.U8(field + ".has_ref"); {
	case r.Err() != nil:
		return Reference{}, false, r.Err()
	case flag == 0:
		return Reference{}, false, nil
	case flag == 1:
		ref, err := ReadEncodedRef(r, field)
		return ref, err == nil, err
	default:
		return Reference{}, false, r.FailAt(off, field+".has_ref", "value 0x%02x is neither 0x00 nor 0x01", flag)
	}
}

// DecodeEncodedRef decodes a standalone EncodedRef with no trailing bytes.
func DecodeEncodedRef(b []byte) (Reference, error) {
	r := enc.NewReader(b)
	ref, err := ReadEncodedRef(r, "encoded_ref")
	if err != nil {
		return Reference{}, err
	}
	return ref, r.Done()
}

// DecodeOptionalEncodedRef decodes a standalone OptionalEncodedRef.
func DecodeOptionalEncodedRef(b []byte) (Reference, bool, error) {
	r := enc.NewReader(b)
	ref, ok, err := ReadOptionalEncodedRef(r, "optional_ref")
	if err != nil {
		return Reference{}, false, err
	}
	return ref, ok, r.Done()
}

// Derive computes the Reference of a under hash id (SPECS.md §5.1): the digest
// of its ArtifactBytes.
func Derive(id HashID, a Artifact) (Reference, error) {
	h, err := NewHasher(id, a.Header())
	if err != nil {
		return Reference{}, err
	}
	h.Write(a.Bytes)
	return h.Sum()
}

// MustDerive is Derive for registered hashes; it panics on an unknown id.
func MustDerive(id HashID, a Artifact) Reference {
	ref, err := Derive(id, a)
	if err != nil {
		panic(err)
	}
	return ref
}

// Hasher derives a Reference incrementally: it is created with the header,
// fed exactly Header.Size payload bytes, and then summed. A Hasher may be
// reused with Reset (a zero Hasher must be Reset before use); Matches checks
// a Reference without allocating.
type Hasher struct {
	id   HashID
	h    hash.Hash
	want uint64
	got  uint64
	buf  [64]byte // header encoding, then the digest for Matches
}

var _ io.Writer = (*Hasher)(nil)

// NewHasher starts deriving the Reference of an artifact with header hdr.
func NewHasher(id HashID, hdr Header) (*Hasher, error) {
	h := new(Hasher)
	if err := h.Reset(id, hdr); err != nil {
		return nil, err
	}
	return h, nil
}

// Reset restarts h for an artifact with header hdr under hash id, reusing
// its hash state when id is the one it had.
func (h *Hasher) Reset(id HashID, hdr Header) error {
	if h.h == nil || h.id != id {
		alg, ok := LookupHash(id)
		if !ok {
			return fmt.Errorf("hash id 0x%04x: %w", uint16(id), ErrUnsupported)
		}
		h.h = alg.New()
	} else {
		h.h.Reset()
	}
	h.h.Write(hdr.AppendHeader(h.buf[:0]))
	h.id, h.want, h.got = id, hdr.Size, 0
	return nil
}

// Matches reports whether the payload written so far completes the artifact
// and hashes to ref. It does not allocate.
func (h *Hasher) Matches(ref Reference) bool {
	if h.got != h.want || ref.hashID != h.id {
		return false
	}
	return string(h.h.Sum(h.buf[:0])) == ref.digest
}

// Write hashes payload bytes. It never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	h.got += uint64(len(p))
	return h.h.Write(p)
}

// Sum returns the Reference, or an error if the payload length differs from
// the header's Size.
func (h *Hasher) Sum() (Reference, error) {
	if h.got != h.want {
		return Reference{}, fmt.Errorf("artifact payload is %d bytes, header says %d", h.got, h.want)
	}
	return Reference{hashID: h.id, digest: string(h.h.Sum(nil))}, nil
}
