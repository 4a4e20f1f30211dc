package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// restoreResult is what get -r --json prints.
type restoreResult struct {
	Ref      asl.Reference `json:"ref"`
	Output   string        `json:"output"`
	Files    int           `json:"files"`
	Dirs     int           `json:"directories"`
	Symlinks int           `json:"symlinks"`
	Bytes    uint64        `json:"bytes"`
}

type restoreItem struct {
	path string // '/'-separated, relative to the output directory
	e    tree.Entry
}

// errRefused: get -r would write over something that exists.
var errRefused = errors.New("refused")

// restoreTree writes the tree arg names into the directory out (created
// if missing), the inverse of put -r (SPECS.md §19.10):
//
//   - every operation goes through an os.Root opened on out, so no path,
//     and no symbolic link met on the way (one that was there before, or
//     one the tree holds), can make a write land outside out;
//   - directories and files are written first, symbolic links last, so a
//     link the tree creates is never followed by a later write;
//   - files get mode 0644, or 0755 when executable (before the umask);
//     every byte is verified against its reference and the size against
//     the tree's, and a file that fails is removed;
//   - without force, anything already at a path the tree writes (except
//     a directory where the tree has a directory) is refused before
//     anything is written; with force files and symbolic links in the way
//     are replaced (through a temporary name and a rename, which replaces
//     a link rather than writing through it), directories never are.
func (a *app) restoreTree(ctx context.Context, arg, out string, force bool) (err error) {
	ref, err := a.parseRef(arg)
	if err != nil {
		return err
	}
	s, err := a.openStoreReadOnly()
	if err != nil {
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	var items []restoreItem
	err = tree.Walk(ctx, s, ref, func(p string, e tree.Entry) error {
		items = append(items, restoreItem{p, e})
		return nil
	})
	if err != nil {
		return treeErr(arg, err)
	}
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return fail(exitUsage, out, errors.New("exists and is not a directory; get -r -o needs a directory"))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fail(exitIO, out, unwrapPathError(err))
	}
	root, err := os.OpenRoot(out)
	if err != nil {
		return fail(exitIO, out, unwrapPathError(err))
	}
	defer root.Close()
	// Check first, so that a refusal writes nothing. Under a directory
	// that --force will put in place of a file or link, nothing exists
	// yet (items are in walk order: a directory before its contents).
	replaced := ""
	for _, it := range items {
		if replaced != "" && strings.HasPrefix(it.path, replaced) {
			continue
		}
		st, err := root.Lstat(it.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(exitIO, path.Join(out, it.path), unwrapPathError(err))
		}
		switch {
		case it.e.Kind == tree.Dir && st.IsDir():
		case it.e.Kind == tree.Dir && force:
			replaced = it.path + "/"
		case st.IsDir():
			return fail(exitNegative, path.Join(out, it.path), fmt.Errorf("%w: a directory is in the way of a %s (get -r never replaces a directory)", errRefused, it.e.Kind))
		case !force:
			return fail(exitNegative, path.Join(out, it.path), fmt.Errorf("%w: exists (--force replaces files and symbolic links)", errRefused))
		}
	}
	res := restoreResult{Ref: ref, Output: out}
	var links []restoreItem
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		full := path.Join(out, it.path)
		switch it.e.Kind {
		case tree.Dir:
			if err := restoreDir(root, it.path, force); err != nil {
				return restoreErr(full, err)
			}
			res.Dirs++
		case tree.File:
			if err := restoreFile(ctx, s, root, it, force); err != nil {
				return restoreErr(full, err)
			}
			res.Files++
			res.Bytes += it.e.Size
		case tree.Symlink:
			links = append(links, it)
		}
	}
	for _, it := range links {
		if err := restoreLink(ctx, s, root, it, force); err != nil {
			return restoreErr(path.Join(out, it.path), err)
		}
		res.Symlinks++
	}
	if a.jsonOut {
		return a.printJSON(res)
	}
	return nil
}

// restoreErr: a refusal is exit 1, the rest as the store's errors say.
func restoreErr(p string, err error) error {
	if errors.Is(err, errRefused) {
		return fail(exitNegative, p, err)
	}
	return failAuto(p, err)
}

// restoreDir creates the directory p, or keeps the directory there; with
// force a file or link in the way is removed first.
func restoreDir(root *os.Root, p string, force bool) error {
	err := root.Mkdir(p, 0o755)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return unwrapPathError(err)
	}
	st, lerr := root.Lstat(p)
	if lerr != nil {
		return unwrapPathError(lerr)
	}
	if st.IsDir() {
		return nil
	}
	if !force {
		return fmt.Errorf("%w: exists and is not a directory", errRefused)
	}
	if err := root.Remove(p); err != nil {
		return unwrapPathError(err)
	}
	return unwrapPathError(root.Mkdir(p, 0o755))
}

// tempName is a name beside p for a file written before it is renamed
// over p.
func tempName(p string) string {
	var b [6]byte
	rand.Read(b[:])
	dir, name := path.Split(p)
	return dir + "." + name + ".amduat-" + hex.EncodeToString(b[:])
}

// restoreFile writes the file item verified: created exclusively (never
// through an existing name), or, with force, under a temporary name
// renamed over whatever is there.
func restoreFile(ctx context.Context, s asl.Fetcher, root *os.Root, it restoreItem, force bool) (err error) {
	rc, hdr, err := s.Fetch(ctx, it.e.Ref)
	if err != nil {
		return err
	}
	defer rc.Close()
	if hdr.Size != it.e.Size {
		return fmt.Errorf("%s is %d bytes, the tree says %d: %w", it.e.Ref, hdr.Size, it.e.Size, asl.ErrIntegrity)
	}
	perm := fs.FileMode(0o644)
	if it.e.Executable {
		perm = 0o755
	}
	name := it.path
	if force {
		name = tempName(it.path)
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: exists (--force replaces files and symbolic links)", errRefused)
		}
		return unwrapPathError(err)
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(name)
		}
	}()
	if _, err := io.Copy(f, rc); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if force {
		if err := root.Rename(name, it.path); err != nil {
			return unwrapPathError(err)
		}
	}
	return nil
}

// restoreLink creates the symbolic link item, its target read verified
// (and refused if it holds NUL, which no file system accepts).
func restoreLink(ctx context.Context, s asl.Fetcher, root *os.Root, it restoreItem, force bool) error {
	a, err := asl.Get(ctx, s, it.e.Ref, tree.MaxSymlink)
	if err != nil {
		return err
	}
	if uint64(len(a.Bytes)) != it.e.Size || strings.IndexByte(string(a.Bytes), 0) >= 0 {
		return fmt.Errorf("symbolic link target %s: %d bytes (the tree says %d) or holds NUL: %w", it.e.Ref, len(a.Bytes), it.e.Size, asl.ErrIntegrity)
	}
	target := string(a.Bytes)
	err = root.Symlink(target, it.path)
	if err == nil || !errors.Is(err, fs.ErrExist) || !force {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: exists (--force replaces files and symbolic links)", errRefused)
		}
		return unwrapPathError(err)
	}
	tmp := tempName(it.path)
	if err := root.Symlink(target, tmp); err != nil {
		return unwrapPathError(err)
	}
	if err := root.Rename(tmp, it.path); err != nil {
		root.Remove(tmp)
		return unwrapPathError(err)
	}
	return nil
}
