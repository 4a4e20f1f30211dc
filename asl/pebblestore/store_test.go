package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

var hashes = []asl.HashID{asl.HashSHA256, asl.HashBLAKE3}

const mib = 1 << 20

type artCase struct {
	name string
	a    asl.Artifact
}

// roundTripCases are artifacts of every size class the store tells apart:
// empty, inline, at and above the inline bound and the chunk size, and two
// of many chunks: 1.5 MiB random and 2 MiB compressible (6 and 8 chunks) by
// default, 3.5 and 4 MiB with AMDUAT_LONG=1 (internal/longtest; they were
// most of the bytes TestRoundTrip and TestPutBatchRoundTrip put; issue
// 25).
func roundTripCases() []artCase {
	random, compressible := longtest.Count(mib+mib/2, 3*mib+mib/2), longtest.Count(2*mib, 4*mib)
	return []artCase{
		{"empty", asl.Untagged([]byte{})},
		{"empty tagged", asl.Tagged(asl.TagPELProgramDAG1, []byte{})},
		{"tag zero", asl.Tagged(0, []byte("x"))},
		{"one byte", asl.Untagged([]byte{0x42})},
		{"small tagged", asl.Tagged(asl.TagTGK1EdgeV1, []byte("hello"))},
		{"inline max random", asl.Untagged(genBytes(1, DefaultInlineMax, false))},
		{"inline max compressible", asl.Untagged(genBytes(2, DefaultInlineMax, true))},
		{"inline max+1", asl.Untagged(genBytes(3, DefaultInlineMax+1, false))},
		{"64 KiB compressible", asl.Tagged(7, genBytes(4, 64<<10, true))},
		{"chunk size random", asl.Untagged(genBytes(5, DefaultChunkSize, false))},
		{"chunk size compressible", asl.Untagged(genBytes(6, DefaultChunkSize, true))},
		{"chunk size+1 random", asl.Untagged(genBytes(7, DefaultChunkSize+1, false))},
		{"chunk size+1 compressible", asl.Tagged(9, genBytes(8, DefaultChunkSize+1, true))},
		{fmt.Sprintf("%.1f MiB random", float64(random)/mib), asl.Untagged(genBytes(9, random, false))},
		{fmt.Sprintf("%d MiB compressible tagged", compressible/mib), asl.Tagged(asl.TagPEL1Result1, genBytes(10, compressible, true))},
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range hashes {
		s := newMemStore(t, nil)
		for _, c := range roundTripCases() {
			t.Run(fmt.Sprintf("%s/%s/put", id, c.name), func(t *testing.T) {
				ref := put(t, s, id, c.a)
				if got := get(t, s, ref); !sameArtifact(got, c.a) {
					t.Fatalf("Get returned a different artifact (%d bytes)", len(got.Bytes))
				}
				ok, err := asl.Has(context.Background(), s, ref)
				if err != nil || !ok {
					t.Fatalf("Has = %v, %v", ok, err)
				}
				info, err := s.Stat(context.Background(), ref)
				if err != nil {
					t.Fatal(err)
				}
				if info.Ref != ref || info.Header != c.a.Header() {
					t.Fatalf("Stat = %+v, want header %+v", info, c.a.Header())
				}
			})
		}
	}
}

func TestPutBatchRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range hashes {
		t.Run(id.String(), func(t *testing.T) {
			s := newMemStore(t, nil)
			var arts []asl.Artifact
			for _, c := range roundTripCases() {
				arts = append(arts, c.a)
			}
			refs, err := s.PutBatch(context.Background(), id, arts)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range arts {
				if want := asl.MustDerive(id, a); refs[i] != want {
					t.Fatalf("ref %d = %s, want %s", i, refs[i], want)
				}
				if got := get(t, s, refs[i]); !sameArtifact(got, a) {
					t.Fatalf("artifact %d differs", i)
				}
			}
			checkNoOrphans(t, s)
		})
	}
}

func TestStreamingFetchSmallReads(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, &Options{ChunkSize: MinChunkSize * 4})
	want := genBytes(11, 5*MinChunkSize*4+123, false)
	ref := put(t, s, asl.HashBLAKE3, asl.Untagged(want))
	for _, size := range []int{1, 3, 4096, 1 << 16} {
		rc, hdr, err := s.Fetch(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Size != uint64(len(want)) {
			t.Fatalf("header size %d", hdr.Size)
		}
		var got []byte
		buf := make([]byte, size)
		for {
			n, err := rc.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("read size %d: bytes differ", size)
		}
	}
	// Closing early, and reading after Close.
	rc, _, _ := s.Fetch(context.Background(), ref)
	rc.Read(make([]byte, 10))
	rc.Close()
	if _, err := rc.Read(make([]byte, 10)); err == nil {
		t.Fatal("read after Close succeeded")
	}
}

