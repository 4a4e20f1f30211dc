package aslutil_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/amduat/amduat/asl/memstore"
)

func putAll(t *testing.T, s *memstore.Store, arts ...asl.Artifact) []asl.Reference {
	t.Helper()
	refs, err := s.PutBatch(context.Background(), asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

func TestListFilters(t *testing.T) {
	s := memstore.New()
	putAll(t, s,
		asl.Artifact{Bytes: []byte("hello")},
		asl.Artifact{Bytes: []byte("hi"), HasTag: true, Tag: 0x101},
		asl.Artifact{Bytes: make([]byte, 2000), HasTag: true, Tag: 0x101},
		asl.Artifact{Bytes: nil, HasTag: true, Tag: 0},
	)
	cases := []struct {
		name string
		f    aslutil.Filter
		want int
	}{
		{"all", aslutil.Filter{}, 4},
		{"tag 0x101", aslutil.Filter{HasTag: true, Tag: 0x101}, 2},
		{"tag 0 is not untagged", aslutil.Filter{HasTag: true, Tag: 0}, 1},
		{"untagged", aslutil.Filter{Untagged: true}, 1},
		{"min 3", aslutil.Filter{MinSize: 3}, 2},
		{"max 2", aslutil.Filter{MaxSize: 2, HasMax: true}, 2},
		{"max 0", aslutil.Filter{MaxSize: 0, HasMax: true}, 1},
		{"tag and min", aslutil.Filter{HasTag: true, Tag: 0x101, MinSize: 3}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []asl.Reference
			if err := aslutil.List(context.Background(), s, tc.f, func(in asl.Info) error {
				got = append(got, in.Ref)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("got %d artifacts, want %d", len(got), tc.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i-1].String() >= got[i].String() {
					t.Fatalf("not in reference order: %s then %s", got[i-1], got[i])
				}
			}
		})
	}
}

func TestUsage(t *testing.T) {
	s := memstore.New()
	putAll(t, s,
		asl.Artifact{Bytes: []byte("hello")},
		asl.Artifact{Bytes: []byte("hi"), HasTag: true, Tag: 0x103},
		asl.Artifact{Bytes: []byte("abc"), HasTag: true, Tag: 0x101},
		asl.Artifact{Bytes: []byte("abcd"), HasTag: true, Tag: 0x101},
	)
	u, err := aslutil.Usage(context.Background(), s, aslutil.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Total.Count != 4 || u.Total.Bytes != 14 {
		t.Fatalf("total %+v", u.Total)
	}
	if len(u.ByTag) != 3 || u.ByTag[0].HasTag || u.ByTag[1].Tag != 0x101 || u.ByTag[1].Count != 2 || u.ByTag[1].Bytes != 7 || u.ByTag[2].Tag != 0x103 {
		t.Fatalf("rows %+v", u.ByTag)
	}
	if u.ByHash[asl.HashSHA256] != 4 {
		t.Fatalf("by hash %v", u.ByHash)
	}
}

func TestResolvePrefix(t *testing.T) {
	s := memstore.New()
	// Enough artifacts that some share 8-digit prefixes ("0001" + 1 byte + ...).
	var arts []asl.Artifact
	for i := 0; i < 600; i++ {
		arts = append(arts, asl.Artifact{Bytes: []byte{byte(i), byte(i >> 8)}})
	}
	refs := putAll(t, s, arts...)
	ctx := context.Background()
	// Every full text's 12-digit prefix that is unique resolves to it.
	count := map[string]int{}
	for _, r := range refs {
		count[r.String()[:8]]++
	}
	var ambiguous string
	for _, r := range refs {
		txt := r.String()
		got, err := aslutil.ResolvePrefix(ctx, s, txt[:20])
		if err != nil || got != r {
			t.Fatalf("%s: got %v, %v", txt[:20], got, err)
		}
		got, err = aslutil.ResolvePrefix(ctx, s, txt[:10]+"..."+txt[60:])
		if count[txt[:8]] == 1 && (err != nil || got != r) {
			t.Fatalf("prefix...suffix: %v %v", got, err)
		}
		if count[txt[:8]] > 1 {
			ambiguous = txt[:8]
		}
	}
	if ambiguous == "" {
		t.Fatal("test needs an ambiguous 8-digit prefix")
	}
	_, err := aslutil.ResolvePrefix(ctx, s, ambiguous)
	var amb *aslutil.AmbiguousError
	if !errors.As(err, &amb) || len(amb.Candidates) < 2 || !errors.Is(err, aslutil.ErrAmbiguous) {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	for _, c := range amb.Candidates {
		if !strings.HasPrefix(c.String(), ambiguous) {
			t.Fatalf("candidate %s lacks prefix %s", c, ambiguous)
		}
	}
	// Odd-length prefixes, "…", absent prefixes, unregistered hash ids.
	r0 := refs[0].String()
	if got, err := aslutil.ResolvePrefix(ctx, s, r0[:21]+"…"); err != nil || got != refs[0] {
		t.Fatalf("odd prefix with …: %v %v", got, err)
	}
	for _, p := range []string{"0001ffffffffffffff", "00020000", "ffff1234", "00010000000000"} {
		if _, err := aslutil.ResolvePrefix(ctx, s, p); !errors.Is(err, asl.ErrNotFound) {
			t.Fatalf("%s: %v, want ErrNotFound", p, err)
		}
	}
	for _, p := range []string{"0001", "0001abc", "0001ABCD", "xyz12345"} {
		if _, err := aslutil.ResolvePrefix(ctx, s, p); err == nil || errors.Is(err, asl.ErrNotFound) {
			t.Fatalf("%s: %v, want a malformed-prefix error", p, err)
		}
	}
	if aslutil.IsAbbreviated(r0) || !aslutil.IsAbbreviated(r0[:8]) || aslutil.IsAbbreviated("0001abc") {
		t.Fatal("IsAbbreviated")
	}
}

// The seek start lies below every matching reference even at the bottom of
// a hash id's range.
func TestResolvePrefixZeroDigest(t *testing.T) {
	s := memstore.New()
	ctx := context.Background()
	r, _ := asl.NewReference(asl.HashSHA256, make([]byte, 32))
	_, err := aslutil.ResolvePrefix(ctx, s, r.String()[:12])
	if !errors.Is(err, asl.ErrNotFound) {
		t.Fatal(err)
	}
}
