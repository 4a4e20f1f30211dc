package pel_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// userOp builds a user operation "test.op" v1 with no inputs and empty
// params whose functions are the given ones (nil: a well-behaved default).
func userOp(run func(opreg.Call) ([]asl.Artifact, *opreg.OpError), decode func([]byte) (any, error), size func(opreg.Call) (uint64, bool)) opreg.Operation {
	if run == nil {
		run = func(opreg.Call) ([]asl.Artifact, *opreg.OpError) { return []asl.Artifact{{Bytes: []byte("ok")}}, nil }
	}
	if decode == nil {
		decode = func([]byte) (any, error) { return nil, nil }
	}
	return opreg.Operation{
		ID: opreg.OperationID{Name: "test.op", Version: 1}, MinInputs: 0, MaxInputs: opreg.Unbounded,
		DecodeParams: decode,
		EncodeParams: func(any) ([]byte, error) { return []byte{}, nil },
		Run:          run, OutputSize: size,
	}
}

func extendedRegistry(t testing.TB, op opreg.Operation) *opreg.Registry {
	t.Helper()
	reg, err := opreg.Kernel().Extend(op)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// oneUserNode is const "x" (node 1) then test.op reading it (node 2).
func oneUserNode(t testing.TB) asl.Artifact {
	return mustArtifact(t, pel.Program{Nodes: []pel.Node{
		constNode(t, 1, "x"),
		{ID: 2, Op: opreg.OperationID{Name: "test.op", Version: 1}, Inputs: []pel.DagInput{pel.FromNode(1, 0)}, Params: []byte{}},
	}, Roots: root(2)})
}

// TestPanickingOperationIsInternalFailure: a panic in any function of a
// registered operation ends the run with an ErrInternal error naming the
// node, no outputs and no result (SPECS.md §12.8), never a crash.
func TestPanickingOperationIsInternalFailure(t *testing.T) {
	t.Parallel()
	var nilMap map[string]int
	tests := []struct {
		name  string
		op    opreg.Operation
		phase string
	}{
		{"run panics with a string", userOp(func(opreg.Call) ([]asl.Artifact, *opreg.OpError) { panic("boom") }, nil, nil), "run"},
		{"run writes a nil map", userOp(func(opreg.Call) ([]asl.Artifact, *opreg.OpError) { nilMap["x"] = 1; return nil, nil }, nil, nil), "run"},
		{"run indexes out of range", userOp(func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) { return c.Inputs[5:6], nil }, nil, nil), "run"},
		{"params decoder panics", userOp(nil, func([]byte) (any, error) { panic(errors.New("decoder bug")) }, nil), "params"},
		{"size declaration panics", userOp(nil, nil, func(opreg.Call) (uint64, bool) { panic(fmt.Sprint("size bug")) }), "size"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := extendedRegistry(t, tc.op)
			var events []pel.NodeEvent
			obs := pel.ObserverFunc(func(e pel.NodeEvent) { events = append(events, e) })
			outs, res, err := pel.ExecDAGWith(reg, oneUserNode(t), nil, nil, obs, pel.RunOptions{})
			if !errors.Is(err, pel.ErrInternal) {
				t.Fatalf("err = %v, want ErrInternal", err)
			}
			var ie *pel.InternalError
			if !errors.As(err, &ie) || ie.NodeID != 2 || ie.Phase != tc.phase || ie.Op.Name != "test.op" {
				t.Fatalf("err = %#v, want node 2, phase %s", ie, tc.phase)
			}
			if !strings.Contains(err.Error(), "node 2: operation test.op version 1 panicked in "+tc.phase) {
				t.Errorf("message %q", err)
			}
			if outs != nil || res.PEL1Version != 0 {
				t.Errorf("outputs %v, result %+v: want none", outs, res)
			}
			for _, e := range events {
				if e.NodeID == 2 {
					t.Errorf("the failing node was reported to the observer: %+v", e)
				}
			}
			// ExecDAG, without an error result, returns the zero value.
			if outs, res := pel.ExecDAG(reg, oneUserNode(t), nil, nil, nil); outs != nil || res.PEL1Version != 0 {
				t.Errorf("ExecDAG: %v %+v", outs, res)
			}
		})
	}
	t.Run("runtime error is exposed", func(t *testing.T) {
		reg := extendedRegistry(t, tests[1].op)
		_, _, err := pel.ExecDAGWith(reg, oneUserNode(t), nil, nil, nil, pel.RunOptions{})
		var re runtime.Error
		if !errors.As(err, &re) {
			t.Fatalf("err = %v, want a runtime.Error inside", err)
		}
	})
}

