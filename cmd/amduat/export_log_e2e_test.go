package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// export --closure of a run, import into a fresh store: the run verifies
// there, and damaged or truncated bundles store nothing wrong.
func TestExportImport(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	var run struct {
		ResultRef  string   `json:"result_ref"`
		TraceRef   string   `json:"trace_ref"`
		OutputRefs []string `json:"output_refs"`
	}
	r := c.must(0, "--json", "pel", "run", "--program", prog, "--input", refHello, "--input", refHiTag)
	json.Unmarshal([]byte(r.stdout), &run)
	bundleFile := filepath.Join(c.cwd, "run.amdb")
	r = c.must(0, "export", "--closure", "-o", bundleFile, run.ResultRef[:12])
	if !strings.HasPrefix(r.stdout, "exported 7 artifacts (") || !strings.Contains(r.stderr, "reached but not stored") {
		t.Fatalf("export: %q %q", r.stdout, r.stderr)
	}
	data, err := os.ReadFile(bundleFile)
	if err != nil || !bytes.HasPrefix(data, []byte("AMDUATBN")) {
		t.Fatalf("bundle file: %v", err)
	}

	d := newCLI(t)
	d.initStore()
	r = d.must(0, "import", bundleFile)
	if !strings.HasPrefix(r.stdout, "imported 7 artifacts") || !strings.Contains(r.stdout, ", 1 roots\nroot "+run.ResultRef) {
		t.Fatalf("import: %q", r.stdout)
	}
	if r := d.must(0, "pel", "verify", run.ResultRef); !strings.Contains(r.stdout, "ok:") {
		t.Fatalf("verify after import: %q", r.stdout)
	}
	if r := d.must(0, "get", run.OutputRefs[0]); r.stdout != "hellohi" {
		t.Fatalf("output after import: %q", r.stdout)
	}
	// The trace is found through the index import wrote.
	if r := d.must(0, "pel", "show", run.ResultRef); !strings.Contains(r.stdout, "trace_ref "+run.TraceRef) {
		t.Fatalf("show after import: %q", r.stdout)
	}
	// Without --closure: exactly the given references; a missing one is exit 3.
	r = c.must(0, "--json", "export", "-o", filepath.Join(c.cwd, "two.amdb"), refHello, refHiTag)
	var ex exportResult
	oneJSON(t, r.stdout, &ex)
	if ex.Artifacts != 2 || len(ex.Roots) != 2 {
		t.Fatalf("export --json %+v", ex)
	}
	missing := "0001" + strings.Repeat("ab", 32)
	oneErrorLine(t, c.must(exitNotFound, "export", "-o", filepath.Join(c.cwd, "m.amdb"), missing), "export")
	if _, err := os.Stat(filepath.Join(c.cwd, "m.amdb")); !os.IsNotExist(err) {
		t.Fatal("failed export left its file")
	}
	oneErrorLine(t, c.must(exitUsage, "export", refHello), "export")

	// Damage: flip a byte inside the third entry's payload.
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"flipped", func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-20] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c.write("bad-"+tc.name+".amdb", tc.mut(append([]byte(nil), data...)))
			e := newCLI(t)
			e.initStore()
			r := e.must(exitIntegrity, "import", bad)
			oneErrorLine(t, r, "import")
			if !strings.Contains(r.stderr, "bundle:") || !strings.Contains(r.stderr, "offset") {
				t.Fatalf("import of damaged bundle: %q", r.stderr)
			}
			// Whatever was stored verifies.
			if r := e.run("verify"); r.code != 0 {
				t.Fatalf("verify after damaged import: %d %q", r.code, r.stdout)
			}
		})
	}
	// get --stdin writes a bundle that import reads back.
	r = c.runIn(strings.NewReader(refHello+"\n"+refHiTag[:9]+"\n"), "get", "--stdin")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "AMDUATBN") {
		t.Fatalf("get --stdin: %d %q", r.code, r.stderr)
	}
	f := newCLI(t)
	f.initStore()
	r = f.runIn(strings.NewReader(r.stdout), "--json", "import", "-")
	var im importResult
	oneJSON(t, r.stdout, &im)
	if len(im.Files) != 1 || im.Files[0].Artifacts != 2 || im.Files[0].Roots[1].String() != refHiTag {
		t.Fatalf("import - %+v", im)
	}
	r = c.runIn(strings.NewReader(refHello+"\n"+missing+"\n"), "get", "--stdin")
	if r.code != exitNotFound {
		t.Fatalf("get --stdin with a missing ref: exit %d", r.code)
	}
}

