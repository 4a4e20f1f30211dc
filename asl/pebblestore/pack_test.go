package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func packPath(s *Store, id uint64) string {
	return s.fs.PathJoin(s.dir, packDir, packName(id))
}

// packDirBytes sums the sizes of the pack files.
func packDirBytes(t *testing.T, s *Store) int64 {
	t.Helper()
	names, err := s.fs.List(s.fs.PathJoin(s.dir, packDir))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, name := range names {
		st, err := s.fs.Stat(s.fs.PathJoin(s.dir, packDir, name))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// packRecordSpan is the byte range of ref's pack record (head and chunk
// value) in its pack file.
func packRecordSpan(t *testing.T, s *Store, ref asl.Reference) (rec indexRecord, off, end int64) {
	t.Helper()
	rec = indexOf(t, s, ref)
	if !rec.packed() {
		t.Fatalf("%s is not packed: %+v", ref, rec)
	}
	v, err := s.packs.read(rec.Pack, rec.Offset, rec.Stored)
	if err != nil {
		t.Fatal(err)
	}
	head := appendPackHead(nil, ref, rec.header(), int(rec.Stored))
	return rec, int64(rec.Offset) - int64(len(head)), int64(rec.Offset) + int64(len(v))
}

func patchFile(t *testing.T, fs vfs.FS, path string, off int64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readFileRange(t *testing.T, fs vfs.FS, path string, off, end int64) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, end-off)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// packCases are the artifacts of one packed batch: empty, tiny, raw,
// compressible (zstd), above InlineMax, tagged, and one larger than a
// chunk, which is written as parts and a large record.
func packCases() []asl.Artifact {
	return []asl.Artifact{
		asl.Untagged(nil),
		asl.Untagged([]byte("hello")),
		asl.Untagged(genBytes(300, 1024, false)),
		asl.Tagged(0x101, genBytes(301, 12<<10, true)),
		asl.Untagged(genBytes(302, 40<<10, false)),
		asl.Tagged(0, genBytes(303, 64<<10, true)),
		asl.Untagged(genBytes(304, 3*(64<<10)+5, true)),
	}
}

func TestPackRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	s := newMemStore(t, &Options{FS: fs, ChunkSize: 64 << 10, PackMin: 1})
	arts := packCases()
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		for i, ref := range refs {
			rec := indexOf(t, s, ref)
			if single := len(arts[i].Bytes) <= 64<<10; !rec.packed() || single != rec.packedSingle() {
				t.Fatalf("artifact %d (%d bytes): record %+v", i, len(arts[i].Bytes), rec)
			}
			if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
				t.Fatalf("artifact %d differs", i)
			}
			info, err := s.Stat(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if info.StoredSize != int64(rec.Stored) || info.Header != arts[i].Header() {
				t.Fatalf("artifact %d: Stat %+v, record %+v", i, info, rec)
			}
		}
		if rec := indexOf(t, s, refs[3]); rec.Compression != compZstd || rec.Stored >= 12<<10 {
			t.Fatalf("compressible artifact stored as %+v", rec)
		}
		checkNoOrphans(t, s)
	}
	check(s)
	size := packDirBytes(t, s)
	s.Close()
	s, err = Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
	// The pack is whole, so appends after Open continue it.
	more, err := s.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged(genBytes(305, 100<<10, false))})
	if err != nil {
		t.Fatal(err)
	}
	head := appendPackHead(nil, more[0], asl.Header{Size: 100 << 10}, 100<<10)
	if rec := indexOf(t, s, more[0]); rec.Pack != 1 || rec.Offset != uint64(size)+uint64(len(head)) {
		t.Fatalf("first put after Open: %+v, want pack 1 at offset %d", rec, uint64(size)+uint64(len(head)))
	}
}