// TestReservedStatusCodes: an operation's status code below 0x00010000 is
// never reported as its own (it would read as a scheme code: 1 contract,
// 4 node limit, 5 output limit); it becomes status code 1 with diagnostic
// 0x0011 (SPECS.md §11.3, §12.3). Codes from 0x00010000 pass unchanged.
func TestReservedStatusCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code     uint32
		wantCode uint32
		wantLead string
	}{
		{0, 1, "node 2: operation test.op version 1 returned reserved status code 0"},
		{1, 1, "node 2: operation test.op version 1 returned reserved status code 1"},
		{2, 1, "node 2: operation test.op version 1 returned reserved status code 2"},
		{3, 1, "node 2: operation test.op version 1 returned reserved status code 3"},
		{4, 1, "node 2: operation test.op version 1 returned reserved status code 4"},
		{5, 1, "node 2: operation test.op version 1 returned reserved status code 5"},
		{0x13, 1, "node 2: operation test.op version 1 returned reserved status code 19"},
		{0xffff, 1, "node 2: operation test.op version 1 returned reserved status code 65535"},
		{0x00010000, 0x00010000, "node 2: operation test.op version 1 failed with status code 0x00010000"},
		{0xdeadbeef, 0xdeadbeef, "node 2: operation test.op version 1 failed with status code 0xdeadbeef"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			reg := extendedRegistry(t, userOp(func(opreg.Call) ([]asl.Artifact, *opreg.OpError) {
				return nil, opreg.Fail(tc.code, "user failure")
			}, nil, nil))
			_, res, err := pel.ExecDAGWith(reg, oneUserNode(t), nil, nil, nil, pel.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantDiag := pel.DiagNodeFailed
			if tc.code < opreg.FirstOperationCode {
				wantDiag = pel.DiagOperationContract
			}
			if res.Status != pel.StatusRuntimeFailed || res.Summary.StatusCode != tc.wantCode ||
				len(res.Diagnostics) != 2 || res.Diagnostics[0].Code != wantDiag ||
				string(res.Diagnostics[0].Message) != tc.wantLead || res.Diagnostics[1].Code != tc.code {
				t.Fatalf("got %+v", res)
			}
			if _, err := pel.EncodeResultValue(res); err != nil {
				t.Errorf("result does not encode: %v", err)
			}
		})
	}
}

// TestBrokenSizeDeclaration: an operation that declares a size and then
// produces another, or fails, breaks its contract: an internal failure.
func TestBrokenSizeDeclaration(t *testing.T) {
	t.Parallel()
	declare := func(n uint64) func(opreg.Call) (uint64, bool) {
		return func(opreg.Call) (uint64, bool) { return n, true }
	}
	tests := []struct {
		name   string
		op     opreg.Operation
		reason string
	}{
		{"produces more", userOp(nil, nil, declare(1)), "declared 1 output bytes, produced 2"},
		{"fails", userOp(func(opreg.Call) ([]asl.Artifact, *opreg.OpError) { return nil, opreg.Fail(0x10001, "no") }, nil, declare(2)),
			"declared 2 output bytes, then failed with status code 0x00010001"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := pel.ExecDAGWith(extendedRegistry(t, tc.op), oneUserNode(t), nil, nil, nil, pel.RunOptions{})
			if !errors.Is(err, pel.ErrInternal) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("err = %v, want ErrInternal with %q", err, tc.reason)
			}
		})
	}
}

// hostileConcat is a program of about 1 MiB: a 1 MiB const (node 1) and one
// concat (node 2) of n inputs all reading it, so its output would be n MiB.
func hostileConcat(t testing.TB, n int) asl.Artifact {
	c := pel.Node{ID: 1, Op: opreg.OpConst}
	var err error
	if c.Params, err = opreg.EncodeConstParams(opreg.ConstParams{Bytes: make([]byte, opreg.MaxConstBytes)}); err != nil {
		t.Fatal(err)
	}
	ins := make([]pel.DagInput, n)
	for i := range ins {
		ins[i] = pel.FromNode(1, 0)
	}
	return mustArtifact(t, pel.Program{Nodes: []pel.Node{c, concatNode(2, ins...)}, Roots: root(2)})
}

// TestDeclaredSizeStopsBeforeAllocation: the 5,000-input concat of a 1 MiB
// const (5.2 GB of output) under a 2 MiB limit stops with the output-bytes
// status before allocating its output: the whole run allocates far less
// than one copy of the output would need.
func TestDeclaredSizeStopsBeforeAllocation(t *testing.T) {
	const n = 5000
	prog := hostileConcat(t, n)
	const limit = 2 << 20
	opts := pel.RunOptions{Limits: pel.Limits{MaxOutputBytes: limit}}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	outs, res, err := pel.ExecDAGWith(nil, prog, nil, nil, nil, opts)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	declared := uint64(opreg.MaxConstBytes) * (n + 1)
	want := fmt.Sprintf("node 2: outputs total %d bytes, above the limit of %d", declared, limit)
	if outs != nil || res.Status != pel.StatusRuntimeFailed || res.Summary.StatusCode != pel.StatusLimitOutputBytes ||
		len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != pel.DiagLimitOutputBytes || string(res.Diagnostics[0].Message) != want {
		t.Fatalf("got %+v, want %q", res, want)
	}
	// The program decodes (its 1 MiB of params are aliased, not copied) and
	// the plan holds n inputs; 16 MiB is generous for that and 300 times
	// less than the declared output.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("the run allocated %d bytes; the output (%d bytes) must not be allocated", got, declared)
	}
}