// TestIdempotent: a duplicate put, single or batched, writes nothing for
// an artifact within one chunk and rewrites no index record for any. The
// multi-chunk artifacts are 1 MiB+5 (four chunks and a tail; the ingested
// one above an IngestMin of 512 KiB): 3 MiB+5 cost three times the hashing
// and staging for the same cases (issue 25).
func TestIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []artCase{
		{"inline", asl.Untagged([]byte("same"))},
		{"single chunk", asl.Untagged(genBytes(20, 100<<10, false))},
		{"multi chunk", asl.Tagged(3, genBytes(21, mib+5, true))},
		{"multi chunk ingested", asl.Tagged(4, genBytes(22, mib+5, false))},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts *Options
			ingested := strings.HasSuffix(c.name, "ingested")
			if ingested {
				// IngestMin applies to a store without packs (Options).
				opts = &Options{IngestMin: mib / 2, PackMin: -1}
			}
			s := newMemStore(t, opts)
			ref := put(t, s, asl.HashSHA256, c.a)
			if n := s.db.Metrics().Ingest.Count; ingested != (n > 0) {
				t.Fatalf("%d ingestions of SSTables after the first put", n)
			}
			before := indexOf(t, s, ref)
			commits := s.commits.Load()
			wal := s.db.Metrics().WAL.BytesIn
			if got := put(t, s, asl.HashSHA256, c.a); got != ref {
				t.Fatal("second put returned another ref")
			}
			refs, err := s.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{c.a, c.a})
			if err != nil || refs[0] != ref || refs[1] != ref {
				t.Fatalf("PutBatch = %v, %v", refs, err)
			}
			if c.a.Header().Size <= uint64(s.chunkSize) {
				// Nothing at all is written for an artifact already there.
				if n := s.commits.Load() - commits; n != 0 {
					t.Fatalf("%d commits for a duplicate put", n)
				}
				if w := s.db.Metrics().WAL.BytesIn; w != wal {
					t.Fatalf("WAL grew by %d bytes for a duplicate put", w-wal)
				}
			}
			// A streamed duplicate stages its chunks and drops them again;
			// the stored record is untouched.
			if after := indexOf(t, s, ref); after.Blob != before.Blob || after.Stored != before.Stored {
				t.Fatalf("index record rewritten: %+v -> %+v", before, after)
			}
			checkNoOrphans(t, s)
			if got := get(t, s, ref); !sameArtifact(got, c.a) {
				t.Fatal("artifact differs after duplicate puts")
			}
		})
	}
}

// TestPutBatchOrderAndDuplicates: a batch answers in input order, stores
// each artifact once, and mixes stored and new ones, inline and of many
// chunks (1 MiB and a little: four chunks and a tail, as 2 MiB were eight;
// issue 25).
func TestPutBatchOrderAndDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	pre := asl.Untagged([]byte("already stored"))
	preBig := asl.Untagged(genBytes(30, mib+1, false))
	put(t, s, asl.HashSHA256, pre)
	put(t, s, asl.HashSHA256, preBig)
	big := asl.Tagged(5, genBytes(31, mib+7, true))
	arts := []asl.Artifact{
		asl.Untagged([]byte("a")),
		pre,
		asl.Untagged([]byte("b")),
		asl.Untagged([]byte("a")),
		big,
		preBig,
		asl.Tagged(1, []byte("a")),
		big,
		asl.Untagged(genBytes(32, 200<<10, false)),
		asl.Untagged(nil),
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != len(arts) {
		t.Fatalf("%d refs for %d artifacts", len(refs), len(arts))
	}
	for i, a := range arts {
		if want := asl.MustDerive(asl.HashSHA256, a); refs[i] != want {
			t.Fatalf("ref %d = %s, want %s", i, refs[i], want)
		}
		if got := get(t, s, refs[i]); !sameArtifact(got, a) {
			t.Fatalf("artifact %d differs", i)
		}
	}
	if refs[0] != refs[3] || refs[4] != refs[7] || refs[0] == refs[6] {
		t.Fatal("duplicate handling broke reference identity")
	}
	var n int
	s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { n++; return nil })
	if n != 8 {
		t.Fatalf("%d artifacts stored, want 8", n)
	}
	checkNoOrphans(t, s)
	if refs, err := s.PutBatch(ctx, asl.HashSHA256, nil); err != nil || len(refs) != 0 {
		t.Fatalf("empty batch: %v, %v", refs, err)
	}
}

