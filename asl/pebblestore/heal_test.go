package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// healStore creates a store on fs holding arts (the last one deleted) and
// closes it.
func healStore(t *testing.T, fs vfs.FS) ([]asl.Artifact, []asl.Reference) {
	t.Helper()
	ctx := context.Background()
	s, err := Create("store", &Options{FS: fs, DefaultHash: asl.HashSHA256})
	if err != nil {
		t.Fatal(err)
	}
	arts := make([]asl.Artifact, 30)
	for i := range arts {
		arts[i] = asl.Tagged(asl.TypeTag(i), genBytes(4000+uint64(i), 100+i*97, i%2 == 0))
	}
	arts = append(arts, asl.Untagged(genBytes(4100, 5*DefaultChunkSize+3, true))) // large
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts[:30])
	if err != nil {
		t.Fatal(err)
	}
	refs = append(refs, put(t, s, asl.HashSHA256, arts[30]))
	if _, err := s.Delete(ctx, refs[29:30]); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin(ctx, "keep", refs[0], asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return arts, refs
}

// TestHealIndex: when Pebble's files are damaged or gone, a writable Open
// moves them aside, rebuilds the index from the packs, reports it, and
// serves every artifact; a deleted artifact stays deleted when its
// tombstone still reads (SPECS.md §6.4, "Rebuilding the index").
func TestHealIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		damage     func(t *testing.T, fs vfs.FS)
		keepsTombs bool
	}{
		{"MANIFEST garbage", func(t *testing.T, fs vfs.FS) {
			for _, n := range listNames(t, fs, "store") {
				if strings.HasPrefix(n, "MANIFEST-") {
					overwrite(t, fs, "store/"+n, []byte(strings.Repeat("garbage ", 64)))
				}
			}
		}, false},
		{"OPTIONS garbage", func(t *testing.T, fs vfs.FS) {
			for _, n := range listNames(t, fs, "store") {
				if strings.HasPrefix(n, "OPTIONS-") {
					overwrite(t, fs, "store/"+n, []byte("[Version]\n  garbage\n"))
				}
			}
		}, true},
		{"Pebble's files gone", func(t *testing.T, fs vfs.FS) {
			for _, n := range listNames(t, fs, "store") {
				if pebbleFile(n) {
					if err := fs.Remove("store/" + n); err != nil {
						t.Fatal(err)
					}
				}
			}
		}, false},
		{"config record's table gone", func(t *testing.T, fs vfs.FS) {
			for _, n := range listNames(t, fs, "store") {
				if strings.HasSuffix(n, ".sst") {
					if err := fs.Remove("store/" + n); err != nil {
						t.Fatal(err)
					}
				}
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			arts, refs := healStore(t, fs)
			tc.damage(t, fs)
			var reported []RebuildReport
			s, err := Open("store", &Options{FS: fs, OnRebuild: func(r RebuildReport) { reported = append(reported, r) }})
			if err != nil {
				t.Fatalf("Open of the damaged store: %v", err)
			}
			defer s.Close()
			rep, ok := s.Rebuilt()
			if !ok || len(reported) != 1 || rep.Artifacts < 30 || !errors.Is(rep.Cause, asl.ErrIntegrity) {
				t.Fatalf("Rebuilt = %+v, %v; reported %d", rep, ok, len(reported))
			}
			t.Log(rep)
			for i, ref := range refs[:29] {
				if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
					t.Fatalf("artifact %d differs", i)
				}
			}
			if got := get(t, s, refs[30]); !sameArtifact(got, arts[30]) {
				t.Fatal("large artifact differs")
			}
			// Tombstones and pins survive every kind of damage: the
			// metadata journal beside the packs is replayed into the fresh
			// index (and what the damaged files still give is read too).
			_, err = s.Stat(ctx, refs[29])
			if !errors.Is(err, asl.ErrNotFound) {
				t.Fatalf("deleted artifact after the rebuild: %v", err)
			}
			if pins, err := s.Pins(ctx); err != nil || len(pins) != 1 || pins[0].Ref != refs[0] {
				t.Fatalf("after the rebuild: pins %v (%v); want the pin", pins, err)
			}
			if tc.keepsTombs && rep.Tombstones != 1 {
				t.Fatalf("after the rebuild: %d tombstones read from the damaged files, want 1", rep.Tombstones)
			}
			vr, err := aslutil.Verify(ctx, s, aslutil.VerifyOptions{}, nil)
			if err != nil || len(vr.Failures) != 0 || len(vr.Damage) != 0 {
				t.Fatalf("verify after the rebuild: %+v, %v", vr, err)
			}
			if s.DefaultHash() != asl.HashSHA256 {
				t.Fatalf("default hash %v", s.DefaultHash())
			}
			// A second open finds a healthy index.
			s.Close()
			s2, err := Open("store", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if _, ok := s2.Rebuilt(); ok || s2.packRecovered != 0 {
				t.Fatalf("second open rebuilt again (%d records)", s2.packRecovered)
			}
		})
	}
}

func listNames(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func overwrite(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildTime measures (asserting nothing about speed) how long a
// writable Open takes to rebuild the index of AMDUAT_REBUILD_N artifacts of
// 1 KiB from the packs after Pebble's files are gone, on disk; it runs only
// when AMDUAT_REBUILD_N is set (SPECS.md §6.4 quotes its figure).
func TestRebuildTime(t *testing.T) {
	// Not parallel: it measures wall time.
	n, _ := strconv.Atoi(os.Getenv("AMDUAT_REBUILD_N"))
	if n <= 0 {
		t.Skip("set AMDUAT_REBUILD_N to measure a rebuild")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for done := 0; done < n; {
		k := min(1000, n-done)
		arts := make([]asl.Artifact, k)
		for i := range arts {
			b := genBytes(uint64(done+i), 1024, false)
			binary.BigEndian.PutUint64(b, uint64(done+i)) // genBytes seeds are 16-bit
			arts[i] = asl.Untagged(b)
		}
		if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
			t.Fatal(err)
		}
		done += k
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if pebbleFile(e.Name()) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	start := time.Now()
	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	rep, _ := s.Rebuilt()
	s.Close()
	if rep.Artifacts != n {
		t.Fatalf("rebuilt %d of %d", rep.Artifacts, n)
	}
	t.Logf("rebuilt the index of %d artifacts of 1 KiB in %v: %v per million", n, d.Round(time.Millisecond), (d * time.Duration(1_000_000) / time.Duration(n)).Round(time.Second))
}
