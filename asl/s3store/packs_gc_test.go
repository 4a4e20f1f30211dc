package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
)

// countKeys is the number of objects under the store's prefix + dir.
func countKeys(t *testing.T, st *s3store.Store, dir string) int {
	t.Helper()
	return len(listKeys(t, st, dir))
}

// TestGCPacks: a collection removes a pack whose artifacts no pin
// reaches, repacks one mostly dead (its live artifact and entry carried
// into a new pack first), and a second server that read the old packs
// still reads every live artifact and entry (SPECS.md §6.7, "Packs in a
// collection"); rm of a packed artifact repacks without it.
func TestGCPacks(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	o.TouchAge = -1
	st := create(t, m, "gcpacks", o)
	ctx := t.Context()
	var dead, live []asl.Artifact
	for i := range 6 {
		dead = append(dead, asl.Untagged(gen(uint64(500+i), 2000)))
	}
	keep := asl.Untagged(gen(600, 300))
	live = append(live, keep)
	// Pack 1: all dead. Pack 2: one small live artifact beside dead ones,
	// and an entry.
	if _, err := st.PutBatch(ctx, asl.HashSHA256, dead[:3]); err != nil {
		t.Fatal(err)
	}
	entry := asl.IndexEntry{Space: "gcpacks.test", Key: []byte("k"), Value: []byte("kept across the repack")}
	if _, err := st.PutIndexed(ctx, asl.HashSHA256, append(append([]asl.Artifact(nil), dead[3:]...), keep), []asl.IndexEntry{entry}); err != nil {
		t.Fatal(err)
	}
	keepRef := asl.MustDerive(asl.HashSHA256, keep)
	if err := st.Pin(ctx, "keep", keepRef, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}
	reader, err := s3store.Open(ctx, st.Bucket(), st.Prefix(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := asl.Get(ctx, reader, keepRef, 0); err != nil { // it learns the old packs
		t.Fatal(err)
	}
	if n := countKeys(t, st, "k/"); n != 2 {
		t.Fatalf("%d packs before the collection, want 2", n)
	}
	rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gc: %+v", rep)
	if rep.PacksRemoved != 2 || rep.PackBytesCarried == 0 || rep.Candidates != 6 {
		t.Errorf("report %+v: want 2 packs removed, bytes carried, 6 candidates", rep)
	}
	if n := countKeys(t, st, "k/"); n != 1 {
		t.Errorf("%d packs after the collection, want 1 (the live artifact's)", n)
	}
	for _, s := range []*s3store.Store{st, reader} {
		if got, err := asl.Get(ctx, s, keepRef, 0); err != nil || !bytes.Equal(got.Bytes, keep.Bytes) {
			t.Errorf("get of the live artifact after the repack = %v", err)
		}
		if v, ok, err := s.LookupIndex(ctx, entry.Space, entry.Key); err != nil || !ok || !bytes.Equal(v, entry.Value) {
			t.Errorf("lookup of the carried entry = %q, %v, %v", v, ok, err)
		}
		for _, a := range dead {
			if _, err := asl.Get(ctx, s, asl.MustDerive(asl.HashSHA256, a), 0); !errors.Is(err, asl.ErrNotFound) {
				t.Errorf("get of a collected artifact = %v, want ErrNotFound", err)
			}
		}
	}
	// rm of a packed artifact: its pack is rewritten without it; the
	// entry stays.
	if _, err := st.Unpin(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	if del, err := st.Delete(ctx, []asl.Reference{keepRef}); err != nil || !del[0] {
		t.Fatalf("Delete = %v, %v", del, err)
	}
	if _, err := asl.Get(ctx, reader, keepRef, 0); !errors.Is(err, asl.ErrNotFound) {
		t.Errorf("get after rm = %v, want ErrNotFound", err)
	}
	if v, ok, err := reader.LookupIndex(ctx, entry.Space, entry.Key); err != nil || !ok || !bytes.Equal(v, entry.Value) {
		t.Errorf("lookup after rm = %q, %v, %v", v, ok, err)
	}
}

// TestPackLoose: a bucket of layout version 3 (loose artifact objects and
// loose index entries) is moved into packs in place by gc --pack-loose;
// a collection stopped after the packs are written and before anything
// is removed loses nothing, and the next one finishes (SPECS.md §6.7,
// "Versions").
func TestPackLoose(t *testing.T) {
	t.Parallel()
	m := sharedServer(t)
	o := options(m)
	o.TouchAge = -1
	st := create(t, m, "packloose", o)
	ctx := t.Context()
	var refs []asl.Reference
	var arts []asl.Artifact
	for i := range 12 {
		a := asl.Tagged(asl.TypeTag(i), gen(uint64(700+i), 100*i))
		ref, err := asl.PutArtifact(ctx, st, asl.HashSHA256, a) // one put: a loose object
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Pin(ctx, "p"+string(rune('a'+i)), ref, asl.PinOptions{}); err != nil {
			t.Fatal(err)
		}
		refs, arts = append(refs, ref), append(arts, a)
	}
	// Loose entries as layout version 3 wrote them.
	entries := map[string]string{"k1": "v1", "k2": "v2", "a/b": "v3"}
	for k, v := range entries {
		key := st.IndexKey("surf.test", []byte(k))
		if _, err := st.Client().PutObject(ctx, st.Bucket(), key, bytes.NewReader([]byte(v)), int64(len(v)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		fresh, err := s3store.Open(ctx, st.Bucket(), st.Prefix(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		for i, ref := range refs {
			if got, err := asl.Get(ctx, fresh, ref, 0); err != nil || !bytes.Equal(got.Bytes, arts[i].Bytes) || got.Header() != arts[i].Header() {
				t.Fatalf("%s: get %s = %v", when, ref, err)
			}
		}
		for k, v := range entries {
			if got, ok, err := fresh.LookupIndex(ctx, "surf.test", []byte(k)); err != nil || !ok || string(got) != v {
				t.Fatalf("%s: lookup %q = %q, %v, %v", when, k, got, ok, err)
			}
		}
		n := 0
		if err := fresh.ScanIndex(ctx, "surf.test", nil, func(k, v []byte) error { n++; return nil }); err != nil || n != len(entries) {
			t.Fatalf("%s: scan = %d entries, %v", when, n, err)
		}
	}
	check("before")
	// Stopped between the writes and the removals.
	stop, cancel := context.WithCancel(ctx)
	if _, err := st.GC(stop, s3store.GCOptions{Grace: -1, PackLoose: true, BeforeSweep: cancel}); err == nil {
		t.Fatal("the stopped collection succeeded")
	}
	check("after a stopped collection")
	rep, err := st.GC(ctx, s3store.GCOptions{Grace: -1, PackLoose: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gc --pack-loose: %+v", rep)
	check("after")
	if n := countKeys(t, st, "a/"); n != 0 {
		t.Errorf("%d loose artifact objects left", n)
	}
	if n := countKeys(t, st, "i/"); n != 0 {
		t.Errorf("%d loose index entries left", n)
	}
}