// TestDeclaredSizeLimitMatchesUndeclared: for every kernel operation the
// outcome under a limit is the same whether or not the size is declared
// (the declaration only moves the check before the allocation).
func TestDeclaredSizeLimitMatchesUndeclared(t *testing.T) {
	t.Parallel()
	undeclared := func(id opreg.OperationID) opreg.Operation {
		op, _ := opreg.Kernel().Lookup(id)
		c := *op
		c.ID = opreg.OperationID{Name: "test." + id.Name, Version: 1}
		c.OutputSize = nil
		return c
	}
	reg, err := opreg.Kernel().Extend(undeclared(opreg.OpConst), undeclared(opreg.OpConcat), undeclared(opreg.OpSlice), undeclared(opreg.OpHash), undeclared(opreg.OpParams))
	if err != nil {
		t.Fatal(err)
	}
	rename := func(p pel.Program) pel.Program {
		q := pel.Program{Nodes: make([]pel.Node, len(p.Nodes)), Roots: p.Roots}
		for i, n := range p.Nodes {
			n.Op.Name = "test." + n.Op.Name
			q.Nodes[i] = n
		}
		return q
	}
	same := func(a, b pel.ExecutionResultValue) bool {
		if a.Status != b.Status || a.Summary != b.Summary || len(a.Diagnostics) != len(b.Diagnostics) {
			return false
		}
		for i := range a.Diagnostics {
			if a.Diagnostics[i].Code != b.Diagnostics[i].Code ||
				string(a.Diagnostics[i].Message) != strings.ReplaceAll(string(b.Diagnostics[i].Message), "test.pel.", "pel.") {
				return false
			}
		}
		return true
	}
	progs := []pel.Program{
		{Nodes: []pel.Node{constNode(t, 1, "hello"), concatNode(2, pel.FromNode(1, 0), pel.FromNode(1, 0)), sliceNode(3, 1, 3, pel.FromNode(2, 0)), hashNode(4, pel.FromNode(3, 0))}, Roots: root(4)},
		{Nodes: []pel.Node{constNode(t, 1, "hello"), sliceNode(2, 4, 3, pel.FromNode(1, 0))}, Roots: root(2)},
		{Nodes: []pel.Node{{ID: 1, Op: opreg.OpParams, Params: []byte{}}, concatNode(2, pel.FromNode(1, 0), pel.External(0))}, Roots: root(2)},
	}
	global := &asl.Artifact{Bytes: []byte("global params")}
	inputs := []asl.Artifact{{Bytes: []byte("in")}}
	sawLimit := false
	for pi, p := range progs {
		for limit := uint64(0); limit < 60; limit++ {
			opts := pel.RunOptions{Limits: pel.Limits{MaxOutputBytes: limit}}
			o1, r1, err1 := pel.ExecDAGWith(reg, mustArtifact(t, p), inputs, global, nil, opts)
			o2, r2, err2 := pel.ExecDAGWith(reg, mustArtifact(t, rename(p)), inputs, global, nil, opts)
			if err1 != nil || err2 != nil || len(o1) != len(o2) || !same(r1, r2) {
				t.Fatalf("program %d limit %d: declared %+v %v, undeclared %+v %v", pi, limit, r1, err1, r2, err2)
			}
			sawLimit = sawLimit || r1.Summary.StatusCode == pel.StatusLimitOutputBytes
		}
	}
	if !sawLimit {
		t.Fatal("no case reached the limit")
	}
}

