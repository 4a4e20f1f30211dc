package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/tree"
	"github.com/amduat/amduat/internal/longtest"
)

var gcServersRun atomic.Int32

// TestGCTwoServers: two `amduat serve` processes on one bucket, each with
// a client putting files and a tree of them, pinning the tree, dropping
// older pins and leaving garbage, while `amduat gc --grace 0s` runs over
// and over on the same bucket (SPECS.md §6.7, "Garbage collection"). A pin
// that finds part of its tree collected fails with ERR_NOT_FOUND and the
// client puts and pins again (counted). At the end every reference of
// every pin a client saw acknowledged is read back through both servers,
// and `amduat verify` passes. The default run has each client do 4 rounds
// (one unpin among them), AMDUAT_LONG=1 40 (internal/longtest); gc runs
// until both clients are done, then once more.
func TestGCTwoServers(t *testing.T) {
	t.Parallel()
	// Every re-put rewrites its object, so that every race of the
	// protocol is exercised (a --grace of 0 needs a touch age of 0).
	touch := "AMDUAT_S3_TOUCH_AGE=0s"
	c, _ := bucketCLI(t, fmt.Sprintf("gcservers/p%d", gcServersRun.Add(1)), touch) // a prefix per run (-count)
	rounds := longtest.Logf(t, "rounds per client", 4, 40)
	const servers = 2
	clients := make([]*httpstore.Client, servers)
	for i := range servers {
		srv := launchServeArgsEnv(t, []string{touch}, c.store, filepath.Join(c.cwd, fmt.Sprintf("serve%d.log", i)))
		cl, err := httpstore.Open(t.Context(), srv.url, httpstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		clients[i] = cl
	}
	type held struct {
		name string
		refs []asl.Reference // the tree first
	}
	var (
		mu      sync.Mutex
		kept    []held
		retried atomic.Int64
		writing atomic.Int32
		wg      sync.WaitGroup
		errs    = make([]error, servers)
	)
	writing.Store(servers)
	for w, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer writing.Add(-1)
			errs[w] = writeAndPin(t.Context(), cl, w, rounds, &retried, func(name string, refs []asl.Reference) {
				mu.Lock()
				kept = append(kept, held{name, refs})
				mu.Unlock()
			}, func(name string) {
				mu.Lock()
				for i, k := range kept {
					if k.name == name {
						kept = append(kept[:i], kept[i+1:]...)
						break
					}
				}
				mu.Unlock()
			})
		}()
	}
	var runs, during, deleted int
	for {
		busy := writing.Load() > 0
		var rep s3store.GCReport
		oneJSON(t, c.must(0, "--json", "gc", "--grace", "0s").stdout, &rep)
		runs++
		if busy {
			during++
		}
		deleted += rep.Deleted
		if !busy {
			break
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	checked, lost := 0, 0
	for _, k := range kept {
		for _, r := range k.refs {
			for i, cl := range clients {
				checked++
				if _, err := asl.Get(t.Context(), cl, r, 1<<20); err != nil {
					lost++
					t.Errorf("pin %s: %s through server %d: %v", k.name, r, i, err)
				}
			}
		}
	}
	c.must(0, "verify")
	t.Logf("two servers, %d rounds each: %d collections (%d while writing), %d artifacts deleted, %d pins put again after a collection; %d reads of acknowledged pinned references, %d lost",
		rounds, runs, during, deleted, retried.Load(), checked, lost)
	if deleted == 0 {
		t.Error("no collection deleted anything: the test did not race")
	}
}

// writeAndPin is one client of TestGCTwoServers: each round puts two
// files of its own and one shared with the other client, a tree of the
// three, and pins the tree (putting and pinning again when the pin finds
// part of it collected: ERR_NOT_FOUND); then it puts an artifact no pin
// reaches, and every third round unpins its oldest pin. pinned and
// unpinned report each acknowledged change.
func writeAndPin(ctx context.Context, cl *httpstore.Client, w, rounds int, retried *atomic.Int64, pinned func(string, []asl.Reference), unpinned func(string)) error {
	var mine []string
	for i := range rounds {
		files := []asl.Artifact{
			{Bytes: fmt.Appendf(nil, "server %d round %d: a", w, i)},
			{Bytes: fmt.Appendf(nil, "server %d round %d: b", w, i)},
			{Bytes: fmt.Appendf(nil, "shared %d", (i+w)%4)},
		}
		name := fmt.Sprintf("s%d/%d", w, i)
		for attempt := 0; ; attempt++ {
			if attempt == 50 {
				return fmt.Errorf("pin %s: still collected after %d attempts", name, attempt)
			}
			var entries []tree.Entry
			var refs []asl.Reference
			for j, f := range files {
				ref, err := asl.PutArtifact(ctx, cl, asl.HashSHA256, f)
				if err != nil {
					return err
				}
				refs = append(refs, ref)
				entries = append(entries, tree.Entry{Name: fmt.Sprintf("f%d", j), Kind: tree.File, Size: uint64(len(f.Bytes)), Ref: ref})
			}
			ta, err := tree.Artifact(entries)
			if err != nil {
				return err
			}
			root, err := asl.PutArtifact(ctx, cl, asl.HashSHA256, ta)
			if err != nil {
				return err
			}
			err = cl.Pin(ctx, name, root, asl.PinOptions{})
			if errors.Is(err, asl.ErrNotFound) {
				retried.Add(1)
				continue
			}
			if err != nil {
				return err
			}
			pinned(name, append([]asl.Reference{root}, refs...))
			mine = append(mine, name)
			break
		}
		if _, err := asl.PutArtifact(ctx, cl, asl.HashSHA256, asl.Artifact{Bytes: fmt.Appendf(nil, "garbage %d %d", w, i)}); err != nil {
			return err
		}
		if i%3 == 2 {
			if _, err := cl.Unpin(ctx, mine[0]); err != nil {
				return err
			}
			unpinned(mine[0])
			mine = mine[1:]
		}
	}
	return nil
}
