package surf_test

import (
	"context"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// Build a program, store it and its input, run it by reference, then read
// the output, the result and the trace back from the store.
func Example() {
	ctx := context.Background()
	store := memstore.New()

	// 1 = input 0 sliced [1, 4); 2 = HASH-ASL1-256 of node 1.
	prog, err := pel.ProgramFromJSON([]byte(`{"nodes":[
	  {"id":1,"op":"pel.bytes.slice","version":1,"inputs":[{"input":0}],"params":{"offset":1,"length":3}},
	  {"id":2,"op":"pel.bytes.hash.asl1","version":1,"inputs":[{"node":1}]}
	],"roots":[{"node":1},{"node":2}]}`), nil)
	if err != nil {
		panic(err)
	}
	progArt, _ := pel.ProgramArtifact(prog)
	progRef, _ := asl.PutArtifact(ctx, store, asl.HashSHA256, progArt)
	inRef, _ := asl.PutArtifact(ctx, store, asl.HashSHA256, asl.Untagged([]byte("abcdef")))

	run, err := surf.New(store, surf.Options{}).Run(ctx, surf.Request{ProgramRef: progRef, InputRefs: []asl.Reference{inRef}})
	if err != nil {
		panic(err)
	}
	out, _ := asl.Get(ctx, store, run.OutputRefs[0], 0)
	fmt.Printf("status %s, output[0] %q\n", run.Result.Value.Status, out.Bytes)

	// From the result reference alone: the request, the outputs, the trace.
	res, _ := surf.LoadResult(ctx, store, run.ResultRef)
	traceRef, _ := surf.FindTrace(ctx, store, run.ResultRef)
	tr, _ := surf.LoadTrace(ctx, store, traceRef)
	fmt.Println(res.ProgramRef == progRef, len(res.OutputRefs), traceRef == run.TraceRef)
	for _, n := range tr.Nodes {
		fmt.Printf("node %d %s %s\n", n.NodeID, n.Op.Name, n.Status)
	}

	// The same request again is answered from the action cache.
	again, _ := surf.New(store, surf.Options{}).Run(ctx, surf.Request{ProgramRef: progRef, InputRefs: []asl.Reference{inRef}})
	fmt.Println(again.CacheHit, again.ResultRef == run.ResultRef)
	// Output:
	// status OK, output[0] "bcd"
	// true 2 true
	// node 1 pel.bytes.slice OK
	// node 2 pel.bytes.hash.asl1 OK
	// true true
}