// TestMemoryBudget: an operational bound on the output bytes held at once.
// Declared outputs that would not fit stop the run with ErrOutOfMemory (an
// internal failure: no result) before they are allocated; outputs whose
// last reader has run no longer count.
func TestMemoryBudget(t *testing.T) {
	// Sequential: its "hostile concat" subtest measures the process's TotalAlloc.
	// 1: const "aaaa" (4 bytes); 2: concat(1, 1) (8); 3: concat(2, 2) (16).
	// When node 3 runs, node 1 is released: 8 bytes are held.
	chain := mustArtifact(t, pel.Program{Nodes: []pel.Node{
		constNode(t, 1, "aaaa"),
		concatNode(2, pel.FromNode(1, 0), pel.FromNode(1, 0)),
		concatNode(3, pel.FromNode(2, 0), pel.FromNode(2, 0)),
	}, Roots: root(3)})
	tests := []struct {
		name   string
		budget uint64
		oom    string // "" when the run succeeds
	}{
		{"unbounded", 0, ""},
		{"exact", 24, ""},
		{"one byte short", 23, "node 3: operation pel.bytes.concat version 1: out of memory: 16 output bytes declared with 8 held, above the memory budget of 23"},
		{"first node", 3, "node 1: operation pel.bytes.const version 1: out of memory: 4 output bytes declared with 0 held, above the memory budget of 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs, res, err := pel.ExecDAGWith(nil, chain, nil, nil, nil, pel.RunOptions{MemoryBudget: tc.budget})
			if tc.oom == "" {
				if err != nil || res.Status != pel.StatusOK || len(outs) != 1 || len(outs[0].Bytes) != 16 {
					t.Fatalf("got %v %+v %v", outs, res, err)
				}
				return
			}
			if !errors.Is(err, pel.ErrOutOfMemory) || !errors.Is(err, pel.ErrInternal) || !strings.Contains(err.Error(), tc.oom) {
				t.Fatalf("err = %v, want %q", err, tc.oom)
			}
			if outs != nil || res.PEL1Version != 0 {
				t.Fatalf("a result on out of memory: %+v", res)
			}
		})
	}
	t.Run("hostile concat", func(t *testing.T) {
		prog := hostileConcat(t, 5000)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := pel.ExecDAGWith(nil, prog, nil, nil, nil, pel.RunOptions{MemoryBudget: 64 << 20})
		runtime.ReadMemStats(&after)
		if !errors.Is(err, pel.ErrOutOfMemory) {
			t.Fatalf("err = %v, want ErrOutOfMemory", err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
			t.Fatalf("the run allocated %d bytes before stopping", got)
		}
	})
}

// TestWorkBudget: an operational bound on the bytes of all node outputs
// together (SPECS.md §12.8). It stops the run with ErrWorkBudget (an
// internal failure: no result) before the node that would cross it, after
// the deterministic output-bytes limit, which wins when both are crossed.
func TestWorkBudget(t *testing.T) {
	t.Parallel()
	// Outputs 4, 8 and 16 bytes: 28 in all.
	chain := mustArtifact(t, pel.Program{Nodes: []pel.Node{
		constNode(t, 1, "aaaa"),
		concatNode(2, pel.FromNode(1, 0), pel.FromNode(1, 0)),
		concatNode(3, pel.FromNode(2, 0), pel.FromNode(2, 0)),
	}, Roots: root(3)})
	tests := []struct {
		name         string
		work, limit  uint64
		wantErr      string // "" when there is a result
		wantStatusOK bool
	}{
		{"unbounded", 0, 0, "", true},
		{"exact", 28, 0, "", true},
		{"one byte short", 27, 0, "node 3: operation pel.bytes.concat version 1: work budget exceeded: outputs would total 28 bytes, above the work budget of 27", false},
		{"first node", 3, 0, "node 1: operation pel.bytes.const version 1: work budget exceeded: outputs would total 4 bytes, above the work budget of 3", false},
		{"the limit wins", 10, 10, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs, res, err := pel.ExecDAGWith(nil, chain, nil, nil, nil, pel.RunOptions{WorkBudget: tc.work, Limits: pel.Limits{MaxOutputBytes: tc.limit}})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if ok := res.Status == pel.StatusOK; ok != tc.wantStatusOK || (!ok && res.Summary.StatusCode != pel.StatusLimitOutputBytes) {
					t.Fatalf("result %+v", res)
				}
				return
			}
			if !errors.Is(err, pel.ErrWorkBudget) || !errors.Is(err, pel.ErrInternal) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if outs != nil || res.PEL1Version != 0 {
				t.Fatalf("a result past the work budget: %+v", res)
			}
		})
	}
	t.Run("doubling chain of 64", func(t *testing.T) {
		nodes := []pel.Node{constNode(t, 1, "a")}
		for id := pel.NodeID(2); id <= 64; id++ {
			nodes = append(nodes, concatNode(id, pel.FromNode(id-1, 0), pel.FromNode(id-1, 0)))
		}
		prog := mustArtifact(t, pel.Program{Nodes: nodes, Roots: root(64)})
		_, _, err := pel.ExecDAGWith(nil, prog, nil, nil, nil, pel.RunOptions{WorkBudget: 1 << 20})
		// Totals 2^k - 1 after node k: node 21 would bring 2^21 - 1.
		if !errors.Is(err, pel.ErrWorkBudget) || !strings.Contains(err.Error(), "node 21:") {
			t.Fatalf("err = %v, want the work budget at node 21", err)
		}
	})
}
