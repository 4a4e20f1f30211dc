package asl

import (
	"fmt"

	"github.com/amduat/amduat/enc"
)

// TypeTag is the optional 32-bit type of an Artifact.
type TypeTag uint32

// Type tags assigned by the published Amduat documents.
const (
	TagPELProgramDAG1 TypeTag = 0x00000101
	TagPELTraceDAG1   TypeTag = 0x00000102
	TagPEL1Result1    TypeTag = 0x00000103
	TagTGK1EdgeV1     TypeTag = 0x00000201
)

// Artifact is an ASL/1 value: bytes plus an optional TypeTag. The zero value
// is the empty, untagged artifact.
type Artifact struct {
	Bytes  []byte
	Tag    TypeTag
	HasTag bool
}

// Tagged returns an artifact with the given tag.
func Tagged(tag TypeTag, b []byte) Artifact { return Artifact{Bytes: b, Tag: tag, HasTag: true} }

// Untagged returns an artifact without a tag.
func Untagged(b []byte) Artifact { return Artifact{Bytes: b} }

// Header describes an artifact without its bytes: what a streaming put needs
// up front and what ArtifactHeaderBytes encodes.
type Header struct {
	Size   uint64
	Tag    TypeTag
	HasTag bool
}

// Header returns a's header.
func (a Artifact) Header() Header {
	return Header{Size: uint64(len(a.Bytes)), Tag: a.Tag, HasTag: a.HasTag}
}

// AppendHeader appends the ArtifactBytes prefix (SPECS.md §3.1) that precedes
// the payload: has_type_tag, [type_tag], bytes_len.
func (h Header) AppendHeader(dst []byte) []byte {
	w := enc.Writer{Buf: dst}
	if h.HasTag {
		w.U8(1)
		w.U32(uint32(h.Tag))
	} else {
		w.U8(0)
	}
	w.U64(h.Size)
	return w.Buf
}

// TagString renders the tag as "0x%08x" or "none".
func (h Header) TagString() string {
	if !h.HasTag {
		return "none"
	}
	return fmt.Sprintf("0x%08x", uint32(h.Tag))
}

// EncodeArtifact returns the canonical ArtifactBytes of a (SPECS.md §3.1).
func EncodeArtifact(a Artifact) []byte {
	out := a.Header().AppendHeader(make([]byte, 0, 13+len(a.Bytes)))
	return append(out, a.Bytes...)
}

// DecodeArtifact parses canonical ArtifactBytes strictly. The returned
// artifact's Bytes alias b.
func DecodeArtifact(b []byte) (Artifact, error) {
	r := enc.NewReader(b)
	a, err := ReadArtifact(r)
	if err != nil {
		return Artifact{}, err
	}
	if err := r.Done(); err != nil {
		return Artifact{}, err
	}
	return a, nil
}

// ReadArtifact reads one ArtifactBytes value from r (it does not require r to
// be exhausted afterwards).
func ReadArtifact(r *enc.Reader) (Artifact, error) {
	var a Artifact
	flagOff := r.Offset()
	switch flag := r.U8("has_type_tag"); {
	case r.Err() != nil:
		return Artifact{}, r.Err()
	case flag == 1:
		a.HasTag = true
		a.Tag = TypeTag(r.U32("type_tag"))
	case flag != 0:
		return Artifact{}, r.FailAt(flagOff, "has_type_tag", "value 0x%02x is neither 0x00 nor 0x01", flag)
	}
	a.Bytes = r.Bytes64("bytes")
	if r.Err() != nil {
		return Artifact{}, r.Err()
	}
	return a, nil
}
