package bundle_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/bundle"
	"github.com/amduat/amduat/asl/memstore"
)

func build(t testing.TB, id asl.HashID, arts []asl.Artifact, rootIdx ...int) ([]byte, []asl.Reference) {
	t.Helper()
	var buf bytes.Buffer
	w, err := bundle.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var refs []asl.Reference
	for _, a := range arts {
		ref, err := w.AddArtifact(id, a)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	var roots []asl.Reference
	for _, i := range rootIdx {
		roots = append(roots, refs[i])
	}
	if err := w.Close(roots); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), refs
}

type readEntry struct {
	ref  asl.Reference
	art  asl.Artifact
	root bool
}

func readAll(b []byte) ([]asl.Artifact, []asl.Reference, []asl.Reference, error) {
	r, err := bundle.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, nil, err
	}
	var arts []asl.Artifact
	var refs []asl.Reference
	for {
		e, err := r.Next()
		if err == io.EOF {
			return arts, refs, r.Roots(), nil
		}
		if err != nil {
			return arts, refs, nil, err
		}
		p, err := io.ReadAll(r)
		if err != nil {
			return arts, refs, nil, err
		}
		arts = append(arts, asl.Artifact{Bytes: p, Tag: e.Header.Tag, HasTag: e.Header.HasTag})
		refs = append(refs, e.Ref)
	}
}

func TestRoundTrip(t *testing.T) {
	arts := []asl.Artifact{
		{Bytes: []byte("hello")},
		{Bytes: []byte("hi"), HasTag: true, Tag: 0x101},
		{},
		{Bytes: bytes.Repeat([]byte{7}, 1<<20)},
	}
	for _, id := range []asl.HashID{asl.HashSHA256, asl.HashBLAKE3} {
		b, refs := build(t, id, arts, 1, 0)
		got, gotRefs, roots, err := readAll(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(arts) || len(roots) != 2 || roots[0] != refs[1] || roots[1] != refs[0] {
			t.Fatalf("got %d artifacts, roots %v", len(got), roots)
		}
		for i := range arts {
			if gotRefs[i] != refs[i] || !bytes.Equal(got[i].Bytes, arts[i].Bytes) || got[i].HasTag != arts[i].HasTag || got[i].Tag != arts[i].Tag {
				t.Fatalf("entry %d differs", i)
			}
		}
	}
}

// The worked example of SPECS.md §19.4, byte for byte.
func TestSpecExample(t *testing.T) {
	b, _ := build(t, asl.HashSHA256, []asl.Artifact{{Bytes: []byte("hello")}}, 0)
	want := "414d44554154424e" + "0001" + "0000" +
		"01" + "00000022" + "00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4" +
		"00" + "0000000000000005" + "68656c6c6f" +
		"00" + "00000001" + "00000022" + "00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4" +
		"0000000000000001"
	got := hex.EncodeToString(b)
	if !strings.HasPrefix(got, want) || len(got) != len(want)+64 {
		t.Fatalf("bundle\n%s\nwant prefix\n%s", got, want)
	}
	t.Logf("digest %s", got[len(want):])
}

func TestRejections(t *testing.T) {
	good, _ := build(t, asl.HashSHA256, []asl.Artifact{{Bytes: []byte("hello")}, {Bytes: []byte("hi"), HasTag: true, Tag: 5}}, 0)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name  string
		b     []byte
		field string
		class error
		entry int64
	}{
		{"empty", nil, "magic", bundle.ErrTruncated, -1},
		{"bad magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), "magic", nil, -1},
		{"version 2", mut(func(b []byte) []byte { b[9] = 2; return b }), "version", asl.ErrUnsupported, -1},
		{"flags", mut(func(b []byte) []byte { b[11] = 1; return b }), "flags", nil, -1},
		{"entry tag", mut(func(b []byte) []byte { b[12] = 2; return b }), "entry.tag", nil, 0},
		{"ref_len 1", mut(func(b []byte) []byte { b[16] = 1; return b }), "entry.ref.ref_len", nil, 0},
		{"reserved hash", mut(func(b []byte) []byte { b[18] = 0; return b }), "entry.ref.hash_id", asl.ErrIntegrity, 0},
		{"unregistered hash", mut(func(b []byte) []byte { b[17] = 0x7f; return b }), "entry.ref.hash_id", asl.ErrUnsupported, 0},
		{"payload flipped", mut(func(b []byte) []byte { b[12+1+4+34+9] ^= 1; return b }), "entry.artifact", asl.ErrIntegrity, 0},
		{"digest byte flipped in ref", mut(func(b []byte) []byte { b[20] ^= 1; return b }), "entry.artifact", asl.ErrIntegrity, 0},
		{"has_type_tag 2", mut(func(b []byte) []byte { b[12+1+4+34] = 2; return b }), "entry.artifact.has_type_tag", nil, 0},
		{"truncated in payload", good[:12+1+4+34+9+3], "entry.artifact.bytes", bundle.ErrTruncated, 0},
		{"truncated before trailer", good[:len(good)-32-8-4-38-1], "entry.tag", bundle.ErrTruncated, 2},
		{"truncated digest", good[:len(good)-1], "digest", bundle.ErrTruncated, -1},
		{"no digest", good[:len(good)-32], "digest", bundle.ErrTruncated, -1},
		{"entry count", mut(func(b []byte) []byte { b[len(b)-33]++; return b }), "entry_count", asl.ErrIntegrity, -1},
		{"digest", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "digest", asl.ErrIntegrity, -1},
		{"root changed", mut(func(b []byte) []byte { b[len(b)-32-8-1] ^= 1; return b }), "digest", asl.ErrIntegrity, -1},
		{"trailing byte", append(append([]byte(nil), good...), 0), "end of input", nil, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := readAll(tc.b)
			var be *bundle.Error
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want *bundle.Error", err)
			}
			if be.Field != tc.field || be.Entry != tc.entry || (tc.class != nil && !errors.Is(err, tc.class)) {
				t.Fatalf("err = %v (field %q entry %d), want field %q entry %d class %v", err, be.Field, be.Entry, tc.field, tc.entry, tc.class)
			}
		})
	}
}

