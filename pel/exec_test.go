package pel_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

var (
	helloIn = asl.Untagged([]byte("hello"))
	worldIn = asl.Tagged(0x42, []byte(" world"))
)

type diagWant struct {
	code uint32
	msg  string
}

// userRegistry extends the kernel with test operations:
//
//	test.pair@1    0 inputs -> two outputs "a", "b"
//	test.fail@1    1 input  -> RUNTIME_FAILED 0x00ab0007 with two diagnostics
//	test.reserved@1 status code from params (0, 2 or 3) -> contract violation
func userRegistry(t testing.TB) *opreg.Registry {
	raw := func(b []byte) (any, error) { return b, nil }
	enc := func(v any) ([]byte, error) { return v.([]byte), nil }
	r, err := opreg.Kernel().Extend(
		opreg.Operation{ID: pel.OperationID{Name: "test.pair", Version: 1}, DecodeParams: raw, EncodeParams: enc,
			Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
				return []asl.Artifact{asl.Untagged([]byte("a")), asl.Untagged([]byte("b"))}, nil
			}},
		opreg.Operation{ID: pel.OperationID{Name: "test.fail", Version: 1}, MinInputs: 1, MaxInputs: 1, DecodeParams: raw, EncodeParams: enc,
			Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
				return nil, &opreg.OpError{StatusCode: 0x00ab0007, Diagnostics: []opreg.Diagnostic{{Code: 1, Message: []byte("first")}, {Code: 2, Message: []byte("second")}}}
			}},
		opreg.Operation{ID: pel.OperationID{Name: "test.reserved", Version: 1}, DecodeParams: raw, EncodeParams: enc,
			Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
				return nil, &opreg.OpError{StatusCode: uint32(c.Params.([]byte)[0])}
			}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func userNode(id pel.NodeID, name string, params []byte, in ...pel.DagInput) pel.Node {
	return pel.Node{ID: id, Op: pel.OperationID{Name: name, Version: 1}, Inputs: in, Params: params}
}

