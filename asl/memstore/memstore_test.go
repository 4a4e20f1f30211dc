package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/memstore"
)

func TestRoundTripAndErrors(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	a := asl.Tagged(9, []byte("payload"))
	ref, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
	if err != nil {
		t.Fatal(err)
	}
	if want := asl.MustDerive(asl.HashSHA256, a); ref != want {
		t.Fatalf("Put ref = %s, want %s", ref, want)
	}
	got, err := asl.Get(ctx, s, ref, 0)
	if err != nil || !bytes.Equal(got.Bytes, a.Bytes) || got.Tag != 9 || !got.HasTag {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	missing := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent")))
	if _, err := s.Stat(ctx, missing); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if ok, err := asl.Has(ctx, s, missing); ok || err != nil {
		t.Fatalf("Has(missing) = %v, %v", ok, err)
	}
	unknown, _ := asl.DecodeReference([]byte{0x77, 0x77, 1})
	if _, _, err := s.Fetch(ctx, unknown); !errors.Is(err, asl.ErrUnsupported) {
		t.Fatalf("Fetch(unknown hash) = %v, want ErrUnsupported", err)
	}
	if _, err := s.Put(ctx, asl.HashSHA256, asl.Header{Size: 10}, bytes.NewReader([]byte("short"))); err == nil {
		t.Fatal("Put accepted a payload shorter than its header")
	}
	s.Corrupt(ref, []byte("pAyload"))
	if _, _, err := s.Fetch(ctx, ref); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("Fetch(corrupt) = %v, want ErrIntegrity", err)
	}
}

func TestEnumerateOrderAndAfter(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	var arts []asl.Artifact
	for i := 0; i < 20; i++ {
		arts = append(arts, asl.Untagged([]byte(fmt.Sprint(i))))
	}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	var seen []asl.Reference
	s.Enumerate(ctx, asl.Reference{}, func(i asl.Info) error { seen = append(seen, i.Ref); return nil })
	if len(seen) != len(refs) {
		t.Fatalf("enumerated %d, want %d", len(seen), len(refs))
	}
	for i := 1; i < len(seen); i++ {
		if bytes.Compare(seen[i-1].Bytes(), seen[i].Bytes()) >= 0 {
			t.Fatal("enumeration not in ascending ReferenceBytes order")
		}
	}
	var rest int
	s.Enumerate(ctx, seen[4], func(asl.Info) error { rest++; return nil })
	if rest != len(seen)-5 {
		t.Fatalf("after 5th: %d, want %d", rest, len(seen)-5)
	}
}

func TestConcurrentPutGet(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				a := asl.Untagged([]byte(fmt.Sprintf("%d", i%50)))
				ref, err := asl.PutArtifact(ctx, s, asl.HashSHA256, a)
				if err != nil {
					t.Error(err)
					return
				}
				rc, _, err := s.Fetch(ctx, ref)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(rc)
				if !bytes.Equal(b, a.Bytes) {
					t.Errorf("goroutine %d read %q, want %q", g, b, a.Bytes)
				}
			}
		}(g)
	}
	wg.Wait()
	if s.Len() != 50 {
		t.Fatalf("Len = %d, want 50 (puts are idempotent)", s.Len())
	}
}

func TestVerifyReaderWithholdsDamagedBytes(t *testing.T) {
	a := asl.Untagged([]byte("abcdef"))
	ref := asl.MustDerive(asl.HashSHA256, a)
	r, err := asl.VerifyReader(ref, a.Header(), bytes.NewReader([]byte("abcdeX")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("err = %v, want ErrIntegrity", err)
	}
	if bytes.Contains(b, []byte("X")) {
		t.Fatalf("damaged byte was returned: %q", b)
	}
	r, _ = asl.VerifyReader(ref, a.Header(), bytes.NewReader(a.Bytes))
	if b, err := io.ReadAll(r); err != nil || !bytes.Equal(b, a.Bytes) {
		t.Fatalf("clean read = %q, %v", b, err)
	}
}

func TestIndex(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	refs, err := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("r"))}, []asl.IndexEntry{
		{Space: "a", Key: []byte("k2"), Value: []byte("v2")},
		{Space: "a", Key: []byte("k1"), Value: []byte("v1")},
		{Space: "ab", Key: []byte("k1"), Value: []byte("other space")},
	})
	if err != nil || len(refs) != 1 {
		t.Fatal(refs, err)
	}
	if v, ok, err := s.LookupIndex(ctx, "a", []byte("k1")); !ok || err != nil || string(v) != "v1" {
		t.Fatalf("LookupIndex = %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.LookupIndex(ctx, "a", []byte("k3")); ok {
		t.Fatal("absent key found")
	}
	var got []string
	s.ScanIndex(ctx, "a", []byte("k"), func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil })
	if fmt.Sprint(got) != "[k1=v1 k2=v2]" {
		t.Fatalf("ScanIndex = %v", got)
	}
}
