package pebblestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestPackMappedReads runs packed reads on the OS file system, where packs
// are read through a mapping: reads interleaved with appends to the same
// pack, concurrent readers, and a pack truncated behind the store's back,
// which must give errors (ErrIntegrity for the lost records), never a crash
// or wrong bytes.
func TestPackMappedReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Create(dir, &Options{PackMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var arts []asl.Artifact
	var refs []asl.Reference
	for round := range 5 {
		batch := make([]asl.Artifact, 60)
		for i := range batch {
			batch[i] = asl.Untagged(genBytes(2000+uint64(round*100+i), 600+i*17, i%3 == 0))
		}
		r, err := s.PutBatch(ctx, asl.HashSHA256, batch)
		if err != nil {
			t.Fatal(err)
		}
		arts, refs = append(arts, batch...), append(refs, r...)
		// Every record so far, including the ones just appended to the
		// pack the reader has mapped.
		for i, ref := range refs {
			if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
				t.Fatalf("round %d: artifact %d differs", round, i)
			}
		}
	}
	rd, err := s.packs.reader(1)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && rd.data == nil {
		t.Fatal("pack 1 is not mapped on linux")
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(refs); i += 4 {
				got, err := asl.Get(ctx, s, refs[i], 0)
				if err != nil || !sameArtifact(got, arts[i]) {
					t.Errorf("concurrent get %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()

	path := filepath.Join(dir, packDir, packName(1))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i, ref := range refs {
		got, err := asl.Get(ctx, s, ref, 0)
		switch {
		case err == nil:
			if !sameArtifact(got, arts[i]) {
				t.Fatalf("artifact %d: wrong bytes from a truncated pack", i)
			}
		case errors.Is(err, asl.ErrIntegrity):
			lost++
		default:
			t.Fatalf("artifact %d: %v, want ErrIntegrity", i, err)
		}
	}
	if lost == 0 || lost == len(refs) {
		t.Fatalf("%d of %d artifacts lost after truncating the pack to half", lost, len(refs))
	}
}
