package pebblestore

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/amduat/amduat/asl"
)

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
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

// TestReclaim: after Delete of most of a store's artifacts (as eviction
// deletes), Reclaim rewrites the pack they lay in and the store's
// directory shrinks by about their bytes; what is left reads back, what
// was deleted stays deleted, also after a reopen.
func TestReclaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n, keep, size = 64, 8, 32 << 10
	var refs []asl.Reference
	for i := range n {
		refs = append(refs, put(t, s, asl.HashSHA256, asl.Untagged(genBytes(uint64(i), size, false))))
	}
	del, err := s.Delete(ctx, refs[keep:])
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range del {
		if !ok {
			t.Fatalf("Delete did not delete %s", refs[keep+i])
		}
	}
	before := dirBytes(t, dir)
	rep, err := s.Reclaim(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	after := dirBytes(t, dir)
	t.Logf("reclaim: %+v; directory %d -> %d bytes", rep, before, after)
	if rep.PacksCompacted == 0 || rep.Rewritten != keep || rep.PackBytes[1] >= rep.PackBytes[0]-(n-keep)*size*9/10 {
		t.Fatalf("Reclaim = %+v; want the pack rewritten with its %d live artifacts and %d bytes given back", rep, keep, (n-keep)*size)
	}
	if before-after < (n-keep)*size*9/10 {
		t.Fatalf("directory %d -> %d bytes: less than the %d bytes deleted given back", before, after, (n-keep)*size)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, ref := range refs {
		_, err := s.Stat(ctx, ref)
		if i < keep && err != nil {
			t.Errorf("kept artifact %d: %v", i, err)
		}
		if i >= keep && !errors.Is(err, asl.ErrNotFound) {
			t.Errorf("deleted artifact %d: Stat = %v, want ErrNotFound", i, err)
		}
	}
	for _, ref := range refs[:keep] {
		get(t, s, ref)
	}
	if _, err := s.Reclaim(ctx, -1); err == nil {
		t.Error("Reclaim with a negative fraction accepted")
	}
}
