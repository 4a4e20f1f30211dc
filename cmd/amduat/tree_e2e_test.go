package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// snapshotDir builds the directory the snapshot tests put: nested
// directories, an empty one, a name with a space, an executable, a large
// file (streamed, not batched), relative, absolute and dangling symbolic
// links, a FIFO, and files the excludes leave out.
func snapshotDir(t *testing.T, root string) {
	t.Helper()
	write := func(p string, data []byte, mode fs.FileMode) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("README", []byte("hello"), 0o644)
	write("bin/run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	write("src/a/b/deep file.txt", []byte("deep"), 0o644)
	write("src/a/other", []byte("hello"), 0o600)                             // same bytes as README; another mode, not executable
	write("big.bin", bytes.Repeat([]byte("0123456789abcdef"), 5<<16), 0o644) // 5 MiB: streamed
	write("debug.log", []byte("excluded by --exclude"), 0o644)
	write("build/out.o", []byte("excluded by --exclude-from"), 0o644)
	write("src/keep.log", []byte("re-included by !keep.log"), 0o644)
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"link": "README", "src/up": "../bin/run.sh", "abs": "/etc/hostname", "dangling": "no/such/file"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeState describes a directory as a snapshot keeps it: per path, the
// kind, the executable bit and the content (a link's target).
func treeState(t *testing.T, root string, skip func(rel string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if p == root || skip(rel) {
			return nil
		}
		switch typ := d.Type(); {
		case typ.IsDir():
			out[rel] = "dir"
		case typ&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case typ.IsRegular():
			info, _ := d.Info()
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if info.Mode()&0o100 != 0 {
				out[rel] = "exec " + string(data)
			} else {
				out[rel] = "file " + string(data)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var treeRefLine = regexp.MustCompile(`^0001[0-9a-f]{64}$`)

// TestSnapshotRoundTrip: put -r stores a directory as a tree (the last
// line), get -r restores it equal to the original (as diff -r would say:
// every path, kind, executable bit, content and link target), without
// the FIFO and the excluded files; the tree reference depends on content
// only; TREE:path works in get and pel run; ls and diff list it.
func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	src := filepath.Join(c.cwd, "src")
	snapshotDir(t, src)
	ignore := c.write("ignore", []byte("# build outputs\nbuild/\n"))
	r := c.must(0, "put", "-r", "--exclude", "*.log", "--exclude", "!keep.log", "--exclude-from", ignore, src)
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	tr := out[len(out)-1]
	if !treeRefLine.MatchString(tr) || len(out) != 7 { // 6 files, then the tree
		t.Fatalf("put -r printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "skipped 1 special file") {
		t.Fatalf("stderr %q does not count the FIFO", r.stderr)
	}

	dst := filepath.Join(c.cwd, "restored")
	var sum restoreResult
	oneJSON(t, c.must(0, "--json", "get", "-r", tr, "-o", dst).stdout, &sum)
	if sum.Files != 6 || sum.Symlinks != 4 || sum.Dirs != 5 || sum.Ref.String() != tr {
		t.Fatalf("get -r summary %+v", sum)
	}
	excluded := func(rel string) bool {
		return rel == "fifo" || rel == "debug.log" || rel == "build" || strings.HasPrefix(rel, "build/")
	}
	want, got := treeState(t, src, excluded), treeState(t, dst, func(string) bool { return false })
	if len(want) != 15 || len(got) != len(want) {
		t.Fatalf("restored %d paths, want %d:\n%v\n%v", len(got), len(want), got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: restored %.40q, want %.40q", p, got[p], w)
		}
	}

	// Same content, other metadata and another creation order: same tree.
	again := filepath.Join(c.cwd, "again")
	c.must(0, "get", "-r", tr, "-o", again)
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(filepath.Join(again, "README"), old, old)
	os.Chmod(filepath.Join(again, "README"), 0o664)
	r = c.must(0, "put", "-r", again)
	if got := lastLine(r.stdout); got != tr {
		t.Fatalf("same content, other mtime and mode bits: tree %s, want %s", got, tr)
	}

	// TREE:path in get, ls and pel run --input.
	if r := c.must(0, "get", tr+":src/a/b/deep file.txt"); r.stdout != "deep" {
		t.Fatalf("get TREE:path = %q", r.stdout)
	}
	if r := c.must(0, "get", tr[:16]+"...:/bin//run.sh"); !strings.HasPrefix(r.stdout, "#!/bin/sh") {
		t.Fatalf("get ABBREV:path = %q", r.stdout)
	}
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	r = c.must(0, "pel", "run", "--output-raw", "--program", prog, "--input", tr+":README", "--input", tr+":src/a/other")
	if r.stdout != "hellohello" {
		t.Fatalf("pel run --input TREE:path = %q", r.stdout)
	}
	ls := c.must(0, "ls", tr).stdout
	if !strings.Contains(c.must(0, "ls", "-r", tr).stdout, "executable ") {
		t.Fatal("ls -r TREE shows no executable")
	}
	for _, w := range []string{"directory ", "file ", "symlink ", " README\n", " empty\n"} {
		if !strings.Contains(ls, w) {
			t.Fatalf("ls TREE lacks %q:\n%s", w, ls)
		}
	}
	var n int
	for _, line := range strings.Split(strings.TrimSpace(c.must(0, "--json", "ls", "-r", tr).stdout), "\n") {
		var e treeEntryJSON
		d := json.NewDecoder(strings.NewReader(line))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			t.Fatalf("ls -r --json line %q: %v", line, err)
		}
		n++
	}
	if n != 15 {
		t.Fatalf("ls -r --json: %d lines, want 15", n)
	}
	if q := c.must(0, "ls", "-q", tr+":src/a/b").stdout; q != "deep file.txt\n" {
		t.Fatalf("ls -q TREE:path = %q", q)
	}

	// diff: one changed file, one removed link, one added directory.
	os.WriteFile(filepath.Join(again, "README"), []byte("changed"), 0o644)
	os.Remove(filepath.Join(again, "link"))
	os.MkdirAll(filepath.Join(again, "new", "sub"), 0o755)
	os.Chmod(filepath.Join(again, "src", "a", "other"), 0o755)
	tr2 := lastLine(c.must(0, "put", "-r", again).stdout)
	if d := c.must(0, "diff", tr, tr2).stdout; d != "M README\nD link\nA new\nA new/sub\nM src/a/other\n" {
		t.Fatalf("diff:\n%s", d)
	}
	if d := c.must(0, "diff", tr, tr).stdout; d != "" {
		t.Fatalf("diff of a tree with itself: %q", d)
	}

	// Errors.
	oneErrorLine(t, c.must(exitNotFound, "get", tr+":src/nope"), "get")
	oneErrorLine(t, c.must(exitNotFound, "get", tr+":README/x"), "get")
	readme := strings.TrimSpace(c.runIn(strings.NewReader("hello"), "hash").stdout)
	oneErrorLine(t, c.must(exitUsage, "ls", readme), "ls")
	oneErrorLine(t, c.must(exitUsage, "diff", tr, readme), "diff")
	oneErrorLine(t, c.must(exitUsage, "get", "-r", tr), "get")
	oneErrorLine(t, c.must(exitUsage, "put", "--exclude", "*.o", src), "put")
	oneErrorLine(t, c.must(exitUsage, "ls", "-r"), "ls")
}

// TestSnapshotRestoreRefusals: get -r writes over nothing without --force,
// never writes outside its directory, and --force replaces files and
// links (never through them).
func TestSnapshotRestoreRefusals(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	src := filepath.Join(c.cwd, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "f"), []byte("new"), 0o644)
	os.WriteFile(filepath.Join(src, "g"), []byte("g"), 0o644)
	tr := lastLine(c.must(0, "put", "-r", src).stdout)

	// An existing file: refused before anything is written.
	dst := filepath.Join(c.cwd, "dst")
	os.MkdirAll(filepath.Join(dst, "sub"), 0o755)
	os.WriteFile(filepath.Join(dst, "sub", "f"), []byte("old"), 0o644)
	oneErrorLine(t, c.must(exitNegative, "get", "-r", tr, "-o", dst), "get")
	if _, err := os.Lstat(filepath.Join(dst, "g")); err == nil {
		t.Fatal("a refused restore wrote g")
	}
	c.must(0, "get", "-r", tr, "-o", dst, "--force")
	if b, _ := os.ReadFile(filepath.Join(dst, "sub", "f")); string(b) != "new" {
		t.Fatalf("--force left %q", b)
	}

	// A symbolic link in the way, pointing outside: refused without
	// --force; with it the link is replaced by the directory, and nothing
	// is written outside.
	outside := filepath.Join(c.cwd, "outside")
	os.MkdirAll(outside, 0o755)
	evil := filepath.Join(c.cwd, "evil")
	os.MkdirAll(evil, 0o755)
	os.Symlink(outside, filepath.Join(evil, "sub"))
	os.Symlink(filepath.Join(outside, "g"), filepath.Join(evil, "g"))
	oneErrorLine(t, c.must(exitNegative, "get", "-r", tr, "-o", evil), "get")
	c.must(0, "get", "-r", tr, "-o", evil, "--force")
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Fatalf("restore wrote outside its directory: %v", es)
	}
	if st, err := os.Lstat(filepath.Join(evil, "sub")); err != nil || !st.IsDir() {
		t.Fatalf("sub is not a directory after --force: %v", err)
	}
	if st, err := os.Lstat(filepath.Join(evil, "g")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("g is not a regular file after --force: %v", err)
	}

	// A directory in the way of a file is never replaced.
	blocked := filepath.Join(c.cwd, "blocked")
	os.MkdirAll(filepath.Join(blocked, "g"), 0o755)
	oneErrorLine(t, c.must(exitNegative, "get", "-r", tr, "-o", blocked, "--force"), "get")

	// -o naming a file.
	file := c.write("file", []byte("x"))
	oneErrorLine(t, c.must(exitUsage, "get", "-r", tr, "-o", file), "get")
}

// TestSnapshotPinnedSurvivesGC: a pinned tree keeps its files, links and
// sub-trees through gc (SPECS.md §19.6); what it does not reach goes.
func TestSnapshotPinnedSurvivesGC(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	src := filepath.Join(c.cwd, "src")
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "f"), []byte("kept"), 0o644)
	os.Symlink("d/f", filepath.Join(src, "l"))
	tr := lastLine(c.must(0, "put", "-r", src).stdout)
	garbage := strings.TrimSpace(c.runIn(strings.NewReader("garbage"), "put").stdout)
	c.must(0, "pin", "add", "snap", tr)
	c.must(0, "gc")
	c.must(exitNegative, "has", garbage)
	dst := filepath.Join(c.cwd, "dst")
	c.must(0, "get", "-r", tr, "-o", dst)
	if b, _ := os.ReadFile(filepath.Join(dst, "l")); string(b) != "kept" {
		t.Fatalf("restored through the link: %q", b)
	}
}
