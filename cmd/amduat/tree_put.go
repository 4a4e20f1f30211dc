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

// treeDeriveBytes bounds the files put -r hashes itself so that its trees
// share their durable commit: hashing this much costs about what one more
// commit (a WAL sync) costs on a quiet disk.
const treeDeriveBytes = 16 << 20

// putTree stores the directory root as put -r does: every regular file
// through the putter (batched or streamed, emitted as before), every
// symbolic link's target as an untagged artifact (never followed), then
// one TREE/1 artifact per directory (SPECS.md §19.9), children before
// parents. Special files (FIFOs, sockets, devices) are skipped and
// counted. Files are read once: the tree takes each file's reference and
// size from the putter. A root that is not a directory is put as a file
// and gives no tree (ok false).
//
// The link targets and trees join the batch of the files still pending
// when the walk ends (one durable commit for both, as put --stdin-paths
// has one for the files alone): their references, which the trees name,
// are derived here when those files hold at most treeDeriveBytes, and the
// store's are checked against them. Everything is stored when putTree
// returns.
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
	w := treeWalk{p: p, x: x, it: &it}
	emit := p.emit
	// Inputs pending before this tree (put -r FILE DIR) are emitted first
	// and are none of its entries.
	before := len(p.pending)
	p.emit = func(pi putItem) error {
		// The putter emits one item per file in the order the files were
		// added (putter's invariant), so after the earlier inputs the
		// head of w.pending is this item's entry.
		if before > 0 {
			before--
		} else if len(w.pending) > 0 {
			loc := w.pending[0]
			w.pending = w.pending[1:]
			e := &loc.dir.entries[loc.index]
			e.Ref, e.Size = pi.Ref, pi.Size
		}
		return emit(pi)
	}
	defer func() { p.emit = emit }()
	root = filepath.Clean(root)
	w.dirs = append(w.dirs, &dirNode{})
	lctx, stop := context.WithCancel(ctx)
	lists := make(chan dirListing, listAhead)
	go listDirs(lctx, x, root, lists)
	defer func() {
		stop()
		for range lists { // until listDirs has returned
		}
	}()
	w.lists = lists
	if err := w.walk(ctx, root, "", w.dirs[0]); err != nil {
		return it, false, err
	}
	dirs, links, linkLocs := w.dirs, w.links, w.linkLocs
	derive := p.treeDerive
	if derive == 0 {
		derive = treeDeriveBytes
	}
	if off := len(p.pending) - len(w.pending); off >= 0 && p.pendingBytes <= derive {
		// The files still pending are the tail of the batch, in
		// w.pending's order.
		for i, loc := range w.pending {
			a := p.pending[off+i]
			r, err := asl.Derive(p.hash, a)
			if err != nil {
				return it, false, failAuto(p.pendingIn[off+i].src, err)
			}
			p.pendingIn[off+i].want = r
			e := &loc.dir.entries[loc.index]
			e.Ref, e.Size = r, uint64(len(a.Bytes))
		}
		w.pending = nil
	} else if err := p.flush(ctx); err != nil {
		return it, false, err
	}
	if len(w.pending) != 0 {
		return it, false, fail(exitInternal, root, fmt.Errorf("%d files were stored without a reference", len(w.pending)))
	}
	// Symlink targets, then trees: a tree's entries need its children's
	// references, so directories are encoded in reverse walk order
	// (children first).
	for i, a := range links {
		r, err := asl.Derive(p.hash, a)
		if err != nil {
			return it, false, failAuto(root, err)
		}
		l := linkLocs[i]
		l.dir.entries[l.index].Ref = r
		if err := p.addQuiet(ctx, root, a, r); err != nil {
			return it, false, err
		}
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
		if err := p.addQuiet(ctx, root, a, r); err != nil {
			return it, false, err
		}
		if n.parent == nil {
			rootRef = r
			continue
		}
		e := &n.parent.entries[n.index]
		e.Ref, e.Size = r, uint64(len(a.Bytes))
	}
	if err := p.flush(ctx); err != nil {
		return it, false, err
	}
	it.Ref = rootRef
	return it, true, nil
}

// treeWalk is put -r's walk: depth first, each directory's entries in
// byte order of their names (as filepath.WalkDir visits them), paths
// joined once per entry rather than cleaned and made relative again.
type treeWalk struct {
	p        *putter
	x        *excluder
	it       *treeItem
	dirs     []*dirNode // in walk order: a parent before its children
	links    []asl.Artifact
	linkLocs []entryLoc
	pending  []entryLoc // files added and not yet emitted, in add order
	lists    <-chan dirListing
}

