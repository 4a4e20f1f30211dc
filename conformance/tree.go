package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// Kinds for TREE/1 directories (SPECS.md §19.9).
const (
	// tree_encode: {"entries":[treeEntry]} (any order) ->
	// {"tree":hex,"reference":text} (tag 0x80000001, SHA-256), or
	// {"reject":{"field":"entries"}} for entries no tree can hold.
	KindTreeEncode = "tree_encode"
	// tree_decode: {"tree":hex} -> {"entries":[treeEntry]} or
	// {"reject":{"field","offset"}}; an accepted tree re-encodes to the
	// input.
	KindTreeDecode = "tree_decode"

	specTree = "§19.9"
)

func init() {
	Register(KindTreeEncode, checkTreeEncode)
	Register(KindTreeDecode, checkTreeDecode)
	RegisterGenerator("tree", genTree)
}

// treeEntryVec is an entry: the name's bytes in hex (names are bytes, not
// text), the kind as a word, the executable bit, the size and the
// reference's text form.
type treeEntryVec struct {
	Name       Hex    `json:"name"`
	Kind       string `json:"kind"`
	Executable bool   `json:"executable"`
	Size       uint64 `json:"size"`
	Ref        string `json:"ref"`
}

func treeEntryToVec(e tree.Entry) treeEntryVec {
	return treeEntryVec{Name: Hex(e.Name), Kind: e.Kind.String(), Executable: e.Executable, Size: e.Size, Ref: e.Ref.String()}
}

func (v treeEntryVec) entry() (tree.Entry, error) {
	e := tree.Entry{Name: string(v.Name), Executable: v.Executable, Size: v.Size}
	switch v.Kind {
	case "file":
		e.Kind = tree.File
	case "directory":
		e.Kind = tree.Dir
	case "symlink":
		e.Kind = tree.Symlink
	default:
		return e, fmt.Errorf("bad vector: kind %q", v.Kind)
	}
	ref, err := asl.ParseReference(v.Ref)
	if err != nil {
		return e, fmt.Errorf("bad vector: %w", err)
	}
	e.Ref = ref
	return e, nil
}

type treeEncodeInput struct {
	Entries []treeEntryVec `json:"entries"`
}

// treeEncodeExpect holds tree and reference, or reject.
type treeEncodeExpect struct {
	Tree      *Hex    `json:"tree,omitempty"`
	Reference string  `json:"reference,omitempty"`
	Reject    *Reject `json:"reject,omitempty"`
}

type treeBytesInput struct {
	Tree *Hex `json:"tree"`
}

// treeDecodeExpect holds exactly one of entries (never null; [] for the
// empty tree) and reject (§7.11).
type treeDecodeExpect struct {
	Entries *[]treeEntryVec `json:"entries,omitempty"`
	Reject  *Reject         `json:"reject,omitempty"`
}

type treeAcceptExpect struct {
	Entries []treeEntryVec `json:"entries"`
}

