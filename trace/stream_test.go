package trace_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/progtest"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// teeObserver passes each event to two observers.
type teeObserver [2]pel.Observer

func (t teeObserver) ObserveNode(ev pel.NodeEvent) { t[0].ObserveNode(ev); t[1].ObserveNode(ev) }

// TestStreamMatchesBuilder runs random programs through a Builder and a
// Stream at once, the Stream's spool in memory and in a temporary file,
// holding its records or not: the TraceBytes and the reference are those of
// Encode over the Builder's trace, and the held records equal the Builder's.
func TestStreamMatchesBuilder(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 4))
	shape := progtest.Shape{InputSizes: []uint64{5, 40}, HasParams: true, ParamsSize: 3, MaxNodes: 60}
	inputs := []asl.Artifact{asl.Untagged([]byte("hello")), asl.Untagged(bytes.Repeat([]byte("ab"), 20))}
	params := asl.Untagged([]byte("cfg"))
	opts := []trace.StreamOptions{{}, {MemoryBytes: 1, HoldRecords: 1, Dir: t.TempDir()}, {MemoryBytes: 100, HoldRecords: 5, Dir: t.TempDir()}}
	for i := 0; i < 60; i++ {
		prog := program(t, progtest.Random(r, shape))
		for k, o := range opts {
			b, _ := trace.NewBuilder(asl.HashBLAKE3)
			s, err := trace.NewStream(asl.HashBLAKE3, o)
			if err != nil {
				t.Fatal(err)
			}
			_, res := pel.ExecDAG(nil, prog, inputs, &params, teeObserver{b, s})
			l := trace.Links{ProgramRef: ref("p"), InputRefs: []asl.Reference{ref("a"), ref("b")}, ParamsRef: ref("c"), HasParams: true, ExecResultRef: ref("r")}
			want, err := b.Finish(l, res)
			if err != nil {
				t.Fatal(err)
			}
			wantArt, err := want.Artifact()
			if err != nil {
				t.Fatal(err)
			}
			sp, err := s.Finish(l, res)
			if err != nil {
				t.Fatalf("program %d options %d: %v", i, k, err)
			}
			got, err := io.ReadAll(sp.Open())
			if err != nil || !bytes.Equal(got, wantArt.Bytes) || sp.Header() != wantArt.Header() {
				t.Fatalf("program %d options %d: stream bytes differ (%v)", i, k, err)
			}
			if a, err := sp.Artifact(1 << 20); err != nil || !bytes.Equal(a.Bytes, wantArt.Bytes) {
				t.Fatalf("program %d options %d: Artifact differs (%v)", i, k, err)
			}
			if sp.Ref != asl.MustDerive(asl.HashBLAKE3, wantArt) || sp.Count != uint64(len(want.Nodes)) {
				t.Fatalf("program %d options %d: ref %s count %d", i, k, sp.Ref, sp.Count)
			}
			held := sp.Held
			if held != (len(want.Nodes) <= max(o.HoldRecords, 0) || o.HoldRecords == 0) {
				t.Fatalf("program %d options %d: held %v with %d records", i, k, held, len(want.Nodes))
			}
			if held {
				hb, err := trace.Encode(sp.Trace)
				if err != nil || !bytes.Equal(hb, wantArt.Bytes) {
					t.Fatalf("program %d options %d: held trace differs (%v)", i, k, err)
				}
			} else if sp.Trace.Nodes != nil || sp.Trace.ExecResultRef != l.ExecResultRef {
				t.Fatalf("program %d options %d: unheld trace %+v", i, k, sp.Trace)
			}
			if err := sp.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range opts[1:] {
		if left, _ := os.ReadDir(o.Dir); len(left) != 0 {
			t.Fatalf("%d spool files left in %s", len(left), o.Dir)
		}
	}
}

// TestStreamRejects: what Builder.Finish refuses, Stream.Finish refuses, and
// it leaves no spool file behind.
func TestStreamRejects(t *testing.T) {
	dir := t.TempDir()
	s, _ := trace.NewStream(asl.HashSHA256, trace.StreamOptions{MemoryBytes: 1, Dir: dir})
	fail := pel.NodeEvent{NodeID: 1, Op: pel.OperationID{Name: "x", Version: 1}, Status: pel.StatusRuntimeFailed, StatusCode: 0x10000}
	s.ObserveRefs(fail, nil)
	s.ObserveRefs(pel.NodeEvent{NodeID: 2, Op: fail.Op, Status: pel.StatusOK}, nil)
	l := trace.Links{ProgramRef: ref("p"), ExecResultRef: ref("r")}
	res := pel.ExecutionResultValue{PEL1Version: 1, Status: pel.StatusRuntimeFailed, SchemeRef: pel.SchemeRefDAG1,
		Summary: pel.ExecutionErrorSummary{Kind: pel.StatusRuntimeFailed.Kind(), StatusCode: 0x10000}}
	if _, err := s.Finish(l, res); err == nil {
		t.Fatal("a record after a failed one was accepted")
	}
	if _, err := trace.NewStream(0x7777, trace.StreamOptions{}); err == nil {
		t.Fatal("unknown hash accepted")
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%d spool files left", len(left))
	}
}
