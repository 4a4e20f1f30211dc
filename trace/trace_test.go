package trace_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/internal/golden"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, "testdata/"+name, got)
}

func ref(s string) asl.Reference {
	return asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(s)))
}

// run executes program through a Builder and returns the trace, with the
// references a surface would use (the result stand-in is its encoded value).
func run(t testing.TB, program asl.Artifact, inputs []asl.Artifact, params *asl.Artifact, hash asl.HashID) ([]asl.Artifact, pel.ExecutionResultValue, trace.Trace) {
	t.Helper()
	b, err := trace.NewBuilder(hash)
	if err != nil {
		t.Fatal(err)
	}
	outs, res := pel.ExecDAG(nil, program, inputs, params, b)
	rb, err := pel.EncodeResultValue(res)
	if err != nil {
		t.Fatal(err)
	}
	l := trace.Links{ProgramRef: asl.MustDerive(hash, program), ExecResultRef: asl.MustDerive(hash, asl.Tagged(asl.TagPEL1Result1, rb))}
	for _, in := range inputs {
		l.InputRefs = append(l.InputRefs, asl.MustDerive(hash, in))
	}
	if params != nil {
		l.ParamsRef, l.HasParams = asl.MustDerive(hash, *params), true
	}
	tr, err := b.Finish(l, res)
	if err != nil {
		t.Fatal(err)
	}
	return outs, res, tr
}

func seed(t testing.TB, name string) asl.Artifact {
	a, err := pel.SeedArtifact(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func program(t testing.TB, p pel.Program) asl.Artifact {
	a, err := pel.ProgramArtifact(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func roundTrip(t testing.TB, tr trace.Trace) []byte {
	t.Helper()
	b, err := trace.Encode(tr)
	if err != nil {
		t.Fatal(err)
	}
	back, err := trace.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := trace.Encode(back)
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("encode(decode(b)) differs: %v", err)
	}
	return b
}

func TestBuilderOK(t *testing.T) {
	for _, hash := range []asl.HashID{asl.HashSHA256, asl.HashBLAKE3} {
		outs, res, tr := run(t, seed(t, pel.SeedConstHash), nil, nil, hash)
		if res.Status != pel.StatusOK || tr.Status != pel.StatusOK || tr.StatusCode != 0 {
			t.Fatalf("status %s / %s", res.Status, tr.Status)
		}
		if len(tr.Nodes) != 2 || tr.Nodes[0].NodeID != 1 || tr.Nodes[1].NodeID != 2 || tr.Nodes[1].Op != opreg.OpHash {
			t.Fatalf("records %+v", tr.Nodes)
		}
		// The root node's output ref is the ref of the scheme output.
		if got := tr.Nodes[1].OutputRefs[0]; got != asl.MustDerive(hash, outs[0]) || got.HashID() != hash {
			t.Fatalf("output ref %s", got)
		}
		if tr.SchemeRef != pel.SchemeRefDAG1 || tr.HasParams || len(tr.InputRefs) != 0 {
			t.Fatalf("links %+v", tr)
		}
		roundTrip(t, tr)
	}
}

func TestBuilderFailures(t *testing.T) {
	params := asl.Untagged([]byte("cfg"))
	tests := []struct {
		name    string
		program asl.Artifact
		inputs  []asl.Artifact
		params  *asl.Artifact
		status  pel.ExecutionStatus
		records []pel.ExecutionStatus
	}{
		{"runtime failure", program(t, pel.Program{Nodes: []pel.Node{
			{ID: 1, Op: opreg.OpConcat, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{}},
			{ID: 2, Op: opreg.OpSlice, Inputs: []pel.DagInput{pel.FromNode(1, 0)}, Params: opreg.EncodeSliceParams(opreg.SliceParams{Offset: 4, Length: 4})},
			{ID: 3, Op: opreg.OpHash, Inputs: []pel.DagInput{pel.FromNode(2, 0)}, Params: []byte{}},
		}, Roots: []pel.RootRef{{NodeID: 3}}}), []asl.Artifact{asl.Untagged([]byte("abc"))}, &params,
			pel.StatusRuntimeFailed, []pel.ExecutionStatus{pel.StatusOK, pel.StatusRuntimeFailed}},
		{"missing input", seed(t, pel.SeedConcat), []asl.Artifact{asl.Untagged([]byte("a"))}, nil,
			pel.StatusInvalidInputs, []pel.ExecutionStatus{pel.StatusInvalidInputs}},
		{"invalid program", asl.Untagged(nil), nil, nil, pel.StatusInvalidProgram, nil},
		{"root out of range", program(t, pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpHash, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{}}}, Roots: []pel.RootRef{{NodeID: 1, OutputIndex: 1}}}),
			[]asl.Artifact{asl.Untagged(nil)}, nil, pel.StatusInvalidProgram, []pel.ExecutionStatus{pel.StatusOK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, res, tr := run(t, tt.program, tt.inputs, tt.params, asl.HashSHA256)
			if res.Status != tt.status || tr.Status != tt.status || tr.StatusCode != res.Summary.StatusCode {
				t.Fatalf("status %s / trace %s", res.Status, tr.Status)
			}
			if len(tr.Nodes) != len(tt.records) {
				t.Fatalf("%d records, want %d", len(tr.Nodes), len(tt.records))
			}
			for i, s := range tt.records {
				if tr.Nodes[i].Status != s {
					t.Fatalf("record %d status %s, want %s", i, tr.Nodes[i].Status, s)
				}
			}
			if n := len(tr.Nodes); n > 0 && tr.Nodes[n-1].Status != pel.StatusOK {
				last := tr.Nodes[n-1]
				if len(last.Diagnostics) != len(res.Diagnostics) || !bytes.Equal(last.Diagnostics[0].Message, res.Diagnostics[0].Message) || len(last.OutputRefs) != 0 {
					t.Fatalf("failing record %+v, result %+v", last, res)
				}
			}
			roundTrip(t, tr)
		})
	}
}

