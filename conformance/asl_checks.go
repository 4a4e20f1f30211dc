package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
)

// The ASL vector kinds (SPECS.md §3-§5). The JSON shape of each kind's input
// and expect is given by the structs below and documented in
// SPECS.md §7.
const (
	KindArtifactEncode           = "artifact_encode"
	KindArtifactDecode           = "artifact_decode"
	KindReferenceDecode          = "reference_decode"
	KindReferenceDerive          = "reference_derive"
	KindReferenceToText          = "reference_to_text"
	KindReferenceFromText        = "reference_from_text"
	KindEncodedRefEncode         = "encoded_ref_encode"
	KindEncodedRefDecode         = "encoded_ref_decode"
	KindOptionalEncodedRefEncode = "optional_encoded_ref_encode"
	KindOptionalEncodedRefDecode = "optional_encoded_ref_decode"
)

// ClassIntegrity is the error class of malformed references (SPECS.md §6.3).
var ClassIntegrity = ClassErr{Name: "ERR_INTEGRITY", Err: asl.ErrIntegrity}

func init() {
	Register(KindArtifactEncode, checkArtifactEncode)
	Register(KindArtifactDecode, checkArtifactDecode)
	Register(KindReferenceDecode, checkReferenceDecode)
	Register(KindReferenceDerive, checkReferenceDerive)
	Register(KindReferenceToText, checkReferenceToText)
	Register(KindReferenceFromText, checkReferenceFromText)
	Register(KindEncodedRefEncode, checkEncodedRefEncode)
	Register(KindEncodedRefDecode, checkEncodedRefDecode)
	Register(KindOptionalEncodedRefEncode, checkOptionalEncodedRefEncode)
	Register(KindOptionalEncodedRefDecode, checkOptionalEncodedRefDecode)
}

// artifactJSON is an Artifact in a vector: type_tag is null for an untagged
// artifact, else the tag as a JSON number.
type artifactJSON struct {
	TypeTag *uint32 `json:"type_tag"`
	Bytes   *Hex    `json:"bytes"`
}

func (a artifactJSON) artifact() (asl.Artifact, error) {
	if a.Bytes == nil {
		return asl.Artifact{}, errors.New("bad vector: bytes missing")
	}
	if a.TypeTag == nil {
		return asl.Untagged(*a.Bytes), nil
	}
	return asl.Tagged(asl.TypeTag(*a.TypeTag), *a.Bytes), nil
}

func artifactToJSON(a asl.Artifact) artifactJSON {
	b := Hex(a.Bytes)
	if b == nil {
		b = Hex{}
	}
	j := artifactJSON{Bytes: &b}
	if a.HasTag {
		t := uint32(a.Tag)
		j.TypeTag = &t
	}
	return j
}

type artifactBytesJSON struct {
	ArtifactBytes *Hex `json:"artifact_bytes"`
}

type artifactDecodeExpect struct {
	TypeTag *uint32 `json:"type_tag"`
	Bytes   *Hex    `json:"bytes"`
	Reject  *Reject `json:"reject,omitempty"`
}

type referenceBytesJSON struct {
	ReferenceBytes *Hex `json:"reference_bytes"`
}

type referenceDecodeExpect struct {
	HashID *uint16 `json:"hash_id,omitempty"`
	Digest *Hex    `json:"digest,omitempty"`
	Known  *bool   `json:"known,omitempty"`
	Reject *Reject `json:"reject,omitempty"`
}

type deriveInput struct {
	HashID  *uint16 `json:"hash_id"`
	TypeTag *uint32 `json:"type_tag"`
	Bytes   *Hex    `json:"bytes"`
}

type deriveExpect struct {
	ArtifactBytes *Hex   `json:"artifact_bytes"`
	Reference     string `json:"reference"`
}

type textJSON struct {
	Text *string `json:"text"`
}

type fromTextExpect struct {
	ReferenceBytes *Hex    `json:"reference_bytes,omitempty"`
	Reject         *Reject `json:"reject,omitempty"`
}

type encodedRefJSON struct {
	EncodedRef *Hex `json:"encoded_ref"`
}

type encodedRefDecodeExpect struct {
	ReferenceBytes *Hex    `json:"reference_bytes,omitempty"`
	Reject         *Reject `json:"reject,omitempty"`
}

// optionalRefJSON: reference_bytes is null when the reference is absent.
type optionalRefJSON struct {
	ReferenceBytes *Hex `json:"reference_bytes"`
}

type optionalEncodedRefJSON struct {
	OptionalEncodedRef *Hex `json:"optional_encoded_ref"`
}

type optionalDecodeExpect struct {
	ReferenceBytes *Hex    `json:"reference_bytes"`
	Reject         *Reject `json:"reject,omitempty"`
}

