package pel

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
)

// The reference seed programs (SPECS.md §11.4), by name.
const (
	SeedConst     = "const"      // pel.bytes.const "hello", no inputs
	SeedConcat    = "concat"     // input 0 ++ input 1
	SeedConcat1   = "concat1"    // concat of input 0 alone: its bytes, untagged
	SeedSlice     = "slice"      // input 0 bytes [1, 4)
	SeedHash      = "hash"       // HASH-ASL1-256 digest of input 0's bytes
	SeedConstHash = "const-hash" // const "hello", then its hash
)

var seedNames = []string{SeedConst, SeedConcat, SeedConcat1, SeedSlice, SeedHash, SeedConstHash}

// SeedNames lists the seed program names in a fixed order.
func SeedNames() []string { return append([]string(nil), seedNames...) }

func mustParams(id opreg.OperationID, v any) []byte {
	op, _ := opreg.Kernel().Lookup(id)
	b, err := op.EncodeParams(v)
	if err != nil {
		panic(err)
	}
	return b
}

func constNode(id NodeID, text string) Node {
	return Node{ID: id, Op: opreg.OpConst, Params: mustParams(opreg.OpConst, opreg.ConstParams{Bytes: []byte(text)})}
}

func emptyParams() []byte { return []byte{} }

// Seed returns the named seed program. Every seed has node ids starting at 1
// and exactly one root.
func Seed(name string) (Program, error) {
	switch name {
	case SeedConst:
		return Program{Nodes: []Node{constNode(1, "hello")}, Roots: []RootRef{{1, 0}}}, nil
	case SeedConcat:
		return Program{Nodes: []Node{{ID: 1, Op: opreg.OpConcat, Inputs: []DagInput{External(0), External(1)}, Params: emptyParams()}}, Roots: []RootRef{{1, 0}}}, nil
	case SeedConcat1:
		return Program{Nodes: []Node{{ID: 1, Op: opreg.OpConcat, Inputs: []DagInput{External(0)}, Params: emptyParams()}}, Roots: []RootRef{{1, 0}}}, nil
	case SeedSlice:
		return Program{Nodes: []Node{{ID: 1, Op: opreg.OpSlice, Inputs: []DagInput{External(0)}, Params: opreg.EncodeSliceParams(opreg.SliceParams{Offset: 1, Length: 3})}}, Roots: []RootRef{{1, 0}}}, nil
	case SeedHash:
		return Program{Nodes: []Node{{ID: 1, Op: opreg.OpHash, Inputs: []DagInput{External(0)}, Params: emptyParams()}}, Roots: []RootRef{{1, 0}}}, nil
	case SeedConstHash:
		return Program{Nodes: []Node{
			constNode(1, "hello"),
			{ID: 2, Op: opreg.OpHash, Inputs: []DagInput{FromNode(1, 0)}, Params: emptyParams()},
		}, Roots: []RootRef{{2, 0}}}, nil
	}
	return Program{}, fmt.Errorf("unknown seed %q (known: %v)", name, seedNames)
}

// SeedArtifact returns the named seed as a program artifact (tagged
// 0x00000101).
func SeedArtifact(name string) (asl.Artifact, error) {
	p, err := Seed(name)
	if err != nil {
		return asl.Artifact{}, err
	}
	return ProgramArtifact(p)
}