// TestStat: Stat's compression and stored size for raw, compressed and
// mixed artifacts, inline, of one chunk and of many (the multi-chunk ones
// 1 MiB, four chunks; 3 MiB and 2 MiB before issue 25, for the same
// cases).
func TestStat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	mixed := append(genBytes(40, mib/2, true), genBytes(41, mib/2, false)...)
	for _, c := range []struct {
		name     string
		a        asl.Artifact
		comp     string
		smaller  bool // StoredSize < Size
		exactRaw bool // StoredSize == Size
	}{
		{"empty", asl.Untagged(nil), "none", false, true},
		{"small compressible stays raw", asl.Untagged(genBytes(42, 3000, true)), "none", false, true},
		{"inline compressible", asl.Tagged(4, genBytes(43, 12<<10, true)), "zstd", true, false},
		{"inline random", asl.Untagged(genBytes(44, 12<<10, false)), "none", false, true},
		{"chunk compressible", asl.Untagged(genBytes(45, 500<<10, true)), "zstd", true, false},
		{"chunk random", asl.Untagged(genBytes(46, 500<<10, false)), "none", false, true},
		{"multi compressible", asl.Untagged(genBytes(47, mib, true)), "zstd", true, false},
		{"multi random", asl.Untagged(genBytes(48, mib, false)), "none", false, true},
		{"mixed", asl.Untagged(mixed), "mixed", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := put(t, s, asl.HashSHA256, c.a)
			info, err := s.Stat(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if info.Compression != c.comp {
				t.Errorf("Compression = %q, want %q", info.Compression, c.comp)
			}
			size := int64(len(c.a.Bytes))
			if c.exactRaw && info.StoredSize != size || c.smaller && info.StoredSize >= size-size/8 {
				t.Errorf("StoredSize = %d for %d bytes", info.StoredSize, size)
			}
			if info.Header != c.a.Header() || info.Ref != ref {
				t.Errorf("Stat = %+v", info)
			}
		})
	}
}

// TestCompressionDisabled: with compression off a compressible artifact of
// many chunks (1 MiB, four) is stored raw.
func TestCompressionDisabled(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, &Options{DisableCompression: true})
	a := asl.Untagged(genBytes(50, mib, true))
	ref := put(t, s, asl.HashSHA256, a)
	info, _ := s.Stat(context.Background(), ref)
	if info.Compression != "none" || info.StoredSize != int64(len(a.Bytes)) {
		t.Fatalf("Stat = %+v", info)
	}
}

