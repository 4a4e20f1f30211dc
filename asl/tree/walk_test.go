package tree_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/tree"
)

// fixture stores files and trees in a memstore; spec maps a path to its
// content ("" for an empty directory marker ending in '/'; "->T" for a
// symlink to T; "x:C" for an executable file with content C).
type fixture struct {
	t *testing.T
	s *memstore.Store
}

func (f fixture) put(a asl.Artifact) asl.Reference {
	r, err := asl.PutArtifact(context.Background(), f.s, asl.HashSHA256, a)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// build stores a tree of nested maps: string values are files (prefix
// "x:" executable, "->" symlink), map values directories.
func (f fixture) build(m map[string]any) asl.Reference {
	var es []tree.Entry
	for name, v := range m {
		switch v := v.(type) {
		case string:
			e := tree.Entry{Name: name, Kind: tree.File}
			if t, ok := strings.CutPrefix(v, "->"); ok {
				e.Kind, v = tree.Symlink, t
			} else if c, ok := strings.CutPrefix(v, "x:"); ok {
				e.Executable, v = true, c
			}
			e.Size, e.Ref = uint64(len(v)), f.put(asl.Untagged([]byte(v)))
			es = append(es, e)
		case map[string]any:
			r := f.build(v)
			info, _ := f.s.Stat(context.Background(), r)
			es = append(es, tree.Entry{Name: name, Kind: tree.Dir, Size: info.Size, Ref: r})
		}
	}
	a, err := tree.Artifact(es)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.put(a)
}

func TestWalkResolveDiff(t *testing.T) {
	ctx := context.Background()
	f := fixture{t, memstore.New()}
	a := f.build(map[string]any{
		"README": "hi",
		"bin":    map[string]any{"run": "x:#!", "tool": "t"},
		"lib":    map[string]any{"deep": map[string]any{"x.go": "package x"}},
		"link":   "->README",
		"gone":   map[string]any{"f": "1"},
	})
	b := f.build(map[string]any{
		"README": "hello",
		"bin":    map[string]any{"run": "#!", "tool": "t"},
		"lib":    map[string]any{"deep": map[string]any{"x.go": "package x"}},
		"link":   map[string]any{},
		"new":    "n",
	})
	var walked []string
	err := tree.Walk(ctx, f.s, a, func(p string, e tree.Entry) error {
		walked = append(walked, fmt.Sprintf("%s %s", p, e.Kind))
		return nil
	})
	want := "README file|bin directory|bin/run file|bin/tool file|gone directory|gone/f file|lib directory|lib/deep directory|lib/deep/x.go file|link symlink"
	if err != nil || strings.Join(walked, "|") != want {
		t.Fatalf("walk %v:\n%s\nwant\n%s", err, strings.Join(walked, "|"), want)
	}
	e, err := tree.Resolve(ctx, f.s, a, "/lib//deep/x.go")
	if err != nil || e.Kind != tree.File || e.Size != 9 {
		t.Fatalf("resolve: %+v %v", e, err)
	}
	if e, err := tree.Resolve(ctx, f.s, a, ""); err != nil || e.Ref != a || e.Kind != tree.Dir {
		t.Fatalf("resolve root: %+v %v", e, err)
	}
	for _, p := range []string{"nope", "README/x", "link/x", "lib/deep/y"} {
		if _, err := tree.Resolve(ctx, f.s, a, p); !errors.Is(err, tree.ErrPath) {
			t.Errorf("resolve %s: %v", p, err)
		}
	}
	var changes []string
	err = tree.Diff(ctx, f.s, a, b, func(c tree.Change) error {
		changes = append(changes, string(c.Op)+" "+c.Path)
		return nil
	})
	want = "M README|M bin/run|D gone|D gone/f|D link|A link|A new"
	if err != nil || strings.Join(changes, "|") != want {
		t.Fatalf("diff %v:\n%s\nwant\n%s", err, strings.Join(changes, "|"), want)
	}
	if err := tree.Diff(ctx, f.s, a, a, func(tree.Change) error { t.Fatal("change"); return nil }); err != nil {
		t.Fatal(err)
	}
	// A file where a tree is wanted.
	file := f.put(asl.Untagged([]byte("hi")))
	if err := tree.Walk(ctx, f.s, file, func(string, tree.Entry) error { return nil }); !errors.Is(err, tree.ErrNotTree) {
		t.Fatalf("walk of a file: %v", err)
	}
	// A damaged tree: tagged, but bytes that do not decode.
	bad := f.put(asl.Tagged(tree.Tag, []byte{0, 0, 0, 1}))
	if _, err := tree.Load(ctx, f.s, bad); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("load of a bad tree: %v", err)
	}
}
