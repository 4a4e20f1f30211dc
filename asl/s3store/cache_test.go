package s3store_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

func dirBytes(t *testing.T, dir string) (n int64, files int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
		files++
	}
	return n, files
}

// TestCache: the local cache (SPECS.md §6.7, "Local cache") serves
// verified copies, even with the bucket down; a cache file altered on disk
// is never served (the bucket is read and the file replaced); the cache
// stays within its size, least recently used out first; concurrent gets of
// one artifact leave one file. Its large artifact has two parts of 1 MiB
// (set after Create, which refuses parts below S3's 5 MiB) and the cache
// 7 MiB: the same cases with a quarter of the bytes (issue 25).
func TestCache(t *testing.T) {
	// Not parallel: it stops the package's MinIO (stoppableServer).
	m := stoppableServer(t)
	o := options(m)
	dir := t.TempDir()
	o.CacheDir, o.CacheSize = dir, 7<<20 // the large artifact is within a quarter
	o.MaxRetries = 1
	o.ReachWait = -1 // fail while MinIO is down, not wait for it (TestReachWait does)
	st := create(t, m, "cache", o)
	s3store.SetPartSize(st, partSize)
	ctx := t.Context()
	small := asl.Tagged(5, gen(20, 1000))
	mid := asl.Untagged(gen(21, 300<<10)) // streamed (above 256 KiB)
	large := asl.Untagged(gen(22, partSize+(512<<10)))
	var refs []asl.Reference
	for _, a := range []asl.Artifact{small, mid, large} {
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
		for range 2 { // a miss that fills, then a hit
			got, err := asl.Get(ctx, st, ref, 0)
			if err != nil || !bytes.Equal(got.Bytes, a.Bytes) || got.Header() != a.Header() {
				t.Fatalf("Get(%s) = %v", ref, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, ref.String())); err != nil {
			t.Fatalf("no cache file for %s: %v", ref, err)
		}
	}
	// Served from the cache with MinIO down.
	m.Stop()
	for i, a := range []asl.Artifact{small, mid, large} {
		if got, err := asl.Get(ctx, st, refs[i], 0); err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
			t.Fatalf("Get(%s) with MinIO down = %v", refs[i], err)
		}
	}
	// A cache file altered on disk is not served: with MinIO down the get
	// fails (an I/O error), never with the altered bytes.
	path := filepath.Join(dir, refs[1].String())
	b, _ := os.ReadFile(path)
	b[len(b)-1] ^= 1
	os.WriteFile(path, b, 0o644)
	if got, err := asl.Get(ctx, st, refs[1], 0); err == nil || asl.IsContentError(err) {
		t.Fatalf("Get of an altered cache file with MinIO down = %d bytes, %v; want an I/O error", len(got.Bytes), err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the altered cache file is still there: %v", err)
	}
	m.Restart()
	os.WriteFile(path, b, 0o644) // altered again, behind the cache's back
	if got, err := asl.Get(ctx, st, refs[1], 0); err != nil || !bytes.Equal(got.Bytes, mid.Bytes) {
		t.Fatalf("Get after the cache file was altered = %v", err)
	}
	// Bounded: more artifacts than fit.
	var wg sync.WaitGroup
	for i := range 24 {
		a := asl.Untagged(gen(uint64(30+i), 300<<10))
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := asl.Get(ctx, st, ref, 0); err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
					t.Errorf("Get(%s) = %v", ref, err)
				}
			}()
		}
		wg.Wait()
	}
	n, files := dirBytes(t, dir)
	if n > o.CacheSize || files < 10 {
		t.Fatalf("cache holds %d bytes in %d files, bound %d", n, files, o.CacheSize)
	}
	// A second store on the same directory (a restarted server) starts
	// from what is there, within the bound.
	st.Close()
	o.CacheSize = 2 << 20
	st2, err := s3store.Open(ctx, st.Bucket(), st.Prefix(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if n, _ := dirBytes(t, dir); n > o.CacheSize {
		t.Fatalf("reopened with a smaller bound: %d bytes", n)
	}
}
