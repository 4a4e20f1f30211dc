package surf_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

func TestLimitsAreRecordedKeyedAndReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	a := put(t, s, asl.Untagged([]byte("aaaa")))
	b := put(t, s, asl.Untagged([]byte("bb")))
	concat := seed(t, s, pel.SeedConcat)
	sf := surf.New(s, surf.Options{})
	limited, err := sf.Run(ctx, surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{a, b}, Limits: pel.Limits{MaxOutputBytes: 5}})
	if err != nil {
		t.Fatal(err)
	}
	v := limited.Result.Value
	if v.Status != pel.StatusRuntimeFailed || v.Summary.StatusCode != pel.StatusLimitOutputBytes || limited.Result.Limits.MaxOutputBytes != 5 {
		t.Fatalf("limited run: %s/%d limits %+v", v.Status, v.Summary.StatusCode, limited.Result.Limits)
	}
	free, err := sf.Run(ctx, surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{a, b}})
	if err != nil || free.CacheHit || free.Result.Value.Status != pel.StatusOK {
		t.Fatalf("unlimited run after a limited one: hit=%v status=%s err=%v", free.CacheHit, free.Result.Value.Status, err)
	}
	back, err := surf.LoadResult(ctx, s, limited.ResultRef)
	if err != nil || back.Limits != limited.Result.Limits {
		t.Fatalf("stored limits %+v, %v", back.Limits, err)
	}
	ver, err := sf.Verify(ctx, limited.ResultRef)
	if err != nil || ver.Mismatch != nil {
		t.Fatalf("verify of a limited run: %+v %v", ver, err)
	}
}

