package surf_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
	"github.com/amduat/amduat/enc"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// poison points the node memo entry of the first node of stepChain(1) on
// input in at a different artifact, as a damaged or malicious cache would.
func poison(t *testing.T, s *memstore.Store, in []byte, salt []byte) {
	t.Helper()
	evil := asl.Untagged([]byte("EVIL"))
	key := surf.NodeKey(asl.HashSHA256, pel.OperationID{Name: "test.step", Version: 1}, nil, []asl.Artifact{asl.Untagged(in)}, nil, salt)
	w := enc.Writer{}
	w.U32(1)
	w.Buf = asl.AppendEncodedRef(w.Buf, asl.MustDerive(asl.HashSHA256, evil))
	if _, err := s.PutIndexed(context.Background(), asl.HashSHA256, []asl.Artifact{evil},
		[]asl.IndexEntry{{Space: surf.NodeIndexSpace, Key: key[:], Value: w.Buf}}); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyIgnoresTheNodeMemoAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	prog, _ := pel.ProgramArtifact(stepChain(1))
	progRef := put(t, s, prog)
	in := put(t, s, asl.Untagged([]byte("x")))
	poison(t, s, []byte("x"), nil)
	memo := surf.New(s, surf.Options{Registry: stepRegistry(t, new(atomic.Int64), 0), NodeMemo: true})
	run, err := memo.Run(ctx, surf.Request{ProgramRef: progRef, InputRefs: []asl.Reference{in}})
	if err != nil || run.NodesReused != 1 {
		t.Fatalf("memoized run: reused %d, %v", run.NodesReused, err)
	}
	before := s.Len()
	v, err := memo.Verify(ctx, run.ResultRef)
	if err != nil {
		t.Fatal(err)
	}
	if v.Mismatch == nil || v.Mismatch.Artifact != "output[0]" {
		t.Fatalf("verify through a memo surface trusted the poisoned memo: %+v", v.Mismatch)
	}
	if s.Len() != before {
		t.Fatalf("verify stored %d artifacts", s.Len()-before)
	}
}

func TestSaltDisownsNodeMemo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	prog, _ := pel.ProgramArtifact(stepChain(1))
	progRef := put(t, s, prog)
	in := put(t, s, asl.Untagged([]byte("x")))
	poison(t, s, []byte("x"), nil)
	if err := surf.SetSalt(ctx, s, []byte("fresh")); err != nil {
		t.Fatal(err)
	}
	run, err := surf.New(s, surf.Options{Registry: stepRegistry(t, new(atomic.Int64), 0), NodeMemo: true}).Run(ctx,
		surf.Request{ProgramRef: progRef, InputRefs: []asl.Reference{in}})
	if err != nil || run.NodesReused != 0 {
		t.Fatalf("after a new salt the poisoned node entry was reused (%d), %v", run.NodesReused, err)
	}
}

// TestNodeMemoOutputAboveMaxArtifactIsReused: memoized outputs are read
// lazily, so MaxArtifact (the bound of what is read into memory for an
// operation) no longer turns a large one into a miss.
func TestNodeMemoOutputAboveMaxArtifactIsReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	var calls atomic.Int64
	sf := surf.New(s, surf.Options{Registry: stepRegistry(t, &calls, 0), NodeMemo: true, MaxArtifact: 1000, NoCache: true})
	prog, _ := pel.ProgramArtifact(stepChain(3))
	progRef := put(t, s, prog)
	in := put(t, s, asl.Untagged(make([]byte, 999))) // node outputs: 1000, 1001, 1002 bytes
	for i := 0; i < 2; i++ {
		run, err := sf.Run(ctx, surf.Request{ProgramRef: progRef, InputRefs: []asl.Reference{in}})
		if err != nil || run.Result.Value.Status != pel.StatusOK {
			t.Fatalf("run %d: %v", i, err)
		}
		if i == 1 && run.NodesReused != 3 {
			t.Fatalf("second run reused %d nodes, want 3", run.NodesReused)
		}
	}
}

// countingStore counts full scans.
type countingStore struct {
	*memstore.Store
	scans int
}

func (c *countingStore) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	c.scans++
	return c.Store.Enumerate(ctx, after, fn)
}

func TestDamagedIndexedTraceIsNotScannedFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &countingStore{Store: memstore.New()}
	prog := seed(t, s, pel.SeedConst)
	run, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog})
	if err != nil {
		t.Fatal(err)
	}
	s.Corrupt(run.TraceRef, []byte("damaged"))
	if _, err := surf.FindTrace(ctx, s, run.ResultRef); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("FindTrace of a damaged trace = %v, want ErrIntegrity", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := surf.New(s, surf.Options{}).Run(ctx, surf.Request{ProgramRef: prog}); err != nil {
			t.Fatal(err)
		}
	}
	if s.scans != 0 {
		t.Fatalf("%d full scans for a trace the index names", s.scans)
	}
}
