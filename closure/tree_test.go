package closure_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/closure"
)

// A pinned tree keeps its files, its symlink targets and its sub-trees
// (SPECS.md §19.6): the walk reaches them in entry order, and a
// collection keeps exactly them (and deletes the unpinned rest).
func TestTreeReachability(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Create("store", &pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(a asl.Artifact) asl.Reference {
		r, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	file := put(asl.Untagged([]byte("hello")))
	target := put(asl.Untagged([]byte("hello.txt")))
	inner := put(asl.Untagged([]byte("inner")))
	subArt, _ := tree.Artifact([]tree.Entry{{Name: "f", Kind: tree.File, Size: 5, Ref: inner}})
	sub := put(subArt)
	rootArt, err := tree.Artifact([]tree.Entry{
		{Name: "hello.txt", Kind: tree.File, Size: 5, Ref: file},
		{Name: "link", Kind: tree.Symlink, Size: 9, Ref: target},
		{Name: "sub", Kind: tree.Dir, Size: uint64(len(subArt.Bytes)), Ref: sub},
	})
	if err != nil {
		t.Fatal(err)
	}
	root := put(rootArt)
	garbage := put(asl.Untagged([]byte("garbage")))

	var order []asl.Reference
	if err := closure.Walk(ctx, s, []asl.Reference{root}, func(n closure.Node) error {
		if !n.Present || n.Undecodable != nil {
			t.Fatalf("%s: %+v", n.Ref, n)
		}
		order = append(order, n.Ref)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []asl.Reference{root, file, target, sub, inner}
	if len(order) != len(want) {
		t.Fatalf("reached %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("reached %v, want %v", order, want)
		}
	}

	if err := s.Pin(ctx, "snap", root, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := closure.Collect(ctx, s, closure.GCOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		if ok, err := asl.Has(ctx, s, r); err != nil || !ok {
			t.Fatalf("%s collected (%v)", r, err)
		}
	}
	if ok, err := asl.Has(ctx, s, garbage); err != nil || ok {
		t.Fatalf("garbage kept (%v)", err)
	}

	// A tagged tree whose bytes do not decode contributes nothing.
	bad := put(asl.Tagged(tree.Tag, []byte{0, 0, 0, 9}))
	in, _ := s.Stat(ctx, bad)
	if _, err := closure.Children(ctx, s, in); !errors.Is(err, closure.ErrUndecodable) {
		t.Fatalf("bad tree: %v", err)
	}
}
