package surf_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// countingRegistry is the kernel plus "test.upper" v1, which upper-cases its
// input and counts its calls.
func countingRegistry(t testing.TB, calls *atomic.Int64) *opreg.Registry {
	t.Helper()
	reg, err := opreg.Kernel().Extend(opreg.Operation{
		ID:        opreg.OperationID{Name: "test.upper", Version: 1},
		MinInputs: 1, MaxInputs: 1,
		DecodeParams: func(b []byte) (any, error) { return nil, nil },
		EncodeParams: func(any) ([]byte, error) { return nil, nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			calls.Add(1)
			out := make([]byte, len(c.Inputs[0].Bytes))
			for i, b := range c.Inputs[0].Bytes {
				if b >= 'a' && b <= 'z' {
					b -= 'a' - 'A'
				}
				out[i] = b
			}
			return []asl.Artifact{asl.Untagged(out)}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func upperProgram(t testing.TB, s asl.Store) asl.Reference {
	t.Helper()
	a, err := pel.ProgramArtifact(pel.Program{
		Nodes: []pel.Node{{ID: 1, Op: pel.OperationID{Name: "test.upper", Version: 1}, Inputs: []pel.DagInput{pel.External(0)}}},
		Roots: []pel.RootRef{{NodeID: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return put(t, s, a)
}

func TestActionCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	var calls atomic.Int64
	sf := surf.New(s, surf.Options{Registry: countingRegistry(t, &calls)})
	prog := upperProgram(t, s)
	in := put(t, s, asl.Untagged([]byte("cache me")))
	req := surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{in}}

	first, err := sf.Run(ctx, req)
	if err != nil || first.CacheHit || calls.Load() != 1 {
		t.Fatalf("first run: hit=%v calls=%d err=%v", first.CacheHit, calls.Load(), err)
	}
	second, err := sf.Run(ctx, req)
	if err != nil || !second.CacheHit || calls.Load() != 1 {
		t.Fatalf("second run: hit=%v calls=%d err=%v", second.CacheHit, calls.Load(), err)
	}
	if second.ResultRef != first.ResultRef || second.TraceRef != first.TraceRef || second.OutputRefs[0] != first.OutputRefs[0] {
		t.Fatal("cache hit returned different references")
	}

	// --no-cache executes again and gives identical references.
	again, err := surf.New(s, surf.Options{Registry: countingRegistry(t, &calls), NoCache: true}).Run(ctx, req)
	if err != nil || again.CacheHit || calls.Load() != 2 || again.ResultRef != first.ResultRef {
		t.Fatalf("no-cache run: hit=%v calls=%d err=%v", again.CacheHit, calls.Load(), err)
	}

	// A new salt disowns every earlier entry.
	if err := surf.SetSalt(ctx, s, []byte("rotated")); err != nil {
		t.Fatal(err)
	}
	if run, err := sf.Run(ctx, req); err != nil || run.CacheHit || calls.Load() != 3 {
		t.Fatalf("run after salt change: calls=%d err=%v", calls.Load(), err)
	}
	if run, err := sf.Run(ctx, req); err != nil || !run.CacheHit || calls.Load() != 3 {
		t.Fatalf("second run after salt change: hit=%v calls=%d err=%v", run.CacheHit, calls.Load(), err)
	}

	// A damaged output invalidates the entry: every run recomputes (an
	// idempotent put does not rewrite the damaged copy; SPECS.md §6.1).
	s.Corrupt(first.OutputRefs[0], []byte("CACHE ME?"))
	for want := int64(4); want <= 5; want++ {
		if run, err := sf.Run(ctx, req); err != nil || run.CacheHit || calls.Load() != want {
			t.Fatalf("run after damage: hit=%v calls=%d err=%v", run.CacheHit, calls.Load(), err)
		}
	}
}

func TestStoreFailuresAreNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	prog := seed(t, s, pel.SeedConcat1)
	art := asl.Untagged([]byte("arrives late"))
	late := asl.MustDerive(asl.HashSHA256, art)
	req := surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{late}}
	run, err := surf.New(s, surf.Options{}).Run(ctx, req)
	if err != nil || run.Result.Value.Status != pel.StatusInvalidInputs {
		t.Fatalf("missing input: %v %v", run, err)
	}
	put(t, s, art)
	run, err = surf.New(s, surf.Options{}).Run(ctx, req)
	if err != nil || run.CacheHit || run.Result.Value.Status != pel.StatusOK {
		t.Fatalf("after storing the input: hit=%v status=%s err=%v", run.CacheHit, run.Result.Value.Status, err)
	}
}

func TestRequestKeyCoversEveryField(t *testing.T) {
	t.Parallel()
	a := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("a")))
	b := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("b")))
	base := surf.Request{ProgramRef: a, InputRefs: []asl.Reference{b}}
	keys := map[[32]byte]string{}
	add := func(name string, k [32]byte) {
		if prev, ok := keys[k]; ok {
			t.Fatalf("%s and %s share a request key", name, prev)
		}
		keys[k] = name
	}
	add("base", surf.RequestKey(base, asl.HashSHA256, nil))
	add("explicit scheme", surf.RequestKey(surf.Request{SchemeRef: b, ProgramRef: a, InputRefs: []asl.Reference{b}}, asl.HashSHA256, nil))
	add("program", surf.RequestKey(surf.Request{ProgramRef: b, InputRefs: []asl.Reference{b}}, asl.HashSHA256, nil))
	add("inputs", surf.RequestKey(surf.Request{ProgramRef: a, InputRefs: []asl.Reference{b, b}}, asl.HashSHA256, nil))
	add("params", surf.RequestKey(surf.Request{ProgramRef: a, InputRefs: []asl.Reference{b}, ParamsRef: a, HasParams: true}, asl.HashSHA256, nil))
	add("hash", surf.RequestKey(base, asl.HashBLAKE3, nil))
	add("max nodes", surf.RequestKey(surf.Request{ProgramRef: a, InputRefs: []asl.Reference{b}, Limits: pel.Limits{MaxNodes: 1}}, asl.HashSHA256, nil))
	add("max bytes", surf.RequestKey(surf.Request{ProgramRef: a, InputRefs: []asl.Reference{b}, Limits: pel.Limits{MaxOutputBytes: 1}}, asl.HashSHA256, nil))
	add("salt", surf.RequestKey(base, asl.HashSHA256, []byte("s")))
	if surf.RequestKey(surf.Request{SchemeRef: pel.SchemeRefDAG1, ProgramRef: a, InputRefs: []asl.Reference{b}}, asl.HashSHA256, nil) !=
		surf.RequestKey(base, asl.HashSHA256, nil) {
		t.Fatal("an explicit SchemeRef_DAG_1 and the default give different keys")
	}
}
