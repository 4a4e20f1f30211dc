package surf_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/golden"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/internal/progtest"
	"github.com/amduat/amduat/internal/testrand"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/server"
	"github.com/amduat/amduat/surf"
)

// referenceRun is one run of referenceRuns: its program, the artifacts of
// its inputs and parameters, and its limits.
type referenceRun struct {
	name   string
	prog   pel.Program
	inputs []asl.Artifact
	params *asl.Artifact
	limits pel.Limits
}

// referenceRunList is the runs of referenceRuns, drawn once from a fixed
// seed (about 70 MB of random input bytes) and shared by its passes over
// the stores: deterministic random kernel programs over inputs of up to 3
// MiB (above and below the size at which the surface keeps an input in
// memory), plus fixed programs whose outputs total more than 16 MiB (the
// size above which outputs are streamed into the store).
var referenceRunList = sync.OnceValue(func() []referenceRun {
	pcg := rand.NewPCG(2026, 13)
	r := rand.New(pcg)
	artifact := func(size int, tagged bool) asl.Artifact {
		x := make([]byte, size)
		testrand.Fill(pcg, x)
		if tagged {
			return asl.Tagged(0x00002000, x)
		}
		return asl.Untagged(x)
	}
	var runs []referenceRun
	for i := 0; i < 60; i++ {
		shape := progtest.Shape{MaxNodes: 10, HasParams: r.IntN(3) == 0}
		run := referenceRun{name: fmt.Sprintf("random-%02d", i)}
		for k := r.IntN(4); k > 0; k-- {
			size := r.IntN(2000)
			if r.IntN(3) == 0 {
				size = 1<<20 + r.IntN(2<<20)
			}
			tagged := r.IntN(4) == 0
			run.inputs = append(run.inputs, artifact(size, tagged))
			shape.InputSizes = append(shape.InputSizes, uint64(size))
		}
		if shape.HasParams {
			size := r.IntN(100)
			if r.IntN(4) == 0 {
				size = 1<<20 + 1
			}
			a := artifact(size, true)
			run.params, shape.ParamsSize = &a, uint64(size)
		}
		if r.IntN(4) == 0 {
			run.limits.MaxOutputBytes = r.Uint64N(4 << 20)
		}
		run.prog = progtest.Random(r, shape)
		runs = append(runs, run)
	}
	// Large outputs: 6 x 3 MiB = 18 MiB, and slices of it.
	x := artifact(3<<20, false)
	ins := make([]pel.DagInput, 6)
	for i := range ins {
		ins[i] = pel.External(0)
	}
	slice := opreg.EncodeSliceParams(opreg.SliceParams{Offset: 5 << 20, Length: 11 << 20})
	big := pel.Program{Nodes: []pel.Node{
		{ID: 1, Op: opreg.OpConcat, Inputs: ins, Params: []byte{}},
		{ID: 2, Op: opreg.OpSlice, Inputs: []pel.DagInput{pel.FromNode(1, 0)}, Params: slice},
		{ID: 3, Op: opreg.OpHash, Inputs: []pel.DagInput{pel.FromNode(2, 0)}, Params: []byte{}},
		{ID: 4, Op: opreg.OpConcat, Inputs: []pel.DagInput{pel.FromNode(2, 0), pel.FromNode(3, 0), pel.External(0)}, Params: []byte{}},
	}, Roots: []pel.RootRef{{NodeID: 1}, {NodeID: 4}, {NodeID: 3}}}
	runs = append(runs,
		referenceRun{name: "large-outputs", prog: big, inputs: []asl.Artifact{x}},
		referenceRun{name: "large-outputs-limit", prog: big, inputs: []asl.Artifact{x}, limits: pel.Limits{MaxOutputBytes: 30 << 20}})
	return runs
})

// sampledRun reports whether run i (named name) of referenceRunList is in
// the passes of TestRunsMatchReference: in the default run every fourth
// random run and large-outputs (whose outputs are streamed into the
// store); with AMDUAT_LONG=1 (internal/longtest) every run.
func sampledRun(i int, name string) bool {
	return longtest.Enabled() || (i%4 == 0 && strings.HasPrefix(name, "random-")) || name == "large-outputs"
}

