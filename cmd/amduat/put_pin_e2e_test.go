package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPutPinSets: put --pin pins what it stores in the same step: one
// DIR's tree (-r), or a tree of several FILEs and DIRs; gc then keeps all of
// it, and re-pointing the pin needs --force (SPECS.md §16.3).
func TestPutPinSets(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	dir := filepath.Join(c.cwd, "home")
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	extra := c.write("extra.txt", []byte("extra\n"))

	r := c.must(0, "put", "-r", "--pin", "backup/home", dir)
	out := lines(r.stdout)
	treeRef := out[len(out)-1]
	if got := strings.TrimSpace(c.must(0, "pin", "ls").stdout); got != "backup/home "+treeRef {
		t.Fatalf("pin ls after put -r --pin: %q, want the tree %s", got, treeRef)
	}
	var dry struct {
		Deleted int64 `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(c.must(0, "--json", "gc", "--dry-run").stdout), &dry); err != nil || dry.Deleted != 0 {
		t.Fatalf("gc --dry-run right after put -r --pin: %+v %v (want nothing to delete)", dry, err)
	}

	// Several arguments under one pin: one tree holding each by base name,
	// printed last.
	r = c.must(0, "put", "-r", "--pin", "set", dir, extra)
	out = lines(r.stdout)
	set := out[len(out)-1]
	if got := c.must(0, "get", set+":extra.txt").stdout; got != "extra\n" {
		t.Fatalf("get SET:extra.txt = %q", got)
	}
	if got := c.must(0, "get", set+":home/sub/run.sh").stdout; got != "#!/bin/sh\necho hi\n" {
		t.Fatalf("get SET:home/sub/run.sh = %q", got)
	}
	ls := c.must(0, "ls", set).stdout
	if !strings.Contains(ls, "home") || !strings.Contains(ls, "extra.txt") {
		t.Fatalf("ls SET: %q", ls)
	}

	// A pin is re-pointed only with --force; the refusal keeps what it put.
	other := c.write("other.txt", []byte("other\n"))
	oneErrorLine(t, c.must(exitNegative, "put", "--pin", "set", other), "put")
	c.must(0, "put", "--pin", "set", "--force", other)
	oneErrorLine(t, c.must(exitUsage, "put", "--pin", "x", "--stdin-paths"), "put")
	if r := c.must(0, "gc"); !strings.HasPrefix(r.stdout, "deleted 2 of") {
		// The old set tree and extra.txt are gone; home's files stay
		// under backup/home.
		t.Fatalf("gc after re-pointing: %q", r.stdout)
	}
	c.must(0, "has", treeRef)
	if log := c.must(0, "pin", "log", "set").stdout; strings.Count(log, "\n") != 2 {
		t.Fatalf("pin log set: %q (want 2 changes)", log)
	}
}
