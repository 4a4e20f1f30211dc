package s3store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

// objectBytes reads the object at key whole.
func objectBytes(t *testing.T, st *s3store.Store, key string) []byte {
	t.Helper()
	o, err := st.Client().GetObject(t.Context(), st.Bucket(), key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
	return b
}

// TestPutChecksums: every object a put writes carries a checksum of its
// bytes, which MinIO checked against the body and kept (SPECS.md §6.7,
// "Checksums"): x-amz-checksum-sha256 when the SHA-256 of the object is
// known without hashing (a SHA-256 Reference's uncompressed object, a
// compressed object, a part), x-amz-checksum-crc32c otherwise (a BLAKE3
// Reference's uncompressed object, a manifest); a pack and an index
// object carry their SHA-256.
func TestPutChecksums(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	o.PartSize = 5 << 20
	st := create(t, m, "checksums", o)
	ctx := t.Context()
	put := func(id asl.HashID, a asl.Artifact) asl.Reference {
		ref, err := asl.PutArtifact(ctx, st, id, a)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	small := put(asl.HashSHA256, asl.Untagged(gen(1, 3000)))
	squeezable := put(asl.HashSHA256, asl.Untagged(bytes.Repeat([]byte("amduat "), 2000)))
	blake := put(asl.HashBLAKE3, asl.Tagged(7, gen(2, 3000)))
	large := put(asl.HashSHA256, asl.Untagged(gen(3, 6<<20)))
	en := asl.IndexEntry{Space: "checksum.test", Key: []byte("k"), Value: []byte("an index entry")}
	if _, err := st.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{en}); err != nil {
		t.Fatal(err)
	}
	// The large artifact's parts, listed under its prefix.
	keys := map[string]string{
		st.ArtifactKey(small):      "sha256",
		st.ArtifactKey(squeezable): "sha256",
		st.ArtifactKey(blake):      "crc32c",
		st.ArtifactKey(large):      "crc32c", // its manifest
	}
	// The entry's index object (SHA-256: its name does not give it, but
	// the writer hashed it to sign the PUT).
	indexes := listKeys(t, st, "x/")
	if len(indexes) != 1 {
		t.Fatalf("%d index objects, want 1", len(indexes))
	}
	keys[indexes[0]] = "sha256"
	// A pack and its index.
	if _, err := st.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged(gen(4, 100)), asl.Untagged(gen(5, 100))}); err != nil {
		t.Fatal(err)
	}
	for _, key := range append(listKeys(t, st, "k/"), listKeys(t, st, "x/")...) {
		keys[key] = "sha256"
	}
	if len(keys) != 7 {
		t.Fatalf("%d objects to check, want 7 (4 artifacts, 2 index objects, 1 pack)", len(keys))
	}
	parts := 0
	for obj := range st.Client().ListObjects(ctx, st.Bucket(), minio.ListObjectsOptions{Prefix: st.Prefix() + "p/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		keys[obj.Key] = "sha256"
		parts++
	}
	if parts != 2 {
		t.Fatalf("%d part objects, want 2 (6 MiB in 5 MiB parts)", parts)
	}
	for key, kind := range keys {
		b := objectBytes(t, st, key)
		info, err := st.Client().StatObject(ctx, st.Bucket(), key, minio.StatObjectOptions{Checksum: true})
		if err != nil {
			t.Fatal(err)
		}
		var got, want string
		switch kind {
		case "sha256":
			sum := sha256.Sum256(b)
			got, want = info.ChecksumSHA256, base64.StdEncoding.EncodeToString(sum[:])
		case "crc32c":
			var c [4]byte
			binary.BigEndian.PutUint32(c[:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
			got, want = info.ChecksumCRC32C, base64.StdEncoding.EncodeToString(c[:])
		}
		if got != want {
			t.Errorf("%s: checksum %s %q, want %q (SHA-256 %q, CRC-32C %q)", key, kind, got, want, info.ChecksumSHA256, info.ChecksumCRC32C)
		}
	}
}

// checksumOf reads the checksum MinIO keeps with the object at key and
// compares it with the one of kind ("sha256" or "crc32c") computed here
// over the object's bytes.
func checksumOf(t *testing.T, st *s3store.Store, key, kind string) {
	t.Helper()
	b := objectBytes(t, st, key)
	info, err := st.Client().StatObject(t.Context(), st.Bucket(), key, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	var got, want string
	switch kind {
	case "sha256":
		sum := sha256.Sum256(b)
		got, want = info.ChecksumSHA256, base64.StdEncoding.EncodeToString(sum[:])
	case "crc32c":
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		got, want = info.ChecksumCRC32C, base64.StdEncoding.EncodeToString(c[:])
	}
	if got != want {
		t.Errorf("%s: checksum %s %q, want %q (SHA-256 %q, CRC-32C %q)", key, kind, got, want, info.ChecksumSHA256, info.ChecksumCRC32C)
	}
}

// TestPutChecksumsOtherObjects: the objects a put of an artifact does not
// write carry their checksum too (SPECS.md §6.7, "Checksums"): the config
// object, a pin and its change record, the collection's state and claims
// (CRC-32C), and an artifact object rewritten by a put that found it
// stored (gc.go's refresh: SHA-256 for a SHA-256 Reference, CRC-32C for a
// BLAKE3 one), here after it was written again behind the store's back
// without a checksum.
func TestPutChecksumsOtherObjects(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	o.TouchAge = -1 // every put of a stored artifact rewrites it
	st := create(t, m, "checksums", o)
	ctx := t.Context()
	sha := asl.Untagged(gen(11, 3000))
	blake := asl.Tagged(9, gen(12, 3000))
	var refs []asl.Reference
	for _, c := range []struct {
		id asl.HashID
		a  asl.Artifact
	}{{asl.HashSHA256, sha}, {asl.HashBLAKE3, blake}} {
		ref, err := asl.PutArtifact(ctx, st, c.id, c.a)
		if err != nil {
			t.Fatal(err)
		}
		// Behind the store's back: the same bytes, no checksum (plain
		// HTTP: the client library adds none of its own).
		b := objectBytes(t, st, st.ArtifactKey(ref))
		if _, err := st.Client().PutObject(ctx, st.Bucket(), st.ArtifactKey(ref), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		info, err := st.Client().StatObject(ctx, st.Bucket(), st.ArtifactKey(ref), minio.StatObjectOptions{Checksum: true})
		if err != nil || info.ChecksumSHA256 != "" || info.ChecksumCRC32C != "" {
			t.Fatalf("object written without a checksum has SHA-256 %q, CRC-32C %q (%v)", info.ChecksumSHA256, info.ChecksumCRC32C, err)
		}
		if _, err := asl.PutArtifact(ctx, st, c.id, c.a); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	for i, name := range []string{"root", "blake"} {
		if err := st.Pin(ctx, name, refs[i], asl.PinOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An unpinned artifact and no grace: the collection claims its shard
	// to sweep it.
	if _, err := asl.PutArtifact(ctx, st, asl.HashSHA256, asl.Untagged([]byte("junk"))); err != nil {
		t.Fatal(err)
	}
	if rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1}); err != nil || rep.Deleted != 1 {
		t.Fatalf("GC = %+v, %v; want 1 deleted", rep, err)
	}
	cases := []struct{ name, key, kind string }{
		{"config", st.Prefix() + "config", "crc32c"},
		{"pin", st.PinKey("root"), "crc32c"},
		{"pin change", st.Prefix() + "pins/log/root/00000000000000000001", "crc32c"},
		{"gc state", st.Prefix() + "gc/state", "crc32c"},
		{"refreshed SHA-256 artifact", st.ArtifactKey(refs[0]), "sha256"},
		{"refreshed BLAKE3 artifact", st.ArtifactKey(refs[1]), "crc32c"},
	}
	claims := 0
	for obj := range st.Client().ListObjects(ctx, st.Bucket(), minio.ListObjectsOptions{Prefix: st.Prefix() + "gc/claims/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if claims++; claims <= 3 {
			cases = append(cases, struct{ name, key, kind string }{"gc claim", obj.Key, "crc32c"})
		}
	}
	if claims == 0 {
		t.Fatal("the collection wrote no claim")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checksumOf(t, st, c.key, c.kind) })
	}
}

// damager flips one byte of the body of the PUT requests whose path holds
// key, on the way to MinIO: bytes damaged in transit.
type damager struct {
	next http.RoundTripper
	key  atomic.Pointer[string]
	hits atomic.Int32
}

func (d *damager) RoundTrip(req *http.Request) (*http.Response, error) {
	if k := d.key.Load(); k != nil && req.Method == http.MethodPut && req.Body != nil && strings.HasSuffix(req.URL.Path, *k) {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > 0 {
			b[len(b)/2] ^= 0x10
			d.hits.Add(1)
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return d.next.RoundTrip(req)
}

// TestPutDamagedInTransit: a PUT whose bytes are damaged between the store
// and MinIO is refused by MinIO (the checksum the store sent does not
// match the body it received): the put fails, naming the object, and
// nothing is stored under its key; the same put then succeeds once the
// network is sound. And MinIO refuses a PUT whose x-amz-checksum-crc32c
// does not match its body, which the store's checksums rest on.
func TestPutDamagedInTransit(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	d := &damager{next: http.DefaultTransport.(*http.Transport).Clone()}
	o.Transport = d
	st := create(t, m, "transit", o)
	ctx := t.Context()
	for _, c := range []struct {
		name string
		id   asl.HashID
		a    asl.Artifact
	}{
		{"sha256", asl.HashSHA256, asl.Untagged(gen(11, 4000))},
		{"sha256 compressed", asl.HashSHA256, asl.Untagged(bytes.Repeat([]byte("transit "), 1000))},
		{"blake3", asl.HashBLAKE3, asl.Untagged(gen(12, 4000))},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref, err := asl.Derive(c.id, c.a)
			if err != nil {
				t.Fatal(err)
			}
			key := st.ArtifactKey(ref)
			d.key.Store(&key)
			d.hits.Store(0)
			_, err = asl.PutArtifact(ctx, st, c.id, c.a)
			d.key.Store(nil)
			if err == nil || d.hits.Load() == 0 {
				t.Fatalf("put with its bytes damaged in transit: %v (%d damaged requests); want refused", err, d.hits.Load())
			}
			if errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), key) {
				t.Fatalf("put with its bytes damaged in transit: %v; want an I/O error naming %s", err, key)
			}
			t.Logf("refused: %v", err)
			if _, err := st.Stat(ctx, ref); !errors.Is(err, asl.ErrNotFound) {
				t.Fatalf("stat after the refused put: %v, want not found", err)
			}
			if _, err := asl.PutArtifact(ctx, st, c.id, c.a); err != nil {
				t.Fatalf("put on a sound network: %v", err)
			}
			got, err := asl.Get(ctx, st, ref, 0)
			if err != nil || !bytes.Equal(got.Bytes, c.a.Bytes) {
				t.Fatalf("get: %d bytes, %v", len(got.Bytes), err)
			}
		})
	}
	// MinIO refuses a body that does not match its x-amz-checksum-crc32c.
	body := []byte("checked by the object store")
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))^1)
	po := minio.PutObjectOptions{UserMetadata: map[string]string{"X-Amz-Checksum-Crc32c": base64.StdEncoding.EncodeToString(c[:])}, DisableMultipart: true}
	key := st.Prefix() + "wrong-checksum"
	if _, err := st.Client().PutObject(context.Background(), st.Bucket(), key, bytes.NewReader(body), int64(len(body)), po); err == nil {
		t.Fatal("a PUT with a wrong x-amz-checksum-crc32c was accepted")
	} else {
		t.Logf("a wrong checksum: %v (%s)", err, minio.ToErrorResponse(err).Code)
	}
	if _, err := st.Client().StatObject(ctx, st.Bucket(), key, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Fatalf("stat after the refused PUT: %v, want NoSuchKey", err)
	}
}
