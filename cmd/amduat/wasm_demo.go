package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/wasmop"
	"github.com/amduat/amduat/wasmop/examples"
)

// The demo's WebAssembly step (order 85, after pel run, before verify):
// store the wordcount example operation (written in Go, built for wasip1,
// embedded in this binary), build a one-node program that runs it through
// amduat.wasm.run, and run it on hello.txt, twice: the second run is an
// action-cache hit.
func init() { addDemoStep(demoStep{85, "wasm run", demoWasmRun}) }

// demoWasmParams are the params of the demo's wordcount node.
var demoWasmParams = wasmop.Params{Export: "wordcount", Outputs: 1, MaxMemoryPages: 1024, MaxOutputBytes: 64}

func demoWasmRun(ctx context.Context, e *demoEnv) ([]string, error) {
	hello, ok := e.refs["hello.txt"]
	if !ok {
		return nil, fmt.Errorf("wasm run: earlier steps did not store hello.txt")
	}
	id := e.store.DefaultHash()
	ex := examples.Wordcount()
	mod, err := asl.PutArtifact(ctx, e.store, id, asl.Untagged(ex.Module))
	if err != nil {
		return nil, failAuto("wordcount module", err)
	}
	params, err := wasmop.EncodeParams(demoWasmParams)
	if err != nil {
		return nil, err
	}
	prog := pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: wasmop.OpID, Inputs: []pel.DagInput{pel.External(0), pel.External(1)}, Params: params}},
		Roots: []pel.RootRef{{NodeID: 1}},
	}
	art, err := pel.ProgramArtifact(prog)
	if err != nil {
		return nil, err
	}
	progRef, err := asl.PutArtifact(ctx, e.store, id, art)
	if err != nil {
		return nil, failAuto("wordcount program", err)
	}
	reg, done, err := newRegistry(ctx, wasmop.Options{CacheDir: filepath.Join(e.storeDir, wasmCacheName)})
	if err != nil {
		return nil, err
	}
	defer done()
	sf := surf.New(e.store, surf.Options{Hash: id, Registry: reg})
	req := surf.Request{ProgramRef: progRef, InputRefs: []asl.Reference{mod, hello}}
	run, err := sf.Run(ctx, req)
	if err != nil {
		return nil, failAuto(progRef.String(), err)
	}
	if s := run.Result.Value.Status; s != pel.StatusOK || len(run.Outputs) != 1 {
		return nil, fmt.Errorf("wordcount: status %s with %d outputs, want OK with 1: %s", s, len(run.Outputs), runFailureLine(run))
	}
	if got := string(run.Outputs[0].Bytes); got != "2\n" {
		return nil, fmt.Errorf("wordcount of hello.txt gave %q, want \"2\\n\"", got)
	}
	again, err := sf.Run(ctx, req)
	if err != nil {
		return nil, failAuto(progRef.String(), err)
	}
	if !again.CacheHit || again.ResultRef != run.ResultRef {
		return nil, fmt.Errorf("wordcount again: cache hit %t, result %s; want a hit with %s", again.CacheHit, again.ResultRef, run.ResultRef)
	}
	return []string{
		fmt.Sprintf("module   %s (wasmop/examples/wordcount, Go built for wasip1, %d bytes)", mod, len(ex.Module)),
		fmt.Sprintf("program  %s (one %s node, export %q)", progRef, wasmop.Name, demoWasmParams.Export),
		fmt.Sprintf("inputs   module, hello.txt -> output %s = %q (words in \"hello, amduat\\n\")", run.OutputRefs[0], run.Outputs[0].Bytes),
		fmt.Sprintf("result   %s, status OK; run again: action-cache hit, nothing executed", run.ResultRef),
	}, nil
}
