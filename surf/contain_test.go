package surf_test

import (
	"context"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// TestPanickingOperationStoresNothing: a user operation that panics is an
// internal failure (SPECS.md §12.8): Run returns an error wrapping
// pel.ErrInternal and stores no output, result or trace, with or without
// the action cache and the node memo.
func TestPanickingOperationStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := opreg.OperationID{Name: "test.boom", Version: 1}
	reg, err := opreg.Kernel().Extend(opreg.Operation{
		ID: boom, MinInputs: 1, MaxInputs: 1,
		DecodeParams: func([]byte) (any, error) { return nil, nil },
		EncodeParams: func(any) ([]byte, error) { return []byte{}, nil },
		Run:          func(opreg.Call) ([]asl.Artifact, *opreg.OpError) { panic("boom") },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []surf.Options{{Registry: reg}, {Registry: reg, NodeMemo: true}} {
		s := memstore.New()
		progArt, err := pel.ProgramArtifact(pel.Program{Nodes: []pel.Node{
			{ID: 1, Op: boom, Inputs: []pel.DagInput{pel.External(0)}, Params: []byte{}},
		}, Roots: []pel.RootRef{{NodeID: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		prog := put(t, s, progArt)
		in := put(t, s, asl.Untagged([]byte("x")))
		before := s.Len()
		run, err := surf.New(s, opts).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in}})
		if !errors.Is(err, pel.ErrInternal) || run != nil {
			t.Fatalf("NodeMemo %v: run %v, err %v; want ErrInternal", opts.NodeMemo, run, err)
		}
		if s.Len() != before {
			t.Fatalf("NodeMemo %v: store grew from %d to %d on an internal failure", opts.NodeMemo, before, s.Len())
		}
	}
}
