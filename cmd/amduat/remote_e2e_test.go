package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amduat/amduat/internal/longtest"
)

// startServe runs `amduat serve` on the store directory dir (initialised
// here) on a free loopback port and returns its URL; the server is stopped
// with SIGTERM at the end of the test, and must exit 0.
func startServe(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	if out, err := exec.Command(amduatBin, "--store", dir, "init").CombinedOutput(); err != nil {
		t.Fatalf("init %s: %v: %s", dir, err, out)
	}
	return serveStore(t, dir, extra...)
}

// serveStore is startServe of an existing store.
func serveStore(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	args := []string{"--store", dir, "--json", "serve"}
	if !slices.Contains(extra, "--unix") {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	args = append(args, extra...)
	cmd := exec.Command(amduatBin, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=20")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("serve printed no address: %v; log: %s", err, log)
	}
	var info serveJSON
	if err := json.Unmarshal([]byte(line), &info); err != nil || !(strings.Contains(info.URL, "://127.0.0.1:") || strings.HasPrefix(info.URL, "unix:")) {
		t.Fatalf("serve --json printed %q: %v", line, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				log, _ := os.ReadFile(logf.Name())
				t.Errorf("serve exited with %v after SIGTERM; log: %s", err, log)
			}
		case <-time.After(time.Minute): // a hang, not a timing
			cmd.Process.Kill()
			t.Error("serve did not stop within a minute of SIGTERM")
		}
	})
	return info.URL
}