// listAhead is how many directories listDirs may have read and the walk
// not yet taken.
const listAhead = 16

// dirListing is one directory as os.ReadDir read it.
type dirListing struct {
	path string
	ents []fs.DirEntry
	err  error
}

// listDirs reads the directories under root in the order put -r's walk
// enters them (depth first, entries in name order, excluded directories
// not read) and sends them to out, which it closes when done or when ctx
// ends: reading a directory overlaps storing the files read before it.
// It stops after a directory it cannot read or a subdirectory the walk
// will refuse, as the walk does.
func listDirs(ctx context.Context, x *excluder, root string, out chan<- dirListing) {
	defer close(out)
	var list func(path, rel string) bool
	list = func(path, rel string) bool {
		if ctx.Err() != nil {
			return false
		}
		ents, err := os.ReadDir(path)
		select {
		case out <- dirListing{path, ents, err}:
		case <-ctx.Done():
			return false
		}
		if err != nil {
			return false
		}
		for _, d := range ents {
			if !d.Type().IsDir() {
				continue
			}
			name := d.Name()
			crel := name
			if rel != "" {
				crel = rel + "/" + name
			}
			if x.excluded(crel, true) {
				continue
			}
			if tree.CheckName(name) != nil || !list(joinPath(path, name), crel) {
				return false
			}
		}
		return true
	}
	list(root, "")
}

// walk adds the entries of the directory at path (rel: its path from the
// root with "/" separators, "" for the root and without an excluder) to n.
func (w *treeWalk) walk(ctx context.Context, path, rel string, n *dirNode) error {
	l, ok := <-w.lists
	if !ok || l.path != path {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fail(exitInternal, path, fmt.Errorf("directory listed out of the walk's order (listed %q)", l.path))
	}
	ents, err := l.ents, l.err
	if err != nil {
		return fail(exitIO, path, unwrapPathError(err))
	}
	n.entries = make([]tree.Entry, 0, len(ents))
	for _, d := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		cpath, crel := joinPath(path, name), ""
		if w.x != nil { // only the excluder reads crel
			crel = name
			if rel != "" {
				crel = rel + "/" + name
			}
		}
		typ := d.Type()
		if w.x.excluded(crel, typ.IsDir()) {
			w.it.Excluded++
			continue
		}
		if !typ.IsDir() && !typ.IsRegular() && typ&fs.ModeSymlink == 0 {
			w.it.Skipped++ // FIFO, socket, device: no content to store
			continue
		}
		if err := tree.CheckName(name); err != nil {
			return fail(exitIO, cpath, fmt.Errorf("cannot be named in a tree: %w", err))
		}
		loc := entryLoc{dir: n, index: len(n.entries)}
		switch {
		case typ.IsDir():
			n.entries = append(n.entries, tree.Entry{Name: name, Kind: tree.Dir})
			c := &dirNode{parent: n, index: loc.index}
			w.dirs = append(w.dirs, c)
			w.it.Dirs++
			if err := w.walk(ctx, cpath, crel, c); err != nil {
				return err
			}
		case typ&fs.ModeSymlink != 0:
			target, err := os.Readlink(cpath)
			if err != nil {
				return fail(exitIO, cpath, unwrapPathError(err))
			}
			if len(target) == 0 || len(target) > tree.MaxSymlink {
				return fail(exitIO, cpath, fmt.Errorf("symbolic link target of %d bytes (a tree holds 1 to %d)", len(target), tree.MaxSymlink))
			}
			n.entries = append(n.entries, tree.Entry{Name: name, Kind: tree.Symlink, Size: uint64(len(target))})
			w.links = append(w.links, asl.Untagged([]byte(target)))
			w.linkLocs = append(w.linkLocs, loc)
			w.it.Symlinks++
		default:
			n.entries = append(n.entries, tree.Entry{Name: name, Kind: tree.File})
			w.pending = append(w.pending, loc)
			w.it.Files++
			mode, err := w.p.addFile(ctx, cpath)
			n.entries[loc.index].Executable = mode&0o100 != 0
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// joinPath is filepath.Join(dir, name) for a clean dir and a single name:
// "." is dropped as Join drops it, and a root ending in a separator is
// not given a second one.
func joinPath(dir, name string) string {
	switch {
	case dir == ".":
		return name
	case os.IsPathSeparator(dir[len(dir)-1]):
		return dir + name
	}
	return dir + string(filepath.Separator) + name
}