// stepRegistry is the kernel plus "test.step" v1: output = input + one byte.
// It counts calls, and kills its own process (SIGKILL, no cleanup) on call
// number killAt when killAt > 0.
func stepRegistry(t testing.TB, calls *atomic.Int64, killAt int64) *opreg.Registry {
	reg, err := opreg.Kernel().Extend(opreg.Operation{
		ID: opreg.OperationID{Name: "test.step", Version: 1}, MinInputs: 1, MaxInputs: 1,
		DecodeParams: func([]byte) (any, error) { return nil, nil },
		EncodeParams: func(any) ([]byte, error) { return nil, nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			if n := calls.Add(1); killAt > 0 && n == killAt {
				if p, err := os.FindProcess(os.Getpid()); err == nil {
					_ = p.Kill() // SIGKILL on Unix: no deferred code runs
				}
				select {}
			}
			in := c.Inputs[0].Bytes
			return []asl.Artifact{asl.Untagged(append(append([]byte(nil), in...), byte(len(in))))}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// stepChain is n test.step nodes in a chain from input 0.
func stepChain(n int) pel.Program {
	step := pel.OperationID{Name: "test.step", Version: 1}
	p := pel.Program{Nodes: []pel.Node{{ID: 1, Op: step, Inputs: []pel.DagInput{pel.External(0)}}}}
	for i := 2; i <= n; i++ {
		p.Nodes = append(p.Nodes, pel.Node{ID: pel.NodeID(i), Op: step, Inputs: []pel.DagInput{pel.FromNode(pel.NodeID(i-1), 0)}})
	}
	p.Roots = []pel.RootRef{{NodeID: pel.NodeID(n)}}
	return p
}

func TestNodeMemoReusesAcrossPrograms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	var calls atomic.Int64
	sf := surf.New(s, surf.Options{Registry: stepRegistry(t, &calls, 0), NodeMemo: true})
	in := put(t, s, asl.Untagged([]byte("x")))
	short, _ := pel.ProgramArtifact(stepChain(10))
	long, _ := pel.ProgramArtifact(stepChain(15))
	if _, err := sf.Run(ctx, surf.Request{ProgramRef: put(t, s, short), InputRefs: []asl.Reference{in}}); err != nil || calls.Load() != 10 {
		t.Fatalf("short chain: %d calls, %v", calls.Load(), err)
	}
	run, err := sf.Run(ctx, surf.Request{ProgramRef: put(t, s, long), InputRefs: []asl.Reference{in}})
	if err != nil || calls.Load() != 15 || run.NodesReused != 10 {
		t.Fatalf("long chain: %d calls in all, %d reused, %v; want 5 new calls and 10 reused", calls.Load(), run.NodesReused, err)
	}
	// Memoized and plain executions store identical bytes.
	p2 := memstore.New()
	put(t, p2, long)
	put(t, p2, asl.Untagged([]byte("x")))
	plain, err := surf.New(p2, surf.Options{Registry: stepRegistry(t, new(atomic.Int64), 0)}).Run(ctx,
		surf.Request{ProgramRef: asl.MustDerive(asl.HashSHA256, long), InputRefs: []asl.Reference{in}})
	if err != nil || plain.ResultRef != run.ResultRef || plain.TraceRef != run.TraceRef {
		t.Fatalf("memoized run %s/%s, plain %s/%s (%v)", run.ResultRef, run.TraceRef, plain.ResultRef, plain.TraceRef, err)
	}
}

const (
	killEnvDir = "AMDUAT_TEST_KILL_DIR"
	killEnvAt  = "AMDUAT_TEST_KILL_AT"
	killChain  = 40
)

// TestKillAndResume runs a 40-node program in a child process that kills
// itself with SIGKILL while executing node 25, then reruns it here with the
// node memo: only the nodes that had not completed execute again.
func TestKillAndResume(t *testing.T) {
	t.Parallel()
	if dir := os.Getenv(killEnvDir); dir != "" {
		childRun(t, dir)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	st, err := pebblestore.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	prog, _ := pel.ProgramArtifact(stepChain(killChain))
	put(t, st, prog)
	put(t, st, asl.Untagged([]byte("seed")))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	const killAt = 25
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillAndResume$")
	cmd.Env = append(os.Environ(), killEnvDir+"="+dir, killEnvAt+"="+strconv.Itoa(killAt))
	out, err := cmd.CombinedOutput()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed: %v\n%s", err, out)
	}

	st, err = pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var calls atomic.Int64
	run, err := surf.New(st, surf.Options{Registry: stepRegistry(t, &calls, 0), NodeMemo: true}).Run(ctx, surf.Request{
		ProgramRef: asl.MustDerive(asl.HashSHA256, prog), InputRefs: []asl.Reference{asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("seed")))}})
	if err != nil {
		t.Fatal(err)
	}
	// Nodes 1..24 completed and were recorded before the kill; 25..40 run now.
	if want := int64(killChain - killAt + 1); calls.Load() != want || run.NodesReused != killAt-1 {
		t.Fatalf("resumed run executed %d operations and reused %d nodes; want %d and %d", calls.Load(), run.NodesReused, want, killAt-1)
	}
	if run.Result.Value.Status != pel.StatusOK {
		t.Fatalf("resumed run status %s", run.Result.Value.Status)
	}
	t.Logf("kill at node %d of %d: the rerun executed %d operations and reused %d nodes", killAt, killChain, calls.Load(), run.NodesReused)
}

func childRun(t *testing.T, dir string) {
	killAt, _ := strconv.ParseInt(os.Getenv(killEnvAt), 10, 64)
	st, err := pebblestore.Open(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var calls atomic.Int64
	prog, _ := pel.ProgramArtifact(stepChain(killChain))
	_, err = surf.New(st, surf.Options{Registry: stepRegistry(t, &calls, killAt), NodeMemo: true}).Run(context.Background(), surf.Request{
		ProgramRef: asl.MustDerive(asl.HashSHA256, prog), InputRefs: []asl.Reference{asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("seed")))}})
	fmt.Fprintln(os.Stderr, "child finished without being killed:", err)
	os.Exit(1)
}
