package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// treeItem is one directory stored by put -r, as printed by put --json.
type treeItem struct {
	Source   string        `json:"source"`
	Ref      asl.Reference `json:"ref"`
	Files    int           `json:"files"`
	Dirs     int           `json:"directories"`
	Symlinks int           `json:"symlinks"`
	Excluded int           `json:"excluded"`
	Skipped  int           `json:"skipped_special"`
}

// dirNode is one directory met by the walk: its entries so far and where
// its own entry sits in its parent.
type dirNode struct {
	entries []tree.Entry
	parent  *dirNode
	index   int // index of this directory's entry in parent.entries
}

type entryLoc struct {
	dir   *dirNode
	index int
}

// putTree stores the directory root as put -r does: every regular file
// through the putter (batched or streamed, emitted as before), every
// symbolic link's target as an untagged artifact (never followed), then
// one TREE/1 artifact per directory (SPECS.md §19.9), children before
// parents. Special files (FIFOs, sockets, devices) are skipped and
// counted. Files are read once: the tree takes each file's reference and
// size from the putter. A root that is not a directory is put as a file
// and gives no tree (ok false).
func (p *putter) putTree(ctx context.Context, root string, x *excluder) (it treeItem, ok bool, err error) {
	st, err := os.Lstat(filepath.Clean(root))
	if err != nil {
		return it, false, fail(exitIO, root, unwrapPathError(err))
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		if fst, err := os.Stat(root); err == nil && fst.IsDir() {
			return it, false, fail(exitUsage, root, errors.New("is a symbolic link to a directory; put -r stores links as links: give the directory itself"))
		}
	}
	if !st.IsDir() {
		return it, false, p.add(ctx, root)
	}
	it.Source = root
	root = filepath.Clean(root)
	var dirs []*dirNode
	pending := map[string]entryLoc{}
	var links []asl.Artifact
	var linkLocs []entryLoc
	emit := p.emit
	p.emit = func(pi putItem) error {
		if loc, ok := pending[pi.Source]; ok {
			e := &loc.dir.entries[loc.index]
			e.Ref, e.Size = pi.Ref, pi.Size
			delete(pending, pi.Source)
		}
		return emit(pi)
	}
	defer func() { p.emit = emit }()
	byPath := map[string]*dirNode{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fail(exitIO, path, unwrapPathError(err))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == root {
			n := &dirNode{}
			dirs = append(dirs, n)
			byPath[path] = n
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return fail(exitIO, path, err)
		}
		rel = filepath.ToSlash(rel)
		parent := byPath[filepath.Dir(path)]
		if parent == nil {
			return fail(exitInternal, path, errors.New("walk met a file before its directory"))
		}
		name := d.Name()
		typ := d.Type()
		if x.excluded(rel, typ.IsDir()) {
			it.Excluded++
			if typ.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !typ.IsDir() && !typ.IsRegular() && typ&fs.ModeSymlink == 0 {
			it.Skipped++ // FIFO, socket, device: no content to store
			return nil
		}
		if err := tree.CheckName(name); err != nil {
			return fail(exitIO, path, fmt.Errorf("cannot be named in a tree: %w", err))
		}
		loc := entryLoc{dir: parent, index: len(parent.entries)}
		switch {
		case typ.IsDir():
			parent.entries = append(parent.entries, tree.Entry{Name: name, Kind: tree.Dir})
			n := &dirNode{parent: parent, index: loc.index}
			dirs = append(dirs, n)
			byPath[path] = n
			it.Dirs++
		case typ&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return fail(exitIO, path, unwrapPathError(err))
			}
			if len(target) == 0 || len(target) > tree.MaxSymlink {
				return fail(exitIO, path, fmt.Errorf("symbolic link target of %d bytes (a tree holds 1 to %d)", len(target), tree.MaxSymlink))
			}
			parent.entries = append(parent.entries, tree.Entry{Name: name, Kind: tree.Symlink, Size: uint64(len(target))})
			links = append(links, asl.Untagged([]byte(target)))
			linkLocs = append(linkLocs, loc)
			it.Symlinks++
		default:
			parent.entries = append(parent.entries, tree.Entry{Name: name, Kind: tree.File})
			pending[path] = loc
			it.Files++
			mode, err := p.addFile(ctx, path)
			parent.entries[loc.index].Executable = mode&0o100 != 0
			return err
		}
		return nil
	})
	if err != nil {
		return it, false, err
	}
	if err := p.flush(ctx); err != nil {
		return it, false, err
	}
	if len(pending) != 0 {
		return it, false, fail(exitInternal, root, fmt.Errorf("%d files were stored without a reference", len(pending)))
	}
	// Symlink targets and trees: references computed here, stored in
	// batches. A tree's entries need its children's references, so
	// directories are encoded in reverse walk order (children first).
	var arts []asl.Artifact
	for i, a := range links {
		r, err := asl.Derive(p.hash, a)
		if err != nil {
			return it, false, failAuto(root, err)
		}
		l := linkLocs[i]
		l.dir.entries[l.index].Ref = r
		arts = append(arts, a)
	}
	var rootRef asl.Reference
	for i := len(dirs) - 1; i >= 0; i-- {
		n := dirs[i]
		a, err := tree.Artifact(n.entries)
		if err != nil {
			return it, false, fail(exitInternal, root, err)
		}
		r, err := asl.Derive(p.hash, a)
		if err != nil {
			return it, false, failAuto(root, err)
		}
		arts = append(arts, a)
		if n.parent == nil {
			rootRef = r
			continue
		}
		e := &n.parent.entries[n.index]
		e.Ref, e.Size = r, uint64(len(a.Bytes))
	}
	batchBytes, batchCount, _ := p.limits()
	for len(arts) > 0 {
		n, size := 0, int64(0)
		for n < len(arts) && int64(n) < batchCount && (n == 0 || size+int64(len(arts[n].Bytes)) <= batchBytes) {
			size += int64(len(arts[n].Bytes))
			n++
		}
		refs, err := p.store.PutBatch(ctx, p.hash, arts[:n])
		if err != nil {
			return it, false, failAuto(root, err)
		}
		for i, r := range refs {
			if want, _ := asl.Derive(p.hash, arts[i]); r != want {
				return it, false, fail(exitIntegrity, root, fmt.Errorf("store returned %s for an artifact whose reference is %s: %w", r, want, asl.ErrIntegrity))
			}
		}
		p.batches++
		arts = arts[n:]
	}
	it.Ref = rootRef
	return it, true, nil
}
