package conformance

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
)

// The ASL case tables. Generators turn them into vector files, asking the
// implementation for every expected value; the files are then frozen.

const (
	specArtifact   = "§3.1"
	specReference  = "§3.2"
	specEncodedRef = "§3.3"
	specOptional   = "§3.4"
	specDerive     = "§5.1"
	specText       = "§5.2"
)

func init() {
	RegisterGenerator("asl.artifact", genArtifact)
	RegisterGenerator("asl.reference", genReference)
	RegisterGenerator("asl.derive", genDerive)
	RegisterGenerator("asl.text", genText)
	RegisterGenerator("asl.encodedref", genEncodedRef)
}

// h decodes a hex literal in which spaces separate fields for readability.
func h(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// rejectExpect is the expect member of every rejection vector.
type rejectExpect struct {
	Reject *Reject `json:"reject"`
}

type artifactCase struct {
	name, desc string
	a          asl.Artifact
}

var artifactCases = sync.OnceValue(func() []artifactCase {
	return []artifactCase{
		{"untagged-empty", "untagged artifact with no bytes: flag 0x00 and a zero length", asl.Untagged(nil)},
		{"untagged-hello", "untagged artifact with the bytes \"hello\"", asl.Untagged([]byte("hello"))},
		{"untagged-zero-byte", "untagged artifact whose only byte is 0x00", asl.Untagged([]byte{0})},
		{"untagged-zeros-one", "untagged artifact 00 00 01: embedded zero bytes are payload", asl.Untagged([]byte{0, 0, 1})},
		{"untagged-all-bytes", "untagged artifact holding every byte value 0x00..0xff once", asl.Untagged(allBytes())},
		{"untagged-nested", "untagged artifact whose payload is itself the ArtifactBytes of the empty artifact", asl.Untagged(asl.EncodeArtifact(asl.Untagged(nil)))},
		{"tagged-zero-empty", "tag 0x00000000 with no bytes: a present zero tag differs from no tag", asl.Tagged(0, nil)},
		{"tagged-empty", "tag 0x00000101 (TYPE_TAG_PEL_PROGRAM_DAG_1) with no bytes", asl.Tagged(asl.TagPELProgramDAG1, nil)},
		{"tagged-hello", "tag 0x00000101 with the bytes \"hello\"", asl.Tagged(asl.TagPELProgramDAG1, []byte("hello"))},
		{"tagged-max", "tag 0xffffffff (largest tag) with the byte 0x00", asl.Tagged(0xffffffff, []byte{0})},
		{"tagged-edge", "tag 0x00000201 (TYPE_TAG_TGK1_EDGE_V1) with the bytes 00 01 02", asl.Tagged(asl.TagTGK1EdgeV1, []byte{0, 1, 2})},
	}
})

type rejectCase struct {
	name, desc string
	in         []byte
}

var artifactRejects = sync.OnceValue(func() []rejectCase {
	return []rejectCase{
		{"empty-input", "no bytes at all: has_type_tag is missing", nil},
		{"flag-02", "has_type_tag 0x02 is neither 0x00 nor 0x01", h("02 0000000000000000")},
		{"flag-ff", "has_type_tag 0xff", h("ff")},
		{"flag-only-untagged", "has_type_tag 0x00 and nothing else: bytes_len missing", h("00")},
		{"flag-only-tagged", "has_type_tag 0x01 and nothing else: type_tag missing", h("01")},
		{"truncated-tag", "has_type_tag 0x01 followed by only 2 of the 4 type_tag bytes", h("01 0000")},
		{"truncated-length", "bytes_len cut after 4 of its 8 bytes", h("00 00000000")},
		{"truncated-length-tagged", "tagged, bytes_len cut after 7 of its 8 bytes", h("01 00000101 00000000000000")},
		{"length-beyond-end", "bytes_len 2 with 1 payload byte present", h("00 0000000000000002 61")},
		{"length-near-2^64", "bytes_len 2^64-1: rejected before any allocation", h("00 ffffffffffffffff 61")},
		{"length-2^63", "bytes_len 2^63: rejected before any allocation", h("01 00000000 8000000000000000")},
		{"trailing-byte", "a complete empty artifact followed by one extra byte", h("00 0000000000000000 00")},
		{"trailing-bytes-tagged", "a complete tagged artifact followed by two extra bytes", h("01 00000101 0000000000000001 61 6262")},
	}
})

func genArtifact() ([]Vector, error) {
	var vs []Vector
	add := func(v Vector, err error) error {
		if err == nil {
			vs = append(vs, v)
		}
		return err
	}
	for _, c := range artifactCases() {
		ab := Hex(asl.EncodeArtifact(c.a))
		if err := add(NewVector("asl.artifact.encode."+c.name, "encode: "+c.desc, specArtifact, KindArtifactEncode,
			artifactToJSON(c.a), artifactBytesJSON{ArtifactBytes: &ab})); err != nil {
			return nil, err
		}
	}
	for _, c := range artifactCases() {
		ab := Hex(asl.EncodeArtifact(c.a))
		a, err := asl.DecodeArtifact(ab)
		if err != nil {
			return nil, fmt.Errorf("%s: own encoding rejected: %w", c.name, err)
		}
		j := artifactToJSON(a)
		if err := add(NewVector("asl.artifact.decode."+c.name, "decode and re-encode: "+c.desc, specArtifact, KindArtifactDecode,
			artifactBytesJSON{ArtifactBytes: &ab}, artifactDecodeExpect{TypeTag: j.TypeTag, Bytes: j.Bytes})); err != nil {
			return nil, err
		}
	}
	for _, c := range artifactRejects() {
		_, err := asl.DecodeArtifact(c.in)
		if err == nil {
			return nil, fmt.Errorf("reject case %s was accepted", c.name)
		}
		in := Hex(c.in)
		if err := add(NewVector("asl.artifact.reject."+c.name, "reject: "+c.desc, specArtifact, KindArtifactDecode,
			artifactBytesJSON{ArtifactBytes: &in}, rejectExpect{RejectOf(err, "")})); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// The values below are computed on first use, not at package init (every
// amduat command links this package).
var (
	refSHA256Empty = sync.OnceValue(func() asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)) })
	refBLAKE3Empty = sync.OnceValue(func() asl.Reference { return asl.MustDerive(asl.HashBLAKE3, asl.Untagged(nil)) })
)