func need(name string, ok bool) error {
	if !ok {
		return fmt.Errorf("bad vector: %s missing", name)
	}
	return nil
}

func eqBytes(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s = %x, want %x", what, got, want)
	}
	return nil
}

func checkArtifactEncode(_ context.Context, v Vector) error {
	var in artifactJSON
	var exp artifactBytesJSON
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	a, err := in.artifact()
	if err != nil {
		return err
	}
	if err := need("expect.artifact_bytes", exp.ArtifactBytes != nil); err != nil {
		return err
	}
	if err := eqBytes("EncodeArtifact", asl.EncodeArtifact(a), *exp.ArtifactBytes); err != nil {
		return err
	}
	// The streaming prefix plus the payload must be the same bytes.
	return eqBytes("Header.AppendHeader || bytes", append(a.Header().AppendHeader(nil), a.Bytes...), *exp.ArtifactBytes)
}

func checkArtifactDecode(_ context.Context, v Vector) error {
	var in artifactBytesJSON
	var exp artifactDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.artifact_bytes", in.ArtifactBytes != nil); err != nil {
		return err
	}
	a, err := asl.DecodeArtifact(*in.ArtifactBytes)
	if exp.Reject != nil {
		if exp.Bytes != nil || exp.TypeTag != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	want, err := (artifactJSON{TypeTag: exp.TypeTag, Bytes: exp.Bytes}).artifact()
	if err != nil {
		return err
	}
	if a.HasTag != want.HasTag || a.Tag != want.Tag {
		return fmt.Errorf("type tag = %s, want %s", a.Header().TagString(), want.Header().TagString())
	}
	if err := eqBytes("bytes", a.Bytes, want.Bytes); err != nil {
		return err
	}
	return eqBytes("re-encoding", asl.EncodeArtifact(a), *in.ArtifactBytes)
}

func checkReferenceDecode(_ context.Context, v Vector) error {
	var in referenceBytesJSON
	var exp referenceDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.reference_bytes", in.ReferenceBytes != nil); err != nil {
		return err
	}
	ref, err := asl.DecodeReference(*in.ReferenceBytes)
	if exp.Reject != nil {
		if exp.HashID != nil || exp.Digest != nil || exp.Known != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject, ClassIntegrity)
	}
	if err := need("expect.hash_id, digest and known", exp.HashID != nil && exp.Digest != nil && exp.Known != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if ref.HashID() != asl.HashID(*exp.HashID) {
		return fmt.Errorf("hash_id = 0x%04x, want 0x%04x", uint16(ref.HashID()), *exp.HashID)
	}
	if err := eqBytes("digest", ref.Digest(), *exp.Digest); err != nil {
		return err
	}
	if ref.Known() != *exp.Known {
		return fmt.Errorf("known = %t, want %t", ref.Known(), *exp.Known)
	}
	return eqBytes("re-encoding", ref.Bytes(), *in.ReferenceBytes)
}

func checkReferenceDerive(ctx context.Context, v Vector) error {
	var in deriveInput
	var exp deriveExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.hash_id", in.HashID != nil); err != nil {
		return err
	}
	if err := need("expect.artifact_bytes", exp.ArtifactBytes != nil); err != nil {
		return err
	}
	a, err := artifactJSON{TypeTag: in.TypeTag, Bytes: in.Bytes}.artifact()
	if err != nil {
		return err
	}
	if err := eqBytes("EncodeArtifact", asl.EncodeArtifact(a), *exp.ArtifactBytes); err != nil {
		return err
	}
	id := asl.HashID(*in.HashID)
	ref, err := asl.Derive(id, a)
	if err != nil {
		return fmt.Errorf("Derive: %v", err)
	}
	if ref.String() != exp.Reference {
		return fmt.Errorf("Derive = %s, want %s", ref, exp.Reference)
	}
	// The incremental hasher, fed one byte at a time, must agree.
	h, err := asl.NewHasher(id, a.Header())
	if err != nil {
		return err
	}
	for i := range a.Bytes {
		h.Write(a.Bytes[i : i+1])
	}
	if got, err := h.Sum(); err != nil || got != ref {
		return fmt.Errorf("Hasher byte by byte = %s, %v; want %s", got, err, exp.Reference)
	}
	// A store must return the same reference from Put.
	got, err := asl.PutArtifact(ctx, memstore.New(), id, a)
	if err != nil || got.String() != exp.Reference {
		return fmt.Errorf("memstore Put = %s, %v; want %s", got, err, exp.Reference)
	}
	return nil
}

