package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// The demo's PEL step (order 80, before verify): store the concat seed, run
// it by reference on two stored artifacts, check the output against the
// inputs, find the trace from the result, and run the slice seed on the
// empty file to show a failing run that is still recorded.
func init() { addDemoStep(demoStep{80, "pel run", demoPELRun}) }

func demoPELRun(ctx context.Context, e *demoEnv) ([]string, error) {
	hello, tagged := e.refs["hello"], e.refs["hello-tagged"]
	empty, ok := e.refs["empty.bin"]
	if hello.IsZero() || tagged.IsZero() || !ok {
		return nil, fmt.Errorf("pel run: earlier steps did not store hello, hello-tagged and empty.bin")
	}
	id := e.store.DefaultHash()
	concat, err := pel.SeedArtifact(pel.SeedConcat)
	if err != nil {
		return nil, err
	}
	prog, err := asl.PutArtifact(ctx, e.store, id, concat)
	if err != nil {
		return nil, failAuto("concat seed", err)
	}
	sf := surf.New(e.store, surf.Options{Hash: id})
	run, err := sf.Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{hello, tagged}})
	if err != nil {
		return nil, failAuto(prog.String(), err)
	}
	if s := run.Result.Value.Status; s != pel.StatusOK || len(run.OutputRefs) != 1 {
		return nil, fmt.Errorf("concat seed: status %s with %d outputs, want OK with 1", s, len(run.OutputRefs))
	}
	got, err := asl.Get(ctx, e.store, run.OutputRefs[0], 0)
	if err != nil {
		return nil, failAuto(run.OutputRefs[0].String(), err)
	}
	want := bytes.Repeat([]byte("hello, amduat\n"), 2)
	if !bytes.Equal(got.Bytes, want) || got.HasTag {
		return nil, fmt.Errorf("concat output %q (tagged %t), want %q untagged", got.Bytes, got.HasTag, want)
	}
	tref, err := surf.FindTrace(ctx, e.store, run.ResultRef)
	if err != nil || tref != run.TraceRef {
		return nil, fmt.Errorf("trace of result %s: found %s, %v; want %s", run.ResultRef, tref, err, run.TraceRef)
	}
	out := []string{
		fmt.Sprintf("program  %s (seed concat)", prog),
		fmt.Sprintf("inputs   hello, hello-tagged -> output %s (%d bytes, the two inputs' bytes, untagged)", run.OutputRefs[0], len(got.Bytes)),
		fmt.Sprintf("result   %s, status OK", run.ResultRef),
		fmt.Sprintf("trace    %s, found again from the result", run.TraceRef),
	}

	slice, err := pel.SeedArtifact(pel.SeedSlice)
	if err != nil {
		return out, err
	}
	sprog, err := asl.PutArtifact(ctx, e.store, id, slice)
	if err != nil {
		return out, failAuto("slice seed", err)
	}
	frun, err := sf.Run(ctx, surf.Request{ProgramRef: sprog, InputRefs: []asl.Reference{empty}})
	if err != nil {
		return out, failAuto(sprog.String(), err)
	}
	v := frun.Result.Value
	if v.Status != pel.StatusRuntimeFailed || len(v.Diagnostics) < 2 {
		return out, fmt.Errorf("slice of the empty file: status %s, want RUNTIME_FAILED with diagnostics", v.Status)
	}
	out = append(out,
		fmt.Sprintf("slice [1,4) of empty.bin: %s status_code 0x%08x (exit code %d from pel run)", v.Status, v.Summary.StatusCode, pelExitCode(v.Status)),
		fmt.Sprintf("         %s", printableText(v.Diagnostics[len(v.Diagnostics)-1].Message)),
		fmt.Sprintf("         result %s and trace %s are stored all the same", frun.ResultRef, frun.TraceRef),
	)
	return out, nil
}
