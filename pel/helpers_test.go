package pel_test

import (
	"encoding/hex"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustArtifact(t testing.TB, p pel.Program) asl.Artifact {
	t.Helper()
	a, err := pel.ProgramArtifact(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func constParams(t testing.TB, s string) []byte {
	t.Helper()
	b, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte(s)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func constNode(t testing.TB, id pel.NodeID, s string) pel.Node {
	return pel.Node{ID: id, Op: opreg.OpConst, Params: constParams(t, s)}
}

func concatNode(id pel.NodeID, in ...pel.DagInput) pel.Node {
	return pel.Node{ID: id, Op: opreg.OpConcat, Inputs: in, Params: []byte{}}
}

func sliceNode(id pel.NodeID, off, n uint64, in pel.DagInput) pel.Node {
	return pel.Node{ID: id, Op: opreg.OpSlice, Inputs: []pel.DagInput{in}, Params: opreg.EncodeSliceParams(opreg.SliceParams{Offset: off, Length: n})}
}

func hashNode(id pel.NodeID, in pel.DagInput) pel.Node {
	return pel.Node{ID: id, Op: opreg.OpHash, Inputs: []pel.DagInput{in}, Params: []byte{}}
}

func root(id pel.NodeID) []pel.RootRef { return []pel.RootRef{{NodeID: id}} }

// rawNode writes one Node of ProgramBytes without any checks, for building
// hostile programs.
type rawNode struct {
	id      uint32
	name    string
	version uint32
	inputs  [][]byte // each a complete encoded DagInput
	params  []byte
}

func rawProgram(nodes []rawNode, roots ...[2]uint32) []byte {
	var w enc.Writer
	w.U32(uint32(len(nodes)))
	for _, n := range nodes {
		w.U32(n.id)
		w.Bytes32([]byte(n.name))
		w.U32(n.version)
		w.U32(uint32(len(n.inputs)))
		for _, in := range n.inputs {
			w.Raw(in)
		}
		w.Bytes32(n.params)
	}
	w.U32(uint32(len(roots)))
	for _, r := range roots {
		w.U32(r[0])
		w.U32(r[1])
	}
	return w.Buf
}

func extIn(i uint32) []byte {
	w := enc.Writer{}
	w.U8(0)
	w.U32(i)
	return w.Buf
}

func nodeIn(id, out uint32) []byte {
	w := enc.Writer{}
	w.U8(1)
	w.U32(id)
	w.U32(out)
	return w.Buf
}

// chain returns const(1) -> concat(2) -> ... -> concat(n), root n.
func chain(t testing.TB, n int) pel.Program {
	nodes := make([]pel.Node, n)
	nodes[0] = constNode(t, 1, "x")
	for i := 1; i < n; i++ {
		nodes[i] = concatNode(pel.NodeID(i+1), pel.FromNode(pel.NodeID(i), 0))
	}
	return pel.Program{Nodes: nodes, Roots: root(pel.NodeID(n))}
}

// fanIn returns n-1 const leaves and one concat node reading all of them.
func fanIn(t testing.TB, n int) pel.Program {
	nodes := make([]pel.Node, n)
	ins := make([]pel.DagInput, n-1)
	p := constParams(t, "x")
	for i := 0; i < n-1; i++ {
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpConst, Params: p}
		ins[i] = pel.FromNode(pel.NodeID(i+1), 0)
	}
	nodes[n-1] = concatNode(pel.NodeID(n), ins...)
	return pel.Program{Nodes: nodes, Roots: root(pel.NodeID(n))}
}