func TestExecDAGBranches(t *testing.T) {
	t.Parallel()
	reg := userRegistry(t)
	prog := func(p pel.Program) asl.Artifact { return mustArtifact(t, p) }
	raw := func(b []byte) asl.Artifact { return asl.Tagged(asl.TagPELProgramDAG1, b) }
	seed := func(name string) asl.Artifact { a, _ := pel.SeedArtifact(name); return a }
	params := asl.Tagged(0x77, []byte("cfg"))
	hashHello := "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

	tests := []struct {
		name    string
		program asl.Artifact
		inputs  []asl.Artifact
		params  *asl.Artifact
		status  pel.ExecutionStatus
		code    uint32
		diags   []diagWant
		outputs []string // hex of output bytes, when OK
	}{
		// Step 1: tag, decoding, structure.
		{"untagged program", asl.Untagged(seed(pel.SeedConst).Bytes), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x1, "program artifact type tag is none, want 0x00000101"}}, nil},
		{"wrong tag", asl.Tagged(asl.TagPELTraceDAG1, seed(pel.SeedConst).Bytes), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x1, "program artifact type tag is 0x00000102, want 0x00000101"}}, nil},
		{"undecodable", raw(unhex(t, "0000000000000001")), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x2, "program bytes malformed: field root_count at offset 4"}}, nil},
		{"trailing bytes", raw(append(seed(pel.SeedConst).Bytes, 0)), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x2, "program bytes malformed: field end of input at offset 61"}}, nil},
		{"duplicate id", raw(rawProgram([]rawNode{{id: 5, name: "x"}, {id: 5, name: "y"}})), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x3, "duplicate node id 5"}}, nil},
		{"unordered ids", raw(rawProgram([]rawNode{{id: 5, name: "x"}, {id: 4, name: "y"}})), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x4, "node id 4 follows node id 5; nodes must be in ascending id order"}}, nil},
		{"dangling input", prog(pel.Program{Nodes: []pel.Node{concatNode(1, pel.FromNode(2, 0))}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x5, "node 1 input 0 refers to missing node 2"}}, nil},
		{"self loop", prog(pel.Program{Nodes: []pel.Node{concatNode(1, pel.FromNode(1, 0))}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x6, "node 1 input 0 refers to node 1 itself"}}, nil},
		{"dangling root", prog(pel.Program{Nodes: []pel.Node{constNode(t, 1, "a")}, Roots: root(3)}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x7, "root 0 refers to missing node 3"}}, nil},
		{"cycle", prog(pel.Program{Nodes: []pel.Node{concatNode(1, pel.FromNode(2, 0)), concatNode(2, pel.FromNode(1, 0))}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x8, "dependency cycle: 2 nodes cannot be ordered, lowest node id 1"}}, nil},
		// Structure is checked before operations are resolved.
		{"structure before unknown op", prog(pel.Program{Nodes: []pel.Node{userNode(1, "acme.none", nil, pel.FromNode(1, 0))}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x6, "node 1 input 0 refers to node 1 itself"}}, nil},

		// Step 2: operations, arity, params.
		{"unknown op", prog(pel.Program{Nodes: []pel.Node{constNode(t, 1, "a"), userNode(2, "acme.none", nil)}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0x9, "node 2: unknown operation acme.none version 1"}}, nil},
		{"arity", prog(pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpSlice, Inputs: []pel.DagInput{pel.External(0), pel.External(1)}, Params: opreg.EncodeSliceParams(opreg.SliceParams{})}}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0xa, "node 1: operation pel.bytes.slice version 1 takes exactly 1 inputs, got 2"}}, nil},
		{"params decode", prog(pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpConst, Params: []byte{9}}}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0xb, "node 1: params of operation pel.bytes.const version 1 do not decode"}}, nil},
		// Params are INVALID_PROGRAM regardless of inputs (seed §3.1).
		{"params decode with inputs", prog(pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpHash, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{1}}}}), []asl.Artifact{helloIn}, &params, pel.StatusInvalidProgram, 2,
			[]diagWant{{0xb, "node 1: params of operation pel.bytes.hash.asl1 version 1 do not decode"}}, nil},

		// Step 3: evaluation in canonical order.
		{"missing input", seed(pel.SeedConcat), []asl.Artifact{helloIn}, nil, pel.StatusInvalidInputs, 3,
			[]diagWant{{0xc, "node 1 input 1: external input index 1 out of range (1 inputs given)"}}, nil},
		{"no inputs", seed(pel.SeedHash), nil, nil, pel.StatusInvalidInputs, 3,
			[]diagWant{{0xc, "node 1 input 0: external input index 0 out of range (0 inputs given)"}}, nil},
		{"missing global params", prog(pel.Program{Nodes: []pel.Node{{ID: 3, Op: opreg.OpParams, Params: []byte{}}}, Roots: root(3)}), nil, nil, pel.StatusInvalidInputs, 3,
			[]diagWant{{0xd, "node 3: operation pel.bytes.params version 1 needs the global params artifact, none given"}}, nil},
		{"global params", prog(pel.Program{Nodes: []pel.Node{{ID: 3, Op: opreg.OpParams, Params: []byte{}}}, Roots: root(3)}), nil, &params, pel.StatusOK, 0,
			nil, []string{"636667"}},
		{"node output index", prog(pel.Program{Nodes: []pel.Node{constNode(t, 1, "a"), concatNode(2, pel.FromNode(1, 1))}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0xe, "node 2 input 0: node 1 has 1 outputs, output index 1 out of range"}}, nil},
		{"runtime failure", seed(pel.SeedSlice), []asl.Artifact{asl.Untagged([]byte("ab"))}, nil, pel.StatusRuntimeFailed, 0x00030001,
			[]diagWant{{0x10, "node 1: operation pel.bytes.slice version 1 failed with status code 0x00030001"}, {0x00030001, "slice offset 1 + length 3 exceeds input length 2"}}, nil},
		{"user runtime failure", prog(pel.Program{Nodes: []pel.Node{userNode(1, "test.fail", nil, pel.External(0))}}), []asl.Artifact{helloIn}, nil, pel.StatusRuntimeFailed, 0x00ab0007,
			[]diagWant{{0x10, "node 1: operation test.fail version 1 failed with status code 0x00ab0007"}, {1, "first"}, {2, "second"}}, nil},
		{"reserved code 0", prog(pel.Program{Nodes: []pel.Node{userNode(1, "test.reserved", []byte{0})}}), nil, nil, pel.StatusRuntimeFailed, 1,
			[]diagWant{{0x11, "node 1: operation test.reserved version 1 returned reserved status code 0"}}, nil},
		{"reserved code 3", prog(pel.Program{Nodes: []pel.Node{userNode(1, "test.reserved", []byte{3})}}), nil, nil, pel.StatusRuntimeFailed, 1,
			[]diagWant{{0x11, "node 1: operation test.reserved version 1 returned reserved status code 3"}}, nil},
		// Canonical order decides which failure is reported: node 2 runs
		// before node 1 (1 depends on 3).
		{"earlier runtime failure wins", prog(pel.Program{Nodes: []pel.Node{
			concatNode(1, pel.FromNode(3, 0), pel.External(5)),
			sliceNode(2, 9, 9, pel.External(0)),
			constNode(t, 3, "c"),
		}}), []asl.Artifact{helloIn}, nil, pel.StatusRuntimeFailed, 0x00030001,
			[]diagWant{{0x10, "node 2: operation pel.bytes.slice version 1 failed with status code 0x00030001"}, {0x00030001, "slice offset 9 + length 9 exceeds input length 5"}}, nil},
		{"earlier input failure wins", prog(pel.Program{Nodes: []pel.Node{
			sliceNode(1, 9, 9, pel.FromNode(3, 0)),
			concatNode(2, pel.External(5)),
			constNode(t, 3, "c"),
		}}), []asl.Artifact{helloIn}, nil, pel.StatusInvalidInputs, 3,
			[]diagWant{{0xc, "node 2 input 0: external input index 5 out of range (1 inputs given)"}}, nil},
		{"inputs resolve in order", prog(pel.Program{Nodes: []pel.Node{constNode(t, 1, "a"), concatNode(2, pel.FromNode(1, 4), pel.External(9))}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0xe, "node 2 input 0: node 1 has 1 outputs, output index 4 out of range"}}, nil},

		// Step 4: roots.
		{"root output index", prog(pel.Program{Nodes: []pel.Node{constNode(t, 1, "a")}, Roots: []pel.RootRef{{1, 0}, {1, 1}}}), nil, nil, pel.StatusInvalidProgram, 2,
			[]diagWant{{0xf, "root 1: node 1 has 1 outputs, output index 1 out of range"}}, nil},
		{"runtime failure beats root check", prog(pel.Program{Nodes: []pel.Node{sliceNode(1, 9, 9, pel.External(0))}, Roots: []pel.RootRef{{1, 5}}}), []asl.Artifact{helloIn}, nil, pel.StatusRuntimeFailed, 0x00030001,
			[]diagWant{{0x10, "node 1: operation pel.bytes.slice version 1 failed with status code 0x00030001"}, {0x00030001, "slice offset 9 + length 9 exceeds input length 5"}}, nil},

		// Success.
		{"seed const", seed(pel.SeedConst), nil, nil, pel.StatusOK, 0, nil, []string{"68656c6c6f"}},
		{"seed concat", seed(pel.SeedConcat), []asl.Artifact{helloIn, worldIn}, nil, pel.StatusOK, 0, nil, []string{"68656c6c6f20776f726c64"}},
		{"seed concat1", seed(pel.SeedConcat1), []asl.Artifact{worldIn}, nil, pel.StatusOK, 0, nil, []string{"20776f726c64"}},
		{"seed slice", seed(pel.SeedSlice), []asl.Artifact{helloIn}, nil, pel.StatusOK, 0, nil, []string{"656c6c"}},
		{"seed hash", seed(pel.SeedHash), []asl.Artifact{helloIn}, nil, pel.StatusOK, 0, nil, []string{hashHello}},
		{"seed const-hash", seed(pel.SeedConstHash), nil, nil, pel.StatusOK, 0, nil, []string{hashHello}},
		{"extra inputs and params ignored", seed(pel.SeedConst), []asl.Artifact{helloIn}, &params, pel.StatusOK, 0, nil, []string{"68656c6c6f"}},
		{"empty program", prog(pel.Program{}), nil, nil, pel.StatusOK, 0, nil, []string{}},
		{"no roots", prog(pel.Program{Nodes: []pel.Node{constNode(t, 1, "a")}}), nil, nil, pel.StatusOK, 0, nil, []string{}},
		{"roots in order, repeated", prog(pel.Program{Nodes: []pel.Node{userNode(1, "test.pair", nil)}, Roots: []pel.RootRef{{1, 1}, {1, 0}, {1, 1}}}), nil, nil, pel.StatusOK, 0,
			nil, []string{"62", "61", "62"}},
		{"second output as input", prog(pel.Program{Nodes: []pel.Node{userNode(1, "test.pair", nil), concatNode(2, pel.FromNode(1, 1), pel.FromNode(1, 0), pel.External(0))}, Roots: root(2)}), []asl.Artifact{helloIn}, nil, pel.StatusOK, 0,
			nil, []string{"626168656c6c6f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outs, res := pel.ExecDAG(reg, tt.program, tt.inputs, tt.params, nil)
			checkResultInvariants(t, outs, res)
			if res.Status != tt.status || res.Summary.StatusCode != tt.code {
				t.Fatalf("status %s code 0x%08x (%s), want %s 0x%08x", res.Status, res.Summary.StatusCode, diagText(res.Diagnostics), tt.status, tt.code)
			}
			if len(res.Diagnostics) != len(tt.diags) {
				t.Fatalf("diagnostics %s, want %v", diagText(res.Diagnostics), tt.diags)
			}
			for i, d := range tt.diags {
				if res.Diagnostics[i].Code != d.code || string(res.Diagnostics[i].Message) != d.msg {
					t.Fatalf("diagnostic %d = 0x%x %q, want 0x%x %q", i, res.Diagnostics[i].Code, res.Diagnostics[i].Message, d.code, d.msg)
				}
			}
			if tt.status == pel.StatusOK {
				if len(outs) != len(tt.outputs) {
					t.Fatalf("%d outputs, want %d", len(outs), len(tt.outputs))
				}
				for i, h := range tt.outputs {
					if !bytes.Equal(outs[i].Bytes, unhex(t, h)) {
						t.Fatalf("output %d = %x, want %s", i, outs[i].Bytes, h)
					}
				}
			}
		})
	}
}

