package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
)

// TestConcurrent runs puts (single and batched), overlapping in content, and
// gets on one store from many goroutines: every artifact ends up stored
// exactly once (no orphaned or doubly referenced blob) and every read
// verifies. With packs on and every artifact within one chunk ("small"),
// the batches take the streamed fresh path, which takes no claims, beside
// puts that do. By default 4 goroutines do 3 rounds each (one of each
// kind: puts, a batch, gets), each kind run by some goroutine in every
// round; AMDUAT_LONG=1 (internal/longtest) runs 8 goroutines of 6 rounds
// (issue 25).
func TestConcurrent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		packMin int64
		small   bool
	}{{-1, false}, {0, false}, {0, true}} {
		t.Run(fmt.Sprintf("packmin %d small %v", c.packMin, c.small), func(t *testing.T) { testConcurrent(t, c.packMin, c.small) })
	}
}

func testConcurrent(t *testing.T, packMin int64, small bool) {
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: 32 << 10, InlineMax: 1024, PackMin: packMin})
	var pool []asl.Artifact
	for i := range 24 {
		switch i % 3 {
		case 0:
			pool = append(pool, asl.Untagged([]byte(fmt.Sprintf("shared %d", i))))
		case 1:
			pool = append(pool, asl.Tagged(asl.TypeTag(i), genBytes(uint64(i), 20<<10, i%2 == 0)))
		default:
			size := 100<<10 + i // chunked
			if small {
				size = 30<<10 + i
			}
			pool = append(pool, asl.Untagged(genBytes(uint64(i), size, i%4 == 0)))
		}
	}
	workers := longtest.Count(4, 8)
	rounds := longtest.Count(3, 6)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				var err error
				switch (w + round) % 3 {
				case 0:
					for i := w % 3; i < len(pool); i += 3 {
						if _, err = asl.PutArtifact(ctx, s, asl.HashSHA256, pool[i]); err != nil {
							break
						}
					}
				case 1:
					batch := slices.Concat(pool[w%5:], pool[:w%5])
					if small {
						// Mostly new artifacts, with shared ones where the
						// presence sample does not look (it probes positions
						// k*43/16), so the batch takes the fresh path while
						// other goroutines put the shared ones.
						batch = nil
						for i := range 38 {
							batch = append(batch, asl.Untagged(genBytes(uint64(10000+w*1000+round*100+i), 600+i, false)))
						}
						for j, pos := range []int{1, 3, 4, 6, 7} {
							batch = slices.Insert(batch, pos, pool[(w+j)%len(pool)])
						}
					}
					var refs []asl.Reference
					if refs, err = s.PutBatch(ctx, asl.HashSHA256, batch); err == nil {
						for i, ref := range refs {
							if got, gerr := asl.Get(ctx, s, ref, 0); gerr != nil || !sameArtifact(got, batch[i]) {
								err = fmt.Errorf("artifact %d of a batch just put: %v", i, gerr)
								break
							}
						}
					}
				default:
					for _, a := range pool {
						ref := asl.MustDerive(asl.HashSHA256, a)
						got, gerr := asl.Get(ctx, s, ref, 0)
						if gerr == nil && !sameArtifact(got, a) {
							err = fmt.Errorf("%s: wrong bytes", ref)
						} else if gerr != nil && !isNotFound(gerr) {
							err = gerr
						}
						if err != nil {
							break
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, pool)
	if err != nil {
		t.Fatal(err)
	}
	for i, ref := range refs {
		if got := get(t, s, ref); !sameArtifact(got, pool[i]) {
			t.Fatalf("artifact %d differs", i)
		}
	}
	checkNoOrphans(t, s)
	for i := range s.claims {
		if n := len(s.claims[i].m); n != 0 {
			t.Fatalf("claim shard %d holds %d claims", i, n)
		}
	}
}

func isNotFound(err error) bool { return errors.Is(err, asl.ErrNotFound) }