// TestRemoteSameOutput runs one session of commands against a store
// directory and against a server over an identical store, and requires the
// same exit code, stdout and stderr from every command (SPECS.md §16.6).
// Every command of the session runs in text mode and most of them with
// --json too; the default run leaves out five output-mode variants of
// commands it runs otherwise (--json of put, has, pel build and of a
// program's pel show, and pel run --output-raw), which AMDUAT_LONG=1 adds
// (internal/longtest; issue 25).
func TestRemoteSameOutput(t *testing.T) {
	t.Parallel()
	local := newCLI(t)
	local.initStore()
	remote := newCLI(t)
	remote.store = startServe(t, filepath.Join(t.TempDir(), "served"))

	files := map[string][]byte{
		"hello.txt": []byte("hello"),
		"a.txt":     []byte("hello, "),
		"b.txt":     []byte("amduat\n"),
		"empty":     nil,
		"zeros":     make([]byte, 300<<10),
		"big":       demoBytes("remote big", 5<<20+7), // streamed, several chunks
		"greet.json": []byte(`{"nodes":[
  {"id":1,"op":"pel.bytes.const","version":1,"params":{"text":"Dear "}},
  {"id":2,"op":"pel.bytes.concat","version":1,"inputs":[{"node":1},{"input":0}]},
  {"id":3,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":2}]}
],"roots":[{"node":2},{"node":3}]}`),
	}
	for name, b := range files {
		local.write(name, b)
		remote.write(name, b)
	}
	vars := map[string]string{}
	// first word of the local stdout, kept as a variable for later steps
	keep := func(name string) func(r result) {
		return func(r result) { vars[name] = strings.Fields(r.stdout)[0] }
	}
	keepLine := func(name, key string) func(r result) {
		return func(r result) {
			for _, l := range strings.Split(r.stdout, "\n") {
				if v, ok := strings.CutPrefix(l, key+" "); ok {
					vars[name] = v
				}
			}
		}
	}
	missing := "0001" + strings.Repeat("ab", 32)
	steps := []struct {
		args  []string
		stdin string
		after func(result)
		long  bool // run under AMDUAT_LONG=1 only
	}{
		{args: []string{"put", "hello.txt", "empty", "zeros", "big"}},
		{args: []string{"--json", "put", "a.txt", "b.txt"}, long: true},
		{args: []string{"put", "a.txt"}, after: keep("a")},
		{args: []string{"put", "b.txt"}, after: keep("b")},
		{args: []string{"put", "big"}, after: keep("big")},
		{args: []string{"put", "--type-tag", "0x101", "hello.txt"}, after: keep("tagged")},
		{args: []string{"put", "--hash", "blake3", "-"}, stdin: "from stdin"},
		{args: []string{"get", "$big"}},
		{args: []string{"get", "-o", "out.bin", "$a"}},
		{args: []string{"--json", "get", "-o", "out2.bin", "$tagged"}},
		{args: []string{"has", "$a", "$b", missing}},
		{args: []string{"--json", "has", "$a"}, long: true},
		{args: []string{"stat", "$a", "$tagged", "$big"}},
		{args: []string{"--json", "stat", "$big"}},
		{args: []string{"get", missing}},
		{args: []string{"--json", "stat", missing}},
		{args: []string{"get", "0001zz"}},
		{args: []string{"pel", "seed", "concat"}, after: keep("concat")},
		{args: []string{"pel", "build", "greet.json"}, after: keep("greet")},
		{args: []string{"--json", "pel", "build", "greet.json"}, long: true},
		{args: []string{"pel", "run", "--program", "$concat", "--input", "$a", "--input", "$b"}, after: keepLine("result", "result_ref")},
		{args: []string{"--json", "pel", "run", "--program", "$concat", "--input", "$a", "--input", "$b"}},
		{args: []string{"pel", "run", "--program", "$concat", "--input", "$a", "--input", "$b", "--output-raw"}, long: true},
		{args: []string{"pel", "run", "--quiet", "--program", "$greet", "--input", "$b"}, after: keep("greeting")},
		{args: []string{"pel", "run", "--program", "$concat", "--input", "$a"}, after: keepLine("failed", "result_ref")},
		{args: []string{"pel", "run", "--no-cache", "--max-nodes", "1", "--program", "$greet", "--input", "$b"}},
		{args: []string{"pel", "show", "$result"}, after: keepLine("trace", "trace_ref")},
		{args: []string{"--json", "pel", "show", "$result"}},
		{args: []string{"pel", "show", "$trace"}},
		{args: []string{"pel", "show", "--dot", "$failed"}},
		{args: []string{"--json", "pel", "show", "$greet"}, long: true},
		{args: []string{"pel", "show", "$a"}},
		{args: []string{"pel", "verify", "$result"}},
		{args: []string{"--json", "pel", "verify", "$failed"}},
		{args: []string{"prov", "why", "$greeting"}},
		{args: []string{"--json", "prov", "uses", "$b"}},
		{args: []string{"prov", "why", "--dot", "$greeting"}},
		{args: []string{"verify"}},
		{args: []string{"--json", "verify", "--sample", "50%"}},
	}
	for _, st := range steps {
		if st.long && !longtest.Enabled() {
			continue
		}
		args := make([]string, len(st.args))
		for i, a := range st.args {
			if v, ok := strings.CutPrefix(a, "$"); ok {
				if vars[v] == "" {
					t.Fatalf("%v: variable %s not set", st.args, v)
				}
				a = vars[v]
			}
			args[i] = a
		}
		var lr, rr result
		if st.stdin != "" {
			lr, rr = local.runIn(strings.NewReader(st.stdin), args...), remote.runIn(strings.NewReader(st.stdin), args...)
		} else {
			lr, rr = local.run(args...), remote.run(args...)
		}
		if lr.code != rr.code || lr.stdout != rr.stdout || lr.stderr != rr.stderr {
			t.Errorf("amduat %s differs:\ndirectory: exit %d\nstdout: %.2000s\nstderr: %s\nserver: exit %d\nstdout: %.2000s\nstderr: %s",
				strings.Join(args, " "), lr.code, lr.stdout, lr.stderr, rr.code, rr.stdout, rr.stderr)
		}
		if st.after != nil && lr.stdout != "" {
			st.after(lr)
		}
	}
	for _, name := range []string{"out.bin", "out2.bin"} {
		l, _ := os.ReadFile(filepath.Join(local.cwd, name))
		r, _ := os.ReadFile(filepath.Join(remote.cwd, name))
		if string(l) != string(r) || len(l) == 0 {
			t.Errorf("get -o %s: %d bytes from the directory, %d from the server", name, len(l), len(r))
		}
	}
	// What a directory store and a server refuse differently, each with
	// its one documented line.
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"init"}, exitUsage},
		{[]string{"prov", "reindex"}, exitUnsupported},
	} {
		r := remote.run(c.args...)
		if r.code != c.code {
			t.Errorf("amduat %v against a server: exit %d, want %d: %s", c.args, r.code, c.code, r.stderr)
		}
		oneErrorLine(t, r, strings.Join(c.args, " "))
	}
}
