package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// put --pin for a file and for standard input, the artifact and its pin in
// one step; re-pointing needs --force; pin log shows every change, newest
// first, in text and JSON; gc keeps what is pinned; a pin acknowledged and
// then lost with Pebble's write-ahead log comes back from the journal
// (SPECS.md §6.4, §19.8).
func TestPutPinAndPinLog(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	refA := strings.TrimSpace(c.must(0, "put", "--pin", "docs", c.write("a", []byte("version a"))).stdout)
	if r := c.must(0, "pin", "ls"); r.stdout != "docs "+refA+"\n" {
		t.Fatalf("pin ls: %q", r.stdout)
	}
	// Standard input, re-pointing an existing name: refused, then forced.
	r := c.runIn(bytes.NewReader([]byte("version b")), "put", "--pin", "docs")
	if r.code != 1 || !strings.Contains(r.stderr, "pin exists") {
		t.Fatalf("put --pin onto a pinned name: exit %d, %q", r.code, r.stderr)
	}
	r = c.runIn(bytes.NewReader([]byte("version b")), "--json", "put", "--pin", "docs", "--force")
	var put struct {
		Artifacts []struct{ Ref string } `json:"artifacts"`
		Pin       struct{ Name, Ref string }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &put) != nil || len(put.Artifacts) != 1 || put.Pin.Name != "docs" || put.Pin.Ref != put.Artifacts[0].Ref {
		t.Fatalf("put --pin --force --json: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	refB := put.Pin.Ref
	// Several files under one pin become one tree (TestPutPinSets).
	c.must(2, "put", "--pin", "x", "--stdin-paths")
	c.must(2, "put", "--pin", "bad\nname", c.write("d", []byte("d")))
	c.must(0, "pin", "rm", "docs")
	c.must(0, "put", "--pin", "other", c.write("e", []byte("e")))

	r = c.must(0, "pin", "log", "docs")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	want := []string{
		`^3 \S+Z docs rm \(was ` + refB + `\) by local$`,
		`^2 \S+Z docs re-point ` + refB + ` \(was ` + refA + `\) by local$`,
		`^1 \S+Z docs add ` + refA + ` by local$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("pin log docs: %q", r.stdout)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d: %q, want %s", i, lines[i], w)
		}
	}
	if r := c.must(0, "pin", "log"); strings.Count(r.stdout, "\n") != 4 || !strings.HasPrefix(r.stdout, "4 ") {
		t.Fatalf("pin log: %q", r.stdout)
	}
	var log struct {
		Changes []struct {
			Seq   uint64  `json:"seq"`
			Name  string  `json:"name"`
			Old   *string `json:"old"`
			New   *string `json:"new"`
			Time  string  `json:"time"`
			Actor string  `json:"actor"`
		} `json:"changes"`
	}
	r = c.must(0, "--json", "pin", "log", "docs")
	if err := json.Unmarshal([]byte(r.stdout), &log); err != nil || len(log.Changes) != 3 {
		t.Fatalf("pin log --json: %q %v", r.stdout, err)
	}
	if ch := log.Changes[0]; ch.Seq != 3 || ch.New != nil || ch.Old == nil || *ch.Old != refB || ch.Actor != "local" {
		t.Errorf("newest change: %+v", ch)
	}
	if ch := log.Changes[2]; ch.Seq != 1 || ch.Old != nil || ch.New == nil || *ch.New != refA {
		t.Errorf("oldest change: %+v", ch)
	}
	c.must(3, "pin", "log", "never")
	c.must(0, "pin", "log", "--help")

	// gc keeps what put --pin stored and a pin still names.
	c.must(0, "gc")
	c.must(1, "has", refB)
	c.must(0, "has", strings.TrimSpace(c.must(0, "pin", "ls").stdout[len("other "):]))

	// Pebble's write-ahead logs gone (what a damaged log tail does to its
	// last batches): the pin put last comes back from the journal, for a
	// read-only open and a writable one.
	refL := strings.TrimSpace(c.must(0, "put", "--pin", "last", c.write("l", []byte("last"))).stdout)
	logs, _ := filepath.Glob(filepath.Join(c.store, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	for _, l := range logs {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.must(0, "pin", "ls"); !strings.Contains(r.stdout, "last "+refL+"\n") {
		t.Fatalf("pin ls after the log was lost: %q", r.stdout)
	}
	c.must(0, "gc")
	c.must(0, "has", refL)
	if r := c.must(0, "pin", "log", "last"); !strings.Contains(r.stdout, " last add "+refL) {
		t.Fatalf("pin log after the log was lost: %q", r.stdout)
	}
}

// import --pin pins the bundle's root as NAME, or its roots as NAME/1..;
// a bundle without roots pins nothing (exit 1); gc right after keeps it all.
func TestImportPin(t *testing.T) {
	t.Parallel()
	src := newCLI(t)
	src.initStore()
	one := strings.TrimSpace(src.must(0, "put", src.write("one", []byte("one"))).stdout)
	two := strings.TrimSpace(src.must(0, "put", src.write("two", []byte("two"))).stdout)
	b1 := filepath.Join(src.cwd, "one.bundle")
	b2 := filepath.Join(src.cwd, "two.bundle")
	src.must(0, "export", "-o", b1, one)
	src.must(0, "export", "-o", b2, one, two)

	c := newCLI(t)
	c.initStore()
	r := c.must(0, "import", "--pin", "backup", b1)
	if !strings.Contains(r.stdout, "pinned backup "+one+"\n") {
		t.Fatalf("import --pin: %q", r.stdout)
	}
	r = c.must(0, "--json", "import", "--pin", "pair", b2)
	var res struct {
		Files []struct {
			Pins []struct{ Name, Ref string } `json:"pins"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Files) != 1 || len(res.Files[0].Pins) != 2 {
		t.Fatalf("import --pin --json: %q %v", r.stdout, err)
	}
	if p := res.Files[0].Pins; p[0].Name != "pair/1" || p[0].Ref != one || p[1].Name != "pair/2" || p[1].Ref != two {
		t.Fatalf("pins: %+v", p)
	}
	if r := c.must(0, "pin", "ls"); r.stdout != "backup "+one+"\npair/1 "+one+"\npair/2 "+two+"\n" {
		t.Fatalf("pin ls: %q", r.stdout)
	}
	c.must(0, "import", "--pin", "pair/1", b1) // names it already: no change
	c.must(0, "import", "--pin", "backup", b2) // backup/1, backup/2 are new names
	c.must(1, "import", "--pin", "pair/2", b1) // pair/2 names another root
	c.must(2, "import", "--pin", "x", b1, b2)
	if r := c.must(0, "gc", "--dry-run"); !strings.HasPrefix(r.stdout, "would delete 0 of 2 artifacts") {
		t.Fatalf("gc --dry-run after import --pin: %q", r.stdout)
	}
	// A bundle without roots.
	empty := filepath.Join(c.cwd, "empty.bundle")
	if err := os.WriteFile(empty, emptyBundle(t, src), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := c.must(1, "import", "--pin", "none", empty); !strings.Contains(r.stderr, "no roots") {
		t.Fatalf("import --pin of a bundle without roots: %q", r.stderr)
	}
}

// emptyBundle returns a bundle of no artifacts and no roots.
func emptyBundle(t *testing.T, c *cli) []byte {
	t.Helper()
	p := filepath.Join(c.cwd, "list")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := c.runIn(bytes.NewReader(nil), "get", "--stdin", "-o", filepath.Join(c.cwd, "e.bundle"))
	if r.code != 0 {
		t.Skipf("no way to write an empty bundle here: %q", r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(c.cwd, "e.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
