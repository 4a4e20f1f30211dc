package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/bundle"
)

// Kinds for BUNDLE/1 (SPECS.md §19).
const (
	// bundle_encode: {"hash_id":N,"entries":[artifact],"roots":[index]}
	// -> {"bundle":hex}.
	KindBundleEncode = "bundle_encode"
	// bundle_decode: {"bundle":hex} -> {"entries":[{"reference",
	// "type_tag","bytes"}],"roots":[text]} or {"reject":...}.
	KindBundleDecode = "bundle_decode"

	specBundle = "§19"
)

func init() {
	Register(KindBundleEncode, checkBundleEncode)
	Register(KindBundleDecode, checkBundleDecode)
	RegisterGenerator("bundle", genBundle)
}

type bundleEncodeInput struct {
	HashID  *uint16        `json:"hash_id"`
	Entries []artifactJSON `json:"entries"`
	Roots   []int          `json:"roots"`
}

type bundleJSON struct {
	Bundle *Hex `json:"bundle"`
}

type bundleEntryJSON struct {
	Reference string  `json:"reference"`
	TypeTag   *uint32 `json:"type_tag"`
	Bytes     *Hex    `json:"bytes"`
}

type bundleAcceptExpect struct {
	Entries []bundleEntryJSON `json:"entries"`
	Roots   []string          `json:"roots"`
}

type bundleDecodeExpect struct {
	Entries []bundleEntryJSON `json:"entries"`
	Roots   []string          `json:"roots"`
	Reject  *Reject           `json:"reject"`
}

func encodeBundle(id asl.HashID, arts []asl.Artifact, roots []int) ([]byte, error) {
	var buf bytes.Buffer
	w, err := bundle.NewWriter(&buf)
	if err != nil {
		return nil, err
	}
	var refs []asl.Reference
	for _, a := range arts {
		ref, err := w.AddArtifact(id, a)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
	}
	var rs []asl.Reference
	for _, i := range roots {
		if i < 0 || i >= len(refs) {
			return nil, fmt.Errorf("bad vector: root index %d of %d entries", i, len(refs))
		}
		rs = append(rs, refs[i])
	}
	if err := w.Close(rs); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeBundle reads a whole bundle, payloads included.
func decodeBundle(b []byte) ([]bundleEntryJSON, []string, error) {
	r, err := bundle.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	entries := []bundleEntryJSON{}
	for {
		e, err := r.Next()
		if err == io.EOF {
			roots := []string{}
			for _, ref := range r.Roots() {
				roots = append(roots, ref.String())
			}
			return entries, roots, nil
		}
		if err != nil {
			return nil, nil, err
		}
		p, err := io.ReadAll(r)
		if err != nil {
			return nil, nil, err
		}
		j := artifactToJSON(asl.Artifact{Bytes: p, Tag: e.Header.Tag, HasTag: e.Header.HasTag})
		entries = append(entries, bundleEntryJSON{Reference: e.Ref.String(), TypeTag: j.TypeTag, Bytes: j.Bytes})
	}
}

func bundleRejectOf(err error) (*Reject, error) {
	var be *bundle.Error
	if !errors.As(err, &be) {
		return nil, fmt.Errorf("rejected without a bundle decode error: %w", err)
	}
	off := int(be.Offset)
	r := &Reject{Field: be.Field, Offset: &off}
	switch {
	case errors.Is(err, asl.ErrUnsupported):
		r.Class = "ERR_UNSUPPORTED"
	case errors.Is(err, asl.ErrIntegrity):
		r.Class = "ERR_INTEGRITY"
	}
	return r, nil
}

func checkBundleEncode(_ context.Context, v Vector) error {
	var in bundleEncodeInput
	var exp bundleJSON
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.hash_id and expect.bundle", in.HashID != nil && exp.Bundle != nil); err != nil {
		return err
	}
	var arts []asl.Artifact
	for _, j := range in.Entries {
		a, err := j.artifact()
		if err != nil {
			return err
		}
		arts = append(arts, a)
	}
	got, err := encodeBundle(asl.HashID(*in.HashID), arts, in.Roots)
	if err != nil {
		return err
	}
	return eqBytes("bundle", got, *exp.Bundle)
}