func TestRunLogCLI(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	c.must(0, "pel", "run", "--program", prog, "--input", refHello, "--input", refHello)
	c.must(0, "pel", "run", "--program", prog, "--input", refHello, "--input", refHello) // a hit
	c.must(13, "pel", "run", "--program", prog, "--input", refHello)
	r := c.must(0, "log")
	ls := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(ls) != 3 || !strings.HasPrefix(ls[0], "1 ") || !strings.Contains(ls[0], " OK 0x00000000 miss ") ||
		!strings.Contains(ls[1], " OK 0x00000000 hit ") || !strings.Contains(ls[2], " INVALID_INPUTS 0x00000003 miss ") {
		t.Fatalf("log:\n%s", r.stdout)
	}
	r = c.must(0, "--json", "log", "--since", "1", "--status", "invalid_inputs")
	var rec logJSON
	oneJSON(t, r.stdout, &rec)
	if rec.Seq != 3 || rec.Status != "INVALID_INPUTS" || rec.StatusCode != 3 || rec.Cache != "miss" || len(rec.RequestKey) != 64 {
		t.Fatalf("log --json %+v", rec)
	}
	oneErrorLine(t, c.must(exitUsage, "log", "--status", "BAD"), "log")
}

func TestPutTreeNamesStdinPaths(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	dir := filepath.Join(c.cwd, "tree")
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "b", "z"), []byte("z"), 0o644)
	os.WriteFile(filepath.Join(dir, "x"), []byte("hello"), 0o644)
	os.Symlink(filepath.Join(dir, "x"), filepath.Join(dir, "link"))
	r := c.must(0, "put", "-r", "--names", dir)
	hz := strings.TrimSpace(c.runIn(strings.NewReader("z"), "hash").stdout)
	want := hz + " " + filepath.Join(dir, "a", "b", "z") + "\n" + refHello + " " + filepath.Join(dir, "x") + "\n"
	// The files, then the tree (SPECS.md §19.10) named by the DIR.
	files, treeLine, _ := strings.Cut(r.stdout, want)
	if files != "" || !regexp.MustCompile(`^0001[0-9a-f]{64} `+regexp.QuoteMeta(dir)+"\n$").MatchString(treeLine) {
		t.Fatalf("put -r --names:\n%s\nwant\n%sREF %s", r.stdout, want, dir)
	}
	r = c.must(exitUsage, "put", dir)
	if !strings.Contains(r.stderr, "put -r") {
		t.Fatalf("%q", r.stderr)
	}
	var paths []string
	for i := 0; i < 50; i++ {
		paths = append(paths, c.write("f"+string(rune('a'+i%26))+string(rune('a'+i/26)), []byte{byte(i)}))
	}
	r = c.runIn(strings.NewReader(strings.Join(paths, "\n")+"\n"), "--json", "put", "--stdin-paths")
	var pr putResult
	oneJSON(t, r.stdout, &pr)
	if len(pr.Artifacts) != 50 || pr.Artifacts[49].Source != paths[49] {
		t.Fatalf("put --stdin-paths: %d artifacts", len(pr.Artifacts))
	}
	oneErrorLine(t, c.must(exitUsage, "put", "--stdin-paths", "x"), "put")
}

