package surf_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

func put(t testing.TB, s asl.Store, a asl.Artifact) asl.Reference {
	t.Helper()
	ref, err := asl.PutArtifact(context.Background(), s, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func seed(t testing.TB, s asl.Store, name string) asl.Reference {
	t.Helper()
	a, err := pel.SeedArtifact(name)
	if err != nil {
		t.Fatal(err)
	}
	return put(t, s, a)
}

// noIndex hides the Indexer capability of a store.
type noIndex struct{ asl.Store }

func TestRunBranches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	in0 := put(t, s, asl.Untagged([]byte("hello ")))
	in1 := put(t, s, asl.Untagged([]byte("world")))
	damaged := put(t, s, asl.Untagged([]byte("soon damaged")))
	s.Corrupt(damaged, []byte("Soon damaged"))
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("never stored")))
	unknownHash, _ := asl.DecodeReference([]byte{0x77, 0x77, 1, 2})
	otherScheme := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("another scheme")))
	concat := seed(t, s, pel.SeedConcat)
	params := seed(t, s, pel.SeedConst) // any artifact works as params

	tests := []struct {
		name    string
		req     surf.Request
		status  pel.ExecutionStatus
		code    uint32
		output  string
		failure *surf.StoreFailure
	}{
		{"ok concat", surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{in0, in1}}, pel.StatusOK, 0, "hello world", nil},
		{"ok with params", surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{in0, in1}, ParamsRef: params, HasParams: true}, pel.StatusOK, 0, "hello world", nil},
		{"scheme unsupported", surf.Request{SchemeRef: otherScheme, ProgramRef: concat, InputRefs: []asl.Reference{in0, in1}}, pel.StatusSchemeUnsupported, 1, "", nil},
		{"program missing", surf.Request{ProgramRef: missing}, pel.StatusInvalidProgram, 2, "",
			&surf.StoreFailure{Phase: surf.PhaseProgram, Ref: missing, Error: surf.StoreErrNotFound}},
		{"program unsupported hash", surf.Request{ProgramRef: unknownHash}, pel.StatusInvalidProgram, 2, "",
			&surf.StoreFailure{Phase: surf.PhaseProgram, Ref: unknownHash, Error: surf.StoreErrUnsupported}},
		{"input missing", surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{in0, missing}}, pel.StatusInvalidInputs, 3, "",
			&surf.StoreFailure{Phase: surf.PhaseInput, InputIndex: 1, Ref: missing, Error: surf.StoreErrNotFound}},
		{"input damaged", surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{damaged, in1}}, pel.StatusInvalidInputs, 3, "",
			&surf.StoreFailure{Phase: surf.PhaseInput, InputIndex: 0, Ref: damaged, Error: surf.StoreErrIntegrity}},
		{"params missing", surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{in0, in1}, ParamsRef: missing, HasParams: true}, pel.StatusInvalidInputs, 3, "",
			&surf.StoreFailure{Phase: surf.PhaseParams, Ref: missing, Error: surf.StoreErrNotFound}},
		{"exec input out of range", surf.Request{ProgramRef: concat, InputRefs: []asl.Reference{in0}}, pel.StatusInvalidInputs, 3, "", nil},
		{"program is not a program", surf.Request{ProgramRef: in0}, pel.StatusInvalidProgram, 2, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := surf.New(s, surf.Options{}).Run(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			v := run.Result.Value
			if v.Status != tt.status || v.Summary.StatusCode != tt.code {
				t.Fatalf("status %s/%d, want %s/%d (diagnostics %v)", v.Status, v.Summary.StatusCode, tt.status, tt.code, v.Diagnostics)
			}
			if tt.failure == nil && run.Result.HasStoreFailure {
				t.Fatalf("unexpected store failure %+v", run.Result.StoreFailure)
			}
			if tt.failure != nil && (!run.Result.HasStoreFailure || run.Result.StoreFailure != *tt.failure) {
				t.Fatalf("store failure %+v (present %v), want %+v", run.Result.StoreFailure, run.Result.HasStoreFailure, *tt.failure)
			}
			if tt.status == pel.StatusOK {
				out, err := asl.Get(ctx, s, run.OutputRefs[0], 0)
				if err != nil || string(out.Bytes) != tt.output {
					t.Fatalf("output = %q, %v; want %q", out.Bytes, err, tt.output)
				}
			} else if len(run.OutputRefs) != 0 {
				t.Fatalf("outputs on failure: %v", run.OutputRefs)
			}
			// Everything is stored and decodes back to what Run returned.
			res, err := surf.LoadResult(ctx, s, run.ResultRef)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := res.Artifact()
			first, _ := run.Result.Artifact()
			if !bytes.Equal(again.Bytes, first.Bytes) {
				t.Fatal("stored result differs from the returned one")
			}
			tr, err := surf.LoadTrace(ctx, s, run.TraceRef)
			if err != nil || tr.ExecResultRef != run.ResultRef || tr.Status != tt.status {
				t.Fatalf("trace %+v, %v", tr, err)
			}
			for _, st := range []asl.Store{s, noIndex{s}} {
				got, err := surf.FindTrace(ctx, st, run.ResultRef)
				if err != nil || got != run.TraceRef {
					t.Fatalf("FindTrace(%T) = %s, %v; want %s", st, got, err, run.TraceRef)
				}
			}
		})
	}
}