// TestPackMin: by default every put is packed, a single small Put and the
// parts of a large one too (SPECS.md §6.4): no acknowledged artifact rests
// on Pebble's log alone. A positive PackMin keeps the payloads of smaller
// puts in Pebble (one fsync), and a negative one packs nothing.
func TestPackMin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	small := []asl.Artifact{asl.Untagged(genBytes(310, 30<<10, false)), asl.Untagged(genBytes(311, 30<<10, false))}
	tiny := asl.Untagged([]byte("one small put"))
	one := asl.Untagged(genBytes(312, 60<<10, false))
	big := asl.Untagged(genBytes(315, 600<<10, false))
	for _, c := range []struct {
		packMin int64
		packed  func(a asl.Artifact, batch int) bool
	}{
		{0, func(asl.Artifact, int) bool { return true }},
		{64 << 10, func(a asl.Artifact, batch int) bool { return batch >= 64<<10 || len(a.Bytes) > 256<<10 }},
		{-1, func(asl.Artifact, int) bool { return false }},
	} {
		s := newMemStore(t, &Options{PackMin: c.packMin})
		refs, err := s.PutBatch(ctx, asl.HashSHA256, small)
		if err != nil {
			t.Fatal(err)
		}
		for i, ref := range refs {
			if indexOf(t, s, ref).packed() != c.packed(small[i], 60<<10) {
				t.Fatalf("PackMin %d: batch artifact %d: record %+v", c.packMin, i, indexOf(t, s, ref))
			}
		}
		for _, a := range []asl.Artifact{tiny, one, big} {
			ref := put(t, s, asl.HashSHA256, a)
			if got := get(t, s, ref); !sameArtifact(got, a) {
				t.Fatal("artifact differs")
			}
			if indexOf(t, s, ref).packed() != c.packed(a, len(a.Bytes)) {
				t.Fatalf("PackMin %d: put of %d bytes: record %+v", c.packMin, len(a.Bytes), indexOf(t, s, ref))
			}
		}
	}
}

// TestPackRePutWritesNothing: putting a stored batch again appends nothing
// to the packs and commits nothing.
func TestPackRePutWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, &Options{PackMin: 1})
	var arts []asl.Artifact
	for i := range 100 {
		arts = append(arts, asl.Untagged(genBytes(320+uint64(i), 1024, false)))
	}
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	settleIndex(t, s)
	size, commits := packDirBytes(t, s), s.commits.Load()
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	if got := packDirBytes(t, s); got != size {
		t.Fatalf("re-put grew the packs from %d to %d bytes", size, got)
	}
	if n := s.commits.Load() - commits; n != 0 {
		t.Fatalf("re-put made %d commits", n)
	}
}

