package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// holdIndexQueue stops the index committer until the returned function is
// called: jobs queued meanwhile stay pending.
func holdIndexQueue(t *testing.T, s *Store) (release func()) {
	t.Helper()
	gate, held := make(chan struct{}), make(chan struct{})
	s.idx.jobs <- &indexJob{call: func() { close(held); <-gate }}
	<-held
	return func() { close(gate) }
}

// TestIndexQueuePending: a packed batch is readable (Fetch, Stat, presence)
// as soon as PutBatch returns, while its index commit is still queued;
// Enumerate waits for the commit and lists every artifact once.
func TestIndexQueuePending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, &Options{PackMin: 1})
	release := holdIndexQueue(t, s)
	var arts []asl.Artifact
	for i := range 40 {
		arts = append(arts, asl.Tagged(asl.TypeTag(i%3), genBytes(900+uint64(i), 700+i, i%2 == 0)))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if _, ok := s.idx.lookup(ref); !ok {
			t.Fatalf("%s is not pending while the committer is held", ref)
		}
		if _, closer, err := s.db.Get(appendIndexKey(nil, ref)); !errors.Is(err, pebble.ErrNotFound) {
			if err == nil {
				closer.Close()
			}
			t.Fatalf("%s reached Pebble while the committer is held: %v", ref, err)
		}
	}
	for i, ref := range refs {
		if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("artifact %d differs", i)
		}
		info, err := s.Stat(ctx, ref)
		if err != nil || info.Header != arts[i].Header() {
			t.Fatalf("Stat(%d) = %+v, %v", i, info, err)
		}
	}
	// A re-put sees the pending records: nothing is appended.
	size := packDirBytes(t, s)
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	if got := packDirBytes(t, s); got != size {
		t.Fatalf("re-put of pending artifacts grew the packs from %d to %d bytes", size, got)
	}
	release()
	seen := map[asl.Reference]int{}
	if err := s.Enumerate(ctx, asl.Reference{}, func(info asl.Info) error {
		seen[info.Ref]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(refs) {
		t.Fatalf("Enumerate listed %d artifacts, want %d", len(seen), len(refs))
	}
	for _, ref := range refs {
		if seen[ref] != 1 {
			t.Fatalf("Enumerate listed %s %d times", ref, seen[ref])
		}
		if _, ok := s.idx.lookup(ref); ok {
			t.Fatalf("%s still pending after the queue drained", ref)
		}
	}
	checkNoOrphans(t, s)
}

// TestPackSampleMiss: a batch whose presence sample finds nothing is packed
// whole, including artifacts stored already outside the sample (inline,
// blob and packed ones); every artifact reads back, Enumerate lists each
// once, and the re-stored ones are named by their new pack records.
func TestPackSampleMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, &Options{PackMin: 64 << 10})
	old := []asl.Artifact{
		asl.Untagged(genBytes(950, 100, false)),    // inline
		asl.Untagged(genBytes(951, 20<<10, false)), // blob (a single put, below PackMin)
	}
	var oldRefs []asl.Reference
	for _, a := range old {
		oldRefs = append(oldRefs, put(t, s, asl.HashSHA256, a))
	}
	var arts []asl.Artifact
	for i := range 200 {
		arts = append(arts, asl.Untagged(genBytes(1000+uint64(i), 1024, false)))
	}
	// Sampled positions are k*len/16; positions 1 and 2 are not sampled.
	arts[1], arts[2] = old[0], old[1]
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	if refs[1] != oldRefs[0] || refs[2] != oldRefs[1] {
		t.Fatal("references of the re-stored artifacts differ")
	}
	for i, ref := range refs {
		if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("artifact %d differs", i)
		}
	}
	for _, ref := range oldRefs {
		if rec := indexOf(t, s, ref); !rec.packed() {
			t.Fatalf("re-stored %s is named by %+v, want its pack record", ref, rec)
		}
	}
	n := 0
	if err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 200 {
		t.Fatalf("Enumerate listed %d artifacts, want 200", n)
	}
}

// TestPackFreshRepeated: an artifact repeated within a fresh batch gets a
// record per occurrence; both references are equal, it reads back, and
// Enumerate lists it once.
func TestPackFreshRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, &Options{PackMin: 1})
	var arts []asl.Artifact
	for i := range 100 {
		arts = append(arts, asl.Untagged(genBytes(3000+uint64(i), 512, false)))
	}
	arts[50] = arts[10]
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	if refs[50] != refs[10] {
		t.Fatal("equal artifacts got different references")
	}
	for i, ref := range refs {
		if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("artifact %d differs", i)
		}
	}
	n := 0
	if err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 99 {
		t.Fatalf("Enumerate listed %d artifacts, want 99", n)
	}
}

// TestIndexQueueFailure: a failed queued commit is sticky. The batch it
// belonged to stays readable from the pending set, every later write and
// Enumerate fail with the error, Close reports it, and the next Open indexes
// the batch again from its pack.
func TestIndexQueueFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Create("store", &Options{FS: fs, PackMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	settleIndex(t, s)
	boom := errors.New("injected commit failure")
	s.idx.commit = func(*indexJob) error { return boom }
	var arts []asl.Artifact
	for i := range 20 {
		arts = append(arts, asl.Untagged(genBytes(5000+uint64(i), 900, false)))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatalf("PutBatch before the commit failed: %v", err)
	}
	if err := s.idx.drain(); !errors.Is(err, boom) {
		t.Fatalf("drain = %v, want the commit failure", err)
	}
	for i, ref := range refs {
		if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("artifact %d differs after the failed commit", i)
		}
	}
	more := []asl.Artifact{asl.Untagged(genBytes(5100, 70<<10, false))}
	if _, err := s.PutBatch(ctx, asl.HashSHA256, more); !errors.Is(err, boom) {
		t.Fatalf("PutBatch after the failure = %v, want the commit failure", err)
	}
	if _, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: 3}, bytes.NewReader([]byte("abc"))); !errors.Is(err, boom) {
		t.Fatalf("Put after the failure = %v, want the commit failure", err)
	}
	if err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { return nil }); !errors.Is(err, boom) {
		t.Fatalf("Enumerate after the failure = %v, want the commit failure", err)
	}
	if err := s.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the commit failure", err)
	}
	s, err = Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packRecovered != len(refs) {
		t.Fatalf("Open indexed %d records from the pack, want %d", s.packRecovered, len(refs))
	}
	for i, ref := range refs {
		if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("artifact %d differs after reopening", i)
		}
	}
}
