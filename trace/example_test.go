package trace_test

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/trace"
)

// Build the trace of one run the way a surface does: run Exec_DAG with a
// Builder as observer, store the result artifact first, then finish the
// trace with the result's reference.
func Example() {
	program, _ := pel.SeedArtifact(pel.SeedConstHash)
	b, err := trace.NewBuilder(asl.HashSHA256)
	if err != nil {
		panic(err)
	}
	outputs, result := pel.ExecDAG(nil, program, nil, nil, b)

	// Stand-in for the surface's stored result artifact.
	resultBytes, _ := pel.EncodeResultValue(result)
	resultRef := asl.MustDerive(asl.HashSHA256, asl.Tagged(asl.TagPEL1Result1, resultBytes))

	tr, err := b.Finish(trace.Links{
		ProgramRef:    asl.MustDerive(asl.HashSHA256, program),
		ExecResultRef: resultRef,
	}, result)
	if err != nil {
		panic(err)
	}
	art, _ := tr.Artifact()
	fmt.Printf("trace artifact tag 0x%08x, %d node records\n", uint32(art.Tag), len(tr.Nodes))
	for _, n := range tr.Nodes {
		fmt.Println(n.NodeID, n.Op, n.Status, len(n.OutputRefs))
	}
	fmt.Println(tr.Nodes[1].OutputRefs[0] == asl.MustDerive(asl.HashSHA256, outputs[0]))

	back, err := trace.DecodeArtifact(art)
	fmt.Println(err == nil, back.ExecResultRef == resultRef)
	// Output:
	// trace artifact tag 0x00000102, 2 node records
	// 1 pel.bytes.const@1 OK 1
	// 2 pel.bytes.hash.asl1@1 OK 1
	// true
	// true true
}