func checkBundleDecode(_ context.Context, v Vector) error {
	var in bundleJSON
	var exp bundleDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.bundle", in.Bundle != nil); err != nil {
		return err
	}
	entries, roots, err := decodeBundle(*in.Bundle)
	if exp.Reject != nil {
		if err == nil {
			return fmt.Errorf("accepted, want rejection at %s", exp.Reject.where())
		}
		got, rerr := bundleRejectOf(err)
		if rerr != nil {
			return rerr
		}
		if got.Field != exp.Reject.Field || exp.Reject.Offset == nil || *got.Offset != *exp.Reject.Offset || got.Class != exp.Reject.Class {
			return fmt.Errorf("rejected at %s class %q (%v), want %s class %q", got.where(), got.Class, err, exp.Reject.where(), exp.Reject.Class)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("rejected: %w", err)
	}
	if fmt.Sprint(entriesKey(entries)) != fmt.Sprint(entriesKey(exp.Entries)) || fmt.Sprint(roots) != fmt.Sprint(exp.Roots) {
		return fmt.Errorf("decoded %v roots %v, want %v roots %v", entriesKey(entries), roots, entriesKey(exp.Entries), exp.Roots)
	}
	// Round trip: re-encoding the entries (under their references' hash)
	// with the roots gives back the input.
	var buf bytes.Buffer
	w, _ := bundle.NewWriter(&buf)
	for _, e := range entries {
		ref, err := asl.ParseReference(e.Reference)
		if err != nil {
			return err
		}
		a, _ := artifactJSON{TypeTag: e.TypeTag, Bytes: e.Bytes}.artifact()
		if err := w.Add(ref, a.Header(), bytes.NewReader(a.Bytes)); err != nil {
			return err
		}
	}
	var rs []asl.Reference
	for _, r := range roots {
		rs = append(rs, asl.MustParseReference(r))
	}
	if err := w.Close(rs); err != nil {
		return err
	}
	return eqBytes("re-encoded bundle", buf.Bytes(), *in.Bundle)
}

func entriesKey(es []bundleEntryJSON) []string {
	out := make([]string, len(es))
	for i, e := range es {
		tag := "null"
		if e.TypeTag != nil {
			tag = fmt.Sprint(*e.TypeTag)
		}
		b := ""
		if e.Bytes != nil {
			b = fmt.Sprintf("%x", []byte(*e.Bytes))
		}
		out[i] = e.Reference + "/" + tag + "/" + b
	}
	return out
}

type bundleCase struct {
	name, desc string
	hash       asl.HashID
	arts       []asl.Artifact
	roots      []int
}

var bundleCases = sync.OnceValue(func() []bundleCase {
	return []bundleCase{
		{"empty", "no entries and no roots: header, end tag, trailer", asl.HashSHA256, nil, nil},
		{"hello", "the worked example of §19.4: untagged \"hello\" as the one entry and root", asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("hello"))}, []int{0}},
		{"tagged-and-empty", "a tagged artifact, the empty artifact and a tag-0 artifact; the second and first as roots, in that order", asl.HashSHA256,
			[]asl.Artifact{asl.Tagged(asl.TagPELProgramDAG1, []byte("hi")), asl.Untagged(nil), asl.Tagged(0, []byte{0})}, []int{1, 0}},
		{"blake3", "entries under BLAKE3-256 (hash id 0x8001)", asl.HashBLAKE3, []asl.Artifact{asl.Untagged([]byte("hello")), asl.Tagged(0xffffffff, allBytes())}, []int{1}},
		{"no-roots", "two entries and an empty root list", asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("a")), asl.Untagged([]byte("b"))}, nil},
		{"duplicate", "the same artifact twice: entries are not deduplicated, and the count says 2", asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("a")), asl.Untagged([]byte("a"))}, []int{0}},
	}
})

type bundleRejectCase struct {
	name, desc string
	mutate     func(b []byte) []byte
}

