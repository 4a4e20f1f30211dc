package server

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
)

// TestRunWorkers: Limits.RunWorkers reaches the runs the server executes
// (SPECS.md §12.10): four independent nodes of a slow user operation
// overlap with four workers and never with one, and the result is the same
// bytes either way.
func TestRunWorkers(t *testing.T) {
	t.Parallel()
	var inFlight, most atomic.Int32
	// With several workers each operation waits until two are in flight
	// (the overlap itself, not a sleep that hopes for it; a minute bounds
	// a server that runs them one at a time). With one worker it pauses a
	// little instead, so that a second one would be seen if it ran.
	type rendezvous struct {
		met  chan struct{}
		once sync.Once
	}
	var overlap atomic.Pointer[rendezvous]
	gate := opreg.Operation{
		ID: opreg.OperationID{Name: "test.gate", Version: 1}, MinInputs: 1, MaxInputs: 1,
		DecodeParams: func(b []byte) (any, error) { return nil, nil },
		EncodeParams: func(any) ([]byte, error) { return nil, nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if rv := overlap.Load(); rv != nil {
				if n >= 2 {
					rv.once.Do(func() { close(rv.met) })
				}
				select {
				case <-rv.met:
				case <-time.After(time.Minute):
				}
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			inFlight.Add(-1)
			return []asl.Artifact{asl.Untagged(append([]byte("gated "), c.Inputs[0].Bytes...))}, nil
		},
	}
	reg, err := opreg.Kernel().Extend(gate)
	if err != nil {
		t.Fatal(err)
	}
	// The consts (nodes 1 to 4) come first in canonical order, so that the
	// four gates (5 to 8) are all ready at once.
	var prog pel.Program
	for i := range 4 {
		cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte{byte('a' + i)}})
		if err != nil {
			t.Fatal(err)
		}
		prog.Nodes = append(prog.Nodes, pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpConst, Params: cp})
	}
	for i := range 4 {
		g := pel.NodeID(i + 5)
		prog.Nodes = append(prog.Nodes, pel.Node{ID: g, Op: gate.ID, Inputs: []pel.DagInput{pel.FromNode(pel.NodeID(i+1), 0)}})
		prog.Roots = append(prog.Roots, pel.RootRef{NodeID: g})
	}
	pa, err := pel.ProgramArtifact(prog)
	if err != nil {
		t.Fatal(err)
	}
	var results []asl.Reference
	for _, c := range []struct {
		workers  int
		min, max int32
	}{{1, 1, 1}, {4, 2, 4}} {
		_, ts, st := newTestServer(t, Config{Ops: reg, Limits: Limits{RunWorkers: c.workers}})
		ref, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, pa)
		if err != nil {
			t.Fatal(err)
		}
		most.Store(0)
		overlap.Store(nil)
		if c.workers > 1 {
			overlap.Store(&rendezvous{met: make(chan struct{})})
		}
		body, _ := json.Marshal(report.RunRequest{ProgramRef: ref, NoCache: true})
		r := do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body})
		var run report.Run
		if r.status != 200 || json.Unmarshal(r.body, &run) != nil || run.Status != "OK" {
			t.Fatalf("RunWorkers %d: %d %s", c.workers, r.status, r.body)
		}
		if m := most.Load(); m < c.min || m > c.max {
			t.Errorf("RunWorkers %d: at most %d operations at once, want %d to %d", c.workers, m, c.min, c.max)
		}
		results = append(results, run.ResultRef)
	}
	if results[0] != results[1] {
		t.Fatalf("result %s with one worker, %s with four", results[0], results[1])
	}
}
