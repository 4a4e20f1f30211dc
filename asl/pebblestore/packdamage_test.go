package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// damagedTail builds the reproduction of issue 20: a put of 40 artifacts of
// 1 KiB is acknowledged, the process dies before its index commit reaches
// Pebble's log (a crash clone that keeps only synced bytes: the pack, synced
// before the acknowledgement, is whole), and one byte at pack size − 14,000
// is then damaged (back = 14,000; other values hit other bytes). It returns the damaged file system, the artifacts and
// their references, and which of them the damaged byte lies in.
func damagedTail(t *testing.T, back int64) (*vfs.MemFS, []asl.Artifact, []asl.Reference, int) {
	t.Helper()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	arts := make([]asl.Artifact, 40)
	for i := range arts {
		arts[i] = asl.Untagged(genBytes(2000+uint64(i), 1024, false))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	// Where each record lies, to know which one the damage hits.
	hit := -1
	st, err := fs.Stat("store/packs/000001.pack")
	if err != nil {
		t.Fatal(err)
	}
	at := st.Size() - back
	for i, ref := range refs {
		if _, off, end := packRecordSpan(t, s, ref); off <= at && at < end {
			hit = i
		}
	}
	if hit < 0 {
		t.Fatalf("byte %d of the pack lies in no record", at)
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	b := readFileRange(t, clone, "store/packs/000001.pack", at, at+1)
	patchFile(t, clone, "store/packs/000001.pack", at, []byte{b[0] ^ 0x5a})
	return clone, arts, refs, hit
}

// TestPackDamageBeforeCommit: Open rebuilding the index from a pack tail
// resynchronises past a damaged record as salvage does, indexes every
// record after it, and records the damage: the damaged artifact fails every
// read with ERR_INTEGRITY naming it and the region, verify reports it, and
// a later put of it heals the store (SPECS.md §6.4, "Recovery").
func TestPackDamageBeforeCommit(t *testing.T) {
	// 14,000 hits the reference in a record's head, 13,500 its payload.
	for _, back := range []int64{14000, 13500} {
		t.Run(fmt.Sprint(back), func(t *testing.T) { testPackDamageBeforeCommit(t, back) })
	}
}

func testPackDamageBeforeCommit(t *testing.T, back int64) {
	ctx := context.Background()
	fs, arts, refs, hit := damagedTail(t, back)
	for _, readOnly := range []bool{true, false} {
		s, err := Open("store", &Options{FS: fs, ReadOnly: readOnly})
		if err != nil {
			t.Fatalf("Open (read-only %v): %v", readOnly, err)
		}
		if s.packRecovered != 39 || s.packDamaged != 1 {
			t.Fatalf("Open (read-only %v) indexed %d records and found %d damaged regions, want 39 and 1", readOnly, s.packRecovered, s.packDamaged)
		}
		present := 0
		for i, ref := range refs {
			got, err := asl.Get(ctx, s, ref, 0)
			if i == hit {
				if !errors.Is(err, asl.ErrIntegrity) || errors.Is(err, asl.ErrNotFound) || !strings.Contains(err.Error(), ref.String()) || !strings.Contains(err.Error(), "000001.pack") {
					t.Fatalf("get of the damaged artifact: %v, want ERR_INTEGRITY naming it and its pack", err)
				}
				if _, err := s.Stat(ctx, ref); !errors.Is(err, asl.ErrIntegrity) {
					t.Fatalf("stat of the damaged artifact: %v, want ERR_INTEGRITY", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("artifact %d: %v", i, err)
			}
			if !sameArtifact(got, arts[i]) {
				t.Fatalf("artifact %d differs", i)
			}
			present++
		}
		if present != 39 {
			t.Fatalf("%d present, want 39", present)
		}
		rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Checked != 39 || len(rep.Failures) != 0 || len(rep.Damage) != 1 ||
			!errors.Is(rep.Damage[0], asl.ErrIntegrity) || !strings.Contains(rep.Damage[0].Error(), refs[hit].String()) {
			t.Fatalf("verify: %d checked, failures %v, damage %v; want 39, none, and the damaged artifact named", rep.Checked, rep.Failures, rep.Damage)
		}
		s.Close()
	}
	// The damage was recorded with the rebuilt index: a second open
	// rebuilds nothing and still reports it.
	s, err := Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packRecovered != 0 {
		t.Fatalf("second Open indexed %d records", s.packRecovered)
	}
	if _, err := s.Stat(ctx, refs[hit]); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("stat after a second open: %v, want ERR_INTEGRITY", err)
	}
	// Putting it again heals it: verify is clean.
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts[hit:hit+1]); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, refs[hit]); !sameArtifact(got, arts[hit]) {
		t.Fatal("re-put artifact differs")
	}
	rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
	if err != nil || rep.Checked != 40 || len(rep.Failures) != 0 || len(rep.Damage) != 0 {
		t.Fatalf("verify after the re-put: %+v, %v", rep, err)
	}
}

// TestPackTornTail: a record cut short at the end of a pack, with nothing
// after it (a crash mid-append), is a torn write: not indexed, not reported
// as damage, and the pack is sealed.
func TestPackTornTail(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	arts := make([]asl.Artifact, 10)
	for i := range arts {
		arts[i] = asl.Untagged(genBytes(3000+uint64(i), 1024, false))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	st, err := clone.Stat("store/packs/000001.pack")
	if err != nil {
		t.Fatal(err)
	}
	kept := readFileRange(t, clone, "store/packs/000001.pack", 0, st.Size()-300)
	f, err := clone.Create("store/packs/000001.pack", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(kept); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err = Open("store", &Options{FS: clone})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packRecovered != 9 || s.packDamaged != 0 {
		t.Fatalf("Open indexed %d records, %d damaged regions; want 9 and 0", s.packRecovered, s.packDamaged)
	}
	if _, err := s.Stat(ctx, refs[9]); !errors.Is(err, asl.ErrNotFound) || errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("the torn record's artifact: %v, want not found", err)
	}
	rep, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
	if err != nil || rep.Checked != 9 || len(rep.Failures) != 0 || len(rep.Damage) != 0 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}
