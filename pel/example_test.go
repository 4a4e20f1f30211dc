package pel_test

import (
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// Build a program in Go, run it with Exec_DAG and read the result.
func Example() {
	greeting, _ := opreg.EncodeConstParams(opreg.ConstParams{Bytes: []byte("hello, ")})
	prog := pel.Program{
		Nodes: []pel.Node{
			{ID: 1, Op: opreg.OpConst, Params: greeting},
			{ID: 2, Op: opreg.OpConcat, Inputs: []pel.DagInput{pel.FromNode(1, 0), pel.External(0)}, Params: []byte{}},
			{ID: 3, Op: opreg.OpHash, Inputs: []pel.DagInput{pel.FromNode(2, 0)}, Params: []byte{}},
		},
		Roots: []pel.RootRef{{NodeID: 2, OutputIndex: 0}, {NodeID: 3, OutputIndex: 0}},
	}
	program, err := pel.ProgramArtifact(prog)
	if err != nil {
		panic(err)
	}
	outputs, result := pel.ExecDAG(opreg.Kernel(), program, []asl.Artifact{asl.Untagged([]byte("world"))}, nil, nil)
	fmt.Println(result.Status, result.Summary.Kind, result.Summary.StatusCode)
	fmt.Printf("%s\n%x\n", outputs[0].Bytes, outputs[1].Bytes)
	// Output:
	// OK NONE 0
	// hello, world
	// 09ca7e4eaa6e8ae9c7d261167129184883644d07dfba7cbfbc4c8a2e08360d5b
}

// A failing run: outputs are empty and the result says why.
func ExampleExecDAG_runtimeFailure() {
	program, _ := pel.SeedArtifact(pel.SeedSlice) // bytes [1, 4) of input 0
	outputs, result := pel.ExecDAG(nil, program, []asl.Artifact{asl.Untagged([]byte("ab"))}, nil, nil)
	fmt.Println(len(outputs), result.Status, result.Summary.Kind)
	fmt.Printf("status_code 0x%08x\n", result.Summary.StatusCode)
	for _, d := range result.Diagnostics {
		fmt.Printf("0x%08x %s\n", d.Code, d.Message)
	}
	// Output:
	// 0 RUNTIME_FAILED RUNTIME
	// status_code 0x00030001
	// 0x00000010 node 1: operation pel.bytes.slice version 1 failed with status code 0x00030001
	// 0x00030001 slice offset 1 + length 3 exceeds input length 2
}

// Programs can be written as JSON.
func ExampleProgramFromJSON() {
	src := `{"nodes":[
	  {"id":1,"op":"pel.bytes.slice","version":1,"inputs":[{"input":0}],"params":{"offset":6,"length":5}}
	],"roots":[{"node":1,"output":0}]}`
	prog, err := pel.ProgramFromJSON([]byte(src), nil)
	if err != nil {
		panic(err)
	}
	program, _ := pel.ProgramArtifact(prog)
	outputs, result := pel.ExecDAG(nil, program, []asl.Artifact{asl.Untagged([]byte("hello world"))}, nil, nil)
	fmt.Println(result.Status, string(outputs[0].Bytes))
	// Output: OK world
}

// Users register their own operations on top of the kernel.
func ExampleExecDAG_userOperation() {
	upper := opreg.Operation{
		ID:        pel.OperationID{Name: "example.upper", Version: 1},
		MinInputs: 1, MaxInputs: 1,
		DecodeParams: func(b []byte) (any, error) {
			if len(b) != 0 {
				return nil, fmt.Errorf("no params expected")
			}
			return nil, nil
		},
		EncodeParams: func(any) ([]byte, error) { return []byte{}, nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			out := []byte(string(c.Inputs[0].Bytes))
			for i, ch := range out {
				if 'a' <= ch && ch <= 'z' {
					out[i] = ch - 'a' + 'A'
				}
			}
			return []asl.Artifact{asl.Untagged(out)}, nil
		},
	}
	reg, err := opreg.Kernel().Extend(upper)
	if err != nil {
		panic(err)
	}
	prog := pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: upper.ID, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{}}},
		Roots: []pel.RootRef{{NodeID: 1}},
	}
	program, _ := pel.ProgramArtifact(prog)
	outputs, result := pel.ExecDAG(reg, program, []asl.Artifact{asl.Untagged([]byte("amduat"))}, nil, nil)
	fmt.Println(result.Status, string(outputs[0].Bytes))
	// The kernel registry alone does not know the operation.
	_, result = pel.ExecDAG(nil, program, []asl.Artifact{asl.Untagged([]byte("amduat"))}, nil, nil)
	fmt.Println(result.Status, string(result.Diagnostics[0].Message))
	// Output:
	// OK AMDUAT
	// INVALID_PROGRAM node 1: unknown operation example.upper version 1
}

func ExampleSchemeDescriptor() {
	fmt.Println(pel.SchemeRefDAG1)
	fmt.Println(asl.MustDerive(asl.HashSHA256, pel.SchemeDescriptor()) == pel.SchemeRefDAG1)
	// Output:
	// 00016e0b3b252f5b15e770b56becd52d6f005a07e90b0b44f7a921a5d9853724cba4
	// true
}
