// Package tree encodes and decodes TREE/1 (SPECS.md §19.9): a directory as
// an artifact of type tag 0x80000001 whose bytes list, sorted bytewise by
// name, each entry's name, kind (file, directory, symlink), executable bit,
// size and reference.
//
// Invariants: Encode is canonical (it sorts its input, so the same entries
// give the same bytes whatever order a directory was read in) and refuses
// what Decode refuses; Decode accepts exactly the bytes Encode produces
// (Encode(Decode(b)) == b for every accepted b), never panics, and checks
// a claimed entry count against the remaining input before allocating.
// Nothing but names, kinds, the executable bit, sizes and references is
// kept: no times, owners or permission bits other than "executable", so a
// tree's reference depends on content alone (§19.9 says why).
package tree

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

// Tag is TYPE_TAG_AMDUAT_TREE_1, in the range of type tags this project
// assigns (0x80000000 and up, SPECS.md §19.9).
const Tag asl.TypeTag = 0x80000001

// Kind is what an entry names.
type Kind uint8

// Entry kinds (the `entry.kind` byte).
const (
	File    Kind = 0x01 // a regular file: Ref names its bytes
	Dir     Kind = 0x02 // a directory: Ref names a TREE/1 artifact
	Symlink Kind = 0x03 // a symbolic link: Ref names the target's bytes
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "directory"
	case Symlink:
		return "symlink"
	}
	return fmt.Sprintf("kind(0x%02x)", uint8(k))
}

// Flag bits of `entry.flags`.
const flagExecutable = 0x01

// Limits of §19.9.
const (
	// MaxName is the longest name, in bytes (Linux's PATH_MAX; every file
	// system's NAME_MAX is below it).
	MaxName = 4096
	// MaxSymlink is the longest symlink target, in bytes (PATH_MAX).
	MaxSymlink = 4096
	// MinEmpty is the size of the empty tree (its count alone): a
	// directory entry's size is at least this.
	MinEmpty = 4
	// minEntry is the smallest encoded entry: a 1-byte name (4+1), kind,
	// flags, size (8) and an EncodedRef of 2 bytes (4+2).
	minEntry = 5 + 1 + 1 + 8 + 6
)

// Entry is one name in a directory.
type Entry struct {
	Name       string
	Kind       Kind
	Executable bool   // files only
	Size       uint64 // the payload size of the artifact Ref names
	Ref        asl.Reference
}

// ErrInvalid is wrapped by Encode's errors: entries no tree can hold.
var ErrInvalid = errors.New("invalid tree entry")

// ErrNotTree: an artifact that should be a tree is not tagged 0x80000001.
var ErrNotTree = errors.New("not a tree")

// CheckName reports why name cannot be an entry name, or nil: empty, "."
// or "..", containing '/' or NUL, or longer than MaxName bytes.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case name == "." || name == "..":
		return fmt.Errorf("name %q is not allowed", name)
	case len(name) > MaxName:
		return fmt.Errorf("name of %d bytes exceeds %d", len(name), MaxName)
	case strings.IndexByte(name, '/') >= 0:
		return fmt.Errorf("name %q contains '/'", name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("name %q contains NUL", name)
	}
	return nil
}

// check reports why e cannot be an entry (apart from its position).
func (e Entry) check() error {
	if err := CheckName(e.Name); err != nil {
		return err
	}
	switch e.Kind {
	case File:
	case Dir:
		if e.Size < MinEmpty {
			return fmt.Errorf("directory %q: size %d is below %d (the empty tree)", e.Name, e.Size, MinEmpty)
		}
	case Symlink:
		if e.Size == 0 || e.Size > MaxSymlink {
			return fmt.Errorf("symlink %q: target size %d is not in 1..%d", e.Name, e.Size, MaxSymlink)
		}
	default:
		return fmt.Errorf("%q: unknown kind 0x%02x", e.Name, uint8(e.Kind))
	}
	if e.Executable && e.Kind != File {
		return fmt.Errorf("%s %q: only a file can be executable", e.Kind, e.Name)
	}
	if e.Ref.IsZero() {
		return fmt.Errorf("%q: no reference", e.Name)
	}
	return nil
}

// Sort orders entries bytewise by name, the order of TREE/1.
func Sort(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
}

