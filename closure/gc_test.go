package closure_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/closure"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

// Surface runs during a collection: each reads unpinned inputs (garbage
// when the collection began) and stores its outputs, result, trace, edge
// and index entries through PutIndexed. Everything every run stored
// survives; a run that read its inputs (status OK) keeps them, so its whole
// closure (§19.6) is stored. (A run whose input the collection had already
// deleted fails with a store failure, and its result names the input,
// which is not stored: §19.6 allows that.)
func TestGcDuringRuns(t *testing.T) {
	ctx := context.Background()
	s, err := pebblestore.Create("store", &pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	progArt, _ := pel.SeedArtifact("concat")
	prog, err := asl.PutArtifact(ctx, s, asl.HashSHA256, progArt)
	if err != nil {
		t.Fatal(err)
	}
	var garbage []asl.Artifact
	for i := range 6000 {
		garbage = append(garbage, asl.Untagged([]byte(fmt.Sprintf("garbage input %d", i))))
	}
	inputs, err := s.PutBatch(ctx, asl.HashSHA256, garbage)
	if err != nil {
		t.Fatal(err)
	}
	sf := surf.New(s, surf.Options{})
	kept, err := sf.Run(ctx, surf.Request{ProgramRef: prog, InputRefs: inputs[:2]})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(ctx, "kept", kept.ResultRef, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		results []*surf.Run
		during  atomic.Int64
		running atomic.Bool
		wg      sync.WaitGroup
	)
	running.Store(true)
	stop := make(chan struct{})
	// Runs start once the collection records what is put and read: what a
	// run stored before that is garbage like any other unpinned artifact.
	started := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-started
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				in := []asl.Reference{inputs[(w*997+i*7)%len(inputs)], inputs[(w*13+i*31+5)%len(inputs)]}
				r, err := sf.Run(ctx, surf.Request{ProgramRef: prog, InputRefs: in})
				if err != nil {
					t.Error(err)
					return
				}
				if running.Load() {
					during.Add(1)
				}
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	rep, err := closure.Collect(ctx, s, closure.GCOptions{Started: func() { close(started) }})
	running.Store(false)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	broken, ok, failed := 0, 0, 0
	for _, r := range results {
		stored := append([]asl.Reference{r.ResultRef, r.TraceRef}, r.OutputRefs...)
		if !r.EdgeRef.IsZero() {
			stored = append(stored, r.EdgeRef)
		}
		for _, ref := range stored {
			if has, err := asl.Has(ctx, s, ref); err != nil || !has {
				broken++
				t.Errorf("run %s: what it stored (%s) is gone: %v", r.ResultRef, ref, err)
			}
		}
		if r.Result.Value.Status != pel.StatusOK {
			failed++
			continue
		}
		ok++
		err := closure.Walk(ctx, s, []asl.Reference{r.ResultRef}, func(n closure.Node) error {
			if !n.Present && n.Ref != pel.SchemeRefDAG1 {
				return fmt.Errorf("%s reaches %s, which is gone", r.ResultRef, n.Ref)
			}
			return nil
		})
		if err != nil {
			broken++
			t.Error(err)
		}
	}
	t.Logf("gc during runs: %d runs returned while gc ran (%d in all: %d OK and whole, %d failed on an input gc had deleted), %d broken; gc deleted %d of %d, kept %d for concurrent use", during.Load(), len(results), ok, failed, broken, rep.Deleted, rep.Stored, rep.KeptConcurrent)
	if during.Load() == 0 {
		t.Log("no run overlapped the collection (timing): the test proved little this time")
	}
}
