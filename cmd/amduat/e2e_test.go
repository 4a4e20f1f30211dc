package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/amduatbin"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/internal/testexit"
	"github.com/amduat/amduat/internal/testparallel"
)

// amduatBin is the amduat executable built once by TestMain.
var amduatBin string

func TestMain(m *testing.M) {
	// The binary the end-to-end tests run is built with -race when the
	// tests are and AMDUAT_LONG=1 (.ci/run's long step): a race build of
	// the child runs its commands several times slower, and the packages
	// it is made of are tested under -race in their own tests, so the
	// README's test command runs the children without it (issue 25).
	// amduatbin keeps it for bench and the next run.
	bin, err := amduatbin.Build(raceEnabled && longtest.Enabled())
	if err != nil {
		fmt.Fprintln(os.Stderr, "building amduat:", err)
		os.Exit(1)
	}
	amduatBin = bin
	// The tests wait on their amduat children most of the time: three
	// per core keep the cores busy, and under load they finish the
	// package in 117 s instead of 156 (issue 25).
	if err := testparallel.Raise(3); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopSharedMinio()
	removeStoreTemplates()
	testexit.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary in cwd with the store dir store (AMDUAT_STORE) and
// the given stdin (nil: empty). env is added to the child's environment
// after this process's (a later entry wins), so that a test can set a
// variable for its own commands and still run in parallel (t.Setenv
// forbids it).
type cli struct {
	t     *testing.T
	cwd   string
	store string
	env   []string
}

func newCLI(t *testing.T) *cli {
	cwd := t.TempDir()
	return &cli{t: t, cwd: cwd, store: filepath.Join(cwd, "store")}
}

func (c *cli) runIn(stdin io.Reader, args ...string) result {
	c.t.Helper()
	return c.runTo(stdin, nil, args...)
}

// runTo runs the binary as runIn does, with its stdout written to stdout
// when that is not nil (result.stdout is then empty).
func (c *cli) runTo(stdin io.Reader, stdout io.Writer, args ...string) result {
	c.t.Helper()
	cmd := c.command(args...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdout != nil {
		cmd.Stdout = stdout
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("running amduat %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// command is the binary with args, to run in c.cwd on c.store with c.env.
func (c *cli) command(args ...string) *exec.Cmd {
	cmd := exec.Command(amduatBin, args...)
	cmd.Dir = c.cwd
	// Under -race the child reports races by exiting 66; atexit_sleep_ms
	// drops the race runtime's default one-second pause at exit.
	cmd.Env = append(append(os.Environ(), "AMDUAT_STORE="+c.store, "TMPDIR="+c.cwd, "GORACE=atexit_sleep_ms=20"), c.env...)
	return cmd
}

func (c *cli) run(args ...string) result { c.t.Helper(); return c.runIn(nil, args...) }

// must runs and requires exit code want.
func (c *cli) must(want int, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != want {
		c.t.Fatalf("amduat %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// mustStdout runs args, requires exit 0 and stdout exactly want. It
// compares stdout as it arrives instead of buffering it: a large get read
// into a bytes.Buffer and a string cost seconds of race-detector time per
// copy under -race (issue 25).
func (c *cli) mustStdout(want []byte, args ...string) {
	c.t.Helper()
	w := &sameBytes{want: want, diff: -1}
	r := c.runTo(nil, w, args...)
	if r.code != 0 {
		c.t.Fatalf("amduat %s: exit %d, want 0\nstderr: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	if w.diff >= 0 || w.off != len(want) {
		c.t.Fatalf("amduat %s: stdout of %d bytes differs from the %d wanted (first difference at byte %d, -1: none)", strings.Join(args, " "), w.off, len(want), w.diff)
	}
}

// sameBytes is a writer that compares what it is given with want: off
// counts the bytes written, diff is the offset of the first difference
// (-1 while there is none).
type sameBytes struct {
	want []byte
	off  int
	diff int
}

func (w *sameBytes) Write(p []byte) (int, error) {
	if w.diff < 0 {
		rest := w.want[min(w.off, len(w.want)):]
		n := min(len(p), len(rest))
		switch {
		case !bytes.Equal(p[:n], rest[:n]):
			i := 0
			for p[i] == rest[i] {
				i++
			}
			w.diff = w.off + i
		case len(p) > n:
			w.diff = w.off + n
		}
	}
	w.off += len(p)
	return len(p), nil
}

func (c *cli) write(name string, data []byte) string {
	c.t.Helper()
	p := filepath.Join(c.cwd, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// oneErrorLine checks that stderr is exactly one line in the documented
// format "amduat: CMD: ...".
func oneErrorLine(t *testing.T, r result, cmd string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.HasPrefix(lines[0], "amduat: "+cmd+": ") {
		t.Fatalf("stderr %q is not one line starting with %q", r.stderr, "amduat: "+cmd+": ")
	}
}

// oneJSON decodes stdout as exactly one JSON document.
func oneJSON(t *testing.T, stdout string, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(stdout))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if d.More() {
		t.Fatalf("stdout %q holds more than one JSON document", stdout)
	}
}

func lines(s string) []string { return strings.Fields(s) }

func TestInitPutGetHasStat(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.must(0, "init")
	r := c.must(exitStore, "init")
	oneErrorLine(t, r, "init")

	files := map[string][]byte{
		"hello.txt": []byte("hello"),
		"empty":     nil,
		"zeros":     make([]byte, 100<<10),
		"big":       demoBytes("e2e big", 5<<20+3), // above the 4 MiB stream threshold
	}
	names := []string{"hello.txt", "empty", "zeros", "big"}
	var args []string
	for _, n := range names {
		args = append(args, c.write(n, files[n]))
	}
	stdinData := []byte("from stdin")
	r = c.runIn(bytes.NewReader(stdinData), append([]string{"put"}, append(args[:2:2], append([]string{"-"}, args[2:]...)...)...)...)
	if r.code != 0 {
		t.Fatalf("put: %d %s", r.code, r.stderr)
	}
	got := lines(r.stdout)
	wantRefs := []asl.Reference{
		asl.MustDerive(asl.HashSHA256, asl.Untagged(files["hello.txt"])),
		asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)),
		asl.MustDerive(asl.HashSHA256, asl.Untagged(stdinData)),
		asl.MustDerive(asl.HashSHA256, asl.Untagged(files["zeros"])),
		asl.MustDerive(asl.HashSHA256, asl.Untagged(files["big"])),
	}
	if len(got) != len(wantRefs) {
		t.Fatalf("put printed %q", r.stdout)
	}
	for i, w := range wantRefs {
		if got[i] != w.String() {
			t.Errorf("ref %d = %s, want %s", i, got[i], w)
		}
	}

	// get to stdout and to a file, for every artifact.
	contents := [][]byte{files["hello.txt"], nil, stdinData, files["zeros"], files["big"]}
	for i, ref := range wantRefs {
		c.mustStdout(contents[i], "get", ref.String())
		out := filepath.Join(c.cwd, "out", fmt.Sprint(i))
		os.MkdirAll(filepath.Dir(out), 0o755)
		c.must(0, "get", ref.String(), "-o", out)
		if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, contents[i]) {
			t.Errorf("get -o %s: %v", ref, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(c.cwd, "out", ".*")); len(left) != 0 {
		t.Fatalf("temporary files left by get -o: %v", left)
	}

	// put --type-tag and --hash; --json.
	var pr putResult
	oneJSON(t, c.must(0, "--json", "put", "--type-tag", "0x101", "--hash", "blake3", args[0]).stdout, &pr)
	want := asl.MustDerive(asl.HashBLAKE3, asl.Tagged(0x101, files["hello.txt"]))
	if pr.Hash != "blake3" || len(pr.Artifacts) != 1 || pr.Artifacts[0].Ref != want || pr.Artifacts[0].TypeTag == nil ||
		*pr.Artifacts[0].TypeTag != 0x101 || pr.Artifacts[0].Source != args[0] || pr.Artifacts[0].Size != 5 {
		t.Fatalf("put --json = %+v, want ref %s", pr, want)
	}

	// has: exit 0 when all present, 1 otherwise; text and JSON.
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("missing")))
	r = c.must(0, "has", wantRefs[0].String(), want.String())
	if r.stdout != wantRefs[0].String()+" present\n"+want.String()+" present\n" {
		t.Fatalf("has stdout %q", r.stdout)
	}
	r = c.must(exitNegative, "has", wantRefs[0].String(), missing.String())
	if r.stdout != wantRefs[0].String()+" present\n"+missing.String()+" missing\n" || r.stderr != "" {
		t.Fatalf("has stdout %q stderr %q", r.stdout, r.stderr)
	}
	var hr hasResult
	oneJSON(t, c.must(exitNegative, "--json", "has", missing.String(), wantRefs[1].String()).stdout, &hr)
	if hr.AllPresent || len(hr.Refs) != 2 || hr.Refs[0].Present || !hr.Refs[1].Present || hr.Refs[0].Ref != missing {
		t.Fatalf("has --json = %+v", hr)
	}

	// stat, text and JSON.
	r = c.must(0, "stat", want.String(), wantRefs[3].String())
	statLines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(statLines) != 2 || statLines[0] != want.String()+" size=5 type_tag=0x00000101 stored_size=5 compression=none" {
		t.Fatalf("stat stdout %q", r.stdout)
	}
	if !regexp.MustCompile(`^` + wantRefs[3].String() + ` size=102400 type_tag=none stored_size=\d+ compression=zstd$`).MatchString(statLines[1]) {
		t.Fatalf("stat zeros: %q", statLines[1])
	}
	var sr struct {
		Artifacts []statItem `json:"artifacts"`
	}
	oneJSON(t, c.must(0, "--json", "stat", wantRefs[4].String(), want.String()).stdout, &sr)
	if len(sr.Artifacts) != 2 || sr.Artifacts[0].Size != 5<<20+3 || sr.Artifacts[0].TypeTag != nil ||
		sr.Artifacts[1].TypeTag == nil || *sr.Artifacts[1].TypeTag != 0x101 || sr.Artifacts[0].StoredSize <= 0 {
		t.Fatalf("stat --json = %+v", sr)
	}
	r = c.must(exitNotFound, "stat", missing.String())
	oneErrorLine(t, r, "stat")

	// A clean store verifies.
	r = c.must(0, "verify")
	if r.stdout != fmt.Sprintf("checked 6 of 6 artifacts (%d bytes): 0 corrupt, 0 failed\n", 5+0+len(stdinData)+100<<10+5<<20+3+5) {
		t.Fatalf("verify stdout %q", r.stdout)
	}
}

func TestPutStdinLargePipeAndFile(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.must(0, "init", "--hash", "blake3")
	data := demoBytes("stdin", 4<<20+100) // above the threshold: spooled from a pipe
	want := asl.MustDerive(asl.HashBLAKE3, asl.Untagged(data)).String() + "\n"
	// bytes.Reader is not an *os.File, so the child's stdin is a pipe.
	if r := c.runIn(bytes.NewReader(data), "put"); r.code != 0 || r.stdout != want {
		t.Fatalf("put from pipe: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// A regular file as stdin has a known size and streams directly.
	f, err := os.Open(c.write("in", data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r := c.runIn(f, "put", "-"); r.code != 0 || r.stdout != want {
		t.Fatalf("put from file stdin: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(c.cwd, "amduat-put-*")); len(left) != 0 {
		t.Fatalf("spool files left: %v", left)
	}
	r := c.must(exitUsage, "put", "-", "-")
	oneErrorLine(t, r, "put")
}

// corrupt flips one byte of every stored copy of needle, standing in for
// disk damage: in the pack files (where the store keeps payloads) and in
// the values of the store's Pebble database, opened directly (payloads of
// the version 2 layout).
func corrupt(t *testing.T, dir string, needle []byte) int {
	t.Helper()
	n := 0
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
	for _, p := range packs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		changed := false
		for at := 0; ; {
			i := bytes.Index(b[at:], needle)
			if i < 0 {
				break
			}
			b[at+i+len(needle)/2] ^= 0x40
			at += i + len(needle)
			n++
			changed = true
		}
		if changed {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n + corruptValues(t, dir, needle)
}

// corruptValues flips one byte in every value of the store's Pebble
// database that holds needle.
func corruptValues(t *testing.T, dir string, needle []byte) int {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLog{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	type kv struct{ k, v []byte }
	var damaged []kv
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(v, needle); i >= 0 {
			nv := bytes.Clone(v)
			nv[i+len(needle)/2] ^= 0x40
			damaged = append(damaged, kv{bytes.Clone(it.Key()), nv})
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range damaged {
		if err := db.Set(d.k, d.v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	return len(damaged)
}

type quietLog struct{}

func (quietLog) Infof(string, ...any)         {}
func (quietLog) Errorf(string, ...any)        {}
func (quietLog) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

func TestVerifyDetectsCorruption(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	small := demoBytes("inline", 8<<10)    // kept inside its index record
	large := demoBytes("chunked", 300<<10) // kept as a separate chunk
	other := []byte("an intact artifact")
	refs := lines(c.must(0, "put", c.write("small", small), c.write("large", large), c.write("other", other)).stdout)
	if len(refs) != 3 {
		t.Fatalf("put printed %v", refs)
	}
	c.must(0, "verify")

	if n := corrupt(t, c.store, small[4000:4064]); n != 1 {
		t.Fatalf("small artifact found in %d values", n)
	}
	if n := corrupt(t, c.store, large[200000:200064]); n != 1 {
		t.Fatalf("large artifact found in %d values", n)
	}

	r := c.must(exitIntegrity, "verify")
	if !strings.HasPrefix(r.stdout, "checked 3 of 3 artifacts (") || !strings.HasSuffix(r.stdout, "): 2 corrupt, 0 failed\n") {
		t.Fatalf("verify stdout %q", r.stdout)
	}
	errLines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(errLines) != 2 {
		t.Fatalf("verify stderr %q, want two failure lines", r.stderr)
	}
	for _, l := range errLines {
		if !strings.HasPrefix(l, "amduat: verify: ") || !(strings.Contains(l, refs[0]) || strings.Contains(l, refs[1])) {
			t.Errorf("failure line %q", l)
		}
	}
	var vr verifyResult
	oneJSON(t, c.must(exitIntegrity, "--json", "verify").stdout, &vr)
	if vr.Corrupt != 2 || vr.Failed != 0 || vr.Checked != 3 || len(vr.Failures) != 2 || !vr.Failures[0].Integrity {
		t.Fatalf("verify --json = %+v", vr)
	}
	// Samples are deterministic: the same sample twice gives the same answer.
	a := c.run("--json", "verify", "--sample", "2")
	b := c.run("--json", "verify", "--sample", "2")
	if a.stdout != b.stdout || a.code != b.code {
		t.Fatalf("sample runs differ:\n%s\n%s", a.stdout, b.stdout)
	}

	// get of a damaged artifact: integrity exit code, nothing written.
	for _, ref := range refs[:2] {
		out := filepath.Join(c.cwd, "got")
		r := c.must(exitIntegrity, "get", ref, "-o", out)
		oneErrorLine(t, r, "get")
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("get -o left %s after an integrity error", out)
		}
		if left, _ := filepath.Glob(filepath.Join(c.cwd, ".got*")); len(left) != 0 {
			t.Fatalf("temporary files left: %v", left)
		}
		c.must(exitIntegrity, "get", ref)
	}
	if r := c.must(0, "get", refs[2]); r.stdout != string(other) {
		t.Fatalf("intact artifact reads %q", r.stdout)
	}
}

// TestConformanceRun: `amduat conformance run` passes every vector,
// embedded (--json) and from the checked-in directory (text); a tampered
// vector fails with exit 1; generate reproduces the checked-in files. Each
// whole run costs about 1.5 CPU-seconds, so the default run passes every
// vector once (embedded, --json; the same files as vectors/, which
// generate reproduces) and reads a directory only in the tampered run;
// AMDUAT_LONG=1 adds the text runs of the checked-in directory and of the
// embedded vectors (internal/longtest; issue 25).
func TestConformanceRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	vecDir, err := filepath.Abs("../../vectors")
	if err != nil {
		t.Fatal(err)
	}
	summary := regexp.MustCompile(`(?m)\A(?:.*\n)*(\d+) passed, 0 failed\n\z`)
	var runs [][]string
	if longtest.Enabled() {
		runs = [][]string{{"conformance", "run", vecDir}, {"conformance", "run"}}
	}
	for _, args := range runs {
		r := c.must(0, args...)
		if !summary.MatchString(r.stdout) || r.stdout != lastLine(r.stdout)+"\n" {
			t.Fatalf("%v: stdout %q", args, r.stdout)
		}
	}
	var cr conformanceResult
	oneJSON(t, c.must(0, "--json", "conformance", "run").stdout, &cr)
	if cr.Failed != 0 || cr.Passed < 100 || len(cr.Results) != cr.Passed || cr.Source != "embedded" {
		t.Fatalf("conformance --json: %+v", cr)
	}

	// A tampered vector fails with exit 1 and a FAIL line.
	vec, err := os.ReadFile(filepath.Join(vecDir, "asl.derive.json"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(c.cwd, "bad")
	os.MkdirAll(bad, 0o755)
	tampered := bytes.Replace(vec, []byte(`"reference": "0001`), []byte(`"reference": "0002`), 1)
	os.WriteFile(filepath.Join(bad, "asl.derive.json"), tampered, 0o644)
	r := c.must(exitNegative, "conformance", "run", bad)
	if !strings.HasPrefix(r.stdout, "FAIL asl.derive.sha256.") || !strings.HasSuffix(r.stdout, " passed, 1 failed\n") {
		t.Fatalf("tampered run stdout %q", r.stdout)
	}
	r = c.must(exitIO, "conformance", "run", filepath.Join(c.cwd, "nope"))
	oneErrorLine(t, r, "conformance run")

	// generate reproduces the checked-in files.
	gen := filepath.Join(c.cwd, "gen")
	c.must(0, "conformance", "generate", gen)
	files, _ := filepath.Glob("../../vectors/*.json")
	if len(files) == 0 {
		t.Fatal("no vector files")
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(gen, filepath.Base(f)))
		if err != nil && strings.HasPrefix(filepath.Base(f), "asl") {
			t.Fatal(err)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Errorf("generate: %s differs from the checked-in file", filepath.Base(f))
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestDemo: `amduat --json demo --dir DIR` runs every step and keeps a
// store that verifies and holds the demo's artifacts; a second demo into
// the same directory fails with one error line (exit 7), or one --json
// document. A whole demo costs some 2.5 CPU-seconds, so the default run
// makes one; AMDUAT_LONG=1 adds the plain `amduat demo` in text mode, whose
// temporary directory under TMPDIR is removed (internal/longtest; issue 25).
func TestDemo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if longtest.Enabled() {
		r := c.must(0, "demo")
		if !regexp.MustCompile(`demo: all \d+ steps ok; temporary directory removed\n\z`).MatchString(r.stdout) || r.stderr != "" {
			t.Fatalf("demo stdout %q stderr %q", r.stdout, r.stderr)
		}
		// The temporary directory lived under TMPDIR (the test's cwd) and is gone.
		if left, _ := filepath.Glob(filepath.Join(c.cwd, "amduat-demo-*")); len(left) != 0 {
			t.Fatalf("demo left %v", left)
		}
	}

	keep := filepath.Join(c.cwd, "keep")
	var dr demoResult
	oneJSON(t, c.must(0, "--json", "demo", "--dir", keep).stdout, &dr)
	if !dr.OK || !dr.Kept || dr.Store != filepath.Join(keep, "store") || len(dr.Steps) < 8 {
		t.Fatalf("demo --json = %+v", dr)
	}
	for _, s := range dr.Steps {
		if !s.OK || s.Error != "" || len(s.Details) == 0 {
			t.Errorf("step %+v", s)
		}
	}
	r := c.must(0, "--store", dr.Store, "verify")
	if !strings.HasSuffix(r.stdout, ": 0 corrupt, 0 failed\n") {
		t.Fatalf("verify of the kept demo store: %q", r.stdout)
	}
	// The kept store holds the demo's hello artifact.
	hello := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello, amduat\n"))).String()
	c.must(0, "--store", dr.Store, "has", hello)

	r = c.must(exitStore, "demo", "--dir", keep)
	oneErrorLine(t, r, "demo")
	var fr demoResult
	oneJSON(t, c.must(exitStore, "--json", "demo", "--dir", keep).stdout, &fr)
	if fr.OK || len(fr.Steps) != 1 || fr.Steps[0].OK || fr.Steps[0].Error == "" {
		t.Fatalf("failed demo --json = %+v", fr)
	}
}

type errorDoc struct {
	Error   string `json:"error"`
	Code    int    `json:"code"`
	Command string `json:"command"`
}

// TestErrorsOneLineWithCodes: every failing command prints one error line
// on stderr and exits with its documented code (SPECS.md §16.2); with
// --json it prints the error document. The default run checks the --json
// document for one case of each exit code, AMDUAT_LONG=1 for every case.
func TestErrorsOneLineWithCodes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	sha0 := "0001" + strings.Repeat("00", 32)
	// Before init: no store.
	for _, args := range [][]string{{"put", "x"}, {"get", sha0}, {"has", sha0}, {"stat", sha0}, {"verify"}} {
		r := c.must(exitStore, args...)
		oneErrorLine(t, r, args[0])
	}
	c.initStore()
	dirArg := c.cwd
	// The --json error document follows one rule for every failure: the
	// default run checks it for the unknown command and the first case
	// of each exit code, AMDUAT_LONG=1 for every case (internal/longtest).
	jsonChecked := map[int]bool{}
	for _, tt := range []struct {
		args []string
		code int
		cmd  string
	}{
		{[]string{"frobnicate"}, exitUsage, ""},
		{[]string{"put", "--bogus"}, exitUsage, "put"},
		{[]string{"get"}, exitUsage, "get"},
		{[]string{"get", "a", "b"}, exitUsage, "get"},
		{[]string{"get", "zz"}, exitUsage, "get"},
		{[]string{"get", "0001ABCD"}, exitUsage, "get"},
		{[]string{"has"}, exitUsage, "has"},
		{[]string{"init", "--hash", "md5"}, exitUsage, "init"},
		{[]string{"put", "--hash", "md5", "x"}, exitUsage, "put"},
		{[]string{"put", "--type-tag", "0x1ffffffff", "x"}, exitUsage, "put"},
		{[]string{"verify", "--sample", "0%"}, exitUsage, "verify"},
		{[]string{"conformance", "generate"}, exitUsage, "conformance generate"},
		{[]string{"conformance", "generate", "g", "no.such.category"}, exitUsage, "conformance generate"},
		{[]string{"get", sha0}, exitNotFound, "get"},
		{[]string{"stat", "zz"}, exitUsage, "stat"}, // stat of a missing REF reports it in its result (listing_refs_e2e_test.go)
		{[]string{"get", "7777abcd"}, exitUnsupported, "get"},
		{[]string{"has", "7777abcd"}, exitUnsupported, "has"},
		{[]string{"put", "does-not-exist"}, exitIO, "put"},
		{[]string{"put", dirArg}, exitUsage, "put"},
		{[]string{"init"}, exitStore, "init"},
	} {
		r := c.run(tt.args...)
		if r.code != tt.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tt.args, r.code, tt.code, r.stderr)
			continue
		}
		if tt.cmd == "" {
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "amduat: ") {
				t.Errorf("%v: stderr %q", tt.args, r.stderr)
			}
		} else {
			oneErrorLine(t, r, tt.cmd)
		}
		if !longtest.Enabled() && jsonChecked[tt.code] && tt.cmd != "" {
			continue
		}
		jsonChecked[tt.code] = true
		var ed errorDoc
		jargs := append([]string{"--json"}, tt.args...)
		if tt.args[0] == "get" && tt.code != exitUsage {
			jargs = append(jargs, "-o", filepath.Join(c.cwd, "out")) // get --json needs -o
		}
		rj := c.run(jargs...)
		oneJSON(t, rj.stdout, &ed)
		if rj.code != tt.code || ed.Code != tt.code || ed.Error == "" || ed.Command != tt.cmd ||
			!strings.HasSuffix(strings.TrimSpace(rj.stderr), ed.Error) {
			t.Errorf("%v --json: exit %d, doc %+v, stderr %q", tt.args, rj.code, ed, rj.stderr)
		}
	}
}

func TestJSONOutputs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ir initResult
	oneJSON(t, c.must(0, "--json", "init", "--hash", "blake3").stdout, &ir)
	if ir.Hash != "blake3" || ir.HashID != 0x8001 || ir.Store != c.store {
		t.Fatalf("init --json = %+v", ir)
	}
	ref := lines(c.runIn(strings.NewReader("x"), "put").stdout)[0]
	if ref != asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("x"))).String() {
		t.Fatalf("put used %s, want the store's blake3 default", ref)
	}
	out := filepath.Join(c.cwd, "x.out")
	var gr getResult
	oneJSON(t, c.must(0, "--json", "get", ref, "-o", out).stdout, &gr)
	if gr.Ref.String() != ref || gr.Size != 1 || gr.Output != out || gr.TypeTag != nil {
		t.Fatalf("get --json = %+v", gr)
	}
	var vr verifyResult
	oneJSON(t, c.must(0, "--json", "verify", "--sample", "100%", "--seed", "s").stdout, &vr)
	if vr.Checked != 1 || vr.Sample == nil || *vr.Sample != "100%" || vr.Seed != "s" || vr.Failures == nil {
		t.Fatalf("verify --json = %+v", vr)
	}
	var v versionResult
	oneJSON(t, c.must(0, "--json", "version").stdout, &v)
	if v.Go == "" || v.VectorsFormat != "amduat-vectors/1" {
		t.Fatalf("version --json = %+v", v)
	}
	var g struct {
		Files []string `json:"files"`
	}
	oneJSON(t, c.must(0, "--json", "conformance", "generate", filepath.Join(c.cwd, "v")).stdout, &g)
	if len(g.Files) == 0 {
		t.Fatal("generate --json listed no files")
	}
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.must(0, "--help")
	for _, want := range []string{"Exit codes:", "4    integrity error", "10-19", "AMDUAT_STORE", "--json"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, sub := range []string{"init", "put", "get", "has", "stat", "verify", "salvage", "conformance", "demo", "version"} {
		if !strings.Contains(r.stdout, "\n  "+sub+" ") {
			t.Errorf("--help does not list %s", sub)
		}
	}
}

// TestSalvage: salvage copies every artifact of a store whose MANIFEST is
// damaged into a new store, which then reads and verifies; its --json and
// exit codes are as documented (SPECS.md §16.3); the damaged store itself
// rebuilds its index at its next open.
func TestSalvage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.must(0, "init", "--hash", "blake3")
	small := []byte("a small artifact")
	large := demoBytes("salvaged large", 700<<10)
	refs := lines(c.must(0, "put", c.write("small", small), c.write("large", large)).stdout)
	if len(refs) != 2 {
		t.Fatalf("put printed %v", refs)
	}
	to := filepath.Join(c.cwd, "rescued")
	r := c.must(exitUsage, "salvage")
	oneErrorLine(t, r, "salvage")
	c.must(exitUsage, "salvage", "--to", c.store)
	var clean salvageResult
	oneJSON(t, c.must(0, "--json", "salvage", "--to", to).stdout, &clean)
	if clean.Artifacts != 2 || clean.FromPacks != 2 || len(clean.Lost) != 0 || len(clean.Damage) != 0 || clean.Hash != "blake3" {
		t.Fatalf("salvage of an intact store: %+v", clean)
	}
	r = c.must(exitStore, "salvage", "--to", to)
	oneErrorLine(t, r, "salvage")
	c.must(exitStore, "--store", filepath.Join(c.cwd, "none"), "salvage", "--to", filepath.Join(c.cwd, "x"))

	// Damage the MANIFEST: salvage reads around it.
	manifests, _ := filepath.Glob(filepath.Join(c.store, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST")
	}
	current := manifests[len(manifests)-1] // the newest (names sort by number)
	b, err := os.ReadFile(current)
	if err != nil {
		t.Fatal(err)
	}
	for i := 8; i < len(b); i += 16 {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(current, b, 0o644); err != nil {
		t.Fatal(err)
	}
	to2 := filepath.Join(c.cwd, "rescued2")
	r = c.must(exitIntegrity, "salvage", "--to", to2)
	if !strings.HasPrefix(r.stdout, "salvaged 2 artifacts ("+fmt.Sprint(len(small)+len(large))+" bytes) into "+to2+": 0 lost, ") {
		t.Fatalf("salvage stdout %q", r.stdout)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if !strings.HasPrefix(l, "amduat: salvage: ") || !strings.Contains(l, "ERR_INTEGRITY") {
			t.Errorf("salvage stderr line %q", l)
		}
	}
	if got := c.must(0, "--store", to2, "get", refs[1]).stdout; got != string(large) {
		t.Fatal("salvaged large artifact differs")
	}
	if got := c.must(0, "--store", to2, "get", refs[0]).stdout; got != string(small) {
		t.Fatal("salvaged small artifact differs")
	}
	c.must(0, "--store", to2, "verify")
	// The damaged store itself: the first command rebuilds its index from
	// the packs and says so on stderr (SPECS.md §6.4, "Rebuilding the
	// index"); the default hash is kept.
	r = c.must(0, "get", refs[0])
	if r.stdout != string(small) || !strings.Contains(r.stderr, "rebuilt it from the packs: 2 artifacts indexed") {
		t.Fatalf("get after the damage: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	c.must(0, "verify")
	refs2 := lines(c.must(0, "put", c.write("again", small)).stdout)
	if len(refs2) != 1 || refs2[0] != refs[0] {
		t.Fatalf("put after the rebuild: %v, want %s (the store's blake3 default kept)", refs2, refs[0])
	}
}
