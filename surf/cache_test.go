package surf_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// gatedSalt is a memstore whose salt reads, once armed, wait until an
// action-cache lookup has begun: a run that read the salt before looking
// its entry up would wait for ever (until the minute's guard).
type gatedSalt struct {
	*memstore.Store
	armed   atomic.Bool
	lookups chan struct{} // closed by the first action lookup once armed
	once    sync.Once
}

func (g *gatedSalt) LookupIndex(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	if g.armed.Load() {
		switch space {
		case surf.ActionIndexSpace:
			g.once.Do(func() { close(g.lookups) })
		case surf.ConfigIndexSpace:
			select {
			case <-g.lookups:
			case <-time.After(time.Minute):
				return nil, false, errors.New("the salt was read before the action entry was looked up")
			}
		}
	}
	return g.Store.LookupIndex(ctx, space, key)
}

// TestSaltReadBesideLookup: a surface that has read the salt before looks
// the action entry up under it while it reads the salt again (SPECS.md
// §6.7, "Requests per operation"), and a salt changed meanwhile still
// disowns the entry (§14.6): the answer found under the old salt is
// discarded and the run executes.
func TestSaltReadBesideLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := &gatedSalt{Store: memstore.New(), lookups: make(chan struct{})}
	var calls atomic.Int64
	salts := new(surf.SaltMemo)
	// A new Surface per run, sharing the memo, as the server makes them.
	run := func(req surf.Request) *surf.Run {
		t.Helper()
		r, err := surf.New(g, surf.Options{Registry: countingRegistry(t, &calls), Salts: salts}).Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	prog := upperProgram(t, g)
	req := surf.Request{ProgramRef: prog, InputRefs: []asl.Reference{put(t, g, asl.Untagged([]byte("beside")))}}
	if r := run(req); r.CacheHit || calls.Load() != 1 {
		t.Fatalf("first run: hit=%v calls=%d", r.CacheHit, calls.Load())
	}
	g.armed.Store(true)
	if r := run(req); !r.CacheHit || calls.Load() != 1 {
		t.Fatalf("second run: hit=%v calls=%d", r.CacheHit, calls.Load())
	}
	// Another process rotates the salt: the entry found under the
	// remembered one must not answer.
	if err := surf.SetSalt(ctx, g.Store, []byte("rotated")); err != nil {
		t.Fatal(err)
	}
	if r := run(req); r.CacheHit || calls.Load() != 2 {
		t.Fatalf("run after the salt changed: hit=%v calls=%d", r.CacheHit, calls.Load())
	}
	if r := run(req); !r.CacheHit || calls.Load() != 2 {
		t.Fatalf("second run after the salt changed: hit=%v calls=%d", r.CacheHit, calls.Load())
	}
}

// TestActionEntryFormats: format 2 round-trips; a lone ReferenceBytes is
// format 1; the decoder's rejection rules (SPECS.md §14.6, "Record").
func TestActionEntryFormats(t *testing.T) {
	t.Parallel()
	res := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("result")))
	tr := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("trace")))
	out := asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("output")))
	v := surf.AppendActionEntry(nil, res, tr, []asl.Reference{out})
	e, err := surf.DecodeActionEntry(v)
	if err != nil || !e.HasRun || e.Result != res || e.Trace != tr || len(e.Outputs) != 1 || e.Outputs[0] != out {
		t.Fatalf("format 2: %+v, %v", e, err)
	}
	if got := e.Refs(); len(got) != 3 || got[0] != res || got[1] != tr || got[2] != out {
		t.Fatalf("Refs = %v", got)
	}
	if e, err := surf.DecodeActionEntry(res.Bytes()); err != nil || e.HasRun || e.Result != res || len(e.Refs()) != 1 {
		t.Fatalf("format 1: %+v, %v", e, err)
	}
	if e, err := surf.DecodeActionEntry(surf.AppendActionEntry(nil, res, tr, nil)); err != nil || !e.HasRun || len(e.Outputs) != 0 {
		t.Fatalf("format 2 without outputs: %+v, %v", e, err)
	}
	one := []byte{0, 0, 0, 1}
	one = asl.AppendEncodedRef(one, res)
	for _, c := range []struct {
		name string
		v    []byte
	}{
		{"empty", nil},
		{"count 0", []byte{0, 0, 0, 0}},
		{"count 1", one},
		{"trailing byte", append(bytes.Clone(v), 0)},
		{"truncated", v[:len(v)-1]},
		{"count beyond the bytes", append([]byte{0xff, 0xff, 0xff, 0xff}, v[4:]...)},
		{"reserved hash id", make([]byte, 34)},
		{"SHA-256 digest short", res.Bytes()[:33]},
	} {
		if e, err := surf.DecodeActionEntry(c.v); err == nil {
			t.Errorf("%s: accepted as %+v", c.name, e)
		}
	}
}