// TestPackCorruptionEveryBit flips every bit of the pack records (head and
// chunk value) of small artifacts (raw and zstd): every read fails with
// ErrIntegrity or returns the original bytes, never other bytes. A truncated
// or missing pack is damage too.
func TestPackCorruptionEveryBit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	s := newMemStore(t, &Options{FS: fs, PackMin: 1, MinCompressSize: 512})
	arts := []asl.Artifact{asl.Untagged(genBytes(330, 300, false)), asl.Tagged(7, genBytes(331, 1500, true))}
	refs, err := s.PutBatch(ctx, asl.HashBLAKE3, arts)
	if err != nil {
		t.Fatal(err)
	}
	for i, ref := range refs {
		rec, off, end := packRecordSpan(t, s, ref)
		path := packPath(s, rec.Pack)
		orig := readFileRange(t, fs, path, off, end)
		for j := range orig {
			for bit := range 8 {
				patchFile(t, fs, path, off+int64(j), []byte{orig[j] ^ 1<<bit})
				got, err := asl.Get(ctx, s, ref, 0)
				if err == nil {
					if !sameArtifact(got, arts[i]) {
						t.Fatalf("artifact %d byte %d bit %d: wrong bytes returned", i, j, bit)
					}
					continue
				}
				readDamaged(t, s, ref, arts[i].Bytes)
			}
			patchFile(t, fs, path, off+int64(j), orig[j:j+1])
		}
		if got := get(t, s, ref); !sameArtifact(got, arts[i]) {
			t.Fatal("restored artifact differs")
		}
	}

	// The record of another artifact at the offset: its CRC binds the
	// position, so this is damage, not the other artifact's bytes.
	rec0 := indexOf(t, s, refs[0])
	rec1 := indexOf(t, s, refs[1])
	moved := rec1
	moved.Offset = rec0.Offset
	rawSet(t, s, appendIndexKey(nil, refs[1]), appendIndexRecord(nil, moved))
	readDamaged(t, s, refs[1], arts[1].Bytes)
	rawSet(t, s, appendIndexKey(nil, refs[1]), appendIndexRecord(nil, rec1))

	// Truncated inside the last record, then missing altogether.
	_, _, end := packRecordSpan(t, s, refs[1])
	s.Close()
	full := readFileRange(t, fs, packPath(s, rec1.Pack), 0, end)
	f, err := fs.Create(packPath(s, rec1.Pack), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(full[:end-3]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err = Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	readDamaged(t, s, refs[1], arts[1].Bytes)
	if got := get(t, s, refs[0]); !sameArtifact(got, arts[0]) {
		t.Fatal("artifact before the truncation differs")
	}
	s.Close()
	if err := fs.Remove(packPath(s, rec1.Pack)); err != nil {
		t.Fatal(err)
	}
	s, err = Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, ref := range refs {
		readDamaged(t, s, ref, arts[i].Bytes)
	}
}

// TestPackWriteFailure: a pack append that fails reports the error, makes
// nothing visible, and the next batch goes to a fresh pack.
func TestPackWriteFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inj := &failFS{FS: vfs.NewMem()}
	s := newMemStore(t, &Options{FS: inj, PackMin: 1})
	arts := []asl.Artifact{asl.Untagged(genBytes(340, 2048, false))}
	if _, err := s.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	inj.failWrites = true
	next := []asl.Artifact{asl.Untagged(genBytes(341, 2048, false))}
	if _, err := s.PutBatch(ctx, asl.HashSHA256, next); !errors.Is(err, errInjected) {
		t.Fatalf("PutBatch with failing pack writes: %v", err)
	}
	ref := asl.MustDerive(asl.HashSHA256, next[0])
	if _, err := s.Stat(ctx, ref); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("artifact of the failed batch: Stat = %v", err)
	}
	inj.failWrites = false
	refs, err := s.PutBatch(ctx, asl.HashSHA256, next)
	if err != nil {
		t.Fatal(err)
	}
	if rec := indexOf(t, s, refs[0]); rec.Pack != 2 {
		t.Fatalf("batch after a failed append went to pack %d, want 2", rec.Pack)
	}
	if got := get(t, s, refs[0]); !bytes.Equal(got.Bytes, next[0].Bytes) {
		t.Fatal("artifact differs")
	}
}

var errInjected = errors.New("injected write failure")

// failFS fails WriteAt on pack files while failWrites is set.
type failFS struct {
	vfs.FS
	failWrites bool
}

func (f *failFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &failFile{File: file, fs: f}, nil
}

type failFile struct {
	vfs.File
	fs *failFS
}

func (f *failFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failWrites && off > int64(len(packMagic)) {
		return 0, errInjected
	}
	return f.File.WriteAt(p, off)
}