func TestNewBuilderUnknownHash(t *testing.T) {
	if _, err := trace.NewBuilder(0x7777); !errors.Is(err, asl.ErrUnsupported) {
		t.Fatalf("err %v", err)
	}
}

// goldenTrace is a small fixed trace: the slice seed on "hello" (OK) and
// the same seed on "ab" (RUNTIME_FAILED), both with SHA-256 refs.
func TestTraceGolden(t *testing.T) {
	var out strings.Builder
	for _, in := range []string{"hello", "ab"} {
		_, _, tr := run(t, seed(t, pel.SeedSlice), []asl.Artifact{asl.Untagged([]byte(in))}, nil, asl.HashSHA256)
		out.WriteString(hex.EncodeToString(roundTrip(t, tr)) + "\n")
	}
	checkGolden(t, "slice_traces.txt", []byte(out.String()))
}

func sample() trace.Trace {
	return trace.Trace{
		SchemeRef:     pel.SchemeRefDAG1,
		ProgramRef:    ref("p"),
		InputRefs:     []asl.Reference{ref("i0")},
		ExecResultRef: ref("r"),
		Status:        pel.StatusRuntimeFailed,
		StatusCode:    0x00030001,
		Nodes: []trace.NodeRecord{
			{NodeID: 2, Op: opreg.OpConst, OutputRefs: []asl.Reference{ref("o")}},
			{NodeID: 1, Op: opreg.OpSlice, Status: pel.StatusRuntimeFailed, StatusCode: 0x00030001,
				Diagnostics: []pel.DiagnosticEntry{{Code: 0x10, Message: []byte("m")}}},
		},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*trace.Trace)
		ok   bool
	}{
		{"sample", func(*trace.Trace) {}, true},
		{"with params", func(tr *trace.Trace) { tr.ParamsRef, tr.HasParams = ref("x"), true }, true},
		{"zero params ref", func(tr *trace.Trace) { tr.HasParams = true }, false},
		{"zero program ref", func(tr *trace.Trace) { tr.ProgramRef = asl.Reference{} }, false},
		{"zero input ref", func(tr *trace.Trace) { tr.InputRefs = append(tr.InputRefs, asl.Reference{}) }, false},
		{"zero output ref", func(tr *trace.Trace) { tr.Nodes[0].OutputRefs = []asl.Reference{{}} }, false},
		{"overall code mismatch", func(tr *trace.Trace) { tr.StatusCode = 0x00030002 }, false},
		{"overall OK with failing record", func(tr *trace.Trace) { tr.Status, tr.StatusCode = pel.StatusOK, 0 }, false},
		{"failing record not last", func(tr *trace.Trace) { tr.Nodes = append(tr.Nodes, trace.NodeRecord{NodeID: 3, Op: opreg.OpHash}) }, false},
		{"failing record with outputs", func(tr *trace.Trace) { tr.Nodes[1].OutputRefs = []asl.Reference{ref("o")} }, false},
		{"OK record with diagnostics", func(tr *trace.Trace) { tr.Nodes[0].Diagnostics = tr.Nodes[1].Diagnostics }, false},
		{"runtime without records", func(tr *trace.Trace) { tr.Nodes = nil }, false},
		{"node status scheme unsupported", func(tr *trace.Trace) { tr.Nodes[1].Status, tr.Nodes[1].StatusCode = pel.StatusSchemeUnsupported, 1 }, false},
		{"node code 2 for runtime", func(tr *trace.Trace) { tr.Nodes[1].StatusCode = 2 }, false},
		{"bad op name", func(tr *trace.Trace) { tr.Nodes[0].Op.Name = "" }, false},
		{"inputs failure at node", func(tr *trace.Trace) {
			tr.Status, tr.StatusCode = pel.StatusInvalidInputs, 3
			tr.Nodes[1].Status, tr.Nodes[1].StatusCode = pel.StatusInvalidInputs, 3
		}, true},
		{"inputs failure before evaluation", func(tr *trace.Trace) { tr.Status, tr.StatusCode, tr.Nodes = pel.StatusInvalidInputs, 3, nil }, true},
		{"inputs failure with OK records only", func(tr *trace.Trace) { tr.Status, tr.StatusCode, tr.Nodes = pel.StatusInvalidInputs, 3, tr.Nodes[:1] }, false},
		{"program failure after evaluation", func(tr *trace.Trace) { tr.Status, tr.StatusCode, tr.Nodes = pel.StatusInvalidProgram, 2, tr.Nodes[:1] }, true},
		{"program failure with runtime record", func(tr *trace.Trace) { tr.Status, tr.StatusCode = pel.StatusInvalidProgram, 2 }, false},
		{"scheme unsupported, no records", func(tr *trace.Trace) { tr.Status, tr.StatusCode, tr.Nodes = pel.StatusSchemeUnsupported, 1, nil }, true},
		{"scheme unsupported with records", func(tr *trace.Trace) {
			tr.Status, tr.StatusCode, tr.Nodes = pel.StatusSchemeUnsupported, 1, tr.Nodes[:1]
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := sample()
			tt.mod(&tr)
			err := tr.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tt.ok)
			}
			b, encErr := trace.Encode(tr)
			if (encErr == nil) != tt.ok {
				t.Fatalf("Encode = %v, want ok=%v", encErr, tt.ok)
			}
			if tt.ok {
				roundTrip(t, tr)
				_ = b
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	good, err := trace.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	// Offsets in good: scheme_ref 0..38, program_ref 38..76, input_count
	// 76..80, input_ref 80..118, params_ref flag 118, exec_result_ref
	// 119..157, status 157, status_code 158..162, node_count 162..166,
	// record 0 at 166: node_id, op_name length 170, name 174..189,
	// op_version 189, node_status 193, code 194, output_count 198.
	set := func(off int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	tests := []struct {
		name   string
		b      []byte
		field  string
		offset int
	}{
		{"empty", nil, "scheme_ref.ref_len", 0},
		{"scheme ref_len 1", set(0, 0, 0, 0, 1), "scheme_ref.ref_len", 0},
		{"scheme hash id 0", set(4, 0, 0), "scheme_ref.hash_id", 4},
		{"program ref_len past end", set(38, 0xff, 0xff, 0xff, 0xff), "program_ref.ref_len", 38},
		{"input count past end", set(76, 0x10, 0, 0, 0), "input_count", 76},
		{"params flag 2", set(118, 2), "params_ref.has_ref", 118},
		{"result ref truncated", good[:130], "exec_result_ref.ref_len", 119},
		{"status 9", set(157, 9), "status", 157},
		{"status code mismatch", set(158, 0, 0, 0, 2), "status_code", 158},
		{"node count past end", set(162, 0, 1, 0, 0), "node_count", 162},
		{"empty op name", set(170, 0, 0, 0, 0), "op_name", 170},
		{"op name not utf8", set(174, 0xff), "op_name", 170},
		{"node status 1", set(193, 1), "node_status", 193},
		{"node status 7", set(193, 7), "node_status", 193},
		{"node code nonzero for OK", set(194, 0, 0, 0, 1), "node_status_code", 194},
		{"output count past end", set(198, 0x10, 0, 0, 0), "output_count", 198},
		{"trailing", append(bytes.Clone(good), 0), "end of input", len(good)},
		{"truncated", good[:len(good)-1], "diagnostics.message", len(good) - 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trace.Decode(tt.b)
			var de *enc.DecodeError
			if !errors.As(err, &de) || de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("err %v; want %q at %d", err, tt.field, tt.offset)
			}
		})
	}
	// Record rules are decode errors too.
	tr := sample()
	tr.Nodes[1].Status, tr.Nodes[1].StatusCode = pel.StatusOK, 0
	tr.Nodes[1].Diagnostics = nil
	tr.Status, tr.StatusCode = pel.StatusOK, 0
	okBytes, _ := trace.Encode(tr)
	// Flip the overall status to INVALID_INPUTS (3) with code 3: all
	// records OK is not allowed for INVALID_INPUTS.
	bad := bytes.Clone(okBytes)
	bad[157] = 3
	copy(bad[158:], []byte{0, 0, 0, 3})
	var de *enc.DecodeError
	if _, err := trace.Decode(bad); !errors.As(err, &de) || de.Field != "status" || de.Offset != 157 {
		t.Fatalf("err %v", err)
	}
	if _, err := trace.DecodeArtifact(asl.Untagged(okBytes)); err == nil {
		t.Fatal("untagged trace artifact accepted")
	}
	a, _ := tr.Artifact()
	if back, err := trace.DecodeArtifact(a); err != nil || len(back.Nodes) != 2 {
		t.Fatalf("%v", err)
	}
}

