package s3store_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/s3store"
)

// textCorpus is the Go sources under GOROOT/src/DIR: text as users store
// it, each file one artifact.
func textCorpus(t testing.TB, dir string) []asl.Artifact {
	var arts []asl.Artifact
	root := filepath.Join(runtime.GOROOT(), "src", dir)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil {
			arts = append(arts, asl.Untagged(b))
		}
		return err
	})
	if err != nil || len(arts) == 0 {
		t.Skipf("no Go sources under %s: %v", root, err)
	}
	return arts
}

func dirSize(t testing.TB, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestCompressedSize: a bucket stores text compressed as the embedded
// store does (SPECS.md §6.7, "Compression"): the objects of the same files
// take at most 1.1 times the embedded store's directory, every artifact
// reads back, and an object a layout-2 writer stored uncompressed still
// reads. The files are text/template's Go sources (17 files, 320 KiB, small
// and large ones); net/http's 112 files and 2.4 MiB cost seven times the
// puts, reads and compression to compare the same ratio (issue 25).
func TestCompressedSize(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	arts := textCorpus(t, "text/template")
	st := create(t, m, "zsize", options(m))
	refs, err := st.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	var raw, bucket int64
	for _, a := range arts {
		raw += int64(len(asl.EncodeArtifact(a)))
	}
	// Everything the batch wrote: loose objects, packs and index objects.
	for obj := range st.Client().ListObjects(ctx, st.Bucket(), minio.ListObjectsOptions{Prefix: st.Prefix(), Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.HasSuffix(obj.Key, "/config") {
			continue
		}
		bucket += obj.Size
	}
	dir := t.TempDir()
	ps, err := pebblestore.Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.PutBatch(ctx, asl.HashSHA256, arts); err != nil {
		t.Fatal(err)
	}
	var embedded int64
	if err := ps.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error { embedded += in.StoredSize; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files, %d bytes as ArtifactBytes: bucket objects %d bytes (%.3fx), embedded store's stored payloads %d bytes (%.3fx; directory %d bytes, preallocated); bucket/embedded = %.3f",
		len(arts), raw, bucket, float64(bucket)/float64(raw), embedded, float64(embedded)/float64(raw), dirSize(t, dir), float64(bucket)/float64(embedded))
	if float64(bucket) > 1.1*float64(embedded) {
		t.Errorf("bucket holds %d bytes, more than 1.1 x the embedded store's %d", bucket, embedded)
	}
	zstd := 0
	for i, ref := range refs {
		got, err := asl.Get(ctx, st, ref, 1<<30)
		if err != nil || !bytes.Equal(got.Bytes, arts[i].Bytes) {
			t.Fatalf("get %s: %v", ref, err)
		}
		in, err := st.Stat(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if in.Compression == "zstd" {
			zstd++
			if in.StoredSize >= int64(len(arts[i].Bytes)) {
				t.Errorf("%s: stored %d bytes compressed of %d", ref, in.StoredSize, len(arts[i].Bytes))
			}
		}
	}
	if zstd == 0 {
		t.Fatal("nothing was compressed")
	}
	// An uncompressed object (layout 2, or a payload that does not pay)
	// reads as before; a re-put stores it compressed.
	a := asl.Untagged(append(bytes.Clone(arts[0].Bytes), " and one more line"...))
	ref := asl.MustDerive(asl.HashSHA256, a)
	ab := asl.EncodeArtifact(a)
	if _, err := st.Client().PutObject(ctx, st.Bucket(), st.ArtifactKey(ref), bytes.NewReader(ab), int64(len(ab)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := asl.Get(ctx, st, ref, 1<<30); err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
		t.Fatalf("get of an uncompressed object: %v", err)
	}
	if in, err := st.Stat(ctx, ref); err != nil || in.Compression != "none" {
		t.Fatalf("stat of an uncompressed object = %+v, %v", in, err)
	}
	if _, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a); err != nil {
		t.Fatal(err)
	}
	if in, err := st.Stat(ctx, ref); err != nil || (in.Compression != "zstd") != (len(a.Bytes) < 4096) {
		t.Fatalf("stat after a re-put = %+v, %v", in, err)
	}
	// A damaged frame is ERR_INTEGRITY, never wrong bytes.
	var zref asl.Reference
	for _, r := range refs {
		if in, err := st.Stat(ctx, r); err == nil && in.Compression == "zstd" {
			zref = r
			break
		}
	}
	key, off, n, ok := st.PackedAt(zref)
	if !ok {
		t.Fatalf("%s is not packed", zref)
	}
	flipObjectByte(t, st, key, off+n-5)
	if _, err := asl.Get(ctx, st, zref, 1<<30); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("get of a damaged compressed object = %v, want ErrIntegrity", err)
	}
}

// TestCompressedParts: the parts of a large compressible artifact are
// stored compressed under PREFIX z/ (a part too short to pay stays raw)
// and named by a version 2 manifest; it
// reads back, the sweep keeps its parts, and a damaged compressed part is
// ERR_INTEGRITY.
func TestCompressedParts(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	ctx := t.Context()
	st := create(t, m, "zparts", options(m))
	s3store.SetPartSize(st, partSize)
	var text []byte
	for _, a := range textCorpus(t, "net/http") {
		text = append(text, a.Bytes...)
	}
	for len(text) < 2*partSize+7 {
		text = append(text, text...)
	}
	a := asl.Untagged(text[:2*partSize+7])
	ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	if b := getObject(t, st, st.ArtifactKey(ref)); !bytes.HasPrefix(b, []byte("amds3mf\x02")) {
		t.Fatalf("manifest starts %q", b[:8])
	}
	zs := listKeys(t, st, "z/")
	if len(zs) != 2 || len(listKeys(t, st, "p/")) != 1 { // the last part, 7 bytes, stays raw
		t.Fatalf("compressed parts %v, raw parts %v", zs, listKeys(t, st, "p/"))
	}
	var stored int64
	for obj := range st.Client().ListObjects(ctx, st.Bucket(), minio.ListObjectsOptions{Prefix: st.Prefix() + "z/", Recursive: true}) {
		stored += obj.Size
	}
	t.Logf("%d bytes of text: 2 compressed parts of %d bytes in all, and a raw part of 7", len(a.Bytes), stored)
	if got, err := asl.Get(ctx, st, ref, 1<<30); err != nil || !bytes.Equal(got.Bytes, a.Bytes) {
		t.Fatalf("get: %v", err)
	}
	rep, err := st.Sweep(ctx, 0, false)
	if err != nil || rep.Referenced != 3 || rep.Removed != 0 {
		t.Fatalf("Sweep = %+v, %v", rep, err)
	}
	putObject(t, st, zs[1], flip(getObject(t, st, zs[1]), 40))
	if _, err := asl.Get(ctx, st, ref, 1<<30); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("get with a damaged compressed part = %v, want ErrIntegrity", err)
	}
}
