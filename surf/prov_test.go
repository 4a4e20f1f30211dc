package surf_test

import (
	"context"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/tgk"
)

func TestRunsRecordProvenance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	sf := surf.New(s, surf.Options{})
	concat := seed(t, s, pel.SeedConcat)
	a := put(t, s, asl.Untagged([]byte("a")))
	b := put(t, s, asl.Untagged([]byte("b")))
	first, err := sf.Run(ctx, surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	// A second run consumes the first run's output.
	second, err := sf.Run(ctx, surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{first.OutputRefs[0], a}})
	if err != nil {
		t.Fatal(err)
	}
	edges, _, err := tgk.EdgesTo(ctx, s, second.OutputRefs[0])
	if err != nil || len(edges) != 1 || edges[0].Ref != second.EdgeRef {
		t.Fatalf("EdgesTo(output) = %+v, %v", edges, err)
	}
	e := edges[0].Edge
	if e.From[0] != (tgk.Endpoint{Role: tgk.RoleProgram, Ref: concat}) || e.From[1].Ref != first.OutputRefs[0] ||
		e.To[len(e.To)-2].Ref != second.ResultRef || e.To[len(e.To)-1].Ref != second.TraceRef {
		t.Fatalf("edge = %+v", e)
	}
	g, err := tgk.Why(ctx, s, second.OutputRefs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Edges[first.EdgeRef]; !ok || g.Depth[b] != 2 {
		t.Fatalf("why does not reach the first run: edges %d, depth(b)=%d", len(g.Edges), g.Depth[b])
	}
	uses, _, err := tgk.EdgesFrom(ctx, s, a)
	if err != nil || len(uses) != 2 {
		t.Fatalf("EdgesFrom(a) = %d edges, %v; want both runs", len(uses), err)
	}
	hit, err := sf.Run(ctx, surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{a, b}})
	if err != nil || !hit.CacheHit || hit.EdgeRef != first.EdgeRef {
		t.Fatalf("cache hit edge %s, want %s (hit=%v, err=%v)", hit.EdgeRef, first.EdgeRef, hit.CacheHit, err)
	}
}
