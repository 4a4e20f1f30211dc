package s3store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/internal/longtest"
)

// TestPackFlips flips bytes of a pack object and of its index object, one
// at a time, behind the store's back, and reads every artifact and the
// entry through a fresh store after each flip (SPECS.md §6.7, "Packs"):
// every read is the right bytes or ERR_INTEGRITY, never other bytes; a
// flip in the index object loses nothing (the pack's own copy of the
// index is read instead); a flip in a record fails only the artifact it
// holds. Every 3rd byte of each (every byte with AMDUAT_LONG=1).
func TestPackFlips(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	st := create(t, m, "packflips", o)
	ctx := t.Context()
	arts := []asl.Artifact{
		asl.Untagged(bytes.Repeat([]byte("amduat "), 700)), // a zstd record
		asl.Tagged(0x101, gen(800, 90)),
		asl.Untagged([]byte{}),
		asl.Untagged(gen(801, 40)),
	}
	entry := asl.IndexEntry{Space: "flips.test", Key: []byte{1, 2}, Value: []byte("an entry")}
	refs, err := st.PutIndexed(ctx, asl.HashSHA256, arts, []asl.IndexEntry{entry})
	if err != nil {
		t.Fatal(err)
	}
	packs, indexes := listKeys(t, st, "k/"), listKeys(t, st, "x/")
	if len(packs) != 1 || len(indexes) != 1 {
		t.Fatalf("packs %v, index objects %v", packs, indexes)
	}
	if in, err := st.Stat(ctx, refs[0]); err != nil || in.Compression != "zstd" {
		t.Fatalf("stat of the first artifact = %+v, %v; want a zstd record", in, err)
	}
	step := longtest.Count(3, 1)
	for _, key := range []string{indexes[0], packs[0]} {
		orig := objectBytes(t, st, key)
		var harmless, detected, lost, wrong, wrongClass int
		for off := 0; off < len(orig); off += step {
			b := bytes.Clone(orig)
			b[off] ^= 0x20
			if _, err := st.Client().PutObject(ctx, st.Bucket(), key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			fresh, err := s3store.Open(ctx, st.Bucket(), st.Prefix(), o)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, ref := range refs {
				got, err := asl.Get(ctx, fresh, ref, 0)
				switch {
				case err == nil && bytes.Equal(got.Bytes, arts[i].Bytes) && got.Header() == arts[i].Header():
				case err == nil:
					wrong++
					t.Errorf("%s byte %d: %s read as other bytes", key, off, ref)
				case errors.Is(err, asl.ErrIntegrity):
					bad++
				case errors.Is(err, asl.ErrNotFound):
					// The index read neither way: the artifact is not
					// found, and enumerate names the damage.
					bad++
				default:
					wrongClass++
					t.Errorf("%s byte %d: %s: %v", key, off, ref, err)
				}
			}
			v, ok, err := fresh.LookupIndex(ctx, entry.Space, entry.Key)
			if err != nil || (ok && !bytes.Equal(v, entry.Value)) {
				wrong++
				t.Errorf("%s byte %d: entry = %q, %v, %v", key, off, v, ok, err)
			}
			if !ok {
				bad++
			}
			fresh.Close()
			switch {
			case bad == 0:
				harmless++
			case key == indexes[0]:
				lost++
				t.Errorf("%s byte %d: a flip in the index object lost %d reads", key, off, bad)
			default:
				detected++
			}
		}
		if _, err := st.Client().PutObject(ctx, st.Bucket(), key, bytes.NewReader(orig), int64(len(orig)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%d bytes, every %d): harmless %d, detected %d, lost %d, wrong bytes %d, wrong class %d",
			key, len(orig), step, harmless, detected, lost, wrong, wrongClass)
	}
}
