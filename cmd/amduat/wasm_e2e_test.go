package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/wasmop/examples"
)

// End-to-end tests of `amduat wasm`, of programs using amduat.wasm.run
// through pel build/run/show/verify and a server, and of the README's
// walkthrough, through the binary built by TestMain.

// wordcountProgram is a JSON program running the wordcount example with
// readable params.
const wordcountProgram = `{"nodes":[{"id":1,"op":"amduat.wasm.run","version":1,
  "inputs":[{"input":0},{"input":1}],
  "params":{"export":"wordcount","outputs":1,"max_memory_pages":1024,"max_output_bytes":64}}],
 "roots":[{"node":1,"output":0}]}`

// TestWasmAddInspect: `amduat wasm add` stores a module under its
// untagged reference, `wasm inspect` (text and --json) describes it, and
// the rejections exit with their codes. Every add or inspect of the 2.7 MB
// example costs some 0.7 CPU-seconds (the module is validated and
// compiled), so the default run checks --json on inspect only;
// AMDUAT_LONG=1 adds `--json wasm add` (internal/longtest; issue 25).
func TestWasmAddInspect(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	mod := c.write("wordcount.wasm", examples.Wordcount().Module)
	ref := strings.TrimSpace(c.must(0, "wasm", "add", mod).stdout)
	if ref != untaggedRef(examples.Wordcount().Module) {
		t.Fatalf("wasm add printed %q, want the untagged reference of the file", ref)
	}
	out := c.must(0, "wasm", "inspect", ref).stdout
	for _, want := range []string{
		"module " + ref + "\n", fmt.Sprintf("size %d\n", len(examples.Wordcount().Module)), "memory min_pages 39 max_pages none\n",
		"export func wordcount () -> (i32)\n", "export func _initialize () -> ()\n", "export memory memory\n",
		"import func amduat.input_read (i32, i64, i32, i32) -> (i32)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("wasm inspect lacks %q:\n%s", want, out)
		}
	}
	var j moduleJSON
	oneJSON(t, c.must(0, "--json", "wasm", "inspect", ref).stdout, &j)
	if j.Ref.String() != ref || j.Memory.MinPages != 39 || j.Memory.MaxPages != nil || len(j.Exports) != 3 || j.Exports[1].Name != "wordcount" {
		t.Errorf("wasm inspect --json: %+v", j)
	}
	if longtest.Enabled() {
		var aj moduleJSON
		oneJSON(t, c.must(0, "--json", "wasm", "add", mod).stdout, &aj)
		if aj.Ref.String() != ref || aj.Size != uint64(len(examples.Wordcount().Module)) {
			t.Errorf("wasm add --json: %+v", aj)
		}
	}

	// Rejections: not a module (exit 2, nothing stored), a missing file,
	// a stored artifact that is not a module, a missing reference.
	junk := c.write("junk.wasm", []byte("\x00asm\x01\x00\x00\x00\x05"))
	r := c.must(2, "wasm", "add", junk)
	if !strings.Contains(r.stderr, "not a module amduat.wasm.run accepts") || !strings.Contains(r.stderr, "0x01010001") {
		t.Errorf("wasm add junk: %q", r.stderr)
	}
	c.must(1, "has", untaggedRef([]byte("\x00asm\x01\x00\x00\x00\x05")))
	c.must(6, "wasm", "add", filepath.Join(c.cwd, "absent.wasm"))
	text := c.putData([]byte("not wasm"))
	c.must(2, "wasm", "inspect", text)
	c.must(3, "wasm", "inspect", untaggedRef([]byte("never stored")))
	c.must(2, "wasm", "add")
}