// A damaged payload is never returned whole: the final bytes are withheld.
func TestDamagedPayloadWithheld(t *testing.T) {
	payload := bytes.Repeat([]byte("abcdefgh"), 1000)
	b, _ := build(t, asl.HashSHA256, []asl.Artifact{{Bytes: payload}})
	b[len(b)-32-8-4-1-10] ^= 0xff // inside the payload's tail
	r, err := bundle.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if !errors.Is(err, asl.ErrIntegrity) || len(got) >= len(payload) {
		t.Fatalf("read %d of %d bytes, err %v", len(got), len(payload), err)
	}
}

func TestWriterRefusesWrongBytes(t *testing.T) {
	var buf bytes.Buffer
	w, _ := bundle.NewWriter(&buf)
	ref := asl.MustDerive(asl.HashSHA256, asl.Artifact{Bytes: []byte("hello")})
	err := w.Add(ref, asl.Header{Size: 5}, strings.NewReader("hellp"))
	if !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("err = %v", err)
	}
	w2, _ := bundle.NewWriter(&buf)
	if err := w2.Add(ref, asl.Header{Size: 5}, strings.NewReader("hell")); err == nil {
		t.Fatal("short payload accepted")
	}
}

func TestImportStoresOnlyVerified(t *testing.T) {
	ctx := context.Background()
	var arts []asl.Artifact
	for i := 0; i < 50; i++ {
		arts = append(arts, asl.Artifact{Bytes: bytes.Repeat([]byte{byte(i)}, 100+i)})
	}
	arts = append(arts, asl.Artifact{Bytes: bytes.Repeat([]byte{9}, 3000), HasTag: true, Tag: 3})
	good, refs := build(t, asl.HashSHA256, arts, 50)

	s := memstore.New()
	st, err := bundle.Import(ctx, s, bytes.NewReader(good), bundle.ImportOptions{BatchCount: 7, StreamAbove: 1000})
	if err != nil || st.Stored != 51 || st.Entries != 51 || len(st.Roots) != 1 || st.Roots[0] != refs[50] {
		t.Fatalf("import: %+v %v", st, err)
	}
	for _, r := range refs {
		if ok, _ := asl.Has(ctx, s, r); !ok {
			t.Fatalf("%s not stored", r)
		}
	}
	// Damage entry 20's payload: entries before it are stored, 20 and
	// later are not, and the error names entry 20.
	bad := append([]byte(nil), good...)
	off := 12
	for i := 0; i < 20; i++ {
		off += 1 + 4 + 34 + 9 + 100 + i
	}
	bad[off+1+4+34+9+5] ^= 1
	for _, so := range []int64{1000, 10} { // batched and streamed
		s := memstore.New()
		st, err := bundle.Import(ctx, s, bytes.NewReader(bad), bundle.ImportOptions{BatchCount: 7, StreamAbove: so})
		var be *bundle.Error
		if !errors.As(err, &be) || be.Entry != 20 || be.Ref != refs[20] || !errors.Is(err, asl.ErrIntegrity) {
			t.Fatalf("streamAbove %d: err %v", so, err)
		}
		if st.Stored != 20 {
			t.Fatalf("stored %d, want 20", st.Stored)
		}
		for i, r := range refs {
			ok, _ := asl.Has(ctx, s, r)
			if ok != (i < 20) {
				t.Fatalf("entry %d stored=%v", i, ok)
			}
		}
	}
	// Truncated: everything before the cut that verified is stored; the
	// error says the bundle ends early.
	s = memstore.New()
	_, err = bundle.Import(ctx, s, bytes.NewReader(good[:len(good)-50]), bundle.ImportOptions{})
	if !errors.Is(err, bundle.ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestExport(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	arts := []asl.Artifact{{Bytes: []byte("a")}, {Bytes: []byte("bb"), HasTag: true, Tag: 1}}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := bundle.Export(ctx, s, &buf, refs, refs[:1], nil)
	if err != nil || st.Entries != 2 || st.Bytes != 3 {
		t.Fatalf("%+v %v", st, err)
	}
	want, _ := build(t, asl.HashSHA256, arts, 0)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("Export and Writer disagree")
	}
	missing := asl.MustDerive(asl.HashSHA256, asl.Artifact{Bytes: []byte("nope")})
	if _, err := bundle.Export(ctx, s, io.Discard, []asl.Reference{missing}, nil, nil); !errors.Is(err, asl.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}