var referenceAccepts = sync.OnceValue(func() []rejectCase {
	return []rejectCase{
		{"sha256", "HASH-ASL1-256 (0x0001) with a 32-byte digest (the empty artifact's reference)", refSHA256Empty().Bytes()},
		{"blake3", "BLAKE3-256 (0x8001) with a 32-byte digest (the empty artifact's reference)", refBLAKE3Empty().Bytes()},
		{"unknown-short-digest", "unregistered hash id 0x7777 with a 2-byte digest: accepted, digest length unchecked", h("7777 0102")},
		{"unknown-empty-digest", "unregistered hash id 0x7777 with an empty digest: accepted", h("7777")},
		{"unknown-0002-long", "unregistered hash id 0x0002 with a 33-byte digest: accepted", append(h("0002"), bytes.Repeat([]byte{0xab}, 33)...)},
		{"unknown-ffff", "unregistered hash id 0xffff with a 1-byte digest: accepted", h("ffff 00")},
	}
})

var referenceRejects = sync.OnceValue(func() []rejectCase {
	return []rejectCase{
		{"empty", "no bytes: hash_id missing", nil},
		{"one-byte", "1 byte: hash_id needs 2", h("00")},
		{"reserved-id", "hash id 0x0000 is reserved, with a 32-byte digest", append(h("0000"), refSHA256Empty().Digest()...)},
		{"reserved-id-bare", "hash id 0x0000 alone", h("0000")},
		{"sha256-empty-digest", "HASH-ASL1-256 with no digest", h("0001")},
		{"sha256-31", "HASH-ASL1-256 with a 31-byte digest", refSHA256Empty().Bytes()[:33]},
		{"sha256-33", "HASH-ASL1-256 with a 33-byte digest", append(refSHA256Empty().Bytes(), 0)},
		{"blake3-31", "BLAKE3-256 with a 31-byte digest", refBLAKE3Empty().Bytes()[:33]},
	}
})