// The rejections mutate the "two" bundle (202 bytes): header 0-11; entry 0
// (untagged "hello") tag 12, ref_len 13, ref 17-50, artifact 51 (length 52,
// payload 60-64); entry 1 (tag 5, "hi") tag 65, ref 70-103, artifact 104
// (length 109, payload 117-118); end tag 119; roots count 120, root 124-161;
// entry_count 162; digest 170-201.
func bundleRejects() []bundleRejectCase {
	set := func(off int, v byte) func([]byte) []byte {
		return func(b []byte) []byte { b[off] = v; return b }
	}
	xor := func(off int) func([]byte) []byte {
		return func(b []byte) []byte {
			if off < 0 {
				off += len(b)
			}
			b[off] ^= 1
			return b
		}
	}
	cut := func(n int) func([]byte) []byte {
		return func(b []byte) []byte {
			if n < 0 {
				return b[:len(b)+n]
			}
			return b[:n]
		}
	}
	return []bundleRejectCase{
		{"empty-input", "no bytes: the magic is missing", cut(0)},
		{"short-magic", "7 bytes of magic", cut(7)},
		{"bad-magic", "the first byte of the magic changed", set(0, 'a')},
		{"version-2", "version 0x0002 is not this version (ERR_UNSUPPORTED)", set(9, 2)},
		{"flags", "flags 0x0001: no flag is defined", set(11, 1)},
		{"no-entry-tag", "the bundle ends after the header", cut(12)},
		{"entry-tag-02", "entry tag 0x02 is neither artifact (0x01) nor end (0x00)", set(12, 2)},
		{"ref-len-1", "ref_len 1 is below 2", set(16, 1)},
		{"ref-len-258", "ref_len 258 exceeds 257", func(b []byte) []byte { b[15], b[16] = 1, 2; return b }},
		{"ref-reserved-hash", "the entry's reference has the reserved hash id 0x0000 (ERR_INTEGRITY)", set(18, 0)},
		{"ref-short-digest", "ref_len 33: a SHA-256 reference with 31 digest bytes (ERR_INTEGRITY)", set(16, 33)},
		{"ref-unregistered-hash", "the entry's reference is under the unregistered hash id 0x7f01: its bytes cannot be checked (ERR_UNSUPPORTED)", set(17, 0x7f)},
		{"has-type-tag-02", "the artifact's has_type_tag is 0x02", set(51, 2)},
		{"truncated-length", "the bundle ends inside the bytes length", cut(55)},
		{"truncated-payload", "the bundle ends after 3 of the 5 payload bytes: reported at the length prefix", cut(63)},
		{"payload-flipped", "one payload bit flipped: the bytes do not hash to the entry's reference (ERR_INTEGRITY, at the artifact)", xor(61)},
		{"ref-flipped", "one digest bit of the entry's reference flipped (ERR_INTEGRITY, at the artifact)", xor(30)},
		{"second-entry-flipped", "the second entry's payload damaged: entry 0 reads, entry 1 fails (ERR_INTEGRITY)", xor(117)},
		{"no-trailer", "the bundle ends after the last entry, without the end tag", cut(119)},
		{"truncated-roots", "the bundle ends inside the roots", cut(125)},
		{"entry-count", "the trailer's entry count is 3 for 2 entries (ERR_INTEGRITY)", xor(-33)},
		{"digest-flipped", "one bit of the trailer digest flipped (ERR_INTEGRITY)", xor(-1)},
		{"root-flipped", "one bit of the root reference flipped: the digest no longer matches (ERR_INTEGRITY)", xor(-41)},
		{"truncated-digest", "the bundle ends one byte before the end of the digest", cut(-1)},
		{"trailing-byte", "a byte after the trailer", func(b []byte) []byte { return append(b, 0) }},
	}
}

func genBundle() ([]Vector, error) {
	var vs []Vector
	add := func(v Vector, err error) error {
		if err == nil {
			vs = append(vs, v)
		}
		return err
	}
	for _, c := range bundleCases() {
		b, err := encodeBundle(c.hash, c.arts, c.roots)
		if err != nil {
			return nil, err
		}
		id := uint16(c.hash)
		in := bundleEncodeInput{HashID: &id, Entries: []artifactJSON{}, Roots: []int{}}
		for _, a := range c.arts {
			in.Entries = append(in.Entries, artifactToJSON(a))
		}
		in.Roots = append(in.Roots, c.roots...)
		hb := Hex(b)
		if err := add(NewVector("bundle.encode."+c.name, "encode: "+c.desc, specBundle, KindBundleEncode, in, bundleJSON{&hb})); err != nil {
			return nil, err
		}
	}
	for _, c := range bundleCases() {
		b, _ := encodeBundle(c.hash, c.arts, c.roots)
		entries, roots, err := decodeBundle(b)
		if err != nil {
			return nil, fmt.Errorf("%s: own bundle rejected: %w", c.name, err)
		}
		hb := Hex(b)
		if err := add(NewVector("bundle.decode."+c.name, "decode and re-encode: "+c.desc, specBundle, KindBundleDecode,
			bundleJSON{&hb}, bundleAcceptExpect{Entries: entries, Roots: roots})); err != nil {
			return nil, err
		}
	}
	two, err := encodeBundle(asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("hello")), asl.Tagged(5, []byte("hi"))}, []int{0})
	if err != nil {
		return nil, err
	}
	for _, c := range bundleRejects() {
		b := c.mutate(append([]byte(nil), two...))
		_, _, err := decodeBundle(b)
		if err == nil {
			return nil, fmt.Errorf("bundle reject case %s was accepted", c.name)
		}
		rj, rerr := bundleRejectOf(err)
		if rerr != nil {
			return nil, fmt.Errorf("bundle reject case %s: %w", c.name, rerr)
		}
		hb := Hex(b)
		if err := add(NewVector("bundle.reject."+c.name, "reject: "+c.desc, specBundle, KindBundleDecode,
			bundleJSON{&hb}, rejectExpect{rj})); err != nil {
			return nil, err
		}
	}
	return vs, nil
}