func TestEnumerate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	var want []asl.Reference
	for i := range 40 {
		id := hashes[i%2]
		a := asl.Untagged([]byte(fmt.Sprintf("artifact %d", i)))
		if i%7 == 0 {
			a = asl.Untagged(genBytes(uint64(i), 100<<10+i, false))
		}
		want = append(want, put(t, s, id, a))
	}
	slices.SortFunc(want, func(a, b asl.Reference) int { return bytes.Compare(a.Bytes(), b.Bytes()) })
	walk := func(after asl.Reference) []asl.Reference {
		var got []asl.Reference
		err := s.Enumerate(ctx, after, func(info asl.Info) error {
			got = append(got, info.Ref)
			if info.StoredSize < 0 || info.Compression == "" {
				t.Errorf("info %+v", info)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	between := asl.MustParseReference(want[10].String()[:len(want[10].String())-1] + "f")
	for _, c := range []struct {
		name  string
		after asl.Reference
		want  []asl.Reference
	}{
		{"all", asl.Reference{}, want},
		{"after first", want[0], want[1:]},
		{"after 17", want[17], want[18:]},
		{"after last", want[len(want)-1], nil},
		{"after absent", between, want[11:]},
		{"after every sha256", asl.MustParseReference("0001" + strings.Repeat("ff", 32)), want[20:]},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := walk(c.after); !slices.Equal(got, c.want) {
				t.Fatalf("got %d refs, want %d", len(got), len(c.want))
			}
		})
	}
	stop := errors.New("stop")
	n := 0
	err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("Enumerate stop: %v after %d", err, n)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	unknown := asl.HashID(0x7777)
	unknownRef := asl.MustParseReference("7777abcd")
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("never stored")))
	if _, err := asl.PutArtifact(ctx, s, unknown, asl.Untagged([]byte("x"))); !errors.Is(err, asl.ErrUnsupported) {
		t.Errorf("Put unknown hash: %v", err)
	}
	if _, err := s.PutBatch(ctx, unknown, []asl.Artifact{asl.Untagged(nil)}); !errors.Is(err, asl.ErrUnsupported) {
		t.Errorf("PutBatch unknown hash: %v", err)
	}
	for _, c := range []struct {
		name string
		ref  asl.Reference
		want error
	}{
		{"unknown hash", unknownRef, asl.ErrUnsupported},
		{"missing", missing, asl.ErrNotFound},
		{"zero", asl.Reference{}, asl.ErrIntegrity},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := s.Fetch(ctx, c.ref); !errors.Is(err, c.want) {
				t.Errorf("Fetch: %v, want %v", err, c.want)
			}
			if _, err := s.Stat(ctx, c.ref); !errors.Is(err, c.want) {
				t.Errorf("Stat: %v, want %v", err, c.want)
			}
			ok, err := asl.Has(ctx, s, c.ref)
			if ok || (c.want == asl.ErrNotFound) != (err == nil) {
				t.Errorf("Has = %v, %v", ok, err)
			}
		})
	}
	// A payload of the wrong length is refused and leaves nothing behind.
	for _, c := range []struct {
		name string
		size uint64
		data []byte
	}{
		{"short small", 10, []byte("12345")},
		{"long small", 3, []byte("12345")},
		{"short large", 2 * mib, genBytes(60, mib+mib/2, false)},
		{"long large", mib, genBytes(61, mib+1, false)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: c.size}, bytes.NewReader(c.data))
			if err == nil || errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("Put: %v", err)
			}
			checkNoOrphans(t, s)
			var n int
			s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { n++; return nil })
			if n != 0 {
				t.Fatalf("%d artifacts stored", n)
			}
		})
	}
	// A reader error is reported as such.
	boom := errors.New("boom")
	_, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: 3 * mib}, io.MultiReader(newGen(1, mib+5, false), errReader{boom}))
	if !errors.Is(err, boom) {
		t.Fatalf("Put with failing reader: %v", err)
	}
	checkNoOrphans(t, s)
	// A cancelled context stops a put.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, asl.HashSHA256, asl.Header{Size: 1}, bytes.NewReader([]byte("x"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled ctx: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewMem()
	if _, err := Open("nowhere", &Options{FS: fs}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("Open missing dir: %v", err)
	}
	fs.MkdirAll("empty", 0o755)
	if _, err := Open("empty", &Options{FS: fs}); !errors.Is(err, ErrNoStore) {
		t.Fatalf("Open empty dir: %v", err)
	}
	fs.MkdirAll("junk", 0o755)
	f, _ := fs.Create("junk/file", vfs.WriteCategoryUnspecified)
	f.Close()
	if _, err := Create("junk", &Options{FS: fs}); err == nil {
		t.Fatal("Create in a non-empty non-store directory succeeded")
	}
	if _, err := Create("x", &Options{FS: fs, DefaultHash: 0x7777}); !errors.Is(err, asl.ErrUnsupported) {
		t.Fatalf("Create with unknown hash: %v", err)
	}
	if _, err := Create("x", &Options{FS: fs, ChunkSize: 100}); err == nil {
		t.Fatal("Create with a tiny chunk size succeeded")
	}
	s, err := Create("db", &Options{FS: fs, DefaultHash: asl.HashBLAKE3})
	if err != nil {
		t.Fatal(err)
	}
	if s.DefaultHash() != asl.HashBLAKE3 {
		t.Fatalf("DefaultHash = %v", s.DefaultHash())
	}
	big := asl.Untagged(genBytes(70, mib+3, false))
	ref := put(t, s, s.DefaultHash(), big)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Stat(ctx, ref); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stat after Close: %v", err)
	}
	if _, err := Create("db", &Options{FS: fs}); !errors.Is(err, ErrExists) {
		t.Fatalf("Create twice: %v", err)
	}
	// Reopen with another chunk size: old artifacts still read, the default
	// hash is the recorded one.
	s, err = Open("db", &Options{FS: fs, ChunkSize: 64 << 10, DefaultHash: asl.HashSHA256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.DefaultHash() != asl.HashBLAKE3 {
		t.Fatalf("reopened DefaultHash = %v", s.DefaultHash())
	}
	if got := get(t, s, ref); !sameArtifact(got, big) {
		t.Fatal("artifact differs after reopen")
	}
	ref2 := put(t, s, asl.HashSHA256, asl.Untagged(genBytes(71, 300<<10, false)))
	if rec := indexOf(t, s, ref2); rec.Chunk != 64<<10 || rec.chunks() != 5 {
		t.Fatalf("new artifact record %+v", rec)
	}
	// Packs are appended to, never rewritten, across reopen: the new
	// artifact lies after the old one.
	if rec1, rec2 := indexOf(t, s, ref), indexOf(t, s, ref2); !rec1.packed() || !rec2.packed() || rec2.Pack < rec1.Pack || rec2.Pack == rec1.Pack && rec2.Offset <= rec1.Offset {
		t.Fatalf("records %+v then %+v", rec1, rec2)
	}
}

func TestCloseWithOpenReader(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, &Options{ChunkSize: MinChunkSize})
	want := genBytes(80, 40*MinChunkSize, false)
	ref := put(t, s, asl.HashSHA256, asl.Untagged(want))
	rc, _, err := s.Fetch(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rc.Read(make([]byte, 100))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, rc)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("read after store Close: %v", err)
	}
}
