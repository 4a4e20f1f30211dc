package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func init() {
	salvageFunc = func(t testing.TB, fs vfs.FS) (*Store, error) {
		rep, err := Salvage(context.Background(), "store", "salvaged", &Options{FS: fs, ChunkSize: flipChunk}, nil)
		if err != nil {
			return nil, err
		}
		for _, l := range rep.Lost {
			if !errors.Is(l.Err, asl.ErrIntegrity) && !errors.Is(l.Err, asl.ErrNotFound) {
				return nil, fmt.Errorf("salvage: %s lost with %w", l.Ref, l.Err)
			}
		}
		return Open("salvaged", &Options{FS: fs})
	}
}

// salvageStore builds a store holding every layout the store reads: packed
// whole and large artifacts (format 3), and, written with PackMin < 0, an
// inline record, a single chunk and chunks staged in Pebble (format 2),
// under both hashes, with index entries; part of it flushed to a table,
// whose blocks are of 1 KiB (Options.tableBlockSize; Pebble's default is
// 4 KiB: a damaged block is searched for a flipped bit on every read).
func salvageStore(t *testing.T, fs vfs.FS) (acked map[asl.Reference]asl.Artifact, packed map[asl.Reference]bool, entries []asl.IndexEntry) {
	t.Helper()
	ctx := context.Background()
	acked, packed = map[asl.Reference]asl.Artifact{}, map[asl.Reference]bool{}
	for round, packMin := range []int64{-1, 0} {
		opts := &Options{FS: fs, ChunkSize: MinChunkSize, PackMin: packMin, tableBlockSize: 1 << 10}
		var (
			s   *Store
			err error
		)
		if round == 0 {
			s, err = Create("store", opts)
		} else {
			s, err = Open("store", opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		arts := []asl.Artifact{
			asl.Untagged([]byte(fmt.Sprintf("tiny %d", round))),
			asl.Tagged(asl.TypeTag(round), genBytes(900+uint64(round), 3000, true)),
			asl.Untagged(genBytes(910+uint64(round), 5*MinChunkSize+3, round == 0)),
		}
		for i, a := range arts {
			id := asl.HashSHA256
			if i == 1 {
				id = asl.HashBLAKE3
			}
			acked[put(t, s, id, a)] = a
		}
		var batch []asl.Artifact
		for i := range 20 {
			batch = append(batch, asl.Untagged(genBytes(920+uint64(round*100+i), 100+i*50, false)))
		}
		en := asl.IndexEntry{Space: "test.space", Key: []byte{byte(round)}, Value: []byte("v")}
		refs, err := s.PutIndexed(ctx, asl.HashSHA256, batch, []asl.IndexEntry{en})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, en)
		for i, ref := range refs {
			acked[ref] = batch[i]
		}
		if round == 0 {
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		for ref := range acked {
			packed[ref] = indexOf(t, s, ref).packed()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return acked, packed, entries
}

// TestSalvage: a store whose metadata (MANIFEST, OPTIONS, log, a table) or a
// pack is damaged is copied, every artifact that can be read and verified,
// into a new store; what cannot be read is named.
func TestSalvage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := vfs.NewMem()
	acked, packed, entries := salvageStore(t, base)
	files := memFiles{}
	snapshotFS(t, base, "store", files)
	byKind := map[string][]string{}
	for p := range files {
		byKind[flipKind(p)] = append(byKind[flipKind(p)], p)
	}
	for k := range byKind {
		slices.Sort(byKind[k])
	}
	for _, c := range []struct {
		name string
		kind string
		// damage returns the offset and XOR of the byte to damage in the
		// first file of the kind, or -1 to remove the file.
		off       func(size int) int
		allBack   bool // every artifact comes back
		wantLost  bool // some artifact is named lost
		wantDmg   bool // damage is reported
		entriesOK bool // index entries come back
	}{
		{"intact", "", nil, true, false, false, true},
		{"MANIFEST removed", "manifest", func(int) int { return -1 }, false, false, true, false},
		{"MANIFEST first record", "manifest", func(int) int { return 10 }, false, false, true, false},
		{"OPTIONS garbled", "options", func(int) int { return 40 }, true, false, false, true},
		{"table middle", "sstable", func(n int) int { return n / 2 }, false, false, true, false},
		{"pack middle", "pack", func(n int) int { return n / 2 }, false, true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			if c.kind == "" {
				fs = restoreFS(t, files, "", 0, 0)
			} else {
				path := byKind[c.kind][len(byKind[c.kind])-1]
				off := c.off(len(files[path]))
				if off < 0 {
					fs = restoreFS(t, files, "", 0, 0)
					if err := fs.Remove(path); err != nil {
						t.Fatal(err)
					}
				} else {
					fs = restoreFS(t, files, path, int64(off), 0x5a)
				}
			}
			rep, err := Salvage(ctx, "store", "new", &Options{FS: fs}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ns, err := Open("new", &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Close()
			back := 0
			for ref, a := range acked {
				got, err := asl.Get(ctx, ns, ref, 0)
				switch {
				case err == nil && !sameArtifact(got, a):
					t.Fatalf("%s: salvaged bytes differ", ref)
				case err == nil:
					back++
				case !errors.Is(err, asl.ErrNotFound):
					t.Fatalf("%s: %v", ref, err)
				}
			}
			if rep.Artifacts != int64(back) {
				t.Errorf("report says %d artifacts copied, the new store holds %d", rep.Artifacts, back)
			}
			if c.allBack && back != len(acked) {
				t.Errorf("%d of %d artifacts back", back, len(acked))
			}
			if c.wantLost != (len(rep.Lost) > 0) || c.wantDmg != (len(rep.Damage) > 0) {
				t.Errorf("lost %v, damage %v", rep.Lost, rep.Damage)
			}
			for _, d := range rep.Damage {
				t.Logf("damage: %v", d)
			}
			for _, l := range rep.Lost {
				if _, ok := acked[l.Ref]; !ok {
					t.Errorf("lost %s, which was never stored", l.Ref)
				}
				t.Logf("lost: %s: %v", l.Ref, l.Err)
			}
			// What is neither back nor named is lost without a name: a
			// pack record whose bytes are damaged, and an artifact of the
			// version 2 layout (kept in Pebble's files) when those files
			// do not read, which the report then says.
			named := map[asl.Reference]bool{}
			for _, l := range rep.Lost {
				named[l.Ref] = true
			}
			for ref := range acked {
				if _, err := ns.Stat(ctx, ref); err != nil && !named[ref] && c.kind != "pack" && (packed[ref] || len(rep.Damage) == 0) {
					t.Errorf("%s (packed %v) neither salvaged nor named lost", ref, packed[ref])
				}
			}
			got := 0
			for _, en := range entries {
				v, ok, err := ns.LookupIndex(ctx, en.Space, en.Key)
				if err != nil {
					t.Fatal(err)
				}
				if ok && bytes.Equal(v, en.Value) {
					got++
				}
			}
			if c.entriesOK && got != len(entries) {
				t.Errorf("%d of %d index entries back", got, len(entries))
			}
			if ns.DefaultHash() != asl.HashSHA256 {
				t.Errorf("new store's default hash %v", ns.DefaultHash())
			}
		})
	}
}