func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var first *surf.Run
	for i := 0; i < 3; i++ {
		s := memstore.New()
		in := put(t, s, asl.Untagged([]byte("abcdef")))
		prog := seed(t, s, pel.SeedSlice)
		run, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in}})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = run
			continue
		}
		if run.ResultRef != first.ResultRef || run.TraceRef != first.TraceRef || run.OutputRefs[0] != first.OutputRefs[0] {
			t.Fatalf("run %d gave %s/%s, first %s/%s", i, run.ResultRef, run.TraceRef, first.ResultRef, first.TraceRef)
		}
	}
}

func TestOperationalErrorStoresNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	prog := seed(t, s, pel.SeedConcat1)
	big := put(t, s, asl.Untagged(bytes.Repeat([]byte("x"), 100)))
	before := s.Len()
	_, err := surf.New(s, surf.Options{MaxArtifact: 10}).Run(ctx, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{big}})
	if err == nil {
		t.Fatal("Run accepted an input above MaxArtifact")
	}
	if s.Len() != before {
		t.Fatalf("store grew from %d to %d on an operational error", before, s.Len())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := surf.New(s, surf.Options{}).Run(cancelled, surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{big}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run err = %v", err)
	}
	if _, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{}); err == nil {
		t.Fatal("Run accepted a zero program reference")
	}
}

func TestResultDecodeRejects(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	run, err := surf.New(s, surf.Options{}).Run(context.Background(), surf.Request{ProgramRef: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil))})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := run.Result.Artifact()
	b := good.Bytes
	if _, err := surf.DecodeResult(b); err != nil {
		t.Fatalf("good result rejected: %v", err)
	}
	flagAt := len(b) - 1 - 1 - 4 - 38 - 1 // has_store_failure before phase, index, ref, error
	tests := []struct {
		name  string
		in    []byte
		field string
	}{
		{"empty", nil, "program_ref.ref_len"},
		{"trailing", append(bytes.Clone(b), 0), "end of input"},
		{"truncated", b[:len(b)-1], "store_failure.error"},
		{"bad store flag", replace(b, flagAt, 7), "has_store_failure"},
		{"bad phase", replace(b, flagAt+1, 9), "result"},
		{"bad store error", replace(b, len(b)-1, 9), "result"},
		{"bad input index", replace(b, flagAt+5, 1), "result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := surf.DecodeResult(tt.in)
			var de *enc.DecodeError
			if !errors.As(err, &de) || de.Field != tt.field {
				t.Fatalf("err = %v, want field %s", err, tt.field)
			}
		})
	}
	if _, err := surf.DecodeResultArtifact(asl.Untagged(b)); !errors.Is(err, enc.ErrMalformed) {
		t.Fatalf("untagged result accepted: %v", err)
	}
}

func replace(b []byte, i int, v byte) []byte {
	c := bytes.Clone(b)
	c[i] = v
	return c
}

func FuzzDecodeResult(f *testing.F) {
	s := memstore.New()
	ctx := context.Background()
	in := put(f, s, asl.Untagged([]byte("abcdef")))
	for _, req := range []surf.Request{
		{ProgramRef: seed(f, s, pel.SeedSlice), InputRefs: []asl.Reference{in}},
		{ProgramRef: asl.MustDerive(asl.HashSHA256, asl.Untagged(nil))},
		{ProgramRef: seed(f, s, pel.SeedConcat), InputRefs: []asl.Reference{in, asl.MustDerive(asl.HashBLAKE3, asl.Untagged(nil))}},
	} {
		run, err := surf.New(s, surf.Options{}).Run(ctx, req)
		if err != nil {
			f.Fatal(err)
		}
		a, _ := run.Result.Artifact()
		f.Add(a.Bytes)
	}
	f.Add([]byte{0, 0, 0, 2, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := surf.DecodeResult(b)
		if err != nil {
			return
		}
		again, err := surf.AppendResult(nil, res)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted bytes do not re-encode identically: %v", err)
		}
	})
}