// FuzzDecodeActionEntry: an accepted format 2 value re-encodes to itself,
// an accepted format 1 value is one ReferenceBytes.
func FuzzDecodeActionEntry(f *testing.F) {
	res := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("result")))
	tr := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("trace")))
	f.Add(res.Bytes())
	f.Add(surf.AppendActionEntry(nil, res, tr, nil))
	f.Add(surf.AppendActionEntry(nil, res, tr, []asl.Reference{res, tr}))
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 2, 0, 9, 0, 0, 0, 2, 0, 9})
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := surf.DecodeActionEntry(v)
		if err != nil {
			return
		}
		var again []byte
		if e.HasRun {
			again = surf.AppendActionEntry(nil, e.Result, e.Trace, e.Outputs)
		} else {
			again = e.Result.Bytes()
		}
		if !bytes.Equal(again, v) {
			t.Fatalf("accepted %x re-encodes as %x", v, again)
		}
	})
}

// TestActionEntryCompat: an entry of format 1 (the result alone, as
// written before format 2) still answers, its trace found through
// surf.trace; a format 2 entry whose outputs disagree with its result is a
// miss, and the run that follows rewrites it.
func TestActionEntryCompat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	var calls atomic.Int64
	run := func(req surf.Request) *surf.Run {
		t.Helper()
		r, err := surf.New(s, surf.Options{Registry: countingRegistry(t, &calls)}).Run(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	req := surf.Request{ProgramRef: upperProgram(t, s), InputRefs: []asl.Reference{put(t, s, asl.Untagged([]byte("compat")))}}
	first := run(req)
	key := surf.RequestKey(req, asl.HashSHA256, nil)
	v, found, err := s.LookupIndex(ctx, surf.ActionIndexSpace, key[:])
	if err != nil || !found {
		t.Fatalf("no entry after the run: %v", err)
	}
	if e, err := surf.DecodeActionEntry(v); err != nil || !e.HasRun || e.Result != first.ResultRef || e.Trace != first.TraceRef || !slices.Equal(e.Outputs, first.OutputRefs) {
		t.Fatalf("entry written: %+v, %v; want format 2 of the run", e, err)
	}
	setEntry := func(v []byte) {
		t.Helper()
		if _, err := s.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{{Space: surf.ActionIndexSpace, Key: key[:], Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	setEntry(first.ResultRef.Bytes())
	if r := run(req); !r.CacheHit || r.TraceRef != first.TraceRef || calls.Load() != 1 {
		t.Fatalf("format 1 entry: hit=%v trace %s (want %s) calls=%d", r.CacheHit, r.TraceRef, first.TraceRef, calls.Load())
	}
	other := put(t, s, asl.Untagged([]byte("not the output")))
	setEntry(surf.AppendActionEntry(nil, first.ResultRef, first.TraceRef, []asl.Reference{other}))
	if r := run(req); r.CacheHit || calls.Load() != 2 {
		t.Fatalf("entry disagreeing with its result: hit=%v calls=%d", r.CacheHit, calls.Load())
	}
	if r := run(req); !r.CacheHit || calls.Load() != 2 {
		t.Fatalf("after the rewrite: hit=%v calls=%d", r.CacheHit, calls.Load())
	}
}
