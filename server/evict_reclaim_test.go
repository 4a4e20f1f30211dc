package server

import (
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

// TestEvictReclaimsDisk: an eviction round that deletes most of a store
// also gives their space back (SPECS.md §18.11): the pack bytes and the
// store directory fall by about the evicted bytes.
func TestEvictReclaimsDisk(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := pebblestore.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	var total int64
	for range 48 {
		b := make([]byte, 32<<10)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if _, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged(b)); err != nil {
			t.Fatal(err)
		}
		total += int64(len(b))
	}
	s, err := New(Config{Store: st, Limits: Limits{MaxStoreBytes: uint64(total / 4)}})
	if err != nil {
		t.Fatal(err)
	}
	before := dirSize(t, dir)
	rep, err := s.Evict(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := dirSize(t, dir)
	t.Logf("eviction %+v; directory %d -> %d bytes", rep, before, after)
	if rep.Evicted == 0 || rep.Disk[0]-rep.Disk[1] < rep.Bytes*9/10 {
		t.Fatalf("eviction %+v: want the pack bytes to fall by about the %d evicted bytes", rep, rep.Bytes)
	}
	if before-after < rep.Bytes*9/10 {
		t.Fatalf("directory %d -> %d bytes after evicting %d bytes", before, after, rep.Bytes)
	}
}

// dirSize is the size of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
