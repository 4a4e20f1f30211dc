package tree_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/enc"
)

func ref(s string) asl.Reference { return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s))) }

// example is the worked example of SPECS.md §19.9.
func example() []tree.Entry {
	return []tree.Entry{
		{Name: "run.sh", Kind: tree.File, Executable: true, Size: 10, Ref: ref("#!/bin/sh\n")},
		{Name: "link", Kind: tree.Symlink, Size: 9, Ref: ref("hello.txt")},
		{Name: "hello.txt", Kind: tree.File, Size: 5, Ref: ref("hello")},
	}
}

// TestGolden: the worked example's bytes and reference match
// testdata/example.hex (one line of hex, then the reference).
func TestGolden(t *testing.T) {
	b, err := tree.Encode(example())
	if err != nil {
		t.Fatal(err)
	}
	r := asl.MustDerive(asl.HashSHA256, asl.Tagged(tree.Tag, b))
	got := hex.EncodeToString(b) + "\n" + r.String() + "\n"
	want, err := os.ReadFile(filepath.Join("testdata", "example.hex"))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("example:\n%s\nwant\n%s", got, want)
	}
	es, err := tree.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || es[0].Name != "hello.txt" || es[1].Kind != tree.Symlink || !es[2].Executable {
		t.Fatalf("decoded %+v", es)
	}
	empty, _ := tree.Encode(nil)
	if hex.EncodeToString(empty) != "00000000" {
		t.Fatalf("empty tree %x", empty)
	}
}

// TestEncodeOrderIndependent: the same entries in any order give the same
// bytes.
func TestEncodeOrderIndependent(t *testing.T) {
	a, _ := tree.Encode(example())
	es := example()
	es[0], es[2] = es[2], es[0]
	b, _ := tree.Encode(es)
	if !bytes.Equal(a, b) {
		t.Fatal("order changes the bytes")
	}
}

func TestEncodeRejects(t *testing.T) {
	r := ref("x")
	cases := []struct {
		name string
		es   []tree.Entry
		want string
	}{
		{"empty name", []tree.Entry{{Name: "", Kind: tree.File, Ref: r}}, "empty name"},
		{"dot", []tree.Entry{{Name: ".", Kind: tree.File, Ref: r}}, `"."`},
		{"dotdot", []tree.Entry{{Name: "..", Kind: tree.Dir, Size: 4, Ref: r}}, `".."`},
		{"slash", []tree.Entry{{Name: "a/b", Kind: tree.File, Ref: r}}, "contains '/'"},
		{"nul", []tree.Entry{{Name: "a\x00", Kind: tree.File, Ref: r}}, "NUL"},
		{"long", []tree.Entry{{Name: strings.Repeat("a", tree.MaxName+1), Kind: tree.File, Ref: r}}, "exceeds"},
		{"duplicate", []tree.Entry{{Name: "a", Kind: tree.File, Ref: r}, {Name: "a", Kind: tree.Dir, Size: 4, Ref: r}}, "twice"},
		{"kind", []tree.Entry{{Name: "a", Kind: 4, Ref: r}}, "unknown kind"},
		{"exec dir", []tree.Entry{{Name: "a", Kind: tree.Dir, Size: 4, Executable: true, Ref: r}}, "only a file"},
		{"small dir", []tree.Entry{{Name: "a", Kind: tree.Dir, Size: 3, Ref: r}}, "below 4"},
		{"empty symlink", []tree.Entry{{Name: "a", Kind: tree.Symlink, Ref: r}}, "1..4096"},
		{"long symlink", []tree.Entry{{Name: "a", Kind: tree.Symlink, Size: 4097, Ref: r}}, "1..4096"},
		{"no ref", []tree.Entry{{Name: "a", Kind: tree.File}}, "no reference"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tree.Encode(c.es)
			if !errors.Is(err, tree.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalid with %q", err, c.want)
			}
		})
	}
}

// exampleHex returns the example's bytes with f applied.
func mutate(t *testing.T, f func([]byte) []byte) []byte {
	b, err := tree.Encode(example())
	if err != nil {
		t.Fatal(err)
	}
	return f(b)
}

