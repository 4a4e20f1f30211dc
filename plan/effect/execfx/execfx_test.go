package execfx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/internal/fxutil"
	"github.com/amduat/amduat/plan/effect/policy"
)

const testPolicy = `{"version":1,"exec":{"commands":[
 {"name":"sh","path":"/bin/sh","max_output_bytes":1000},
 {"name":"echo","path":"echo"},
 {"name":"cat","path":"/bin/cat"},
 {"name":"env","path":"/usr/bin/env","env":["FOO","BAR"],"pass_env":["AMDUAT_TEST_PASS","AMDUAT_TEST_UNSET"]}
]}}`

type fixture struct {
	x   *Executor
	st  *memstore.Store
	tmp string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pol, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{x: New(pol), st: memstore.New(), tmp: t.TempDir()}
	f.x.TempDir = f.tmp
	return f
}

// call runs one attempt and checks that the working directory is gone.
func (f *fixture) call(t *testing.T, ctx context.Context, p Params, inputs map[string]string) (map[string]string, error) {
	t.Helper()
	b, err := fxutil.Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	req := effect.Request{Kind: Kind, Params: b, Key: "key-1", Attempt: 2}
	names := []string{}
	for name := range inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ref, err := fxutil.PutBytes(ctx, f.st, []byte(inputs[name]))
		if err != nil {
			t.Fatal(err)
		}
		req.Inputs = append(req.Inputs, effect.Input{Name: name, Ref: ref})
	}
	obs, err := f.x.Call(ctx, f.st, req)
	left, rerr := os.ReadDir(f.tmp)
	if rerr != nil || len(left) != 0 {
		t.Errorf("temporary directory not cleaned: %v %v", left, rerr)
	}
	out := map[string]string{}
	for i, o := range obs.Outputs {
		if i > 0 && obs.Outputs[i-1].Name >= o.Name {
			t.Errorf("outputs not in name order: %v", obs.Outputs)
		}
		rc, _, ferr := f.st.Fetch(ctx, o.Ref)
		if ferr != nil {
			t.Fatal(ferr)
		}
		v, _ := io.ReadAll(rc)
		rc.Close()
		out[o.Name] = string(v)
	}
	return out, err
}

func wantClass(t *testing.T, err error, c effect.ErrorClass) {
	t.Helper()
	var e *effect.Error
	if !errors.As(err, &e) || e.Class != c {
		t.Fatalf("err %v, want %v", err, c)
	}
}

