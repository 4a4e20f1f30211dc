package surf_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
	"github.com/amduat/amduat/trace"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) (*memstore.Store, *surf.Run) {
		s := memstore.New()
		in := put(t, s, asl.Untagged([]byte("abcdef")))
		prog := seed(t, s, pel.SeedSlice)
		run, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in}})
		if err != nil {
			t.Fatal(err)
		}
		return s, run
	}

	t.Run("clean", func(t *testing.T) {
		s, run := setup(t)
		v, err := surf.New(s, surf.Options{}).Verify(ctx, run.ResultRef)
		if err != nil || v.Mismatch != nil || v.TraceRef != run.TraceRef {
			t.Fatalf("Verify = %+v, %v", v, err)
		}
	})
	t.Run("damaged output", func(t *testing.T) {
		s, run := setup(t)
		s.Corrupt(run.OutputRefs[0], []byte("xxx"))
		v, err := surf.New(s, surf.Options{}).Verify(ctx, run.ResultRef)
		if err != nil || v.Mismatch == nil || v.Mismatch.Artifact != "output[0]" || !strings.Contains(v.Mismatch.Detail, "ERR_INTEGRITY") {
			t.Fatalf("Verify = %+v, %v", v.Mismatch, err)
		}
	})
	t.Run("damaged trace", func(t *testing.T) {
		s, run := setup(t)
		a, _ := asl.Get(ctx, s, run.TraceRef, 0)
		a.Bytes[len(a.Bytes)-1] ^= 1
		s.Corrupt(run.TraceRef, a.Bytes)
		v, err := surf.New(s, surf.Options{}).Verify(ctx, run.ResultRef)
		if err != nil || v.Mismatch == nil || v.Mismatch.Artifact != "trace" || v.Mismatch.Stored != run.TraceRef {
			t.Fatalf("Verify = %+v, %v", v.Mismatch, err)
		}
	})
	t.Run("substituted trace", func(t *testing.T) {
		// A well-formed but altered trace, stored and indexed as the
		// result's trace: the replay names the first differing record.
		s, run := setup(t)
		forged := run.Trace
		forged.Nodes = append([]trace.NodeRecord(nil), run.Trace.Nodes...)
		other := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("forged")))
		forged.Nodes[len(forged.Nodes)-1].OutputRefs = []asl.Reference{other}
		art, err := forged.Artifact()
		if err != nil {
			t.Fatal(err)
		}
		forgedRef := asl.MustDerive(asl.HashSHA256, art)
		if _, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{art}, []asl.IndexEntry{
			{Space: surf.TraceIndexSpace, Key: run.ResultRef.Bytes(), Value: forgedRef.Bytes()}}); err != nil {
			t.Fatal(err)
		}
		v, err := surf.New(s, surf.Options{}).Verify(ctx, run.ResultRef)
		if err != nil || v.Mismatch == nil || v.Mismatch.Artifact != "trace" || !strings.Contains(v.Mismatch.Detail, "output 0") {
			t.Fatalf("Verify = %+v, %v", v.Mismatch, err)
		}
	})
	t.Run("operation changed semantics", func(t *testing.T) {
		// Stored under one implementation of test.upper, replayed under a
		// different one: the output differs first.
		s := memstore.New()
		var calls atomic.Int64
		prog := upperProgram(t, s)
		in := put(t, s, asl.Untagged([]byte("abc")))
		run, err := surf.New(s, surf.Options{Registry: countingRegistry(t, &calls)}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in}})
		if err != nil {
			t.Fatal(err)
		}
		lower, _ := opreg.Kernel().Extend(opreg.Operation{
			ID: opreg.OperationID{Name: "test.upper", Version: 1}, MinInputs: 1, MaxInputs: 1,
			DecodeParams: func([]byte) (any, error) { return nil, nil },
			EncodeParams: func(any) ([]byte, error) { return nil, nil },
			Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
				return []asl.Artifact{c.Inputs[0]}, nil
			},
		})
		v, err := surf.New(s, surf.Options{Registry: lower}).Verify(ctx, run.ResultRef)
		if err != nil || v.Mismatch == nil || v.Mismatch.Artifact != "output[0]" {
			t.Fatalf("Verify = %+v, %v", v, err)
		}
	})
}
