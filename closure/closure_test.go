package closure_test

import (
	"context"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

func TestWalkFromResult(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	progArt, _ := pel.SeedArtifact("concat")
	prog, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, progArt)
	a, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Untagged([]byte("a")))
	b, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Untagged([]byte("b")))
	unrelated, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Untagged([]byte("unrelated")))
	run, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	// A failed run whose second input is missing: the missing input is
	// reached but not present.
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("missing")))
	failed, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{a, missing}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		roots   []asl.Reference
		present []asl.Reference
		absent  []asl.Reference
	}{
		{"result", []asl.Reference{run.ResultRef},
			[]asl.Reference{run.ResultRef, prog, a, b, run.OutputRefs[0], run.TraceRef, run.EdgeRef}, []asl.Reference{pel.SchemeRefDAG1}},
		{"trace", []asl.Reference{run.TraceRef},
			[]asl.Reference{run.TraceRef, run.ResultRef, prog, a, b, run.OutputRefs[0], run.EdgeRef}, []asl.Reference{pel.SchemeRefDAG1}},
		{"edge", []asl.Reference{run.EdgeRef},
			[]asl.Reference{run.EdgeRef, run.ResultRef, run.TraceRef, prog, a, b, run.OutputRefs[0]}, []asl.Reference{pel.SchemeRefDAG1}},
		{"program alone", []asl.Reference{prog}, []asl.Reference{prog}, nil},
		{"input alone", []asl.Reference{a}, []asl.Reference{a}, nil},
		{"failed run", []asl.Reference{failed.ResultRef},
			[]asl.Reference{failed.ResultRef, prog, a, failed.TraceRef, failed.EdgeRef}, []asl.Reference{missing, pel.SchemeRefDAG1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[asl.Reference]bool{}
			var order []asl.Reference
			err := closure.Walk(ctx, s, tc.roots, func(n closure.Node) error {
				if _, dup := got[n.Ref]; dup {
					t.Fatalf("%s visited twice", n.Ref)
				}
				got[n.Ref] = n.Present
				order = append(order, n.Ref)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if order[0] != tc.roots[0] {
				t.Fatal("root not first")
			}
			want := map[asl.Reference]bool{}
			for _, r := range tc.present {
				want[r] = true
			}
			for _, r := range tc.absent {
				want[r] = false
			}
			if len(got) != len(want) {
				t.Fatalf("reached %d references, want %d: %v", len(got), len(want), order)
			}
			for r, p := range want {
				if gp, ok := got[r]; !ok || gp != p {
					t.Fatalf("%s: reached %v present %v, want present %v", r, ok, gp, p)
				}
			}
			if got[unrelated] {
				t.Fatal("unrelated artifact reached")
			}
		})
	}
}

// A tagged artifact that does not decode contributes nothing and is
// reported.
func TestUndecodable(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	bad, _ := asl.PutArtifact(ctx, s, asl.HashSHA256, asl.Tagged(asl.TagPEL1Result1, []byte("not a result")))
	var nodes []closure.Node
	if err := closure.Walk(ctx, s, []asl.Reference{bad}, func(n closure.Node) error { nodes = append(nodes, n); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].Undecodable == nil || !nodes[0].Present {
		t.Fatalf("%+v", nodes)
	}
}