func TestInputFileVersionCompletionDocs(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	r := c.must(0, "pel", "run", "--program", prog, "--input-file", c.write("in", []byte("X")), "--input", refHello, "--output-raw")
	if r.stdout != "Xhello" {
		t.Fatalf("--input-file: %q", r.stdout)
	}
	r = c.runIn(strings.NewReader("Y"), "pel", "run", "--program", prog, "--input", refHello, "--input-file", "-", "--output-raw")
	if r.stdout != "helloY" {
		t.Fatalf("--input-file -: %q", r.stdout)
	}
	v := c.must(0, "version").stdout
	if got := c.must(0, "--version").stdout; got != v {
		t.Fatalf("--version %q, version %q", got, v)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if r := c.must(0, "completion", sh); !strings.Contains(r.stdout, "amduat") {
			t.Fatalf("completion %s: %q", sh, r.stdout[:50])
		}
	}
	oneErrorLine(t, c.must(exitUsage, "completion", "tcsh"), "completion")
	dir := filepath.Join(c.cwd, "docs")
	c.must(0, "docs", dir)
	md, err := os.ReadFile(filepath.Join(dir, "amduat_ls.md"))
	if err != nil || !bytes.Contains(md, []byte("JSON lines")) {
		t.Fatalf("docs: %v", err)
	}
	c.must(0, "docs", "--format", "man", filepath.Join(c.cwd, "man"))
	if _, err := os.Stat(filepath.Join(c.cwd, "man", "amduat-export.1")); err != nil {
		t.Fatal(err)
	}
	// pel build refuses a program that can never run OK (--strict is the
	// default and still accepted); --allow-invalid stores it with a warning.
	bad := c.write("bad.json", []byte(`{"nodes":[{"id":1,"op":"pel.bytes.nope","version":1}],"roots":[{"node":1}]}`))
	r = c.must(exitUsage, "pel", "build", "--strict", bad)
	oneErrorLine(t, r, "pel build")
	r = c.must(exitUsage, "pel", "build", bad)
	if !strings.Contains(r.stderr, "--allow-invalid") {
		t.Fatalf("pel build of an invalid program: %q does not name --allow-invalid", r.stderr)
	}
	c.must(0, "pel", "build", "--allow-invalid", bad)
	// a cycle likewise
	cycle := c.write("cycle.json", []byte(`{"nodes":[{"id":1,"op":"pel.bytes.concat","version":1,"inputs":[{"node":2}]},{"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1}]}],"roots":[{"node":1}]}`))
	oneErrorLine(t, c.must(exitUsage, "pel", "build", cycle), "pel build")
	// --program naming a file says to build it first.
	if r := c.must(exitUsage, "pel", "run", "--program", bad); !strings.Contains(r.stderr, "amduat pel build "+bad) {
		t.Fatalf("pel run --program FILE.json: %q", r.stderr)
	}
}

