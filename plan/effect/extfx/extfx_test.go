package extfx

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/internal/testexit"
	"github.com/amduat/amduat/plan/effect"
	"github.com/amduat/amduat/plan/effect/internal/fxutil"
	"github.com/amduat/amduat/plan/effect/policy"
)

// TestMain lets the test binary play a misbehaving executor:
// `extfx.test fake-executor MODE`.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "fake-executor" {
		testexit.Exit(fakeExecutor(os.Args[2]))
	}
	testexit.Main(m)
}

func fakeExecutor(mode string) int {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	send := func(s string) { out.WriteString(s + "\n"); out.Flush() }
	switch mode {
	case "garbage-hello":
		send("this is not json")
		io.Copy(io.Discard, in)
		return 0
	case "silent":
		io.Copy(io.Discard, in)
		return 0
	case "wrong-protocol":
		in.ReadString('\n')
		send(`{"type":"hello","protocol":"amduat-executor/2","name":"fake","version":"1"}`)
		io.Copy(io.Discard, in)
		return 0
	case "exit-at-once":
		fmt.Fprintln(os.Stderr, "fake: giving up")
		return 7
	}
	if _, err := in.ReadString('\n'); err != nil {
		return 1
	}
	send(`{"type":"hello","protocol":"amduat-executor/1","name":"fake","version":"` + mode + `"}`)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return 0
		}
		var call Frame
		if err := json.Unmarshal([]byte(line), &call); err != nil {
			return 1
		}
		var p struct {
			Crash   bool   `json:"crash"`
			Class   string `json:"class"`
			Unknown bool   `json:"unknown"`
		}
		json.Unmarshal(call.Params, &p)
		switch {
		case mode == "garbage":
			send("}{")
			continue
		case mode == "huge":
			out.WriteString(strings.Repeat("a", 1<<20))
			out.Flush()
			select {}
		case mode == "early-exit":
			return 0
		case mode == "partial-exit":
			out.WriteString(`{"type":"result","id":`)
			out.Flush()
			return 0
		case mode == "hang":
			select {}
		case mode == "no-read":
			select {}
		case mode == "wrong-id":
			send(fmt.Sprintf(`{"type":"result","id":%d,"outputs":[]}`, call.ID+1))
			continue
		case mode == "hello-again":
			send(`{"type":"hello","protocol":"amduat-executor/1","name":"fake","version":"1"}`)
			continue
		case mode == "answer-then-exit":
			send(fmt.Sprintf(`{"type":"result","id":%d,"outputs":[{"name":"x","data":"eA=="}]}`, call.ID))
			return 0
		case p.Crash:
			fmt.Fprintln(os.Stderr, "fake: crashing on purpose")
			return 3
		case p.Class != "":
			send(fmt.Sprintf(`{"type":"error","id":%d,"class":%q,"retry_after_ms":250,"message":"as asked"}`, call.ID, p.Class))
			continue
		}
		// echo: every input back under its name, and the key and attempt.
		res := Frame{Type: TypeResult, ID: call.ID, Outputs: []Blob{
			{Name: "key", Data: []byte(call.Key)},
			{Name: "attempt", Data: []byte(fmt.Sprint(call.Attempt))},
			{Name: "pid", Data: []byte(fmt.Sprint(os.Getpid()))},
		}}
		for _, b := range call.Inputs {
			res.Outputs = append(res.Outputs, Blob{Name: "in." + b.Name, Data: b.Data})
		}
		if mode == "stderr-noise" {
			fmt.Fprint(os.Stderr, strings.Repeat("noise ", 50_000))
		}
		b, _ := json.Marshal(res)
		send(string(b))
	}
}