func TestWasmPELRun(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	mod := strings.TrimSpace(c.must(0, "wasm", "add", c.write("wordcount.wasm", examples.Wordcount().Module)).stdout)
	prog := strings.TrimSpace(c.must(0, "pel", "build", c.write("wc.json", []byte(wordcountProgram))).stdout)
	text := c.write("text.txt", []byte("one two  three\nfour\n"))
	r := c.must(0, "pel", "run", "--program", prog, "--input", mod, "--input-file", text, "--output-raw")
	if r.stdout != "4\n" {
		t.Fatalf("wordcount output %q, want \"4\\n\"", r.stdout)
	}
	if st, err := os.Stat(filepath.Join(c.store, wasmCacheName)); err != nil || !st.IsDir() {
		t.Errorf("no compilation cache in the store: %v", err)
	}
	// The run is recorded like any other: show renders readable params,
	// --json round-trips through pel build, verify replays it.
	show := c.must(0, "pel", "show", prog).stdout
	if !strings.Contains(show, `params {"export":"wordcount","outputs":1,"max_memory_pages":1024,"max_output_bytes":64}`) || !strings.Contains(show, "valid") {
		t.Errorf("pel show:\n%s", show)
	}
	js := c.must(0, "--json", "pel", "show", prog).stdout
	if again := strings.TrimSpace(c.runIn(strings.NewReader(js), "pel", "build", "-").stdout); again != prog {
		t.Errorf("pel show --json | pel build -: %q, want %q", again, prog)
	}
	res := runLines(t, c.must(0, "pel", "run", "--program", prog, "--input", mod, "--input-file", text).stdout)
	c.must(0, "pel", "verify", res["result_ref"])

	// The module's own failure: status RUNTIME_FAILED, exit 14, its code
	// and message in the diagnostic.
	prog3 := strings.TrimSpace(c.must(0, "pel", "build", c.write("wc3.json",
		[]byte(strings.Replace(wordcountProgram, `{"input":1}]`, `{"input":1},{"input":2}]`, 1)))).stdout)
	enc := c.putData([]byte("hex"))
	r = c.must(14, "pel", "run", "--program", prog3, "--input", mod, "--input-file", text, "--input", enc)
	if !strings.Contains(r.stdout, "status RUNTIME_FAILED status_code 0x01000003") || !strings.Contains(r.stdout, `unknown encoding "hex"`) {
		t.Errorf("failing run:\n%s\n%s", r.stdout, r.stderr)
	}
	// Input 0 not a module: the host's rejection, also a recorded result.
	r = c.must(14, "pel", "run", "--program", prog, "--input", enc, "--input-file", text)
	if !strings.Contains(r.stdout, "status RUNTIME_FAILED status_code 0x01010001") {
		t.Errorf("run of a non-module:\n%s\n%s", r.stdout, r.stderr)
	}
}

// TestWasmServe runs a wasm program on a server: pel build and pel run
// against --store http://… execute there with the same registry.
func TestWasmServe(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	srv := launchKillableServe(t, c.store, filepath.Join(c.cwd, "serve.log"))
	defer srv.kill9(t)
	remote := &cli{t: t, cwd: c.cwd, store: srv.url}
	mod := strings.TrimSpace(remote.must(0, "wasm", "add", c.write("wordcount.wasm", examples.Wordcount().Module)).stdout)
	prog := strings.TrimSpace(remote.must(0, "pel", "build", c.write("wc.json", []byte(wordcountProgram))).stdout)
	r := remote.must(0, "pel", "run", "--program", prog, "--input", mod, "--input-file", c.write("t.txt", []byte("a b c")), "--output-raw")
	if r.stdout != "3\n" {
		t.Fatalf("remote wordcount output %q, want \"3\\n\"", r.stdout)
	}
	remote.must(0, "wasm", "inspect", mod)
	// The web view checks the program against the same registry and
	// shows its params readably.
	resp, err := http.Get(srv.url + "/ui/a/" + prog)
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/a/PROG: %d %v", resp.StatusCode, err)
	}
	if txt := html.UnescapeString(string(page)); !strings.Contains(txt, `{"export":"wordcount","outputs":1,"max_memory_pages":1024,"max_output_bytes":64}`) ||
		strings.Contains(txt, "unknown operation") {
		t.Errorf("web view of the program lacks the readable params or calls the operation unknown:\n%s", txt)
	}
}

// walkthroughScript returns the shell block of README.md after the marker
// "<!-- walkthrough: write an operation in Go -->".
func walkthroughScript(t *testing.T, root string) string {
	t.Helper()
	return readmeBlock(t, root, "write an operation in Go")
}

// TestReadmeWasmWalkthrough runs the README's "Write an operation in Go"
// commands exactly as written, with bash, from the repository root, with
// the amduat under test first on PATH and no network for the go command.
func TestReadmeWasmWalkthrough(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the README's commands")
	}
	root, err := examples.ModuleRoot(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(amduatBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"TMPDIR="+tmp, "GOPROXY=off", "GOFLAGS=-buildvcs=false", "AMDUAT_STORE=", "GORACE=atexit_sleep_ms=20")
	// One clear skip when this toolchain cannot build for wasip1 at all.
	probe := filepath.Join(tmp, "probe")
	if err := os.MkdirAll(probe, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(probe, "go.mod"), []byte("module probe\n"), 0o644)
	os.WriteFile(filepath.Join(probe, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	pb := exec.Command("go", "build", "-o", os.DevNull, ".")
	pb.Dir, pb.Env = probe, append(env, "GOOS=wasip1", "GOARCH=wasm")
	if out, err := pb.CombinedOutput(); err != nil {
		t.Skipf("this go command cannot build for GOOS=wasip1 GOARCH=wasm: %v: %s", err, bytes.TrimSpace(out))
	}
	cmd := exec.Command(bash, "-eu", "-o", "pipefail", "-c", walkthroughScript(t, root))
	cmd.Dir, cmd.Env = root, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("walkthrough failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.HasSuffix(stdout.String(), "HELLO, WASM\n") {
		t.Fatalf("walkthrough stdout does not end with HELLO, WASM:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
