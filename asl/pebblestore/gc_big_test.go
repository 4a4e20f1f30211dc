package pebblestore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
)

// TestGcBig measures (does not assert) a collection over a store of
// AMDUAT_GC_BIG artifacts (e.g. 1000000) on disk: 100-byte leaves, one in
// ten reachable through pinned list artifacts (one per 100 leaves kept).
func TestGcBig(t *testing.T) {
	// Not parallel: it measures wall time.
	n, _ := strconv.Atoi(os.Getenv("AMDUAT_GC_BIG"))
	if n == 0 {
		t.Skip("set AMDUAT_GC_BIG=N to measure gc over N artifacts")
	}
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	start := time.Now()
	const batch = 10000
	lists := 0
	for done := 0; done < n; done += batch {
		arts := make([]asl.Artifact, 0, batch)
		for i := done; i < done+batch && i < n; i++ {
			b := make([]byte, 100)
			copy(b, fmt.Sprintf("leaf %d", i))
			arts = append(arts, asl.Untagged(b))
		}
		refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k+100 <= len(refs); k += 1000 {
			l := put(t, s, asl.HashSHA256, listArt(refs[k:k+100]...))
			if err := s.Pin(ctx, fmt.Sprintf("list/%07d", lists), l, asl.PinOptions{}); err != nil {
				t.Fatal(err)
			}
			lists++
		}
	}
	fill := time.Since(start)
	before, _ := s.packBytes()
	opts := gcOpts(s)
	opts.DryRun = true
	t0 := time.Now()
	dry, err := s.GC(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	dryT := time.Since(t0)
	opts.DryRun = false
	t0 = time.Now()
	rep, err := s.GC(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	gcT := time.Since(t0)
	after, _ := s.packBytes()
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("store of %d artifacts (+%d pinned lists) filled in %s; gc --dry-run %s (would delete %d); gc %s: deleted %d (%d bytes), reached %d, %d packs compacted, %d rewritten, packs %d -> %d bytes; load %s",
		n, lists, fill.Round(time.Millisecond), dryT.Round(time.Millisecond), dry.Deleted, gcT.Round(time.Millisecond),
		rep.Deleted, rep.DeletedBytes, rep.Reached, rep.PacksCompacted, rep.Rewritten, before, after, load)
}

// TestRePutCost measures (does not assert) what the repair check adds to a
// re-put: AMDUAT_REPUT=N artifacts of 1 KiB put, put again (each found
// stored and its copy read and verified), and read back whole for
// comparison.
func TestRePutCost(t *testing.T) {
	// Not parallel: it measures wall time.
	n, _ := strconv.Atoi(os.Getenv("AMDUAT_REPUT"))
	if n == 0 {
		t.Skip("set AMDUAT_REPUT=N to measure")
	}
	ctx := context.Background()
	s, err := Create(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	arts := make([]asl.Artifact, n)
	for i := range arts {
		b := make([]byte, 1024)
		copy(b, fmt.Sprintf("artifact %d", i))
		arts[i] = asl.Untagged(b)
	}
	t0 := time.Now()
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Since(t0)
	t0 = time.Now()
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	again := time.Since(t0)
	t0 = time.Now()
	for _, r := range refs {
		if _, err := asl.Get(ctx, s, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	read := time.Since(t0)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("%d x 1 KiB: put %s, re-put (with the repair check) %s, verified reads of all %s; load %s", n, first, again, read, load)
}