func fakeConfig(t *testing.T, mode, extra string) policy.Executor {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]string{"fake-executor", mode})
	p, err := policy.Parse([]byte(fmt.Sprintf(`{"version":1,"executors":[{"name":"fake","path":%q,"args":%s,"timeout_ms":5000,"start_timeout_ms":20000,"max_frame_bytes":65536%s}]}`, self, args, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return p.Executors[0]
}

func read(t *testing.T, st *memstore.Store, obs effect.Observation) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, o := range obs.Outputs {
		rc, _, err := st.Fetch(context.Background(), o.Ref)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		m[o.Name] = string(b)
	}
	return m
}

// callBounded calls and fails the test if the call does not return within
// 30 seconds: a protocol violation must never hang.
func callBounded(t *testing.T, x *Executor, st *memstore.Store, req effect.Request) (effect.Observation, error) {
	t.Helper()
	type res struct {
		obs effect.Observation
		err error
	}
	done := make(chan res, 1)
	go func() {
		obs, err := x.Call(context.Background(), st, req)
		done <- res{obs, err}
	}()
	select {
	case r := <-done:
		return r.obs, r.err
	case <-time.After(30 * time.Second):
		t.Fatal("the call hangs")
	}
	return effect.Observation{}, nil
}

func TestEchoAndRestart(t *testing.T) {
	x := New(fakeConfig(t, "echo", ""))
	defer x.Close()
	st := memstore.New()
	ref, err := fxutil.PutBytes(context.Background(), st, []byte("bytes\x00\xff in"))
	if err != nil {
		t.Fatal(err)
	}
	req := effect.Request{Kind: "fake", Params: []byte(`{}`), Key: "the-key", Attempt: 3, Inputs: []effect.Input{{Name: "doc", Ref: ref}}}
	obs, err := callBounded(t, x, st, req)
	if err != nil {
		t.Fatal(err)
	}
	out := read(t, st, obs)
	if out["key"] != "the-key" || out["attempt"] != "3" || out["in.doc"] != "bytes\x00\xff in" {
		t.Fatalf("outputs %q", out)
	}
	names := []string{}
	for _, o := range obs.Outputs {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "attempt,in.doc,key,pid" {
		t.Fatalf("output order %v", names)
	}
	if v := x.Version(); v != "fake echo" {
		t.Fatalf("version %q", v)
	}
	firstPid := out["pid"]
	obs, _ = callBounded(t, x, st, req)
	if read(t, st, obs)["pid"] != firstPid {
		t.Fatal("a second call started a second process")
	}

	// A crash mid-call: executor_fault and unknown outcome; the next call
	// runs in a new process.
	_, err = callBounded(t, x, st, effect.Request{Kind: "fake", Params: []byte(`{"crash":true}`), Key: "k"})
	if class, unknown := classOf(t, err); class != effect.ExecutorFault || !unknown || !strings.Contains(err.Error(), "crashing on purpose") {
		t.Fatalf("err %v, want executor_fault, unknown outcome, with the stderr tail", err)
	}
	obs, err = callBounded(t, x, st, req)
	if err != nil {
		t.Fatal(err)
	}
	if read(t, st, obs)["pid"] == firstPid {
		t.Fatal("no new process after the crash")
	}
}

func TestErrorFrames(t *testing.T) {
	x := New(fakeConfig(t, "echo", ""))
	defer x.Close()
	st := memstore.New()
	for _, c := range classes {
		obs, err := callBounded(t, x, st, effect.Request{Kind: "fake", Params: []byte(fmt.Sprintf(`{"class":%q}`, c))})
		var e *effect.Error
		if !errors.As(err, &e) || e.Class != c || e.RetryAfter != 250*time.Millisecond || effect.IsUnknownOutcome(err) {
			t.Fatalf("%v: err %v", c, err)
		}
		// The error frame is the observation a receipt names (SPECS.md §23.5).
		if len(obs.Outputs) != 1 || obs.Outputs[0].Name != "error" {
			t.Fatalf("%v: outputs %+v, want the error frame", c, obs.Outputs)
		}
		if got := read(t, st, obs)["error"]; !strings.Contains(got, `"message":"as asked"`) || !strings.Contains(got, c.String()) {
			t.Fatalf("%v: stored error frame %q", c, got)
		}
	}
	_, err := callBounded(t, x, st, effect.Request{Kind: "fake", Params: []byte(`{"class":"unknown_outcome"}`)})
	if !effect.IsUnknownOutcome(err) {
		t.Fatalf("err %v, want unknown outcome", err)
	}
	_, err = callBounded(t, x, st, effect.Request{Kind: "fake", Params: []byte(`[1]`)})
	var e *effect.Error
	if !errors.As(err, &e) || e.Class != effect.InvalidInput {
		t.Fatalf("err %v, want invalid_input", err)
	}
}

func TestProtocolViolations(t *testing.T) {
	cases := []struct {
		mode    string
		unknown bool // the call had been written
		class   effect.ErrorClass
		extra   string
	}{
		{mode: "garbage-hello", class: effect.ExecutorFault},
		{mode: "silent", class: effect.ExecutorFault},
		{mode: "wrong-protocol", class: effect.ExecutorFault},
		{mode: "exit-at-once", class: effect.ExecutorFault},
		{mode: "garbage", unknown: true, class: effect.ExecutorFault},
		{mode: "huge", unknown: true, class: effect.ExecutorFault},
		{mode: "early-exit", unknown: true, class: effect.ExecutorFault},
		{mode: "partial-exit", unknown: true, class: effect.ExecutorFault},
		{mode: "wrong-id", unknown: true, class: effect.ExecutorFault},
		{mode: "hello-again", unknown: true, class: effect.ExecutorFault},
		{mode: "hang", unknown: true, class: effect.NetworkTimeout, extra: `,"timeout_ms":300`},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			cfg := fakeConfig(t, c.mode, c.extra)
			if c.mode == "silent" {
				cfg.StartTimeoutMillis = 500
			}
			x := New(cfg)
			defer x.Close()
			calls := 1
			if c.mode == "garbage" || c.mode == "exit-at-once" {
				calls = 2 // the second call starts a new process and fails the same way
			}
			for i := 0; i < calls; i++ {
				_, err := callBounded(t, x, memstore.New(), effect.Request{Kind: "fake", Params: []byte(`{}`)})
				if class, unknown := classOf(t, err); class != c.class || unknown != c.unknown {
					t.Fatalf("call %d: err %v, want %v, unknown outcome %v", i, err, c.class, c.unknown)
				}
			}
		})
	}
}

