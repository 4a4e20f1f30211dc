package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/golden"
)

const (
	refHello = "00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4"
	refHiTag = "000157ea0c5cba3742c69ca28b67b4dd2696b33d2111b98c8490436259c8808f6f23"
	refEmpty = "00013e7077fd2f66d689e0cee6a7cf5b37bf2dca7c979af356d0a31cbc5c85605c7d"
)

// lifeFiles are the files of lifeStore's artifacts.
var lifeFiles = []struct {
	name string
	data []byte
}{
	{"hello", []byte("hello")},
	{"empty", nil},
	{"hi", []byte("hi")},
	{"big", []byte(strings.Repeat("x", 3000))},
}

// lifeTemplate is the store of lifeStore, made by the commands each test
// used to run: init, a put of hello and empty, one of hi, one of big.
var lifeTemplate = storeTemplate{make: func(store, work string) error {
	for _, f := range lifeFiles {
		if err := os.WriteFile(filepath.Join(work, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init"},
		{"put", "hello", "empty"},
		{"put", "--type-tag", "0x101", "hi"},
		{"put", "--type-tag", "259", "big"},
	} {
		if err := amduatIn(store, work, args...); err != nil {
			return err
		}
	}
	return nil
}}

// lifeStore is a store with "hello" (untagged), "hi" (tag 0x101), the
// empty artifact and a 3000-byte artifact tagged 0x103 (259), and their
// files in the working directory: a copy of lifeTemplate.
func lifeStore(t *testing.T) *cli {
	t.Helper()
	c := newCLI(t)
	lifeTemplate.copyTo(t, c)
	for _, f := range lifeFiles {
		c.write(f.name, f.data)
	}
	return c
}

func TestLsAndDu(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	cases := []struct {
		name string
		args []string
	}{
		{"ls.txt", []string{"ls"}},
		{"ls-q-tag.txt", []string{"ls", "-q", "--type-tag", "0x101"}},
		{"ls-untagged-min.txt", []string{"ls", "--type-tag", "none", "--min-size", "1"}},
		{"ls-max.txt", []string{"ls", "--max-size", "2"}},
		{"ls-json.txt", []string{"ls", "--json", "--min-size", "1K"}},
		{"du.txt", []string{"du"}},
		{"du.json", []string{"du", "--json"}},
		{"du-filtered.txt", []string{"stats", "--type-tag", "none"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.must(0, tc.args...)
			if r.stderr != "" {
				t.Fatalf("stderr %q", r.stderr)
			}
			golden.Check(t, filepath.Join("testdata", "life", tc.name), []byte(r.stdout))
		})
	}
	// ls --json is JSON lines: every line one object.
	r := c.must(0, "ls", "--json")
	ls := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(ls) != 4 {
		t.Fatalf("ls --json: %d lines", len(ls))
	}
	for _, l := range ls {
		var it statItem
		oneJSON(t, l, &it)
	}
	for _, bad := range [][]string{{"ls", "--type-tag", "x"}, {"ls", "--min-size", "1Q"}, {"ls", "extra"}, {"du", "--max-size", "-1"}} {
		r := c.must(exitUsage, bad...)
		oneErrorLine(t, r, bad[0])
	}
}

func TestAbbreviatedReferences(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	for _, arg := range []string{refHello[:8], refHello[:13], refHello[:12] + "...", refHello[:12] + "…", refHello[:12] + "..." + refHello[62:]} {
		r := c.must(0, "get", arg)
		if r.stdout != "hello" {
			t.Fatalf("get %s: %q", arg, r.stdout)
		}
	}
	r := c.must(0, "stat", refHiTag[:10])
	if !strings.HasPrefix(r.stdout, refHiTag+" size=2 ") {
		t.Fatalf("stat: %q", r.stdout)
	}
	// A prefix matching nothing is not found; a suffix that disagrees too.
	oneErrorLine(t, c.must(exitNotFound, "get", "0001ffffffff"), "get")
	oneErrorLine(t, c.must(exitNotFound, "get", refHello[:12]+"..."+"abcd"), "get")
	// Ambiguous: "0001" + one digit cannot reach 8 digits; build a store
	// where two references share 8 digits.
	amb := newCLI(t)
	amb.initStore()
	var files []string
	for i := 0; i < 1500; i++ {
		files = append(files, amb.write(fmt.Sprint("f", i), []byte{byte(i), byte(i >> 8), 1}))
	}
	refs := strings.Fields(amb.must(0, append([]string{"put"}, files...)...).stdout)
	seen := map[string]bool{}
	prefix := ""
	for _, r := range refs {
		if seen[r[:8]] {
			prefix = r[:8]
			break
		}
		seen[r[:8]] = true
	}
	if prefix == "" {
		t.Fatal("no shared 8-digit prefix among 1500 references")
	}
	r = amb.must(exitUsage, "get", prefix)
	oneErrorLine(t, r, "get")
	if !strings.Contains(r.stderr, "matches") || strings.Count(r.stderr, prefix) < 3 {
		t.Fatalf("ambiguous: %q", r.stderr)
	}
	// A malformed reference: usage, says what is wrong, no ERR_INTEGRITY.
	for _, bad := range []string{"0001", "00011F1D4EA7", "xyz", refHello + "00"} {
		r := c.must(exitUsage, "get", bad)
		oneErrorLine(t, r, "get")
		if strings.Contains(r.stderr, "ERR_INTEGRITY") || !strings.Contains(r.stderr, "bad argument") {
			t.Fatalf("get %s: %q", bad, r.stderr)
		}
	}
}

func TestHashCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t) // no store: hash needs none
	r := c.must(0, "hash", c.write("h", []byte("hello")))
	if r.stdout != refHello+"\n" {
		t.Fatalf("hash: %q", r.stdout)
	}
	r = c.must(0, "hash", "--type-tag", "0x101", "--names", c.write("hi", []byte("hi")))
	if r.stdout != refHiTag+" "+filepath.Join(c.cwd, "hi")+"\n" {
		t.Fatalf("hash --names: %q", r.stdout)
	}
	r = c.runIn(strings.NewReader("hello"), "hash", "--hash", "blake3", "--json")
	var res hashResult
	oneJSON(t, r.stdout, &res)
	if res.Hash != "blake3" || res.Artifacts[0].Ref.String() != "8001d6b1856e50c62e6e947c6900468c85097655f3b56ac659a83ef2d78c8d81ea01" {
		t.Fatalf("hash --json: %+v", res)
	}
	if _, err := os.Stat(c.store); !os.IsNotExist(err) {
		t.Fatal("hash created a store")
	}
	oneErrorLine(t, c.must(exitUsage, "hash", c.cwd), "hash")
	oneErrorLine(t, c.must(exitIO, "hash", "nonexistent"), "hash")
}