// Encode returns the TreeBytes of entries, sorted by name (the input is
// not modified). It refuses, wrapping ErrInvalid, a name CheckName refuses,
// two entries with one name, an unknown kind, a non-file marked
// executable, a directory smaller than the empty tree, a symlink target
// outside 1..MaxSymlink bytes and a zero reference.
func Encode(entries []Entry) ([]byte, error) {
	sorted := slices.Clone(entries)
	Sort(sorted)
	n := 4
	for i, e := range sorted {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if i > 0 && sorted[i-1].Name == e.Name {
			return nil, fmt.Errorf("%w: name %q appears twice", ErrInvalid, e.Name)
		}
		n += 4 + len(e.Name) + 1 + 1 + 8 + 4 + 2 + len(e.Ref.Digest())
	}
	w := enc.Writer{Buf: make([]byte, 0, n)}
	w.U32(uint32(len(sorted)))
	for _, e := range sorted {
		w.Bytes32([]byte(e.Name))
		w.U8(uint8(e.Kind))
		var flags uint8
		if e.Executable {
			flags = flagExecutable
		}
		w.U8(flags)
		w.U64(e.Size)
		w.Buf = asl.AppendEncodedRef(w.Buf, e.Ref)
	}
	return w.Buf, nil
}

// Artifact returns the tree artifact (tag Tag) of entries.
func Artifact(entries []Entry) (asl.Artifact, error) {
	b, err := Encode(entries)
	if err != nil {
		return asl.Artifact{}, err
	}
	return asl.Tagged(Tag, b), nil
}

// Decode parses TreeBytes under the rules of SPECS.md §19.9. An error is an
// *enc.DecodeError (wrapping enc.ErrMalformed) naming the field and the
// offset at which it starts.
func Decode(b []byte) ([]Entry, error) {
	r := enc.NewReader(b)
	n := r.Count("count", minEntry)
	if r.Err() != nil {
		return nil, r.Err()
	}
	out := make([]Entry, 0, n)
	var prev []byte
	for i := 0; i < n; i++ {
		start := r.Offset()
		name := r.Bytes32("entry.name")
		if r.Err() != nil {
			return nil, r.Err()
		}
		if err := CheckName(string(name)); err != nil {
			return nil, r.FailAt(start, "entry.name", "entry %d: %v", i, err)
		}
		if i > 0 && bytes.Compare(prev, name) >= 0 {
			return nil, r.FailAt(start, "entry.name", "entry %d: name %q is not after %q (names are unique and sorted bytewise)", i, name, prev)
		}
		prev = name
		e := Entry{Name: string(name)}
		off := r.Offset()
		e.Kind = Kind(r.U8("entry.kind"))
		if r.Err() != nil {
			return nil, r.Err()
		}
		if e.Kind != File && e.Kind != Dir && e.Kind != Symlink {
			return nil, r.FailAt(off, "entry.kind", "entry %d: kind 0x%02x is not 0x01 (file), 0x02 (directory) or 0x03 (symlink)", i, uint8(e.Kind))
		}
		off = r.Offset()
		flags := r.U8("entry.flags")
		if r.Err() != nil {
			return nil, r.Err()
		}
		switch {
		case flags == flagExecutable && e.Kind == File:
			e.Executable = true
		case flags != 0:
			return nil, r.FailAt(off, "entry.flags", "entry %d: flags 0x%02x not allowed for a %s", i, flags, e.Kind)
		}
		off = r.Offset()
		e.Size = r.U64("entry.size")
		if r.Err() != nil {
			return nil, r.Err()
		}
		switch {
		case e.Kind == Dir && e.Size < MinEmpty:
			return nil, r.FailAt(off, "entry.size", "entry %d: directory size %d is below %d (the empty tree)", i, e.Size, MinEmpty)
		case e.Kind == Symlink && (e.Size == 0 || e.Size > MaxSymlink):
			return nil, r.FailAt(off, "entry.size", "entry %d: symlink target size %d is not in 1..%d", i, e.Size, MaxSymlink)
		}
		ref, err := asl.ReadEncodedRef(r, "entry.ref")
		if err != nil {
			return nil, err
		}
		e.Ref = ref
		out = append(out, e)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeArtifact decodes a tree artifact; one not tagged Tag is refused
// with ErrNotTree.
func DecodeArtifact(a asl.Artifact) ([]Entry, error) {
	if !a.HasTag || a.Tag != Tag {
		return nil, fmt.Errorf("%w: type tag is %s, want 0x%08x", ErrNotTree, a.Header().TagString(), uint32(Tag))
	}
	return Decode(a.Bytes)
}

// Lookup finds name in sorted entries (as Decode returns them).
func Lookup(entries []Entry, name string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(entries, name, func(e Entry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return Entry{}, false
	}
	return entries[i], true
}

// Refs returns the references entries contribute to reachability
// (SPECS.md §19.6): every entry's, in entry order.
func Refs(entries []Entry) []asl.Reference {
	out := make([]asl.Reference, len(entries))
	for i, e := range entries {
		out[i] = e.Ref
	}
	return out
}
