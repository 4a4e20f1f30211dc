package pel_test

import (
	"errors"
	"os"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

func TestCanonicalOrder(t *testing.T) {
	t.Parallel()
	n := func(id pel.NodeID, deps ...pel.NodeID) pel.Node {
		node := pel.Node{ID: id, Op: opreg.OpConcat, Params: []byte{}}
		for _, d := range deps {
			node.Inputs = append(node.Inputs, pel.FromNode(d, 0))
		}
		return node
	}
	tests := []struct {
		name  string
		nodes []pel.Node
		want  []pel.NodeID
	}{
		{"empty", nil, []pel.NodeID{}},
		{"independent", []pel.Node{n(1), n(5), n(9)}, []pel.NodeID{1, 5, 9}},
		{"reverse chain", []pel.Node{n(1, 2), n(2, 3), n(3)}, []pel.NodeID{3, 2, 1}},
		// 4 becomes ready after 3 but 2 is smaller; 1 waits for 4.
		{"smallest ready first", []pel.Node{n(1, 4), n(2), n(3), n(4, 3)}, []pel.NodeID{2, 3, 4, 1}},
		{"diamond", []pel.Node{n(1, 2, 3), n(2, 4), n(3, 4), n(4)}, []pel.NodeID{4, 2, 3, 1}},
		{"sparse ids", []pel.Node{n(10, 4000000000), n(20), n(4000000000, 20)}, []pel.NodeID{20, 4000000000, 10}},
		{"repeated edge", []pel.Node{n(1), n(2, 1, 1, 1)}, []pel.NodeID{1, 2}},
		// Ready set grows out of id order: 7 is placed before 3 is ready.
		{"late small id", []pel.Node{n(3, 8), n(7), n(8, 7)}, []pel.NodeID{7, 8, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pel.CanonicalOrder(pel.Program{Nodes: tt.nodes})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("order %v, want %v", got, tt.want)
			}
			if brute := bruteOrder(tt.nodes); !slices.Equal(got, brute) {
				t.Fatalf("order %v, seed §4.1 literal algorithm gives %v", got, brute)
			}
		})
	}
}

// bruteOrder is seed §4.1 taken literally: O(N^2), for cross-checking.
func bruteOrder(nodes []pel.Node) []pel.NodeID {
	placed := map[pel.NodeID]bool{}
	order := []pel.NodeID{}
	for len(order) < len(nodes) {
		best := -1
		for i, n := range nodes {
			if placed[n.ID] {
				continue
			}
			ready := true
			for _, in := range n.Inputs {
				if in.Kind == pel.InputNode && !placed[in.NodeID] {
					ready = false
				}
			}
			if ready && (best < 0 || n.ID < nodes[best].ID) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		placed[nodes[best].ID] = true
		order = append(order, nodes[best].ID)
	}
	return order
}

func TestStructureErrors(t *testing.T) {
	t.Parallel()
	c := func(id pel.NodeID, ins ...pel.DagInput) pel.Node { return concatNode(id, ins...) }
	tests := []struct {
		name string
		p    pel.Program
		code uint32
		msg  string
	}{
		{"dangling input", pel.Program{Nodes: []pel.Node{c(1, pel.External(0), pel.FromNode(7, 0))}}, pel.DiagDanglingInput, "node 1 input 1 refers to missing node 7"},
		{"self loop", pel.Program{Nodes: []pel.Node{c(1), c(2, pel.FromNode(1, 0), pel.FromNode(2, 0))}}, pel.DiagSelfLoop, "node 2 input 1 refers to node 2 itself"},
		{"dangling root", pel.Program{Nodes: []pel.Node{c(1)}, Roots: []pel.RootRef{{1, 0}, {2, 0}}}, pel.DiagDanglingRoot, "root 1 refers to missing node 2"},
		{"two-cycle", pel.Program{Nodes: []pel.Node{c(1), c(2, pel.FromNode(3, 0)), c(3, pel.FromNode(2, 0))}}, pel.DiagCycle, "dependency cycle: 2 nodes cannot be ordered, lowest node id 2"},
		{"cycle with tail", pel.Program{Nodes: []pel.Node{c(1, pel.FromNode(4, 0)), c(4, pel.FromNode(5, 0)), c(5, pel.FromNode(4, 0))}}, pel.DiagCycle, "dependency cycle: 3 nodes cannot be ordered, lowest node id 1"},
		// Inputs are checked before roots, and dangling before cycles.
		{"input before root", pel.Program{Nodes: []pel.Node{c(1, pel.FromNode(1, 0))}, Roots: []pel.RootRef{{9, 0}}}, pel.DiagSelfLoop, "node 1 input 0 refers to node 1 itself"},
		{"dangling before cycle", pel.Program{Nodes: []pel.Node{c(1, pel.FromNode(2, 0)), c(2, pel.FromNode(1, 0)), c(3, pel.FromNode(4, 0))}}, pel.DiagDanglingInput, "node 3 input 0 refers to missing node 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, check := range []func() error{
				func() error { return pel.CheckStructure(tt.p) },
				func() error { _, err := pel.CanonicalOrder(tt.p); return err },
				func() error { _, err := pel.Prepare(tt.p, nil); return err },
			} {
				err := check()
				var pe *pel.ProgramError
				if !errors.As(err, &pe) || pe.Code != tt.code || pe.Message != tt.msg {
					t.Fatalf("err %v, want code %d %q", err, tt.code, tt.msg)
				}
				if !errors.Is(err, pel.ErrInvalidProgram) {
					t.Fatal("does not wrap ErrInvalidProgram")
				}
			}
		})
	}
}

