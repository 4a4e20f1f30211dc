package tree

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/amduat/amduat/asl"
)

// MaxTreeBytes bounds the size of a tree artifact read into memory (a
// directory of a million entries with 100-byte names is about 150 MiB).
const MaxTreeBytes = 256 << 20

// MaxDepth bounds how deep Walk, Diff and Resolve descend: a path of more
// levels could not be created on any file system (PATH_MAX 4096, at least
// two bytes per level).
const MaxDepth = 2048

// ErrPath is wrapped by Resolve's errors about the path itself: a name
// that is not in the tree, or a component that is not a directory.
var ErrPath = errors.New("no such path in the tree")

// Load fetches the tree ref names, verified, and decodes it. An artifact
// that is not tagged as a tree wraps ErrNotTree; bytes that do not decode
// wrap enc.ErrMalformed and asl.ErrIntegrity (damaged data).
func Load(ctx context.Context, f asl.Fetcher, ref asl.Reference) ([]Entry, error) {
	a, err := asl.Get(ctx, f, ref, MaxTreeBytes)
	if err != nil {
		return nil, err
	}
	es, err := DecodeArtifact(a)
	if errors.Is(err, ErrNotTree) {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w: %w", ref, asl.ErrIntegrity, err)
	}
	return es, nil
}

// load is Load for a tree named by a directory entry (sub true): there an
// artifact that is not a tree is damage (the entry lies), so the error
// wraps asl.ErrIntegrity besides ErrNotTree.
func load(ctx context.Context, f asl.Fetcher, ref asl.Reference, sub bool) ([]Entry, error) {
	es, err := Load(ctx, f, ref)
	if sub && errors.Is(err, ErrNotTree) {
		return nil, fmt.Errorf("directory entry names %w: %w", err, asl.ErrIntegrity)
	}
	return es, err
}

// Resolve returns the entry path names inside the tree root: components
// separated by '/', empty components (a leading, doubled or trailing
// slash) ignored; "" or "/" names root itself (a directory entry named ""
// without size). A component that is not found, or that is a file or a
// symlink where a directory is needed, wraps ErrPath; symlinks are never
// followed.
func Resolve(ctx context.Context, f asl.Fetcher, root asl.Reference, path string) (Entry, error) {
	cur := Entry{Kind: Dir, Ref: root}
	var walked []string
	for _, name := range strings.Split(path, "/") {
		if name == "" {
			continue
		}
		if cur.Kind != Dir {
			return Entry{}, fmt.Errorf("%s is a %s, not a directory: %w", strings.Join(walked, "/"), cur.Kind, ErrPath)
		}
		if len(walked) >= MaxDepth {
			return Entry{}, fmt.Errorf("%w: more than %d levels", ErrPath, MaxDepth)
		}
		es, err := load(ctx, f, cur.Ref, len(walked) > 0)
		if err != nil {
			return Entry{}, err
		}
		walked = append(walked, name)
		e, ok := Lookup(es, name)
		if !ok {
			return Entry{}, fmt.Errorf("%s: %w", strings.Join(walked, "/"), ErrPath)
		}
		cur = e
	}
	return cur, nil
}

// Walk calls fn for every entry under root, depth first, in name order,
// a directory before its contents, with the entry's path relative to root
// ('/'-separated). When fn returns SkipDir for a directory its contents
// are skipped. A tree shared by several paths is visited at each.
func Walk(ctx context.Context, f asl.Fetcher, root asl.Reference, fn func(path string, e Entry) error) error {
	return walk(ctx, f, root, "", 0, fn)
}

// SkipDir, returned by a Walk callback for a directory, skips its contents.
var SkipDir = errors.New("skip this directory")

func walk(ctx context.Context, f asl.Fetcher, ref asl.Reference, prefix string, depth int, fn func(string, Entry) error) error {
	if depth >= MaxDepth {
		return fmt.Errorf("%s: more than %d levels of directories", prefix, MaxDepth)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	es, err := load(ctx, f, ref, depth > 0)
	if err != nil {
		if prefix != "" {
			return fmt.Errorf("%s: %w", prefix, err)
		}
		return err
	}
	for _, e := range es {
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		err := fn(p, e)
		if err == SkipDir {
			continue
		}
		if err != nil {
			return err
		}
		if e.Kind == Dir {
			if err := walk(ctx, f, e.Ref, p, depth+1, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Change is one difference between two trees.
type Change struct {
	Op   byte   // 'A' added, 'D' deleted, 'M' modified
	Path string // '/'-separated, relative to the trees' roots
	Old  *Entry // nil for A
	New  *Entry // nil for D
}

// Diff calls fn for each path that differs between the trees a and b, in
// path order: an entry only in b is added (A), only in a deleted (D), in
// both with another kind, executable bit or reference modified (M). A
// directory in both is descended into (it is not reported itself); a
// directory added or deleted is reported with every path under it; a
// kind change reports the old and new entries as D and A. Sub-trees with
// equal references are skipped without being read.
func Diff(ctx context.Context, f asl.Fetcher, a, b asl.Reference, fn func(Change) error) error {
	return diff(ctx, f, a, b, "", 0, fn)
}

func diff(ctx context.Context, f asl.Fetcher, a, b asl.Reference, prefix string, depth int, fn func(Change) error) error {
	if a == b {
		return nil
	}
	if depth >= MaxDepth {
		return fmt.Errorf("%s: more than %d levels of directories", prefix, MaxDepth)
	}
	ea, err := load(ctx, f, a, depth > 0)
	if err != nil {
		return err
	}
	eb, err := load(ctx, f, b, depth > 0)
	if err != nil {
		return err
	}
	join := func(n string) string {
		if prefix == "" {
			return n
		}
		return prefix + "/" + n
	}
	all := func(op byte, e Entry) error {
		e2 := e
		c := Change{Op: op, Path: join(e.Name)}
		if op == 'A' {
			c.New = &e2
		} else {
			c.Old = &e2
		}
		if err := fn(c); err != nil {
			return err
		}
		if e.Kind != Dir {
			return nil
		}
		return walk(ctx, f, e.Ref, c.Path, depth+1, func(p string, e Entry) error {
			e3 := e
			c := Change{Op: op, Path: p}
			if op == 'A' {
				c.New = &e3
			} else {
				c.Old = &e3
			}
			return fn(c)
		})
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j == len(eb) || i < len(ea) && ea[i].Name < eb[j].Name:
			if err := all('D', ea[i]); err != nil {
				return err
			}
			i++
		case i == len(ea) || eb[j].Name < ea[i].Name:
			if err := all('A', eb[j]); err != nil {
				return err
			}
			j++
		default:
			x, y := ea[i], eb[j]
			i++
			j++
			switch {
			case x.Kind != y.Kind:
				if err := all('D', x); err != nil {
					return err
				}
				if err := all('A', y); err != nil {
					return err
				}
			case x.Kind == Dir:
				if err := diff(ctx, f, x.Ref, y.Ref, join(x.Name), depth+1, fn); err != nil {
					return err
				}
			case x.Ref != y.Ref || x.Executable != y.Executable:
				if err := fn(Change{Op: 'M', Path: join(x.Name), Old: &x, New: &y}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