func checkReferenceToText(_ context.Context, v Vector) error {
	var in referenceBytesJSON
	var exp textJSON
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.reference_bytes and expect.text", in.ReferenceBytes != nil && exp.Text != nil); err != nil {
		return err
	}
	ref, err := asl.DecodeReference(*in.ReferenceBytes)
	if err != nil {
		return fmt.Errorf("bad vector: reference_bytes: %v", err)
	}
	if ref.String() != *exp.Text {
		return fmt.Errorf("String = %q, want %q", ref.String(), *exp.Text)
	}
	if m, _ := ref.MarshalText(); string(m) != *exp.Text {
		return fmt.Errorf("MarshalText = %q, want %q", m, *exp.Text)
	}
	return nil
}

func checkReferenceFromText(_ context.Context, v Vector) error {
	var in textJSON
	var exp fromTextExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.text", in.Text != nil); err != nil {
		return err
	}
	ref, err := asl.ParseReference(*in.Text)
	var viaText asl.Reference
	errText := viaText.UnmarshalText([]byte(*in.Text))
	if exp.Reject != nil {
		if exp.ReferenceBytes != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		if err := CheckReject(err, exp.Reject, ClassIntegrity); err != nil {
			return err
		}
		if err := CheckReject(errText, exp.Reject, ClassIntegrity); err != nil {
			return fmt.Errorf("UnmarshalText: %w", err)
		}
		return nil
	}
	if err := need("expect.reference_bytes", exp.ReferenceBytes != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if errText != nil || viaText != ref {
		return fmt.Errorf("UnmarshalText = %s, %v; want %s", viaText, errText, ref)
	}
	if err := eqBytes("ReferenceBytes", ref.Bytes(), *exp.ReferenceBytes); err != nil {
		return err
	}
	if ref.String() != *in.Text {
		return fmt.Errorf("String = %q, want the input %q", ref.String(), *in.Text)
	}
	return nil
}

func checkEncodedRefEncode(_ context.Context, v Vector) error {
	var in referenceBytesJSON
	var exp encodedRefJSON
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.reference_bytes and expect.encoded_ref", in.ReferenceBytes != nil && exp.EncodedRef != nil); err != nil {
		return err
	}
	ref, err := asl.DecodeReference(*in.ReferenceBytes)
	if err != nil {
		return fmt.Errorf("bad vector: reference_bytes: %v", err)
	}
	return eqBytes("AppendEncodedRef", asl.AppendEncodedRef(nil, ref), *exp.EncodedRef)
}

func checkEncodedRefDecode(_ context.Context, v Vector) error {
	var in encodedRefJSON
	var exp encodedRefDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.encoded_ref", in.EncodedRef != nil); err != nil {
		return err
	}
	ref, err := asl.DecodeEncodedRef(*in.EncodedRef)
	if exp.Reject != nil {
		if exp.ReferenceBytes != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.reference_bytes", exp.ReferenceBytes != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	if err := eqBytes("ReferenceBytes", ref.Bytes(), *exp.ReferenceBytes); err != nil {
		return err
	}
	return eqBytes("re-encoding", asl.AppendEncodedRef(nil, ref), *in.EncodedRef)
}

func checkOptionalEncodedRefEncode(_ context.Context, v Vector) error {
	var in optionalRefJSON
	var exp optionalEncodedRefJSON
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("expect.optional_encoded_ref", exp.OptionalEncodedRef != nil); err != nil {
		return err
	}
	var ref asl.Reference
	present := in.ReferenceBytes != nil
	if present {
		var err error
		if ref, err = asl.DecodeReference(*in.ReferenceBytes); err != nil {
			return fmt.Errorf("bad vector: reference_bytes: %v", err)
		}
	}
	return eqBytes("AppendOptionalEncodedRef", asl.AppendOptionalEncodedRef(nil, ref, present), *exp.OptionalEncodedRef)
}

func checkOptionalEncodedRefDecode(_ context.Context, v Vector) error {
	var in optionalEncodedRefJSON
	var exp optionalDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.optional_encoded_ref", in.OptionalEncodedRef != nil); err != nil {
		return err
	}
	ref, present, err := asl.DecodeOptionalEncodedRef(*in.OptionalEncodedRef)
	if exp.Reject != nil {
		if exp.ReferenceBytes != nil {
			return errors.New("bad vector: reject together with a decoded value")
		}
		return CheckReject(err, exp.Reject)
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	switch {
	case exp.ReferenceBytes == nil && present:
		return fmt.Errorf("decoded present reference %s, want absent", ref)
	case exp.ReferenceBytes != nil && !present:
		return fmt.Errorf("decoded absent, want %x", *exp.ReferenceBytes)
	case present:
		if err := eqBytes("ReferenceBytes", ref.Bytes(), *exp.ReferenceBytes); err != nil {
			return err
		}
	}
	return eqBytes("re-encoding", asl.AppendOptionalEncodedRef(nil, ref, present), *in.OptionalEncodedRef)
}