func genReference() ([]Vector, error) {
	var vs []Vector
	for _, c := range referenceAccepts() {
		ref, err := asl.DecodeReference(c.in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		in, d, id, known := Hex(c.in), Hex(ref.Digest()), uint16(ref.HashID()), ref.Known()
		v, err := NewVector("asl.reference.decode."+c.name, "decode: "+c.desc, specReference, KindReferenceDecode,
			referenceBytesJSON{ReferenceBytes: &in}, referenceDecodeExpect{HashID: &id, Digest: &d, Known: &known})
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	for _, c := range referenceRejects() {
		_, err := asl.DecodeReference(c.in)
		if err == nil {
			return nil, fmt.Errorf("reject case %s was accepted", c.name)
		}
		in := Hex(c.in)
		v, err := NewVector("asl.reference.reject."+c.name, "reject: "+c.desc, specReference, KindReferenceDecode,
			referenceBytesJSON{ReferenceBytes: &in}, rejectExpect{RejectOf(err, "", ClassIntegrity)})
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func genDerive() ([]Vector, error) {
	var vs []Vector
	for _, alg := range []struct {
		name string
		id   asl.HashID
	}{{"sha256", asl.HashSHA256}, {"blake3", asl.HashBLAKE3}} {
		for _, c := range artifactCases() {
			ref, err := asl.Derive(alg.id, c.a)
			if err != nil {
				return nil, err
			}
			j := artifactToJSON(c.a)
			id := uint16(alg.id)
			ab := Hex(asl.EncodeArtifact(c.a))
			v, err := NewVector("asl.derive."+alg.name+"."+c.name,
				fmt.Sprintf("%s reference of: %s", alg.id, c.desc),
				specDerive, KindReferenceDerive,
				deriveInput{HashID: &id, TypeTag: j.TypeTag, Bytes: j.Bytes},
				deriveExpect{ArtifactBytes: &ab, Reference: ref.String()})
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		}
	}
	return vs, nil
}

var textAccepts = sync.OnceValue(func() []rejectCase {
	return []rejectCase{
		{"sha256", "HASH-ASL1-256 reference", refSHA256Empty().Bytes()},
		{"blake3", "BLAKE3-256 reference", refBLAKE3Empty().Bytes()},
		{"unknown-short", "unregistered hash id 0x7777 with a 2-byte digest", h("7777 0102")},
		{"unknown-bare", "unregistered hash id 0x7777 with an empty digest: the 4-digit minimum", h("7777")},
	}
})

type textReject struct {
	name, desc, text string
}

var textRejects = sync.OnceValue(func() []textReject {
	return []textReject{
		{"uppercase", "uppercase hex digits are not the text form", strings.ToUpper(refSHA256Empty().String())},
		{"uppercase-one", "a single uppercase digit", refSHA256Empty().String()[:10] + "A" + refSHA256Empty().String()[11:]},
		{"odd-length", "an odd number of hex digits", refSHA256Empty().String()[:65]},
		{"non-hex", "the character 'g'", refSHA256Empty().String()[:65] + "g"},
		{"empty", "the empty string", ""},
		{"two-digits", "2 digits: below the 4-digit minimum", "00"},
		{"three-digits", "3 digits", "000"},
		{"leading-space", "a leading space", " " + refSHA256Empty().String()},
		{"trailing-newline", "a trailing newline", refSHA256Empty().String() + "\n"},
		{"0x-prefix", "a 0x prefix", "0x" + refSHA256Empty().String()},
		{"reserved-id", "well-formed hex whose hash id is the reserved 0x0000", "0000" + hex.EncodeToString(refSHA256Empty().Digest())},
		{"sha256-short", "well-formed hex whose HASH-ASL1-256 digest is 31 bytes", refSHA256Empty().String()[:66]},
	}
})

func genText() ([]Vector, error) {
	var vs []Vector
	for _, c := range textAccepts() {
		ref, err := asl.DecodeReference(c.in)
		if err != nil {
			return nil, err
		}
		in, text := Hex(c.in), ref.String()
		v, err := NewVector("asl.text.to-text."+c.name, "ReferenceBytes to text: "+c.desc, specText, KindReferenceToText,
			referenceBytesJSON{ReferenceBytes: &in}, textJSON{Text: &text})
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	for _, c := range textAccepts() {
		ref, err := asl.ParseReference(hex.EncodeToString(c.in))
		if err != nil {
			return nil, err
		}
		text, rb := ref.String(), Hex(ref.Bytes())
		v, err := NewVector("asl.text.from-text."+c.name, "text to ReferenceBytes: "+c.desc, specText, KindReferenceFromText,
			textJSON{Text: &text}, fromTextExpect{ReferenceBytes: &rb})
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	for _, c := range textRejects() {
		_, err := asl.ParseReference(c.text)
		if err == nil {
			return nil, fmt.Errorf("reject case %s was accepted", c.name)
		}
		text := c.text
		v, err := NewVector("asl.text.reject."+c.name, "reject text: "+c.desc, specText, KindReferenceFromText,
			textJSON{Text: &text}, rejectExpect{RejectOf(err, "text", ClassIntegrity)})
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

var encodedRefRejects = sync.OnceValue(func() []rejectCase {
	return []rejectCase{
		{"empty", "no bytes: ref_len missing", nil},
		{"truncated-ref-len", "ref_len cut after 3 bytes", h("000000")},
		{"ref-len-0", "ref_len 0 is below the minimum 2", h("00000000")},
		{"ref-len-1", "ref_len 1 is below the minimum 2", h("00000001 00")},
		{"ref-len-beyond-end", "ref_len 5 with 2 bytes following", h("00000005 0001")},
		{"ref-len-max", "ref_len 2^32-1: rejected before any allocation", h("ffffffff 0001")},
		{"reserved-id", "ref_len 2 framing the reserved hash id 0x0000", h("00000002 0000")},
		{"sha256-short-digest", "ref_len 33 framing HASH-ASL1-256 with a 31-byte digest", append(h("00000021"), refSHA256Empty().Bytes()[:33]...)},
		{"trailing", "a complete EncodedRef followed by one extra byte", h("00000002 7777 00")},
	}
})

var optionalRejects = sync.OnceValue(func() []rejectCase {
	return []rejectCase{
		{"empty", "no bytes: has_ref missing", nil},
		{"flag-02", "has_ref 0x02 is neither 0x00 nor 0x01", h("02")},
		{"flag-ff", "has_ref 0xff", append(h("ff"), asl.AppendEncodedRef(nil, refSHA256Empty())...)},
		{"present-truncated", "has_ref 0x01 with no EncodedRef after it", h("01")},
		{"present-ref-len-0", "has_ref 0x01 then ref_len 0", h("01 00000000")},
		{"present-ref-len-beyond-end", "has_ref 0x01 then ref_len 34 with 2 bytes following", h("01 00000022 0001")},
		{"absent-trailing", "has_ref 0x00 followed by an extra byte", h("00 00")},
		{"present-trailing", "a complete present OptionalEncodedRef followed by an extra byte", h("01 00000002 7777 ff")},
	}
})

func genEncodedRef() ([]Vector, error) {
	var vs []Vector
	push := func(v Vector, err error) error {
		if err == nil {
			vs = append(vs, v)
		}
		return err
	}
	for _, c := range textAccepts() {
		ref := asl.MustParseReference(hex.EncodeToString(c.in))
		rb, er := Hex(ref.Bytes()), Hex(asl.AppendEncodedRef(nil, ref))
		if err := push(NewVector("asl.encodedref.encode."+c.name, "EncodedRef of a "+c.desc, specEncodedRef, KindEncodedRefEncode,
			referenceBytesJSON{ReferenceBytes: &rb}, encodedRefJSON{EncodedRef: &er})); err != nil {
			return nil, err
		}
		got, err := asl.DecodeEncodedRef(er)
		if err != nil || got != ref {
			return nil, fmt.Errorf("%s: EncodedRef does not round-trip: %v", c.name, err)
		}
		if err := push(NewVector("asl.encodedref.decode."+c.name, "decode the EncodedRef of a "+c.desc, specEncodedRef, KindEncodedRefDecode,
			encodedRefJSON{EncodedRef: &er}, encodedRefDecodeExpect{ReferenceBytes: &rb})); err != nil {
			return nil, err
		}
	}
	for _, c := range encodedRefRejects() {
		_, err := asl.DecodeEncodedRef(c.in)
		if err == nil {
			return nil, fmt.Errorf("reject case %s was accepted", c.name)
		}
		in := Hex(c.in)
		if err := push(NewVector("asl.encodedref.reject."+c.name, "reject EncodedRef: "+c.desc, specEncodedRef, KindEncodedRefDecode,
			encodedRefJSON{EncodedRef: &in}, rejectExpect{RejectOf(err, "")})); err != nil {
			return nil, err
		}
	}
	optional := []struct {
		name, desc string
		ref        *asl.Reference
	}{
		{"absent", "an absent reference: the single byte 0x00", nil},
		{"sha256", "a present HASH-ASL1-256 reference", ptr(refSHA256Empty())},
		{"unknown-bare", "a present reference with unregistered hash id 0x7777 and an empty digest", ptr(asl.MustParseReference("7777"))},
	}
	for _, c := range optional {
		var rb *Hex
		var ref asl.Reference
		if c.ref != nil {
			ref = *c.ref
			b := Hex(ref.Bytes())
			rb = &b
		}
		oer := Hex(asl.AppendOptionalEncodedRef(nil, ref, c.ref != nil))
		if err := push(NewVector("asl.encodedref.optional-encode."+c.name, "OptionalEncodedRef of "+c.desc, specOptional, KindOptionalEncodedRefEncode,
			optionalRefJSON{ReferenceBytes: rb}, optionalEncodedRefJSON{OptionalEncodedRef: &oer})); err != nil {
			return nil, err
		}
		if err := push(NewVector("asl.encodedref.optional-decode."+c.name, "decode the OptionalEncodedRef of "+c.desc, specOptional, KindOptionalEncodedRefDecode,
			optionalEncodedRefJSON{OptionalEncodedRef: &oer}, optionalDecodeExpect{ReferenceBytes: rb})); err != nil {
			return nil, err
		}
	}
	for _, c := range optionalRejects() {
		_, _, err := asl.DecodeOptionalEncodedRef(c.in)
		if err == nil {
			return nil, fmt.Errorf("reject case %s was accepted", c.name)
		}
		in := Hex(c.in)
		if err := push(NewVector("asl.encodedref.optional-reject."+c.name, "reject OptionalEncodedRef: "+c.desc, specOptional, KindOptionalEncodedRefDecode,
			optionalEncodedRefJSON{OptionalEncodedRef: &in}, rejectExpect{RejectOf(err, "")})); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

func ptr[T any](v T) *T { return &v }
