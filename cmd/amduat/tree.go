package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/tree"
)

// Directories (TREE/1, SPECS.md §19.9-§19.10) in the command line: the
// TREE:path syntax, `ls TREE`, `diff TREE TREE`; put -r is in tree_put.go,
// get -r in tree_get.go.

func init() { addCommand(newDiffCmd) }

// resolveTreePath returns the reference of the entry path names inside
// the tree root (arg is the whole TREE:path argument, for messages). A
// path that is not in the tree is exit 3; a root that is not a tree exit 2.
func resolveTreePath(ctx context.Context, f asl.Fetcher, arg string, root asl.Reference, path string) (asl.Reference, error) {
	e, err := tree.Resolve(ctx, f, root, path)
	switch {
	case err == nil:
		return e.Ref, nil
	case errors.Is(err, tree.ErrPath):
		return asl.Reference{}, fail(exitNotFound, arg, err)
	}
	return asl.Reference{}, treeErr(arg, err)
}

// treeErr classifies an error of reading the tree arg: not a tree is a
// usage error (exit 2), the rest as refErr does.
func treeErr(arg string, err error) error {
	if errors.Is(err, tree.ErrNotTree) && !errors.Is(err, asl.ErrIntegrity) {
		return fail(exitUsage, arg, fmt.Errorf("%w (a directory stored by put -r is tagged 0x%08x)", err, uint32(tree.Tag)))
	}
	return refErr(arg, err)
}

// treeEntryJSON is an entry as `ls TREE --json` and `diff --json` print it.
type treeEntryJSON struct {
	Path       string        `json:"path"`
	Kind       string        `json:"kind"`
	Executable bool          `json:"executable"`
	Size       uint64        `json:"size"`
	Ref        asl.Reference `json:"ref"`
}

func entryJSON(path string, e tree.Entry) *treeEntryJSON {
	return &treeEntryJSON{Path: path, Kind: e.Kind.String(), Executable: e.Executable, Size: e.Size, Ref: e.Ref}
}

// kindWord is the kind column of ls: file, executable, directory, symlink.
func kindWord(e tree.Entry) string {
	if e.Executable {
		return "executable"
	}
	return e.Kind.String()
}

// quotePath prints a path as it is, or Go-quoted when it holds a control
// character, a quote, a backslash or bytes that are not UTF-8 (as git's
// core.quotePath does), so that one entry is always one line.
func quotePath(p string) string {
	if !utf8.ValidString(p) {
		return strconv.Quote(p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return strconv.Quote(p)
		}
	}
	return p
}

// lsTree lists the tree arg names (ls TREE [-r]): "KIND SIZE REF PATH"
// lines, or JSON lines, or paths alone with -q.
func (a *app) lsTree(ctx context.Context, arg string, recursive, quiet bool) (err error) {
	ref, err := a.parseRef(arg)
	if err != nil {
		return err
	}
	s, err := a.openStoreReadOnly()
	if err != nil {
		return err
	}
	defer closeStore(s, a.storeDir, &err)
	w := bufio.NewWriterSize(a.stdout, 64<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	err = tree.Walk(ctx, s, ref, func(p string, e tree.Entry) error {
		var werr error
		switch {
		case a.jsonOut:
			werr = enc.Encode(entryJSON(p, e))
		case quiet:
			_, werr = fmt.Fprintln(w, quotePath(p))
		default:
			_, werr = fmt.Fprintf(w, "%-10s %12d %s %s\n", kindWord(e), e.Size, e.Ref, quotePath(p))
		}
		if werr != nil {
			return fail(exitIO, "stdout", werr)
		}
		if !recursive && e.Kind == tree.Dir {
			return tree.SkipDir
		}
		return nil
	})
	if ferr := w.Flush(); ferr != nil && err == nil {
		err = fail(exitIO, "stdout", ferr)
	}
	if err != nil {
		var ce *cliError
		if errors.As(err, &ce) {
			return err
		}
		return treeErr(arg, err)
	}
	return nil
}

// diffJSON is one line of diff --json.
type diffJSON struct {
	Op   string         `json:"op"`
	Path string         `json:"path"`
	Old  *treeEntryJSON `json:"old"`
	New  *treeEntryJSON `json:"new"`
}

func newDiffCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "diff OLD_TREE NEW_TREE",
		Short: "List the paths added, deleted and modified between two trees",
		Long: `Compare two directory trees (put -r's last line; TREE:path names a
sub-directory) and print one line per path that differs, in path order:

  A PATH    only in NEW_TREE (every path under an added directory too)
  D PATH    only in OLD_TREE
  M PATH    in both, with other content or another executable bit

A path whose kind changed (a file became a directory) is printed as D then
A. Equal sub-trees are skipped without being read, so comparing two
snapshots of a large directory reads only what changed. Paths that hold a
control character, a quote, a backslash or bytes that are not UTF-8 are
printed Go-quoted. No output means the trees are equal; the exit code is 0
either way.

With --json the output is JSON lines, one per path, as ls --json prints
them: {"op":"A|D|M","path","old":ENTRY|null,"new":ENTRY|null}, ENTRY being
{"path","kind","executable","size","ref"}.`,
		Example: `  old=$(amduat put -r src | tail -n 1); edit src/main.go
  new=$(amduat put -r src | tail -n 1)
  amduat diff "$old" "$new"            # M main.go`,
		Args: rangeArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) (err error) {
			refs, err := a.parseRefs(args)
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			ctx := c.Context()
			for i, r := range refs {
				if _, err := tree.Load(ctx, s, r); err != nil {
					return treeErr(args[i], err)
				}
			}
			w := bufio.NewWriterSize(a.stdout, 64<<10)
			var enc *json.Encoder
			if a.jsonOut {
				enc = json.NewEncoder(w)
				enc.SetEscapeHTML(false)
			}
			err = tree.Diff(ctx, s, refs[0], refs[1], func(ch tree.Change) error {
				return writeChange(w, enc, ch)
			})
			if ferr := w.Flush(); ferr != nil && err == nil {
				err = fail(exitIO, "stdout", ferr)
			}
			if err != nil {
				var ce *cliError
				if errors.As(err, &ce) {
					return err
				}
				return failAuto(args[0]+" "+args[1], err)
			}
			return nil
		},
	}
	return c
}

// writeChange prints one change: a JSON line when enc is set.
func writeChange(w io.Writer, enc *json.Encoder, ch tree.Change) error {
	var err error
	if enc != nil {
		j := diffJSON{Op: string(ch.Op), Path: ch.Path}
		if ch.Old != nil {
			j.Old = entryJSON(ch.Path, *ch.Old)
		}
		if ch.New != nil {
			j.New = entryJSON(ch.Path, *ch.New)
		}
		err = enc.Encode(j)
	} else {
		_, err = fmt.Fprintf(w, "%c %s\n", ch.Op, quotePath(ch.Path))
	}
	if err != nil {
		return fail(exitIO, "stdout", err)
	}
	return nil
}

// set reports whether any selection flag of ls was given.
func (f *filterFlags) set() bool { return f.tag != "" || f.minSize != "" || f.maxSize != "" }