// TestPackRecovery: the index records of a packed batch are committed
// without a sync of their own; after a crash that loses them, Open rebuilds
// them from the pack; a forged record is recorded as damage and the records
// after it are indexed (SPECS.md §6.4, "Recovery").
func TestPackRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs, PackMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var arts []asl.Artifact
	for i := range 50 {
		if i%2 == 0 {
			arts = append(arts, asl.Tagged(asl.TypeTag(i), genBytes(350+uint64(i), 1000+i, i%4 == 0)))
		} else {
			arts = append(arts, asl.Untagged(genBytes(350+uint64(i), 5000+i, true)))
		}
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts[:40])
	if err != nil {
		t.Fatal(err)
	}
	forged, err := s.PutBatch(ctx, asl.HashSHA256, arts[40:])
	if err != nil {
		t.Fatal(err)
	}
	// Lose every unsynced byte: the index records of both batches.
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	fresh := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()

	// Forge the head of the second batch's first record: another reference.
	probe, err := Open("store", &Options{FS: clone})
	if err != nil {
		t.Fatal(err)
	}
	if probe.packRecovered != 50 {
		t.Fatalf("Open indexed %d pack records, want 50", probe.packRecovered)
	}
	_, off, _ := packRecordSpan(t, probe, forged[0])
	probe.Close()
	patchFile(t, fresh, "store/packs/000001.pack", off+4+33, []byte{0x55})

	cs, err := Open("store", &Options{FS: fresh})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if cs.packRecovered != 49 || cs.packDamaged != 1 {
		t.Fatalf("Open indexed %d pack records and %d damaged regions, want the 49 around the forged head and 1", cs.packRecovered, cs.packDamaged)
	}
	for i, ref := range refs {
		if got := get(t, cs, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("recovered artifact %d differs", i)
		}
	}
	// The forged record is damage (records that check follow it): its
	// artifact reads as damaged, those after it are indexed.
	if _, err := cs.Stat(ctx, forged[0]); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("artifact of the forged head: Stat = %v, want ERR_INTEGRITY", err)
	}
	for i, ref := range forged[1:] {
		if got := get(t, cs, ref); !sameArtifact(got, arts[41+i]) {
			t.Fatalf("artifact after the forged head differs")
		}
	}
	checkNoOrphans(t, cs)
	// The watermark moved past the garbage: a second Open rebuilds nothing.
	cs.Close()
	again, err := Open("store", &Options{FS: fresh, PackMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.packRecovered != 0 {
		t.Fatalf("second Open indexed %d records", again.packRecovered)
	}
	// The lost artifacts can be put again; they go to a new pack, never
	// after the garbage.
	if _, err := again.PutBatch(ctx, asl.HashSHA256, arts[40:]); err != nil {
		t.Fatal(err)
	}
	if rec := indexOf(t, again, forged[0]); rec.Pack != 2 {
		t.Fatalf("re-put after a damaged tail went to pack %d, want 2", rec.Pack)
	}
	for i, ref := range forged {
		if got := get(t, again, ref); !sameArtifact(got, arts[40+i]) {
			t.Fatal("re-put artifact differs")
		}
	}
}

// TestPackCleanCloseNeedsNoRecovery: Close makes the unsynced index records
// durable, so the next Open rebuilds nothing.
func TestPackCleanCloseNeedsNoRecovery(t *testing.T) {
	t.Parallel()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs, PackMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	ref := put(t, s, asl.HashSHA256, asl.Untagged([]byte("closed cleanly")))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open("store", &Options{FS: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packRecovered != 0 {
		t.Fatalf("Open after a clean Close indexed %d records", s.packRecovered)
	}
	get(t, s, ref)
}

// TestSyncNeedsNoRecovery: after Sync, a crash that loses every unsynced
// byte leaves Open nothing to rebuild, and every packed artifact reads back.
func TestSyncNeedsNoRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs, PackMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var arts []asl.Artifact
	for i := range 30 {
		arts = append(arts, asl.Untagged(genBytes(4000+uint64(i), 800, false)))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open("store", &Options{FS: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.packRecovered != 0 {
		t.Fatalf("Open after Sync and a crash indexed %d records", s2.packRecovered)
	}
	for i, ref := range refs {
		if got := get(t, s2, ref); !sameArtifact(got, arts[i]) {
			t.Fatalf("artifact %d differs", i)
		}
	}
}
