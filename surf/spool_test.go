package surf_test

import (
	"context"
	"os"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/trace"
)

// TestSpooledTrace: a run whose trace records go to a temporary file
// stores the same trace, result and outputs as one that holds them, under
// the same references; Run.Trace then has no records, the stored trace
// decodes, Verify finds it clean, and no spool file is left behind.
func TestSpooledTrace(t *testing.T) {
	// Sequential: it sets the package-wide trace spool options of every run.
	ctx := context.Background()
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	sp := opreg.EncodeSliceParams(opreg.SliceParams{Offset: 0, Length: 8})
	p := pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpConst, Params: cp}}}
	for i := 2; i <= 300; i++ {
		op, params := opreg.OpSlice, sp
		if i%2 == 0 {
			op, params = opreg.OpConcat, []byte{}
		}
		p.Nodes = append(p.Nodes, pel.Node{ID: pel.NodeID(i), Op: op, Inputs: []pel.DagInput{pel.FromNode(pel.NodeID(i-1), 0)}, Params: params})
	}
	p.Roots = []pel.RootRef{{NodeID: 300}, {NodeID: 150}}
	art, err := pel.ProgramArtifact(p)
	if err != nil {
		t.Fatal(err)
	}
	run := func(s *memstore.Store) *surf.Run {
		ref, err := asl.PutArtifact(ctx, s, asl.HashSHA256, art)
		if err != nil {
			t.Fatal(err)
		}
		r, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: ref})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	held := run(memstore.New())
	dir := t.TempDir()
	restore := surf.SetTraceSpool(trace.StreamOptions{MemoryBytes: 64, HoldRecords: 10, Dir: dir})
	defer restore()
	s := memstore.New()
	spooled := run(s)
	if spooled.TraceRef != held.TraceRef || spooled.ResultRef != held.ResultRef || spooled.EdgeRef != held.EdgeRef ||
		len(spooled.OutputRefs) != 2 || spooled.OutputRefs[0] != held.OutputRefs[0] || spooled.OutputRefs[1] != held.OutputRefs[1] {
		t.Fatalf("spooled run %s/%s, held %s/%s", spooled.ResultRef, spooled.TraceRef, held.ResultRef, held.TraceRef)
	}
	if spooled.Trace.Nodes != nil || len(held.Trace.Nodes) != 300 || spooled.Trace.ExecResultRef != spooled.ResultRef {
		t.Fatalf("Run.Trace: %d records spooled, %d held", len(spooled.Trace.Nodes), len(held.Trace.Nodes))
	}
	tr, err := surf.LoadTrace(ctx, s, spooled.TraceRef)
	if err != nil || len(tr.Nodes) != 300 {
		t.Fatalf("stored trace: %d records, %v", len(tr.Nodes), err)
	}
	if found, err := surf.FindTrace(ctx, s, spooled.ResultRef); err != nil || found != spooled.TraceRef {
		t.Fatalf("FindTrace = %s, %v", found, err)
	}
	v, err := surf.New(s, surf.Options{}).Verify(ctx, spooled.ResultRef)
	if err != nil || v.Mismatch != nil {
		t.Fatalf("Verify = %+v, %v", v, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%d spool files left", len(left))
	}
}
