package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// newMemStore creates a store on an in-memory filesystem.
func newMemStore(t testing.TB, opts *Options) *Store {
	t.Helper()
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = vfs.NewMem()
	}
	s, err := Create("store", &o)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// genReader yields n deterministic bytes without holding them: random
// (incompressible) or text-like (compressible), from a seed.
type genReader struct {
	left  uint64
	rng   *rand.ChaCha8
	text  bool
	phase uint64
}

func newGen(seed uint64, n uint64, compressible bool) *genReader {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return &genReader{left: n, rng: rand.NewChaCha8(s), text: compressible}
}

const textPattern = "the quick brown fox jumps over the lazy dog; amduat artifact store chunk "

// textBlock is textPattern 1024 times: a copy from any offset within the
// first pattern yields the stream from that phase for 1023 patterns.
var textBlock = strings.Repeat(textPattern, 1024)

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if uint64(len(p)) > g.left {
		p = p[:g.left]
	}
	if g.text {
		// textPattern repeated from phase, with the byte at every
		// multiple of 4099 replaced; written with copy rather than byte by
		// byte (each byte written is a call under -race; issue 25).
		for i := 0; i < len(p); {
			i += copy(p[i:], textBlock[(g.phase+uint64(i))%uint64(len(textPattern)):])
		}
		for i := (4099 - g.phase%4099) % 4099; i < uint64(len(p)); i += 4099 {
			p[i] = byte(g.phase + i>>12)
		}
		g.phase += uint64(len(p))
	} else {
		g.rng.Read(p)
	}
	g.left -= uint64(len(p))
	return len(p), nil
}

func genBytes(seed uint64, n int, compressible bool) []byte {
	b := make([]byte, n)
	io.ReadFull(newGen(seed, uint64(n), compressible), b)
	return b
}

func put(t testing.TB, s *Store, id asl.HashID, a asl.Artifact) asl.Reference {
	t.Helper()
	ref, err := asl.PutArtifact(context.Background(), s, id, a)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if want := asl.MustDerive(id, a); ref != want {
		t.Fatalf("Put returned %s, want %s", ref, want)
	}
	return ref
}

func get(t testing.TB, s *Store, ref asl.Reference) asl.Artifact {
	t.Helper()
	a, err := asl.Get(context.Background(), s, ref, 0)
	if err != nil {
		t.Fatalf("Get %s: %v", ref, err)
	}
	return a
}

func sameArtifact(a, b asl.Artifact) bool {
	return bytes.Equal(a.Bytes, b.Bytes) && a.HasTag == b.HasTag && (!a.HasTag || a.Tag == b.Tag)
}

// readDamaged fetches ref expecting an integrity failure. It reads in small
// pieces and fails the test if any returned byte differs from want or if
// the read does not end in an error wrapping asl.ErrIntegrity.
func readDamaged(t *testing.T, s *Store, ref asl.Reference, want []byte) {
	t.Helper()
	rc, _, err := s.Fetch(context.Background(), ref)
	if err != nil {
		if !errors.Is(err, asl.ErrIntegrity) {
			t.Fatalf("Fetch: %v, want ErrIntegrity", err)
		}
		return
	}
	defer rc.Close()
	var got []byte
	buf := make([]byte, 7919)
	for {
		n, err := rc.Read(buf)
		got = append(got, buf[:n]...)
		if len(got) > len(want) || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("read returned %d bytes that are not a prefix of the original", len(got))
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, asl.ErrIntegrity) {
			t.Fatalf("read ended with %v after %d bytes, want ErrIntegrity", err, len(got))
		}
		return
	}
}

// settleIndex waits until the queued index commits of packed batches are
// in Pebble, so raw reads and writes see (and are not overwritten by) them.
func settleIndex(t testing.TB, s *Store) {
	t.Helper()
	if err := s.idx.drain(); err != nil {
		t.Fatal(err)
	}
}

// rawKeys lists the keys with the given prefix byte.
func rawKeys(t testing.TB, s *Store, prefix byte) [][]byte {
	t.Helper()
	settleIndex(t, s)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var keys [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
	}
	return keys
}

func rawGet(t testing.TB, s *Store, key []byte) []byte {
	t.Helper()
	settleIndex(t, s)
	v, closer, err := s.db.Get(key)
	if err != nil {
		t.Fatalf("raw get %x: %v", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v)
}

func rawSet(t testing.TB, s *Store, key, value []byte) {
	t.Helper()
	settleIndex(t, s)
	if err := s.db.Set(key, value, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func indexOf(t testing.TB, s *Store, ref asl.Reference) indexRecord {
	t.Helper()
	rec, _, err := decodeIndexHead(rawGet(t, s, appendIndexKey(nil, ref)))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// checkNoOrphans asserts that no staging record is left and that every
// chunk belongs to a blob that exactly one index record references.
func checkNoOrphans(t testing.TB, s *Store) {
	t.Helper()
	if k := rawKeys(t, s, prefixStaging); len(k) != 0 {
		t.Fatalf("%d staging records left", len(k))
	}
	refs := map[uint64]int{}
	chunks := map[uint64]uint64{}
	for _, k := range rawKeys(t, s, prefixIndex) {
		rec, _, err := decodeIndexHead(rawGet(t, s, k))
		if err != nil {
			t.Fatal(err)
		}
		if rec.chunked() {
			refs[rec.Blob]++
			chunks[rec.Blob] = rec.chunks()
		}
	}
	seen := map[uint64]uint64{}
	for _, k := range rawKeys(t, s, prefixChunk) {
		seen[beUint64(k[1:9])]++
	}
	for blob, n := range seen {
		if refs[blob] != 1 || chunks[blob] != n {
			t.Fatalf("blob %d: %d chunks, referenced %d times by records expecting %d chunks", blob, n, refs[blob], chunks[blob])
		}
	}
	for blob := range refs {
		if refs[blob] != 1 {
			t.Fatalf("blob %d referenced %d times", blob, refs[blob])
		}
	}
}
