package surf_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// hundredNodes: 50 alternating concat/slice pairs over input 0 and input 1,
// so each node does a little byte work on ~1 KiB artifacts.
func hundredNodes(b *testing.B) asl.Artifact {
	concat := pel.OperationID{Name: "pel.bytes.concat", Version: 1}
	slice := pel.OperationID{Name: "pel.bytes.slice", Version: 1}
	params := make([]byte, 16)
	binary.BigEndian.PutUint64(params[8:], 1024) // offset 0, length 1024
	p := pel.Program{}
	prev := pel.External(0)
	for i := 0; i < 50; i++ {
		c, s := pel.NodeID(2*i+1), pel.NodeID(2*i+2)
		p.Nodes = append(p.Nodes,
			pel.Node{ID: c, Op: concat, Inputs: []pel.DagInput{prev, pel.External(1)}},
			pel.Node{ID: s, Op: slice, Inputs: []pel.DagInput{pel.FromNode(c, 0)}, Params: params})
		prev = pel.FromNode(s, 0)
	}
	p.Roots = []pel.RootRef{{NodeID: 100}}
	a, err := pel.ProgramArtifact(p)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func benchSurface(b *testing.B, cached bool) {
	ctx := context.Background()
	st, err := pebblestore.Create(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	prog := put(b, st, hundredNodes(b))
	one := put(b, st, asl.Untagged(make([]byte, 1024)))
	sf := surf.New(st, surf.Options{NoCache: !cached})
	inputs := make([]asl.Reference, b.N)
	for i := range inputs {
		in := make([]byte, 1024)
		binary.BigEndian.PutUint64(in, uint64(i))
		inputs[i] = put(b, st, asl.Untagged(in))
	}
	if cached {
		for i := range inputs {
			inputs[i] = inputs[0]
		}
		if _, err := sf.Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{inputs[0], one}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run, err := sf.Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{inputs[i], one}})
		if err != nil || run.Result.Value.Status != pel.StatusOK || run.CacheHit != cached {
			b.Fatalf("run %d: %v, status %s, hit %v", i, err, run.Result.Value.Status, run.CacheHit)
		}
	}
}

// BenchmarkSurfaceRun100Nodes is a fresh surface run (executes and stores
// outputs, result, trace and edge durably) of a 100-node program with 1 KiB
// inputs on the embedded store; each iteration uses a different input.
func BenchmarkSurfaceRun100Nodes(b *testing.B) { benchSurface(b, false) }

// BenchmarkSurfaceCacheHit100Nodes repeats one request: every iteration is
// an action-cache hit (lookup, result decode, output and trace verification).
func BenchmarkSurfaceCacheHit100Nodes(b *testing.B) { benchSurface(b, true) }