func TestNoShell(t *testing.T) {
	f := newFixture(t)
	out, err := f.call(t, context.Background(), Params{Command: "echo", Args: []string{"$HOME; echo hi", "*", "`id`"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "$HOME; echo hi * `id`\n"; out["stdout"] != want || out["exit"] != "0" || out["stderr"] != "" {
		t.Fatalf("outputs %q, want stdout %q", out, want)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("AMDUAT_TEST_PASS", "passed")
	t.Setenv("AMDUAT_TEST_SECRET", "must not leak")
	f := newFixture(t)
	out, err := f.call(t, context.Background(), Params{Command: "env", Env: map[string]string{"FOO": "bar"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(out["stdout"]), "\n")
	sort.Strings(got)
	want := []string{"AMDUAT_ATTEMPT=2", "AMDUAT_IDEMPOTENCY_KEY=key-1", "AMDUAT_TEST_PASS=passed", "FOO=bar"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("environment %q, want %q", got, want)
	}
	_, err = f.call(t, context.Background(), Params{Command: "env", Env: map[string]string{"PATH": "/evil"}}, nil)
	wantClass(t, err, effect.PolicyDenied)
}

func TestAllowlist(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"bash", "/bin/sh", "rm", ""} {
		_, err := f.call(t, context.Background(), Params{Command: name}, nil)
		wantClass(t, err, effect.PolicyDenied)
	}
}

func TestFilesInAndOut(t *testing.T) {
	f := newFixture(t)
	out, err := f.call(t, context.Background(), Params{Command: "sh",
		Args:    []string{"-c", `/usr/bin/tr a-z A-Z <doc >upper.txt && /bin/cat notes doc && /bin/echo warn >&2`},
		Outputs: []string{"upper.txt"}},
		map[string]string{"doc": "hello world", "notes": "n:"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"exit": "0", "stdout": "n:hello world", "stderr": "warn\n", "upper.txt": "HELLO WORLD"}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("outputs %q, want %q", out, want)
	}
	out, err = f.call(t, context.Background(), Params{Command: "cat", Stdin: "doc"}, map[string]string{"doc": "from stdin"})
	if err != nil || out["stdout"] != "from stdin" {
		t.Fatalf("stdin: %q %v", out, err)
	}
}

func TestExitStatus(t *testing.T) {
	f := newFixture(t)
	out, err := f.call(t, context.Background(), Params{Command: "sh", Args: []string{"-c", "echo out; exit 3"}, Outputs: []string{"never"}}, nil)
	wantClass(t, err, effect.InvalidInput)
	if out["exit"] != "3" || out["stdout"] != "out\n" {
		t.Fatalf("outputs %q", out)
	}
	_, err = f.call(t, context.Background(), Params{Command: "sh", Args: []string{"-c", "exit 75"}, RetryExitCodes: []int{75}}, nil)
	wantClass(t, err, effect.ProviderUnavailable)
	out, err = f.call(t, context.Background(), Params{Command: "sh", Args: []string{"-c", "kill -9 $$"}}, nil)
	wantClass(t, err, effect.ExecutorFault)
	if out["exit"] != "signal 9" {
		t.Fatalf("outputs %q", out)
	}
}

func TestBadOutputsAndInputs(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name   string
		p      Params
		inputs map[string]string
		class  effect.ErrorClass
	}{
		{"missing output", Params{Command: "sh", Args: []string{"-c", "true"}, Outputs: []string{"out"}}, nil, effect.InvalidInput},
		{"symlink output", Params{Command: "sh", Args: []string{"-c", "/bin/ln -s /etc/passwd out"}, Outputs: []string{"out"}}, nil, effect.InvalidInput},
		{"directory output", Params{Command: "sh", Args: []string{"-c", "mkdir out"}, Outputs: []string{"out"}}, nil, effect.InvalidInput},
		{"output too long", Params{Command: "sh", Args: []string{"-c", "/usr/bin/head -c 1001 /dev/zero > out"}, Outputs: []string{"out"}}, nil, effect.LimitExceeded},
		{"stdout too long", Params{Command: "sh", Args: []string{"-c", "/usr/bin/head -c 100000 /dev/zero"}}, nil, effect.LimitExceeded},
		{"stderr too long", Params{Command: "sh", Args: []string{"-c", "/usr/bin/head -c 1001 /dev/zero >&2"}}, nil, effect.LimitExceeded},
		{"output path", Params{Command: "sh", Outputs: []string{"../x"}}, nil, effect.InvalidInput},
		{"output slash", Params{Command: "sh", Outputs: []string{"a/b"}}, nil, effect.InvalidInput},
		{"output reserved", Params{Command: "sh", Outputs: []string{"stdout"}}, nil, effect.InvalidInput},
		{"input dotdot", Params{Command: "sh"}, map[string]string{"..": "x"}, effect.InvalidInput},
		{"input slash", Params{Command: "sh"}, map[string]string{"../../etc/x": "x"}, effect.InvalidInput},
		{"stdin unknown", Params{Command: "cat", Stdin: "nope"}, nil, effect.InvalidInput},
		{"retry code", Params{Command: "sh", RetryExitCodes: []int{0}}, nil, effect.InvalidInput},
		{"arg NUL", Params{Command: "sh", Args: []string{"a\x00b"}}, nil, effect.InvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.call(t, context.Background(), c.p, c.inputs)
			wantClass(t, err, c.class)
		})
	}
	// Exactly at the limit passes.
	out, err := f.call(t, context.Background(), Params{Command: "sh", Args: []string{"-c", "/usr/bin/head -c 1000 /dev/zero | /usr/bin/tr '\\0' a"}}, nil)
	if err != nil || len(out["stdout"]) != 1000 {
		t.Fatalf("1000 bytes: %d %v", len(out["stdout"]), err)
	}
}

// processGone waits until pid has exited (gone or a zombie).
func processGone(pid int) bool {
	deadline := time.Now().Add(time.Minute) // a hang bound, not a timing
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i+1:]), " Z") {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestTimeLimitKillsTheGroup(t *testing.T) {
	f := newFixture(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	start := time.Now()
	// A limit of 5 s (was 300 ms): the shell must start its background
	// sleep and write its pid before the limit, on a loaded machine too.
	_, err := f.call(t, context.Background(), Params{Command: "sh", TimeoutMillis: 5000,
		Args: []string{"-c", `/bin/sleep 60 & echo $! > "$1"; /bin/sleep 60`, "sh", pidFile}}, nil)
	wantClass(t, err, effect.LimitExceeded)
	if d := time.Since(start); d > time.Minute { // a hang bound against sleep 60
		t.Fatalf("the call took %v", d)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || !processGone(pid) {
		t.Fatalf("the background child %d outlived the call", pid)
	}
}

func TestCallerCancelIsUnknownOutcome(t *testing.T) {
	f := newFixture(t)
	fifo := filepath.Join(t.TempDir(), "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Opening a FIFO for reading waits for its writer: the command.
		if b, err := os.ReadFile(fifo); err == nil && len(b) > 0 {
			cancel()
		}
	}()
	_, err := f.call(t, ctx, Params{Command: "sh", Args: []string{"-c", `echo go > "$1"; /bin/sleep 60`, "sh", fifo}}, nil)
	if !effect.IsUnknownOutcome(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want unknown outcome", err)
	}
}

func TestDeclarations(t *testing.T) {
	x := New(policy.Empty())
	if x.Name() != "exec" || x.Version() == "" || x.HonoursKeys() {
		t.Fatal("exec executor declarations")
	}
}
