package pebblestore

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
)

func TestIndexer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	arts := []asl.Artifact{asl.Untagged([]byte("one")), asl.Tagged(7, []byte("two"))}
	before := s.commits.Load()
	refs, err := s.PutIndexed(ctx, asl.HashSHA256, arts, []asl.IndexEntry{
		{Space: "a", Key: []byte("k2"), Value: []byte("v2")},
		{Space: "a", Key: []byte("k1"), Value: []byte("v1")},
		{Space: "ab", Key: []byte("k1"), Value: []byte("other space")},
		{Space: "a", Key: []byte{0xff, 0xff}, Value: []byte("high key")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Fatalf("%d synced commits for artifacts and entries, want 1", n)
	}
	if got := get(t, s, refs[1]); string(got.Bytes) != "two" {
		t.Fatalf("artifact = %q", got.Bytes)
	}
	if v, ok, err := s.LookupIndex(ctx, "a", []byte("k1")); !ok || err != nil || string(v) != "v1" {
		t.Fatalf("LookupIndex = %q %v %v", v, ok, err)
	}
	if _, ok, err := s.LookupIndex(ctx, "a", []byte("k3")); ok || err != nil {
		t.Fatalf("absent key: %v %v", ok, err)
	}
	var got []string
	if err := s.ScanIndex(ctx, "a", nil, func(k, v []byte) error { got = append(got, fmt.Sprintf("%x=%s", k, v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[6b31=v1 6b32=v2 ffff=high key]" {
		t.Fatalf("ScanIndex(a) = %v", got)
	}
	got = nil
	s.ScanIndex(ctx, "a", []byte{0xff}, func(k, v []byte) error { got = append(got, string(v)); return nil })
	if fmt.Sprint(got) != "[high key]" {
		t.Fatalf("ScanIndex(a, ff) = %v", got)
	}
	// Entries alone, and an overwrite.
	if _, err := s.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{{Space: "a", Key: []byte("k1"), Value: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.LookupIndex(ctx, "a", []byte("k1")); string(v) != "new" {
		t.Fatalf("overwritten value = %q", v)
	}
	if _, err := s.PutIndexed(ctx, asl.HashSHA256, nil, []asl.IndexEntry{{Space: "bad\x00space"}}); err == nil {
		t.Fatal("a space with NUL was accepted")
	}
}

func TestIndexEntriesSurviveCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s, err := Create("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("durable"))},
		[]asl.IndexEntry{{Space: "surf.trace", Key: []byte("r"), Value: []byte("t")}})
	if err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	s2, err := Open("store", &Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v, ok, err := s2.LookupIndex(ctx, "surf.trace", []byte("r")); !ok || err != nil || string(v) != "t" {
		t.Fatalf("entry after crash: %q %v %v", v, ok, err)
	}
	if got := get(t, s2, ref[0]); string(got.Bytes) != "durable" {
		t.Fatalf("artifact after crash: %q", got.Bytes)
	}
}
