// Package shapes holds the PEL programs the benchmarks measure (bench's
// exec, parallel and hostile groups) and the tests of pel reuse: each a
// pure function of its size, so that a benchmark and a test build the same
// bytes. It depends on pel and the kernel operations only, so that a test
// using a shape does not link what bench runs (servers, stores).
package shapes

import (
	"bytes"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// Shape is a benchmark program together with the same computation written
// as direct calls of the kernel operation functions.
type Shape struct {
	Name    string
	Program pel.Program
	// Direct makes the same operation calls, with the same inputs and
	// decoded params, in canonical order, and returns the root output.
	Direct func() (asl.Artifact, error)
}

func kernelOp(id opreg.OperationID) *opreg.Operation {
	op, ok := opreg.Kernel().Lookup(id)
	if !ok {
		panic("kernel operation missing: " + id.String())
	}
	return op
}

func decodedParams(id opreg.OperationID, b []byte) any {
	v, err := kernelOp(id).DecodeParams(b)
	if err != nil {
		panic(err)
	}
	return v
}

// Chain is n nodes: pel.bytes.const of 16 bytes, then n-1
// pel.bytes.slice nodes each taking bytes [0, 8) of the previous output.
func Chain(n int) Shape {
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte("0123456789abcdef")})
	if err != nil {
		panic(err)
	}
	sp := opreg.EncodeSliceParams(opreg.SliceParams{Offset: 0, Length: 8})
	nodes := make([]pel.Node, n)
	inputs := make([]pel.DagInput, n) // one backing array for all nodes' inputs
	nodes[0] = pel.Node{ID: 1, Op: opreg.OpConst, Params: cp}
	for i := 1; i < n; i++ {
		inputs[i] = pel.FromNode(pel.NodeID(i), 0)
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpSlice, Inputs: inputs[i : i+1 : i+1], Params: sp}
	}
	constOp, sliceOp := kernelOp(opreg.OpConst), kernelOp(opreg.OpSlice)
	cv, sv := decodedParams(opreg.OpConst, cp), decodedParams(opreg.OpSlice, sp)
	return Shape{
		Name:    "chain",
		Program: pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: pel.NodeID(n)}}},
		Direct: func() (asl.Artifact, error) {
			outs, oerr := constOp.Run(opreg.Call{Params: cv})
			if oerr != nil {
				return asl.Artifact{}, oerr
			}
			in := make([]asl.Artifact, 1)
			for i := 1; i < n; i++ {
				in[0] = outs[0]
				if outs, oerr = sliceOp.Run(opreg.Call{Inputs: in, Params: sv}); oerr != nil {
					return asl.Artifact{}, oerr
				}
			}
			return outs[0], nil
		},
	}
}

// FanIn is n nodes: n-1 pel.bytes.const leaves of one byte and one
// pel.bytes.concat node reading all of them.
func FanIn(n int) Shape {
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte("x")})
	if err != nil {
		panic(err)
	}
	nodes := make([]pel.Node, n)
	ins := make([]pel.DagInput, n-1)
	for i := range n - 1 {
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpConst, Params: cp}
		ins[i] = pel.FromNode(pel.NodeID(i+1), 0)
	}
	nodes[n-1] = pel.Node{ID: pel.NodeID(n), Op: opreg.OpConcat, Inputs: ins, Params: []byte{}}
	constOp, concatOp := kernelOp(opreg.OpConst), kernelOp(opreg.OpConcat)
	cv, ev := decodedParams(opreg.OpConst, cp), decodedParams(opreg.OpConcat, nil)
	return Shape{
		Name:    "fanin",
		Program: pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: pel.NodeID(n)}}},
		Direct: func() (asl.Artifact, error) {
			leaves := make([]asl.Artifact, n-1)
			for i := range leaves {
				outs, oerr := constOp.Run(opreg.Call{Params: cv})
				if oerr != nil {
					return asl.Artifact{}, oerr
				}
				leaves[i] = outs[0]
			}
			outs, oerr := concatOp.Run(opreg.Call{Inputs: leaves, Params: ev})
			if oerr != nil {
				return asl.Artifact{}, oerr
			}
			return outs[0], nil
		},
	}
}

// WideHash is n pel.bytes.hash.asl1 nodes, node i hashing external
// input i, and one concat of the n digests (the root).
func WideHash(n int) pel.Program {
	nodes := make([]pel.Node, n+1)
	digests := make([]pel.DagInput, n)
	for i := range n {
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpHash, Inputs: []pel.DagInput{pel.External(uint32(i))}, Params: []byte{}}
		digests[i] = pel.FromNode(pel.NodeID(i+1), 0)
	}
	nodes[n] = pel.Node{ID: pel.NodeID(n + 1), Op: opreg.OpConcat, Inputs: digests, Params: []byte{}}
	return pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: pel.NodeID(n + 1)}}}
}

// HostileConcat is a 1 MiB pel.bytes.const and one pel.bytes.concat of
// n inputs all reading it: a program of about 1 MB that declares n MiB of
// output (5.2 GB for n = 5,000).
func HostileConcat(n int) pel.Program {
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: bytes.Repeat([]byte{0x5a}, opreg.MaxConstBytes)})
	if err != nil {
		panic(err)
	}
	ins := make([]pel.DagInput, n)
	for i := range ins {
		ins[i] = pel.FromNode(1, 0)
	}
	return pel.Program{Nodes: []pel.Node{{ID: 1, Op: opreg.OpConst, Params: cp}, {ID: 2, Op: opreg.OpConcat, Inputs: ins, Params: []byte{}}},
		Roots: []pel.RootRef{{NodeID: 2}}}
}

// Doubling is n nodes: a one-byte pel.bytes.const, then n-1
// pel.bytes.concat(prev, prev): node k's output is 2^(k-1) bytes, 2^63 for
// the last of 64.
func Doubling(n int) pel.Program {
	cp, err := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte("x")})
	if err != nil {
		panic(err)
	}
	nodes := make([]pel.Node, n)
	nodes[0] = pel.Node{ID: 1, Op: opreg.OpConst, Params: cp}
	for i := 1; i < n; i++ {
		prev := pel.FromNode(pel.NodeID(i), 0)
		nodes[i] = pel.Node{ID: pel.NodeID(i + 1), Op: opreg.OpConcat, Inputs: []pel.DagInput{prev, prev}, Params: []byte{}}
	}
	return pel.Program{Nodes: nodes, Roots: []pel.RootRef{{NodeID: pel.NodeID(n)}}}
}
