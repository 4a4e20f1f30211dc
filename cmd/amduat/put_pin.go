package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// pinTops collects what `put --pin NAME` pins (SPECS.md §16.3): the
// artifact of one FILE (or of standard input), the tree of one DIR (-r), or,
// for several, a tree holding each one under its base name, so that
// everything put together under one pin is one root.
type pinTops struct {
	args    []string
	isTop   map[string]bool // the FILE arguments
	entries []tree.Entry
}

func newPinTops(args []string, recursive bool) *pinTops {
	t := &pinTops{args: args, isTop: make(map[string]bool)}
	for _, a := range args {
		if st, err := os.Stat(a); a == "-" || err != nil || !(recursive && st.IsDir()) {
			t.isTop[a] = true
		}
	}
	return t
}

// file records a put item when it is one of the FILE arguments.
func (t *pinTops) file(it putItem) {
	if !t.isTop[it.Source] {
		return
	}
	e := tree.Entry{Name: filepath.Base(it.Source), Kind: tree.File, Size: it.Size, Ref: it.Ref}
	if st, err := os.Stat(it.Source); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		e.Executable = true
	}
	t.entries = append(t.entries, e)
}

// tree records the tree put for the DIR argument src.
func (t *pinTops) tree(ctx context.Context, s asl.Statter, src string, ref asl.Reference) error {
	info, err := s.Stat(ctx, ref)
	if err != nil {
		return fmt.Errorf("tree of %s: %w", src, err)
	}
	name := filepath.Base(filepath.Clean(src))
	t.entries = append(t.entries, tree.Entry{Name: name, Kind: tree.Dir, Size: info.Size, Ref: ref})
	return nil
}

// target returns the reference the pin names: the one thing put, or a tree
// of them all, stored with the hash id (made reports the latter).
func (t *pinTops) target(ctx context.Context, s asl.Receiver, id asl.HashID) (ref asl.Reference, made bool, err error) {
	if len(t.args) == 1 && len(t.entries) == 1 {
		return t.entries[0].Ref, false, nil
	}
	if len(t.entries) == 0 {
		return asl.Reference{}, false, usagef("--pin: nothing was put")
	}
	entries := append([]tree.Entry(nil), t.entries...)
	tree.Sort(entries)
	for i := 1; i < len(entries); i++ {
		if entries[i].Name == entries[i-1].Name {
			return asl.Reference{}, false, usagef("--pin: two arguments have the base name %q; one tree cannot hold both", entries[i].Name)
		}
	}
	art, err := tree.Artifact(entries)
	if err != nil {
		return asl.Reference{}, false, usageErr(fmt.Errorf("--pin: %w", err))
	}
	ref, err = asl.PutArtifact(ctx, s, id, art)
	if err != nil {
		return asl.Reference{}, false, err
	}
	return ref, true, nil
}
