package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/tree"
)

// TestPutTreeBatches: put -r's links and trees share the last batch of
// files when they fit (one commit for a small directory), and under every
// batching (trees past the batch limits, files too large to hash twice, a
// FILE put before the DIR) every entry names its own content and the tree
// reference is the same.
func TestPutTreeBatches(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a":           "alpha",
		"b/c":         "gamma",
		"b/d/e":       "epsilon",
		"b/d/f":       "phi",
		"z":           "zeta",
		"b/same-as-a": "alpha",
	}
	for p, data := range files {
		full := filepath.Join(dir, "src", p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../a", filepath.Join(dir, "src", "b", "link")); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "first")
	if err := os.WriteFile(first, []byte("put before the tree"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	const h = asl.HashSHA256
	wantFiles := len(files) // emitted by the walk, in walk order

	tests := []struct {
		name             string
		args             []string
		batchCount       int64
		treeDerive       int64
		wantCalls, emits string
	}{
		// 6 files, 1 link target, 3 trees: one batch.
		{name: "one commit", args: []string{src}, wantCalls: "batch:10"},
		{name: "file first", args: []string{first, src}, wantCalls: "batch:11", emits: first},
		{name: "trees past the count", args: []string{src}, batchCount: 4, wantCalls: "batch:4 batch:4 batch:2"},
		{name: "no hashing here", args: []string{src}, treeDerive: -1, wantCalls: "batch:6 batch:4"},
		{name: "file first, no hashing here", args: []string{first, src}, treeDerive: -1, wantCalls: "batch:7 batch:4", emits: first},
	}
	var rootRef asl.Reference
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cs := &countingStore{Store: memstore.New()}
			var emitted []string
			p := &putter{store: cs, hash: h, batchCount: tc.batchCount, treeDerive: tc.treeDerive,
				emit: func(it putItem) error {
					emitted = append(emitted, it.Source)
					if want := asl.MustDerive(h, asl.Untagged(mustRead(t, it.Source))); it.Ref != want {
						t.Errorf("%s emitted with %s, want %s", it.Source, it.Ref, want)
					}
					return nil
				}}
			var it treeItem
			for _, a := range tc.args {
				var ok bool
				var err error
				if it, ok, err = p.putTree(ctx, a, nil); err != nil {
					t.Fatal(err)
				} else if ok != (a == src) {
					t.Fatalf("putTree(%s): ok %v", a, ok)
				}
			}
			if err := p.flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cs.calls, " "); got != tc.wantCalls {
				t.Errorf("store calls %q, want %q", got, tc.wantCalls)
			}
			if len(emitted) != wantFiles+len(tc.args)-1 || tc.emits != "" && emitted[0] != tc.emits {
				t.Errorf("emitted %q", emitted)
			}
			if it.Files != wantFiles || it.Symlinks != 1 || it.Dirs != 2 {
				t.Errorf("tree item %+v", it)
			}
			if rootRef.IsZero() {
				rootRef = it.Ref
			} else if it.Ref != rootRef {
				t.Errorf("tree %s, want %s (the first case's)", it.Ref, rootRef)
			}
			seen := 0
			err := tree.Walk(ctx, cs, it.Ref, func(path string, e tree.Entry) error {
				full := filepath.Join(src, filepath.FromSlash(path))
				var want asl.Artifact
				switch e.Kind {
				case tree.File:
					want = asl.Untagged(mustRead(t, full))
					seen++
				case tree.Symlink:
					target, err := os.Readlink(full)
					if err != nil {
						return err
					}
					want = asl.Untagged([]byte(target))
				default:
					return nil
				}
				if r := asl.MustDerive(h, want); e.Ref != r || e.Size != uint64(len(want.Bytes)) {
					t.Errorf("%s: entry %s of %d bytes, want %s of %d", path, e.Ref, e.Size, r, len(want.Bytes))
				}
				if _, err := cs.Stat(ctx, e.Ref); err != nil {
					t.Errorf("%s: %v", path, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if seen != wantFiles {
				t.Errorf("tree holds %d files, want %d", seen, wantFiles)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPutTreeCanceled: a put -r whose context ends returns its error, and
// the directory lister has stopped by then.
func TestPutTreeCanceled(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		sub := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "f"), []byte(sub), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	p := &putter{store: memstore.New(), hash: asl.HashSHA256, batchCount: 1,
		emit: func(putItem) error {
			if n++; n == 3 {
				cancel()
			}
			return nil
		}}
	if _, _, err := p.putTree(ctx, dir, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled put -r: %v", err)
	}
}