// referenceRuns puts the inputs of every run of referenceRunList (of the
// sampled ones only, if sampled) into st, runs it, and renders its
// references: one line per run, "" for a run left out.
func referenceRuns(t *testing.T, st asl.Store, memo, sampled bool) []string {
	ctx := context.Background()
	runs := referenceRunList()
	lines := make([]string, len(runs))
	sf := surf.New(st, surf.Options{NoCache: true, NodeMemo: memo})
	for i, run := range runs {
		if sampled && !sampledRun(i, run.name) {
			continue
		}
		prog, err := pel.ProgramArtifact(run.prog)
		if err != nil {
			t.Fatal(err)
		}
		req := surf.Request{ProgramRef: put(t, st, prog), Limits: run.limits}
		for _, a := range run.inputs {
			req.InputRefs = append(req.InputRefs, put(t, st, a))
		}
		if run.params != nil {
			req.ParamsRef, req.HasParams = put(t, st, *run.params), true
		}
		res, err := sf.Run(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", run.name, err)
		}
		lines[i] = fmt.Sprintf("%s %s code=%d result=%s trace=%s edge=%s outputs=%v\n", run.name, res.Result.Value.Status,
			res.Result.Value.Summary.StatusCode, res.ResultRef, res.TraceRef, res.EdgeRef, res.OutputRefs)
	}
	return lines
}

// TestRunsMatchReference: the references of the sampled runs above
// (sampledRun: all of them with AMDUAT_LONG=1) equal those in
// testdata/reference_runs.golden on a memstore, on a Pebble store with
// the node memo, twice, and over the HTTP client, on a server; the three
// stores are independent subtests run in parallel. The golden file was
// written by the surface as it was before it read inputs lazily and
// streamed outputs (commit 39853a0, `go test -run TestRunsMatchReference
// -update`).
func TestRunsMatchReference(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes about 200 MiB")
	}
	const path = "testdata/reference_runs.golden"
	if golden.Updating() {
		golden.Check(t, path, []byte(strings.Join(referenceRuns(t, memstore.New(), false, false), "")))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != len(referenceRunList()) {
		t.Fatalf("%s has %d lines for %d runs", path, len(lines), len(referenceRunList()))
	}
	for i, run := range referenceRunList() {
		if !sampledRun(i, run.name) {
			lines[i] = ""
		}
	}
	want := strings.Join(lines, "")
	t.Run("memstore", func(t *testing.T) {
		t.Parallel()
		if got := strings.Join(referenceRuns(t, memstore.New(), false, true), ""); got != want {
			t.Fatalf("memstore:\n%s\n%s (the sampled runs):\n%s", got, path, want)
		}
	})
	t.Run("pebble", func(t *testing.T) {
		t.Parallel()
		ps, err := pebblestore.Create(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ps.Close()
		if got := strings.Join(referenceRuns(t, ps, true, true), ""); got != want {
			t.Fatalf("pebble store with the node memo:\n%s\n%s (the sampled runs):\n%s", got, path, want)
		}
		if got := strings.Join(referenceRuns(t, ps, true, true), ""); got != want {
			t.Fatalf("pebble store, memo entries reused:\n%s\n%s (the sampled runs):\n%s", got, path, want)
		}
	})
	// Through the HTTP client: store-backed inputs are read over HTTP.
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		backing, err := pebblestore.Create(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer backing.Close()
		srv, err := server.New(server.Config{Store: backing})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		defer ts.Close()
		hc, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer hc.Close()
		// Without its index (index writes go through the server's own runs),
		// as a plain asl.Store.
		if got := strings.Join(referenceRuns(t, struct{ asl.Store }{hc}, false, true), ""); got != want {
			t.Fatalf("HTTP store:\n%s\n%s (the sampled runs):\n%s", got, path, want)
		}
	})
}