// Ctrl-C prints "interrupted" and exits 130; log --follow prints runs made
// while it follows (it lets the embedded store go between polls).
func TestFollowAndInterrupt(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	cmd := exec.Command(amduatBin, "log", "--follow", "--poll", "50ms")
	cmd.Dir = c.cwd
	cmd.Env = append(os.Environ(), "AMDUAT_STORE="+c.store)
	// Files, not buffers: the test reads stdout while the child writes.
	outF, _ := os.Create(filepath.Join(c.cwd, "follow.out"))
	errF, _ := os.Create(filepath.Join(c.cwd, "follow.err"))
	defer outF.Close()
	defer errF.Close()
	cmd.Stdout, cmd.Stderr = outF, errF
	read := func(f *os.File) string { b, _ := os.ReadFile(f.Name()); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i := 0; i < 20 && ran < 2; i++ {
		r := c.run("pel", "run", "--program", prog, "--input", refHello, "--input", refHello, "--no-cache", "-q")
		if r.code == 0 {
			ran++
		} else if r.code != exitIO { // the follower held the store at that instant
			t.Fatalf("pel run: %d %q", r.code, r.stderr)
		}
	}
	// The follower prints each run, the ones before it started as the
	// records so far; wait for them (two minutes bound a follower that
	// never prints: a loaded machine may take seconds to start it).
	deadline := time.Now().Add(2 * time.Minute)
	for strings.Count(read(outF), "\n") < ran && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitInterrupted || read(errF) != "amduat: log: interrupted\n" {
		t.Fatalf("exit %v, stderr %q", err, read(errF))
	}
	if ran < 2 || strings.Count(read(outF), " OK 0x00000000 off ") != ran {
		t.Fatalf("followed:\n%s(ran %d)", read(outF), ran)
	}
}

// ls, du, log, export and import work against amduat serve as against a
// directory, with the same output (the log's times and durations aside).
func TestLifeCommandsRemote(t *testing.T) {
	t.Parallel()
	local := newCLI(t)
	local.initStore()
	remote := &cli{t: t, cwd: t.TempDir()}
	remote.store = startServe(t, filepath.Join(remote.cwd, "store"))
	var res string
	for _, c := range []*cli{local, remote} {
		c.must(0, "put", c.write("hello", []byte("hello")), c.write("empty", nil))
		c.must(0, "put", "--type-tag", "0x101", c.write("hi", []byte("hi")))
		prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
		res = strings.Fields(c.must(0, "pel", "run", "--program", prog, "--input", refHello, "--input", refHiTag).stdout)[1]
		c.must(13, "pel", "run", "--program", prog, "--input", refHello)
	}
	for _, args := range [][]string{{"ls"}, {"ls", "--type-tag", "0x101", "-q"}, {"du"}, {"--json", "du"}, {"stat", refHello[:10]}} {
		// Pack files are the embedded store's: a server reports none.
		if got, want := withoutPacks(remote.must(0, args...).stdout), withoutPacks(local.must(0, args...).stdout); got != want {
			t.Fatalf("%v remote:\n%s\nlocal:\n%s", args, got, want)
		}
	}
	strip := func(log string) string { // drop TIME and DURATION
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
			f := strings.Fields(l)
			out = append(out, strings.Join(append(append([]string{}, f[0], f[2], f[3], f[4]), f[6:]...), " "))
		}
		return strings.Join(out, "\n")
	}
	if got, want := strip(remote.must(0, "log").stdout), strip(local.must(0, "log").stdout); got != want || strings.Count(got, "\n") != 1 {
		t.Fatalf("log remote:\n%s\nlocal:\n%s", got, want)
	}
	bl, br := filepath.Join(local.cwd, "l.amdb"), filepath.Join(local.cwd, "r.amdb")
	local.must(0, "export", "--closure", "-o", bl, res)
	remote.must(0, "export", "--closure", "-o", br, res)
	a, _ := os.ReadFile(bl)
	b, _ := os.ReadFile(br)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatal("remote export differs from local export")
	}
	other := &cli{t: t, cwd: t.TempDir()}
	other.store = startServe(t, filepath.Join(other.cwd, "store"))
	if r := other.must(0, "import", bl); !strings.HasPrefix(r.stdout, "imported 7 artifacts") {
		t.Fatalf("remote import: %q", r.stdout)
	}
	if r := other.must(0, "pel", "verify", res); !strings.Contains(r.stdout, "ok:") {
		t.Fatalf("verify on the server after import: %q", r.stdout)
	}
}

// withoutPacks drops du's pack lines and its JSON packs member, the one
// part of du that only the embedded store reports.
func withoutPacks(out string) string {
	var keep []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "pack") {
			continue
		}
		if i := strings.Index(l, `,"packs":`); i >= 0 && strings.HasPrefix(l, "{") {
			l = l[:i] + "}\n"
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "")
}