func TestStatAndHasBatch(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	missing := "0001" + strings.Repeat("ab", 32)
	in := strings.Join([]string{refHello, "", "  " + refHiTag[:10] + "  ", missing, "zz", refEmpty}, "\n") + "\n"
	r := c.runIn(strings.NewReader(in), "stat", "--stdin")
	if r.code != exitUsage {
		t.Fatalf("exit %d, want 2 (a malformed line)", r.code)
	}
	golden.Check(t, filepath.Join("testdata", "life", "stat-stdin.txt"), []byte(r.stdout+"--- stderr\n"+r.stderr))
	r = c.runIn(strings.NewReader(refHello+"\n"+missing+"\n"), "stat", "--stdin")
	if r.code != exitNotFound || r.stdout != "" && !strings.HasSuffix(r.stdout, missing+" missing\n") {
		t.Fatalf("stat --stdin: %d %q", r.code, r.stdout)
	}
	r = c.runIn(strings.NewReader(refHello+"\n"+missing+"\n"), "has", "--stdin", "--json")
	if r.code != exitNegative {
		t.Fatalf("has --stdin: exit %d", r.code)
	}
	ls := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var h0, h1 hasItemText
	if len(ls) != 2 || json.Unmarshal([]byte(ls[0]), &h0) != nil || json.Unmarshal([]byte(ls[1]), &h1) != nil || !h0.Present || h1.Present {
		t.Fatalf("has --stdin --json: %q", r.stdout)
	}
	oneErrorLine(t, c.must(exitUsage, "has", "--stdin", refHello), "has")
	// stat A B reports every reference, exit of the first failure.
	r = c.must(exitNotFound, "stat", refHello, missing, refHiTag)
	if strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("stat A B C: %q", r.stdout)
	}
	oneErrorLine(t, r, "stat")
}

func TestMessages(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	// get -o fails before reading, naming the path.
	r := c.must(exitUsage, "get", "-o", c.cwd+"/", refHello)
	oneErrorLine(t, r, "get")
	r = c.must(exitUsage, "get", "-o", c.cwd, refHello)
	if !strings.Contains(r.stderr, c.cwd+": is a directory") {
		t.Fatalf("%q", r.stderr)
	}
	r = c.must(exitIO, "get", "-o", filepath.Join(c.cwd, "missing", "dir", "f"), refHello)
	if !strings.Contains(r.stderr, filepath.Join(c.cwd, "missing", "dir", "f")) {
		t.Fatalf("%q", r.stderr)
	}
	// A store path that is a file.
	f := c.write("afile", []byte("x"))
	r = c.must(exitStore, "--store", f, "has", refHello)
	oneErrorLine(t, r, "has")
	if !strings.Contains(r.stderr, "is a file, not a store directory") {
		t.Fatalf("%q", r.stderr)
	}
}
