// Package progtest generates random kernel programs for tests that compare
// two evaluations of the same program (lazy against materialised, before
// against after a change). It is deterministic for a given generator.
package progtest

import (
	"math/rand/v2"

	"github.com/amduat/amduat/asl"

	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// Shape describes what a random program may read.
type Shape struct {
	InputSizes []uint64 // sizes of the external inputs
	HasParams  bool     // a global params artifact is given
	ParamsSize uint64
	MaxNodes   int // at least 1
}

type value struct {
	in   pel.DagInput
	size uint64
}

// Random returns a program of 1 to s.MaxNodes kernel nodes over the inputs
// of s. Most programs succeed; some slice out of range (RUNTIME_FAILED),
// name a missing input (INVALID_INPUTS), or use pel.bytes.params without
// global params.
func Random(r *rand.Rand, s Shape) pel.Program {
	n := 1 + r.IntN(s.MaxNodes)
	var vals []value
	for i, sz := range s.InputSizes {
		vals = append(vals, value{pel.External(uint32(i)), sz})
	}
	var p pel.Program
	id := pel.NodeID(0)
	pick := func() value { return vals[r.IntN(len(vals))] }
	for k := 0; k < n; k++ {
		id += pel.NodeID(1 + r.IntN(3))
		node := pel.Node{ID: id, Params: []byte{}}
		var size uint64
		op := r.IntN(10)
		if len(vals) == 0 {
			op = 0
		}
		switch {
		case op == 0:
			b := make([]byte, r.IntN(64))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			cp := opreg.ConstParams{Bytes: b}
			if r.IntN(4) == 0 {
				cp.HasTag, cp.Tag = true, asl.TypeTag(0x00001000+r.IntN(4))
			}
			node.Op = opreg.OpConst
			node.Params, _ = opreg.EncodeConstParams(cp)
			size = uint64(len(b))
		case op <= 4:
			node.Op = opreg.OpConcat
			for j := 1 + r.IntN(4); j > 0; j-- {
				v := pick()
				node.Inputs = append(node.Inputs, v.in)
				size += v.size
			}
		case op <= 7:
			v := pick()
			off := uint64(0)
			if v.size > 0 {
				off = r.Uint64N(v.size + 1)
			}
			length := r.Uint64N(v.size - off + 1)
			if r.IntN(20) == 0 {
				length += 1 + r.Uint64N(3) // out of range
			}
			node.Op = opreg.OpSlice
			node.Inputs = []pel.DagInput{v.in}
			node.Params = opreg.EncodeSliceParams(opreg.SliceParams{Offset: off, Length: length})
			size = length
		case op == 8:
			node.Op = opreg.OpHash
			node.Inputs = []pel.DagInput{pick().in}
			size = 32
		default:
			if !s.HasParams && r.IntN(4) != 0 {
				node.Op = opreg.OpHash
				node.Inputs = []pel.DagInput{pick().in}
				size = 32
				break
			}
			node.Op = opreg.OpParams
			size = s.ParamsSize
		}
		if r.IntN(100) == 0 {
			node.Inputs = append(node.Inputs, pel.External(uint32(len(s.InputSizes)))) // missing input
			if node.Op != opreg.OpConcat {
				node.Op = opreg.OpConcat
				node.Params = []byte{}
			}
		}
		p.Nodes = append(p.Nodes, node)
		vals = append(vals, value{pel.FromNode(id, 0), size})
	}
	for j := 1 + r.IntN(3); j > 0; j-- {
		p.Roots = append(p.Roots, pel.RootRef{NodeID: p.Nodes[r.IntN(len(p.Nodes))].ID})
	}
	return p
}