// TestDecodeRejects: one case per rule of §19.9; offsets are those of
// the example (entry 0 at 4: name 4-16, kind 17, flags 18, size 19-26,
// ref 27-64; entry 1 at 65: name 65-72, kind 73, flags 74, size 75-82,
// ref 83-120; entry 2 at 121: name 121-130, kind 131, flags 132, size
// 133-140, ref 141-178).
func TestDecodeRejects(t *testing.T) {
	set := func(off int, v ...byte) func([]byte) []byte {
		return func(b []byte) []byte { copy(b[off:], v); return b }
	}
	cut := func(n int) func([]byte) []byte { return func(b []byte) []byte { return b[:n] } }
	cases := []struct {
		name  string
		f     func([]byte) []byte
		field string
		off   int
	}{
		{"empty input", cut(0), "count", 0},
		{"count too large", set(0, 0, 0, 0, 9), "count", 0},
		{"count huge", set(0, 0xff, 0xff, 0xff, 0xff), "count", 0},
		{"name length past the end", set(4, 0xff, 0xff, 0xff, 0xff), "entry.name", 4},
		{"name truncated length", cut(67), "entry.name length", 65},
		{"empty name", func(b []byte) []byte {
			return append([]byte{0, 0, 0, 1, 0, 0, 0, 0}, b[17:65]...)
		}, "entry.name", 4},
		{"name with slash", set(8, '/'), "entry.name", 4},
		{"name with NUL", set(8, 0), "entry.name", 4},
		{"unsorted", set(69, 'a'), "entry.name", 65},
		{"duplicate", set(69, 'h', 'e', 'l', 'l'), "entry.name", 65},
		{"kind 0", set(17, 0), "entry.kind", 17},
		{"kind 4", set(17, 4), "entry.kind", 17},
		{"flags 2 on a file", set(18, 2), "entry.flags", 18},
		{"executable symlink", set(74, 1), "entry.flags", 74},
		{"symlink size 0", set(75, 0, 0, 0, 0, 0, 0, 0, 0), "entry.size", 75},
		{"symlink size 4097", set(75, 0, 0, 0, 0, 0, 0, 0x10, 0x01), "entry.size", 75},
		{"directory size 3", set(73, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3), "entry.size", 75},
		{"ref_len 1", set(27, 0, 0, 0, 1), "entry.ref.ref_len", 27},
		{"reserved hash", set(31, 0, 0), "entry.ref.hash_id", 31},
		{"short digest", set(27, 0, 0, 0, 33), "entry.ref.digest", 33},
		{"truncated ref", cut(100), "entry.ref.ref_len", 83},
		{"truncated kind", cut(73), "entry.kind", 73},
		{"truncated name", cut(64 + 6), "entry.name", 65},
		{"truncated size", cut(80), "entry.size", 75},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, "end of input", 179},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mutate(t, c.f)
			_, err := tree.Decode(b)
			var de *enc.DecodeError
			if !errors.As(err, &de) || de.Field != c.field || de.Offset != c.off {
				t.Fatalf("err = %v, want %s at %d", err, c.field, c.off)
			}
		})
	}
}

func TestDecodeArtifactTag(t *testing.T) {
	b, _ := tree.Encode(nil)
	if _, err := tree.DecodeArtifact(asl.Untagged(b)); !errors.Is(err, tree.ErrNotTree) {
		t.Fatalf("untagged: %v", err)
	}
	if es, err := tree.DecodeArtifact(asl.Tagged(tree.Tag, b)); err != nil || len(es) != 0 {
		t.Fatalf("empty tree: %v %v", es, err)
	}
}

func TestLookup(t *testing.T) {
	b, _ := tree.Encode(example())
	es, _ := tree.Decode(b)
	if e, ok := tree.Lookup(es, "link"); !ok || e.Kind != tree.Symlink {
		t.Fatal("link not found")
	}
	if _, ok := tree.Lookup(es, "nope"); ok {
		t.Fatal("nope found")
	}
}