func (in treeEncodeInput) entries() ([]tree.Entry, error) {
	var es []tree.Entry
	for _, v := range in.Entries {
		e, err := v.entry()
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, nil
}

func checkTreeEncode(_ context.Context, v Vector) error {
	var in treeEncodeInput
	var exp treeEncodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	es, err := in.entries()
	if err != nil {
		return err
	}
	b, err := tree.Encode(es)
	if exp.Reject != nil {
		if exp.Tree != nil {
			return errors.New("bad vector: reject together with a tree")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.tree", exp.Tree != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("encode: %v", err)
	}
	if err := eqBytes("TreeBytes", b, *exp.Tree); err != nil {
		return err
	}
	if ref := asl.MustDerive(asl.HashSHA256, asl.Tagged(tree.Tag, b)); ref.String() != exp.Reference {
		return fmt.Errorf("tree reference = %s, want %s", ref, exp.Reference)
	}
	return nil
}

func checkTreeDecode(_ context.Context, v Vector) error {
	var in treeBytesInput
	var exp treeDecodeExpect
	if err := DecodeInput(v, &in); err != nil {
		return err
	}
	if err := DecodeExpect(v, &exp); err != nil {
		return err
	}
	if err := need("input.tree", in.Tree != nil); err != nil {
		return err
	}
	es, err := tree.Decode(*in.Tree)
	if exp.Reject != nil {
		if exp.Entries != nil {
			return errors.New("bad vector: reject together with entries")
		}
		return CheckReject(err, exp.Reject)
	}
	if err := need("expect.entries", exp.Entries != nil); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("rejected: %v", err)
	}
	got := make([]treeEntryVec, len(es))
	for i, e := range es {
		got[i] = treeEntryToVec(e)
	}
	if fmt.Sprint(got) != fmt.Sprint(*exp.Entries) {
		return fmt.Errorf("decoded %+v, want %+v", got, *exp.Entries)
	}
	again, err := tree.Encode(es)
	if err != nil {
		return err
	}
	return eqBytes("re-encoding", again, *in.Tree)
}

func genTree() ([]Vector, error) {
	var l vectorList
	r := func(s string) asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s))) }
	emptyTree := asl.MustDerive(asl.HashSHA256, asl.Tagged(tree.Tag, []byte{0, 0, 0, 0}))
	blake := asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("b")))
	unknown, _ := asl.DecodeReference([]byte{0x77, 0x77, 1})
	example := []tree.Entry{
		{Name: "run.sh", Kind: tree.File, Executable: true, Size: 10, Ref: r("#!/bin/sh\n")},
		{Name: "link", Kind: tree.Symlink, Size: 9, Ref: r("hello.txt")},
		{Name: "hello.txt", Kind: tree.File, Size: 5, Ref: r("hello")},
	}
	cases := []struct {
		name, desc string
		es         []tree.Entry
	}{
		{"empty", "the empty directory: a count of 0", nil},
		{"example", "the worked example of §19.9, given out of order: a file, an executable file and a symlink, sorted by name", example},
		{"directory", "a directory entry naming the empty tree (size 4)", []tree.Entry{{Name: "sub", Kind: tree.Dir, Size: 4, Ref: emptyTree}}},
		{"bytewise-order", "names sorted bytewise, not by locale or case: \"B\" < \"a\" < \"a.b\" < \"a0\" < \"\\xff\" (not UTF-8, allowed)", []tree.Entry{
			{Name: "a0", Kind: tree.File, Ref: r("")},
			{Name: "\xff", Kind: tree.File, Size: 1, Ref: r("x")},
			{Name: "a.b", Kind: tree.File, Ref: r("")},
			{Name: "B", Kind: tree.File, Ref: r("")},
			{Name: "a", Kind: tree.File, Ref: r("")},
		}},
		{"mixed-hashes", "entries under BLAKE3-256 and an unregistered hash id (framing accepted, §3.2); the size is not checked against the reference", []tree.Entry{
			{Name: "b", Kind: tree.File, Size: 1, Ref: blake},
			{Name: "u", Kind: tree.File, Size: 1 << 40, Ref: unknown},
		}},
		{"limits", "a name of 4096 bytes and a symlink target of 4096 bytes, the largest allowed", []tree.Entry{
			{Name: strings.Repeat("n", tree.MaxName), Kind: tree.Symlink, Size: tree.MaxSymlink, Ref: r(strings.Repeat("t", tree.MaxSymlink))},
		}},
	}
	for _, c := range cases {
		b, err := tree.Encode(c.es)
		if err != nil {
			return nil, fmt.Errorf("tree case %s: %w", c.name, err)
		}
		in := treeEncodeInput{Entries: []treeEntryVec{}}
		for _, e := range c.es {
			in.Entries = append(in.Entries, treeEntryToVec(e))
		}
		bh := Hex(b)
		l.add("tree.encode."+c.name, "encode: "+c.desc, specTree, KindTreeEncode, in,
			treeEncodeExpect{Tree: &bh, Reference: asl.MustDerive(asl.HashSHA256, asl.Tagged(tree.Tag, b)).String()})
		es, _ := tree.Decode(b)
		dec := treeAcceptExpect{Entries: []treeEntryVec{}}
		for _, e := range es {
			dec.Entries = append(dec.Entries, treeEntryToVec(e))
		}
		l.add("tree.decode."+c.name, "decode and re-encode: "+c.desc, specTree, KindTreeDecode, treeBytesInput{Tree: &bh}, dec)
	}
	x := r("x")
	for _, c := range []struct {
		name, desc string
		es         []tree.Entry
	}{
		{"empty-name", "an empty name", []tree.Entry{{Name: "", Kind: tree.File, Ref: x}}},
		{"dot", "the name \".\"", []tree.Entry{{Name: ".", Kind: tree.Dir, Size: 4, Ref: emptyTree}}},
		{"dotdot", "the name \"..\"", []tree.Entry{{Name: "..", Kind: tree.Dir, Size: 4, Ref: emptyTree}}},
		{"slash", "a name containing '/'", []tree.Entry{{Name: "a/b", Kind: tree.File, Ref: x}}},
		{"nul", "a name containing NUL", []tree.Entry{{Name: "a\x00b", Kind: tree.File, Ref: x}}},
		{"long-name", "a name of 4097 bytes", []tree.Entry{{Name: strings.Repeat("n", tree.MaxName+1), Kind: tree.File, Ref: x}}},
		{"duplicate", "two entries named \"a\" (a file and a directory)", []tree.Entry{{Name: "a", Kind: tree.File, Ref: x}, {Name: "a", Kind: tree.Dir, Size: 4, Ref: emptyTree}}},
		{"executable-directory", "a directory marked executable", []tree.Entry{{Name: "d", Kind: tree.Dir, Size: 4, Executable: true, Ref: emptyTree}}},
		{"executable-symlink", "a symlink marked executable", []tree.Entry{{Name: "l", Kind: tree.Symlink, Size: 1, Executable: true, Ref: x}}},
		{"empty-symlink", "a symlink with an empty target", []tree.Entry{{Name: "l", Kind: tree.Symlink, Size: 0, Ref: x}}},
		{"small-directory", "a directory of size 3, smaller than the empty tree", []tree.Entry{{Name: "d", Kind: tree.Dir, Size: 3, Ref: emptyTree}}},
	} {
		in := treeEncodeInput{Entries: []treeEntryVec{}}
		for _, e := range c.es {
			in.Entries = append(in.Entries, treeEntryToVec(e))
		}
		_, err := tree.Encode(c.es)
		if err == nil {
			return nil, fmt.Errorf("tree encode reject case %s accepted", c.name)
		}
		l.add("tree.encode.reject."+c.name, "refuse to encode: "+c.desc, specTree, KindTreeEncode, in, rejectExpect{&Reject{Field: "entries"}})
	}
	full, err := tree.Encode(example)
	if err != nil {
		return nil, err
	}
	// full: count 0-3; entry 0 ("hello.txt") name 4-16, kind 17, flags 18,
	// size 19-26, ref 27-64; entry 1 ("link") name 65-72, kind 73, flags
	// 74, size 75-82, ref 83-120; entry 2 ("run.sh") 121-178.
	set := func(off int, v ...byte) []byte {
		b := cat(full)
		copy(b[off:], v)
		return b
	}
	for _, c := range []bytesCase{
		{"empty", "no bytes: count truncated", nil},
		{"count-past-end", "count 9 for three entries' bytes (9 × 21 > 175)", set(0, 0, 0, 0, 9)},
		{"count-huge", "count 2^32-1 with 175 bytes following: refused before allocating", set(0, 0xff, 0xff, 0xff, 0xff)},
		{"name-length-past-end", "a name length of 2^32-1", set(4, 0xff, 0xff, 0xff, 0xff)},
		{"empty-name", "an empty name", cat(h("00000001 00000000"), full[17:65])},
		{"dot", "the name \".\"", cat(h("00000001 00000001 2e 02 00 0000000000000004"), asl.AppendEncodedRef(nil, emptyTree))},
		{"dotdot", "the name \"..\"", cat(h("00000001 00000002 2e2e 02 00 0000000000000004"), asl.AppendEncodedRef(nil, emptyTree))},
		{"slash", "a name containing '/' (\"hell/.txt\")", set(8, '/')},
		{"nul", "a name containing NUL", set(8, 0)},
		{"unsorted", "entry 1 named \"aink\", before entry 0's \"hello.txt\"", set(69, 'a')},
		{"duplicate", "entry 0 (\"hello.txt\") twice", cat(h("00000002"), full[4:65], full[4:65])},
		{"kind-0", "kind 0x00", set(17, 0)},
		{"kind-4", "kind 0x04", set(17, 4)},
		{"flags-file", "flags 0x02 on a file (only bit 0, executable, is defined)", set(18, 2)},
		{"flags-symlink", "flags 0x01 on a symlink (only a file is executable)", set(74, 1)},
		{"symlink-size-0", "a symlink of target size 0", set(75, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"symlink-size-4097", "a symlink of target size 4097", set(75, 0, 0, 0, 0, 0, 0, 0x10, 0x01)},
		{"directory-size-3", "entry 1 as a directory of size 3", set(73, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3)},
		{"ref-len-1", "ref_len 1", set(27, 0, 0, 0, 1)},
		{"ref-reserved-hash", "a reference with the reserved hash id 0x0000", set(31, 0, 0)},
		{"ref-short-digest", "ref_len 33: a SHA-256 reference with 31 digest bytes", set(27, 0, 0, 0, 33)},
		{"truncated-name", "the input ends inside entry 1's name", full[:70]},
		{"truncated-kind", "the input ends before entry 1's kind", full[:73]},
		{"truncated-size", "the input ends inside entry 1's size", full[:80]},
		{"truncated-ref", "the input ends inside entry 1's reference", full[:100]},
		{"trailing-byte", "the tree followed by one byte", cat(full, h("00"))},
	} {
		_, err := tree.Decode(c.in)
		if err == nil {
			return nil, fmt.Errorf("tree reject case %s accepted", c.name)
		}
		in := Hex(c.in)
		l.add("tree.reject."+c.name, "reject: "+c.desc, specTree, KindTreeDecode, treeBytesInput{Tree: &in}, rejectExpect{RejectOf(err, "")})
	}
	return l.vs, l.err
}