func TestPrepareErrors(t *testing.T) {
	t.Parallel()
	unknown := pel.Node{ID: 2, Op: pel.OperationID{Name: "acme.nope", Version: 1}}
	badParams := pel.Node{ID: 1, Op: opreg.OpConcat, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{0}}
	tests := []struct {
		name string
		p    pel.Program
		code uint32
		msg  string
	}{
		{"unknown op", pel.Program{Nodes: []pel.Node{unknown}}, pel.DiagUnknownOperation, "node 2: unknown operation acme.nope version 1"},
		{"unknown version", pel.Program{Nodes: []pel.Node{{ID: 3, Op: pel.OperationID{Name: opreg.NameConst, Version: 2}}}}, pel.DiagUnknownOperation, "node 3: unknown operation pel.bytes.const version 2"},
		// All operations are resolved before any params are decoded.
		{"unknown op beats params", pel.Program{Nodes: []pel.Node{badParams, unknown}}, pel.DiagUnknownOperation, "node 2: unknown operation acme.nope version 1"},
		{"bad params", pel.Program{Nodes: []pel.Node{badParams}}, pel.DiagParamsDecode, "node 1: params of operation pel.bytes.concat version 1 do not decode"},
		{"concat arity", pel.Program{Nodes: []pel.Node{concatNode(1)}}, pel.DiagArity, "node 1: operation pel.bytes.concat version 1 takes at least 1 inputs, got 0"},
		{"const arity", pel.Program{Nodes: []pel.Node{{ID: 4, Op: opreg.OpConst, Inputs: []pel.DagInput{pel.External(0)}, Params: constParams(t, "a")}}}, pel.DiagArity, "node 4: operation pel.bytes.const version 1 takes exactly 0 inputs, got 1"},
		// Arity and params are checked per node in ascending id order.
		{"params before later arity", pel.Program{Nodes: []pel.Node{badParams, concatNode(2)}}, pel.DiagParamsDecode, "node 1: params of operation pel.bytes.concat version 1 do not decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pel.Prepare(tt.p, nil)
			var pe *pel.ProgramError
			if !errors.As(err, &pe) || pe.Code != tt.code || pe.Message != tt.msg {
				t.Fatalf("err %v, want code %d %q", err, tt.code, tt.msg)
			}
			if errors.Is(err, enc.ErrMalformed) {
				t.Fatal("a validation error claims to be a decode error")
			}
		})
	}
}

func TestPlanAccessors(t *testing.T) {
	t.Parallel()
	p, _ := pel.Seed(pel.SeedSlice)
	pl, err := pel.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := pl.Params(1); err != nil || v != (opreg.SliceParams{Offset: 1, Length: 3}) {
		t.Fatalf("params %v %v", v, err)
	}
	if _, err := pl.Params(2); err == nil {
		t.Fatal("params of a missing node")
	}
	if !slices.Equal(pl.Order(), []pel.NodeID{1}) || !pl.Program().Equal(p) {
		t.Fatal("accessors")
	}
}

// heavy reports whether the AMDUAT_HEAVY=1 cases run.
func heavy() bool { return os.Getenv("AMDUAT_HEAVY") == "1" }

// A million-node chain validates, orders and runs on a small fixed stack
// limit: nothing recurses per node. Under -short or -race it uses 200k
// nodes.
func TestLongChainNoRecursion(t *testing.T) {
	// Sequential: the stack limit it sets binds every goroutine of the process.
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 200_000
	}
	p := chain(t, n)
	a := mustArtifact(t, p)
	old := debug.SetMaxStack(1 << 20)
	defer debug.SetMaxStack(old)

	order, err := pel.CanonicalOrder(p)
	if err != nil || len(order) != n || order[0] != 1 || order[n-1] != pel.NodeID(n) {
		t.Fatalf("order: %v (len %d)", err, len(order))
	}
	outs, res := pel.ExecDAG(nil, a, nil, nil, nil)
	if res.Status != pel.StatusOK || len(outs) != 1 || string(outs[0].Bytes) != "x" {
		t.Fatalf("status %s outputs %v", res.Status, outs)
	}

	// The same chain closed into a cycle is rejected.
	p.Nodes[0] = concatNode(1, pel.FromNode(pel.NodeID(n), 0))
	if _, err := pel.CanonicalOrder(p); err == nil {
		t.Fatal("cycle of a million nodes accepted")
	}
}

func TestWideFanIn(t *testing.T) {
	t.Parallel()
	n := 100_000
	if heavy() {
		n = 1_000_000
	}
	p := fanIn(t, n)
	outs, res := pel.ExecDAG(nil, mustArtifact(t, p), nil, nil, nil)
	if res.Status != pel.StatusOK || len(outs[0].Bytes) != n-1 {
		t.Fatalf("status %s", res.Status)
	}
}
