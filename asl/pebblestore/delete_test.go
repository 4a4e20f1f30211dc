package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
)

func TestPinAddLsRm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	a := put(t, s, asl.HashSHA256, asl.Untagged([]byte("a")))
	b := put(t, s, asl.HashSHA256, asl.Untagged([]byte("b")))
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("missing")))
	cases := []struct {
		name string
		pin  string
		ref  asl.Reference
		want error
	}{
		{"first", "release/1", a, nil},
		{"second", "keep", b, nil},
		{"re-point without force", "keep", a, asl.ErrPinExists},
		{"same reference again", "keep", b, nil},
		{"re-point with force", "keep!", a, nil},
		{"missing artifact", "x", missing, asl.ErrNotFound},
		{"empty name", "", a, nil},
		{"not UTF-8", "\xff", a, nil},
		{"control character", "a\nb", a, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name, force := strings.CutSuffix(tc.pin, "!")
			err := s.Pin(ctx, name, tc.ref, asl.PinOptions{Force: force})
			switch {
			case tc.pin == "" || tc.pin == "a\nb" || tc.pin == "\xff":
				if err == nil {
					t.Fatal("bad name accepted")
				}
			case tc.want != nil:
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
	pins, err := s.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Pin{{Name: "keep", Ref: a}, {Name: "release/1", Ref: a}}
	if len(pins) != len(want) || pins[0] != want[0] || pins[1] != want[1] {
		t.Fatalf("pins %v, want %v", pins, want)
	}
	for _, tc := range []struct {
		name string
		was  bool
	}{{"keep", true}, {"keep", false}, {"nothing", false}} {
		was, err := s.Unpin(ctx, tc.name)
		if err != nil || was != tc.was {
			t.Fatalf("unpin %s: %v %v, want %v", tc.name, was, err, tc.was)
		}
	}
	if pins, _ := s.Pins(ctx); len(pins) != 1 || pins[0].Name != "release/1" {
		t.Fatalf("after unpin: %v", pins)
	}
}

// TestRmStaysDeleted deletes artifacts of every layout and checks that no
// reopen, full rescan of the packs or read-only open brings them back, and
// that a later put of the same bytes stores them again (and survives a
// rescan).
func TestRmStaysDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name string
		opts Options
		art  asl.Artifact
	}{
		{"small packed", Options{}, asl.Untagged([]byte("hello"))},
		{"small tagged packed", Options{}, asl.Tagged(0x101, genBytes(1, 3000, true))},
		{"large packed", Options{ChunkSize: MinChunkSize}, asl.Untagged(genBytes(2, 3*MinChunkSize+5, false))},
		{"inline (version 2 layout)", Options{PackMin: -1}, asl.Untagged([]byte("inline"))},
		{"chunked (version 2 layout)", Options{PackMin: -1, ChunkSize: MinChunkSize, IngestMin: -1}, asl.Untagged(genBytes(3, 2*MinChunkSize+1, false))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			o := tc.opts
			o.FS = fs
			s, err := Create("store", &o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			keep := put(t, s, asl.HashSHA256, asl.Untagged([]byte("keep me")))
			ref := put(t, s, asl.HashSHA256, tc.art)
			gone := func(when string) {
				t.Helper()
				if _, err := s.Stat(ctx, ref); !errors.Is(err, asl.ErrNotFound) {
					t.Fatalf("%s: stat of the deleted artifact: %v", when, err)
				}
				if got := get(t, s, keep); string(got.Bytes) != "keep me" {
					t.Fatalf("%s: other artifact lost", when)
				}
				n := 0
				if err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { n++; return nil }); err != nil || n != 1 {
					t.Fatalf("%s: enumerate %d, %v", when, n, err)
				}
			}
			del, err := s.Delete(ctx, []asl.Reference{ref, ref})
			if err != nil || !del[0] || del[1] {
				t.Fatalf("delete: %v %v", del, err)
			}
			if del, err := s.Delete(ctx, []asl.Reference{ref}); err != nil || del[0] {
				t.Fatalf("second delete: %v %v", del, err)
			}
			gone("after delete")
			reopen := func(ro bool) {
				t.Helper()
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				o.ReadOnly = ro
				if s, err = Open("store", &o); err != nil {
					t.Fatal(err)
				}
			}
			reopen(false)
			gone("after reopen")
			// Every pack record is scanned again, as after a damaged
			// MANIFEST (the watermarks no longer protect the copy).
			if _, err := s.recoverPacks(true); err != nil {
				t.Fatal(err)
			}
			gone("after a full rescan")
			reopen(true)
			gone("read-only open")
			reopen(false)
			// A new put stores it again; the new copy is not tombstoned.
			put(t, s, asl.HashSHA256, tc.art)
			if got := get(t, s, ref); !sameArtifact(got, tc.art) {
				t.Fatal("re-put artifact differs")
			}
			settleIndex(t, s)
			if err := s.db.Delete(appendIndexKey(nil, ref), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.recoverPacks(true); err != nil {
				t.Fatal(err)
			}
			if tc.opts.PackMin >= 0 {
				if got := get(t, s, ref); !sameArtifact(got, tc.art) {
					t.Fatal("re-put copy not recovered by a rescan")
				}
				if _, err := s.Delete(ctx, []asl.Reference{ref}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.recoverPacks(true); err != nil {
					t.Fatal(err)
				}
				gone("second delete, full rescan")
			}
		})
	}
}

// TestRepairByRePut damages a stored copy (its pack bytes, or its index
// record), puts the same bytes again and reads them back, also after a
// reopen.
func TestRepairByRePut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name   string
		art    asl.Artifact
		damage string // "pack" or "index"
		via    string // "put" (Put), "repair" (Repair)
	}{
		{"small, pack byte, put", asl.Untagged([]byte("hello, repair")), "pack", "put"},
		{"small tagged, pack byte, put", asl.Tagged(7, genBytes(4, 5000, true)), "pack", "put"},
		{"small, index record, put", asl.Untagged([]byte("index gone bad")), "index", "put"},
		{"large, pack byte, put", asl.Untagged(genBytes(7, 3*MinChunkSize+9, false)), "pack", "put"},
		{"large, index record, put", asl.Tagged(3, genBytes(8, 2*MinChunkSize+9, true)), "index", "put"},
		{"small, pack byte, repair", asl.Untagged([]byte("hello, repair 2")), "pack", "repair"},
		{"small, pack byte, batch", asl.Untagged([]byte("hello, batch")), "pack", "batch"},
		{"large, index record, batch", asl.Untagged(genBytes(9, 2*MinChunkSize+9, false)), "index", "batch"},
		{"large, pack byte, repair", asl.Untagged(genBytes(5, 3*MinChunkSize+9, false)), "pack", "repair"},
		{"large, index record, repair", asl.Untagged(genBytes(6, 2*MinChunkSize+9, false)), "index", "repair"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			o := Options{FS: fs, ChunkSize: MinChunkSize}
			s, err := Create("store", &o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			ref := put(t, s, asl.HashSHA256, tc.art)
			rec := indexOf(t, s, ref)
			switch tc.damage {
			case "pack":
				path := packPath(s, rec.Pack)
				off := int64(rec.Offset) + 20
				orig := readFileRange(t, fs, path, off, off+1)
				patchFile(t, fs, path, off, []byte{orig[0] ^ 0x40})
			case "index":
				rawSet(t, s, appendIndexKey(nil, ref), []byte{0xa1, 0x01})
			}
			if _, err := asl.Get(ctx, s, ref, 0); !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("damaged read: %v", err)
			}
			switch tc.via {
			case "put":
				put(t, s, asl.HashSHA256, tc.art)
			case "batch":
				other := asl.Untagged([]byte("another one"))
				if _, err := s.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{other, tc.art, tc.art}); err != nil {
					t.Fatal(err)
				}
			case "repair":
				res, err := s.Repair(ctx, asl.HashSHA256, []asl.Artifact{tc.art})
				if err != nil || res[0].State != "repaired" || res[0].Damage == "" {
					t.Fatalf("repair: %+v %v", res, err)
				}
				if res, err := s.Repair(ctx, asl.HashSHA256, []asl.Artifact{tc.art}); err != nil || res[0].State != "ok" {
					t.Fatalf("second repair: %+v %v", res, err)
				}
			}
			if got := get(t, s, ref); !sameArtifact(got, tc.art) {
				t.Fatal("repaired artifact differs")
			}
			if nrec := indexOf(t, s, ref); nrec.Pack == rec.Pack && nrec.Offset == rec.Offset {
				t.Fatal("index record still names the damaged copy")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = Open("store", &o); err != nil {
				t.Fatal(err)
			}
			if got := get(t, s, ref); !bytes.Equal(got.Bytes, tc.art.Bytes) {
				t.Fatal("repair lost at reopen")
			}
		})
	}
}

// TestRePutOfIntactArtifactWritesNothing: the repair check of a re-put
// reads the stored copy and writes nothing when it verifies.
func TestRePutOfIntactArtifactWritesNothing(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, nil)
	a := asl.Untagged([]byte("intact"))
	ref := put(t, s, asl.HashSHA256, a)
	before := indexOf(t, s, ref)
	c := s.commits.Load()
	put(t, s, asl.HashSHA256, a)
	if after := indexOf(t, s, ref); after != before || s.commits.Load() != c {
		t.Fatalf("re-put rewrote: %+v -> %+v, commits %d -> %d", before, after, c, s.commits.Load())
	}
}