func TestAnswerThenExit(t *testing.T) {
	x := New(fakeConfig(t, "answer-then-exit", ""))
	defer x.Close()
	st := memstore.New()
	for i := 0; i < 3; i++ {
		obs, err := callBounded(t, x, st, effect.Request{Kind: "fake", Params: []byte(`{}`)})
		if err != nil || read(t, st, obs)["x"] != "x" {
			t.Fatalf("call %d: %v %v", i, obs, err)
		}
		// Once the exit is seen, the next call starts a new process.
		<-x.proc.exited
	}
}

func TestStderrIsDrained(t *testing.T) {
	x := New(fakeConfig(t, "stderr-noise", ""))
	defer x.Close()
	for i := 0; i < 3; i++ {
		if _, err := callBounded(t, x, memstore.New(), effect.Request{Kind: "fake", Params: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFrameLimits(t *testing.T) {
	st := memstore.New()
	big, err := fxutil.PutBytes(context.Background(), st, make([]byte, 60_000))
	if err != nil {
		t.Fatal(err)
	}
	// An input that cannot fit in a frame is refused before any call.
	x := New(fakeConfig(t, "echo", ""))
	defer x.Close()
	_, err = callBounded(t, x, st, effect.Request{Kind: "fake", Params: []byte(`{}`), Inputs: []effect.Input{{Name: "big", Ref: big}}})
	var e *effect.Error
	if !errors.As(err, &e) || e.Class != effect.LimitExceeded || effect.IsUnknownOutcome(err) {
		t.Fatalf("err %v, want limit_exceeded", err)
	}
	// An executor that stops reading: the write blocks, the time limit
	// ends it.
	cfg := fakeConfig(t, "no-read", `,"timeout_ms":300`)
	cfg.MaxFrameBytes = 1 << 20
	y := New(cfg)
	defer y.Close()
	huge, err := fxutil.PutBytes(context.Background(), st, make([]byte, 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	_, err = callBounded(t, y, st, effect.Request{Kind: "fake", Params: []byte(`{}`), Inputs: []effect.Input{{Name: "big", Ref: huge}}})
	if class, unknown := classOf(t, err); class != effect.NetworkTimeout || !unknown {
		t.Fatalf("err %v, want network_timeout and unknown outcome", err)
	}
}

func TestCallerCancel(t *testing.T) {
	x := New(fakeConfig(t, "hang", ""))
	defer x.Close()
	if v := x.Version(); v != "fake hang" {
		t.Fatalf("version %q", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	_, err := x.Call(ctx, memstore.New(), effect.Request{Kind: "fake", Params: []byte(`{}`)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want canceled", err)
	}
}

func TestUnavailableVersion(t *testing.T) {
	x := New(fakeConfig(t, "garbage-hello", ""))
	defer x.Close()
	if v := x.Version(); !strings.HasPrefix(v, "unavailable: ") {
		t.Fatalf("version %q", v)
	}
}

// TestExampleExecutor runs the shipped Python example under Python 3.
func TestExampleExecutor(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3 for the example executor")
	}
	script, err := filepath.Abs("example/textfx.py")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(fmt.Sprintf(`{"version":1,"executors":[{"name":"text","path":%q,"args":[%q]}]}`, py, script)))
	if err != nil {
		t.Fatal(err)
	}
	x := New(p.Executors[0])
	defer x.Close()
	if v := x.Version(); v != "textfx 1.0.0" {
		t.Fatalf("version %q", v)
	}
	st := memstore.New()
	doc, err := fxutil.PutBytes(context.Background(), st, []byte("the quick brown\nfox"))
	if err != nil {
		t.Fatal(err)
	}
	in := []effect.Input{{Name: "text", Ref: doc}}
	for _, c := range []struct{ params, name, want string }{
		{`{"op":"upper"}`, "upper", "THE QUICK BROWN\nFOX"},
		{`{"op":"wordcount"}`, "count", "4"},
	} {
		obs, err := callBounded(t, x, st, effect.Request{Kind: "text", Params: []byte(c.params), Key: "k", Attempt: 1, Inputs: in})
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, st, obs); len(got) != 1 || got[c.name] != c.want {
			t.Fatalf("%s: outputs %q", c.params, got)
		}
	}
	_, err = callBounded(t, x, st, effect.Request{Kind: "text", Params: []byte(`{"class":"rate_limited","message":"slow down","op":"fail","retry_after_ms":1500}`), Inputs: in})
	var e *effect.Error
	if !errors.As(err, &e) || e.Class != effect.RateLimited || e.RetryAfter != 1500*time.Millisecond || !strings.Contains(e.Msg, "slow down") {
		t.Fatalf("err %v", err)
	}
	_, err = callBounded(t, x, st, effect.Request{Kind: "text", Params: []byte(`{"op":"nope"}`)})
	if !errors.As(err, &e) || e.Class != effect.InvalidInput {
		t.Fatalf("err %v", err)
	}
}

// TestTranscript checks the worked example of SPECS.md §23.5.5 (kept in
// testdata/transcript.txt): amduat's frames are what this package writes
// for those calls, and the example executor answers with exactly the
// frames shown.
func TestTranscript(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3 for the example executor")
	}
	b, err := os.ReadFile("testdata/transcript.txt")
	if err != nil {
		t.Fatal(err)
	}
	var sent, want []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			sent = append(sent, line[2:])
		case strings.HasPrefix(line, "< "):
			want = append(want, line[2:])
		default:
			t.Fatalf("line %q", line)
		}
	}
	// amduat's side, encoded by this package.
	data := []byte("the quick brown\nfox")
	ref, err := fxutil.PutBytes(context.Background(), memstore.New(), data)
	if err != nil {
		t.Fatal(err)
	}
	frames := []*Frame{
		{Type: TypeHello, Protocol: Protocol, Executor: "text"},
		{Type: TypeCall, ID: 1, Kind: "text", Params: json.RawMessage(`{"op":"wordcount"}`), Key: "3f0c9a", Attempt: 1, TimeoutMillis: 60000, Inputs: []Blob{{Name: "text", Ref: ref.String(), Data: data}}},
		{Type: TypeCall, ID: 2, Kind: "text", Params: json.RawMessage(`{"class":"rate_limited","message":"slow down","op":"fail","retry_after_ms":1500}`), Key: "9d41e7", Attempt: 1, TimeoutMillis: 60000, Inputs: []Blob{}},
	}
	for i, f := range frames {
		got, _ := json.Marshal(f)
		if string(got) != sent[i] {
			t.Fatalf("frame %d:\n got %s\nwant %s", i, got, sent[i])
		}
	}
	// The executor's side.
	script, _ := filepath.Abs("example/textfx.py")
	cmd := exec.Command(py, script)
	cmd.Stdin = strings.NewReader(strings.Join(sent, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("answers\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, line := range want {
		id := uint64(i)
		if _, err := DecodeReply([]byte(line), id); err != nil {
			t.Fatalf("answer %d does not decode: %v", i, err)
		}
	}
}

// classOf returns the class an error names and whether it is an unknown
// outcome; an unknown outcome must never also be an *effect.Error.
func classOf(t *testing.T, err error) (effect.ErrorClass, bool) {
	t.Helper()
	var e *effect.Error
	var ue *effect.UnknownError
	isErr, isUnknown := errors.As(err, &e), errors.As(err, &ue)
	if isErr && effect.IsUnknownOutcome(err) {
		t.Fatalf("%v: an unknown outcome that is also an *effect.Error would be retried by class", err)
	}
	switch {
	case isErr:
		return e.Class, false
	case isUnknown:
		return ue.Class, true
	}
	return 0, effect.IsUnknownOutcome(err)
}