func TestHugeNodeCountNoAllocation(t *testing.T) {
	tr := sample()
	tr.Nodes, tr.Status, tr.StatusCode = nil, pel.StatusInvalidProgram, 2
	b, _ := trace.Encode(tr)
	b = append(b[:len(b)-4], 0xff, 0xff, 0xff, 0xff)
	b = append(b, make([]byte, 64)...)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := trace.Decode(b); err == nil {
			t.Fatal("accepted")
		}
	})
	if allocs > 32 {
		t.Fatalf("%v allocations", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 50; i++ {
		trace.Decode(b)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 50; per > 8192 {
		t.Fatalf("%d bytes allocated per rejected %d-byte trace", per, len(b))
	}
}

func FuzzDecodeTrace(f *testing.F) {
	good, _ := trace.Encode(sample())
	f.Add(good)
	_, _, tr := run(f, seed(f, pel.SeedConstHash), nil, nil, asl.HashBLAKE3)
	b, _ := trace.Encode(tr)
	f.Add(b)
	f.Add([]byte{0, 0, 0, 2, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := trace.Decode(b)
		if err != nil {
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("decoded an invalid trace: %v", err)
		}
		back, err := trace.Encode(tr)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("encode(decode(b)) = %x, %v; want %x", back, err, b)
		}
	})
}

// TestBuilderKeepsEachNodesRefs: output references observed for more
// nodes than one chunk of the Builder's reference store are each kept as
// observed, even when the caller reuses its slice, and a record's slice
// cannot grow into the next record's.
func TestBuilderKeepsEachNodesRefs(t *testing.T) {
	b, err := trace.NewBuilder(asl.HashSHA256)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	want := make([][]asl.Reference, n)
	scratch := make([]asl.Reference, 3)
	for i := range n {
		k := i % 3 // 0, 1 or 2 outputs
		for j := range k {
			scratch[j] = ref(strings.Repeat("x", i) + string(rune('a'+j)))
		}
		want[i] = append([]asl.Reference(nil), scratch[:k]...)
		b.ObserveRefs(pel.NodeEvent{NodeID: pel.NodeID(i + 1), Op: opreg.OpConst, Status: pel.StatusOK}, scratch[:k])
		clear(scratch)
	}
	tr, err := b.Finish(trace.Links{ProgramRef: ref("p"), ExecResultRef: ref("r")}, pel.ExecutionResultValue{Status: pel.StatusOK, SchemeRef: pel.SchemeRefDAG1})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Nodes) != n {
		t.Fatalf("%d records, want %d", len(tr.Nodes), n)
	}
	for i, rec := range tr.Nodes {
		if len(rec.OutputRefs) != len(want[i]) || cap(rec.OutputRefs) != len(rec.OutputRefs) {
			t.Fatalf("node %d: %d refs (capacity %d), want %d", i+1, len(rec.OutputRefs), cap(rec.OutputRefs), len(want[i]))
		}
		for j := range rec.OutputRefs {
			if rec.OutputRefs[j] != want[i][j] {
				t.Fatalf("node %d output %d: %s, want %s", i+1, j, rec.OutputRefs[j], want[i][j])
			}
		}
	}
}