func diagText(ds []pel.DiagnosticEntry) string {
	s := ""
	for _, d := range ds {
		s += fmt.Sprintf("[0x%x %q]", d.Code, d.Message)
	}
	return s
}

// checkResultInvariants asserts what every Exec_DAG result must satisfy.
func checkResultInvariants(t testing.TB, outs []asl.Artifact, res pel.ExecutionResultValue) {
	t.Helper()
	if err := res.Validate(); err != nil {
		t.Fatalf("invalid result: %v", err)
	}
	if res.SchemeRef != pel.SchemeRefDAG1 || res.PEL1Version != 1 {
		t.Fatalf("scheme_ref %s version %d", res.SchemeRef, res.PEL1Version)
	}
	if res.Status == pel.StatusSchemeUnsupported {
		t.Fatal("Exec_DAG produced SCHEME_UNSUPPORTED")
	}
	if res.Status != pel.StatusOK && len(outs) != 0 {
		t.Fatalf("status %s with %d outputs", res.Status, len(outs))
	}
	if res.Status == pel.StatusOK && len(res.Diagnostics) != 0 {
		t.Fatal("OK with diagnostics")
	}
	b, err := pel.EncodeResultValue(res)
	if err != nil {
		t.Fatal(err)
	}
	back, err := pel.DecodeResultValue(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := pel.EncodeResultValue(back); !bytes.Equal(b, b2) {
		t.Fatal("result does not round-trip")
	}
}

// Equal arguments give byte-identical results and outputs, also when run
// concurrently on a shared registry and program.
func TestExecDAGDeterministic(t *testing.T) {
	t.Parallel()
	reg := userRegistry(t)
	p := pel.Program{Nodes: []pel.Node{
		constNode(t, 1, "abc"),
		userNode(2, "test.pair", nil),
		concatNode(3, pel.FromNode(1, 0), pel.FromNode(2, 1), pel.External(0)),
		hashNode(4, pel.FromNode(3, 0)),
		sliceNode(5, 1, 2, pel.FromNode(3, 0)),
	}, Roots: []pel.RootRef{{4, 0}, {5, 0}, {3, 0}}}
	a := mustArtifact(t, p)
	fingerprint := func() string {
		outs, res := pel.ExecDAG(reg, a, []asl.Artifact{helloIn}, nil, nil)
		b, err := pel.EncodeResultValue(res)
		if err != nil {
			t.Error(err)
		}
		s := fmt.Sprintf("%x", b)
		for _, o := range outs {
			s += fmt.Sprintf("|%x", asl.EncodeArtifact(o))
		}
		return s
	}
	want := fingerprint()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				if got := fingerprint(); got != want {
					t.Errorf("run differs:\n%s\n%s", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestObserverEvents(t *testing.T) {
	t.Parallel()
	p := pel.Program{Nodes: []pel.Node{
		concatNode(1, pel.FromNode(3, 0)),
		constNode(t, 2, "two"),
		constNode(t, 3, "three"),
		sliceNode(4, 0, 10, pel.FromNode(1, 0)),
		hashNode(5, pel.FromNode(4, 0)),
	}, Roots: root(5)}
	var got []pel.NodeEvent
	obs := pel.ObserverFunc(func(e pel.NodeEvent) { got = append(got, e) })
	_, res := pel.ExecDAG(nil, mustArtifact(t, p), nil, nil, obs)
	if res.Status != pel.StatusRuntimeFailed {
		t.Fatalf("status %s", res.Status)
	}
	wantIDs := []pel.NodeID{2, 3, 1, 4} // 5 is never reached
	if len(got) != len(wantIDs) {
		t.Fatalf("%d events, want %d", len(got), len(wantIDs))
	}
	for i, e := range got {
		if e.NodeID != wantIDs[i] {
			t.Fatalf("event %d is node %d, want %d", i, e.NodeID, wantIDs[i])
		}
	}
	if e := got[2]; e.Status != pel.StatusOK || e.Op != opreg.OpConcat || len(e.Outputs) != 1 || string(e.Outputs[0].Bytes) != "three" || e.Diagnostics != nil {
		t.Fatalf("event for node 1: %+v", e)
	}
	last := got[3]
	if last.Status != pel.StatusRuntimeFailed || last.StatusCode != res.Summary.StatusCode || last.Outputs != nil || diagText(last.Diagnostics) != diagText(res.Diagnostics) {
		t.Fatalf("failing event %+v, result %+v", last, res)
	}

	// Validation failures report no events.
	got = nil
	pel.ExecDAG(nil, mustArtifact(t, pel.Program{Nodes: []pel.Node{concatNode(1)}}), nil, nil, obs)
	if len(got) != 0 {
		t.Fatalf("%d events for an invalid program", len(got))
	}
}

func TestPlanRunReuse(t *testing.T) {
	t.Parallel()
	p, _ := pel.Seed(pel.SeedConcat)
	pl, err := pel.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][2]string{{"a", "b"}, {"", "xyz"}} {
		outs, res := pl.Run([]asl.Artifact{asl.Untagged([]byte(in[0])), asl.Untagged([]byte(in[1]))}, nil, nil)
		if res.Status != pel.StatusOK || string(outs[0].Bytes) != in[0]+in[1] {
			t.Fatalf("%v: %s %v", in, res.Status, outs)
		}
	}
}

// boundedKernelProgram reports whether every node output of a valid kernel
// program stays within limit bytes, so that fuzzing cannot build doubling
// concat chains that exhaust memory (out-of-memory is outside the model).
func boundedKernelProgram(b []byte, inputs []asl.Artifact, params *asl.Artifact, limit uint64) bool {
	p, err := pel.DecodeProgram(b)
	if err != nil {
		return true
	}
	pl, err := pel.Prepare(p, nil)
	if err != nil {
		return true
	}
	size := map[pel.NodeID]uint64{}
	for _, id := range pl.Order() {
		n := p.Nodes[0]
		for _, m := range p.Nodes {
			if m.ID == id {
				n = m
			}
		}
		var s uint64
		switch n.Op {
		case opreg.OpConst:
			s = uint64(len(n.Params))
		case opreg.OpHash:
			s = 32
		case opreg.OpParams:
			if params != nil {
				s = uint64(len(params.Bytes))
			}
		default: // concat, slice: at most the sum of the inputs
			for _, in := range n.Inputs {
				if in.Kind == pel.InputExternal {
					if int(in.InputIndex) < len(inputs) {
						s += uint64(len(inputs[in.InputIndex].Bytes))
					}
				} else {
					s += size[in.NodeID]
				}
				if s > limit {
					return false
				}
			}
		}
		size[id] = s
	}
	return true
}

func FuzzExecDAG(f *testing.F) {
	for _, name := range pel.SeedNames() {
		a, _ := pel.SeedArtifact(name)
		f.Add(a.Bytes, true, uint8(2))
	}
	f.Add(mustArtifact(f, chain(f, 20)).Bytes, false, uint8(0))
	f.Add(rawProgram([]rawNode{{id: 1, name: "pel.bytes.params", version: 1}}, [2]uint32{1, 0}), false, uint8(0))
	f.Add(rawProgram([]rawNode{{id: 1, name: "pel.bytes.concat", version: 1, inputs: [][]byte{nodeIn(1, 0)}}}, [2]uint32{1, 0}), true, uint8(1))
	f.Add(unhex(f, "ffffffff00000000"), true, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, withParams bool, nInputs uint8) {
		inputs := []asl.Artifact{helloIn, worldIn, asl.Untagged(nil)}[:nInputs%4%3]
		var params *asl.Artifact
		if withParams {
			params = &asl.Artifact{Bytes: []byte("p"), Tag: 1, HasTag: true}
		}
		if !boundedKernelProgram(b, inputs, params, 1<<20) {
			t.Skip("outputs could exceed 1 MiB")
		}
		a := asl.Tagged(asl.TagPELProgramDAG1, b)
		outs, res := pel.ExecDAG(nil, a, inputs, params, nil)
		checkResultInvariants(t, outs, res)
		outs2, res2 := pel.ExecDAG(nil, a, inputs, params, nil)
		r1, _ := pel.EncodeResultValue(res)
		r2, _ := pel.EncodeResultValue(res2)
		if !bytes.Equal(r1, r2) || len(outs) != len(outs2) {
			t.Fatal("nondeterministic result")
		}
		for i := range outs {
			if !bytes.Equal(asl.EncodeArtifact(outs[i]), asl.EncodeArtifact(outs2[i])) {
				t.Fatal("nondeterministic output")
			}
		}
		if res.Status == pel.StatusOK {
			p, err := pel.DecodeProgram(b)
			if err != nil || len(outs) != len(p.Roots) {
				t.Fatalf("OK with %d outputs (decode err %v)", len(outs), err)
			}
		}
	})
}
