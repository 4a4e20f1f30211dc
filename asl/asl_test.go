package asl_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/enc"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestArtifactEncoding(t *testing.T) {
	tests := []struct {
		name string
		a    asl.Artifact
		hex  string
	}{
		{"untagged empty", asl.Untagged(nil), "00 0000000000000000"},
		{"untagged hello", asl.Untagged([]byte("hello")), "00 0000000000000005 68656c6c6f"},
		{"tagged empty", asl.Tagged(0x101, nil), "01 00000101 0000000000000000"},
		{"tagged max tag", asl.Tagged(0xffffffff, []byte{0}), "01 ffffffff 0000000000000001 00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.hex)
			got := asl.EncodeArtifact(tt.a)
			if !bytes.Equal(got, want) {
				t.Fatalf("EncodeArtifact = %x, want %x", got, want)
			}
			back, err := asl.DecodeArtifact(got)
			if err != nil {
				t.Fatalf("DecodeArtifact: %v", err)
			}
			if !bytes.Equal(back.Bytes, tt.a.Bytes) || back.HasTag != tt.a.HasTag || back.Tag != tt.a.Tag {
				t.Fatalf("round trip = %+v, want %+v", back, tt.a)
			}
		})
	}
}

func TestArtifactDecodeRejects(t *testing.T) {
	tests := []struct {
		name   string
		hex    string
		field  string
		offset int
	}{
		{"empty input", "", "has_type_tag", 0},
		{"flag 0x02", "02 0000000000000000", "has_type_tag", 0},
		{"flag 0xff", "ff", "has_type_tag", 0},
		{"truncated tag", "01 0000", "type_tag", 1},
		{"truncated length", "00 00000000", "bytes length", 1},
		{"length beyond end", "00 0000000000000002 61", "bytes", 1},
		{"length near 2^64", "00 ffffffffffffffff 61", "bytes", 1},
		{"trailing byte", "00 0000000000000000 00", "end of input", 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := asl.DecodeArtifact(unhex(t, tt.hex))
			var de *enc.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *enc.DecodeError", err)
			}
			if de.Field != tt.field || de.Offset != tt.offset {
				t.Fatalf("rejected at %s@%d (%v), want %s@%d", de.Field, de.Offset, err, tt.field, tt.offset)
			}
			if !errors.Is(err, enc.ErrMalformed) {
				t.Fatalf("err %v does not wrap enc.ErrMalformed", err)
			}
		})
	}
}

func TestDeriveMatchesSHA256OfArtifactBytes(t *testing.T) {
	for _, a := range []asl.Artifact{asl.Untagged(nil), asl.Untagged([]byte("hello")), asl.Tagged(7, []byte("x"))} {
		sum := sha256.Sum256(asl.EncodeArtifact(a))
		want := "0001" + hex.EncodeToString(sum[:])
		got := asl.MustDerive(asl.HashSHA256, a)
		if got.String() != want {
			t.Errorf("Derive(%+v) = %s, want %s", a, got, want)
		}
	}
	// Pinned independently with: printf "\0\0\0\0\0\0\0\0\0" | sha256sum
	const emptyRef = "00013e7077fd2f66d689e0cee6a7cf5b37bf2dca7c979af356d0a31cbc5c85605c7d"
	if got := asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)).String(); got != emptyRef {
		t.Errorf("empty artifact ref = %s, want %s", got, emptyRef)
	}
}

func TestReferenceDecode(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	tests := []struct {
		name    string
		hex     string
		ok      bool
		wantErr error
	}{
		{"sha256", "0001" + sha, true, nil},
		{"blake3", "8001" + sha, true, nil},
		{"unknown id, short digest", "7777" + "0102", true, nil},
		{"unknown id, empty digest", "7777", true, nil},
		{"one byte", "00", false, asl.ErrIntegrity},
		{"empty", "", false, asl.ErrIntegrity},
		{"reserved id", "0000" + sha, false, asl.ErrIntegrity},
		{"sha256 short digest", "0001" + sha[2:], false, asl.ErrIntegrity},
		{"sha256 long digest", "0001" + sha + "00", false, asl.ErrIntegrity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := unhex(t, tt.hex)
			ref, err := asl.DecodeReference(b)
			if tt.ok {
				if err != nil {
					t.Fatalf("DecodeReference: %v", err)
				}
				if !bytes.Equal(ref.Bytes(), b) {
					t.Fatalf("Bytes() = %x, want %x", ref.Bytes(), b)
				}
				back, err := asl.ParseReference(ref.String())
				if err != nil || back != ref {
					t.Fatalf("ParseReference(String()) = %v, %v; want %v", back, err, ref)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, enc.ErrMalformed) {
				t.Fatalf("err = %v, want %v and enc.ErrMalformed", err, tt.wantErr)
			}
		})
	}
}

func TestParseReferenceRejects(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, s := range []string{"", "00", "001", "0001" + strings.ToUpper(sha), "0001" + sha[:63] + "g", "0000" + sha, " 0001" + sha} {
		if _, err := asl.ParseReference(s); !errors.Is(err, asl.ErrIntegrity) {
			t.Errorf("ParseReference(%q) err = %v, want ErrIntegrity", s, err)
		}
	}
}

func TestReferenceComparable(t *testing.T) {
	a := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("a")))
	b := asl.MustParseReference(a.String())
	if a != b {
		t.Fatal("equal references compare unequal")
	}
	m := map[asl.Reference]int{a: 1}
	if m[b] != 1 {
		t.Fatal("reference does not key a map")
	}
	if asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("a"))) == a {
		t.Fatal("different hashes compare equal")
	}
}

func TestEncodedRef(t *testing.T) {
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged(nil))
	b := asl.AppendEncodedRef(nil, ref)
	if got := hex.EncodeToString(b[:4]); got != "00000022" {
		t.Fatalf("ref_len = %s, want 00000022", got)
	}
	back, err := asl.DecodeEncodedRef(b)
	if err != nil || back != ref {
		t.Fatalf("DecodeEncodedRef = %v, %v", back, err)
	}
	opt := asl.AppendOptionalEncodedRef(nil, ref, true)
	if r, ok, err := asl.DecodeOptionalEncodedRef(opt); err != nil || !ok || r != ref {
		t.Fatalf("DecodeOptionalEncodedRef = %v %v %v", r, ok, err)
	}
	if _, ok, err := asl.DecodeOptionalEncodedRef([]byte{0}); err != nil || ok {
		t.Fatalf("absent optional ref = %v %v", ok, err)
	}
	rejects := []struct {
		name, hex, field string
		opt              bool
	}{
		{"ref_len 0", "00000000", "encoded_ref.ref_len", false},
		{"ref_len 1", "00000001 00", "encoded_ref.ref_len", false},
		{"ref_len beyond end", "00000005 0001", "encoded_ref.ref_len", false},
		{"reserved hash inside", "00000002 0000", "encoded_ref.hash_id", false},
		{"trailing", "00000002 7777 00", "end of input", false},
		{"flag 2", "02", "optional_ref.has_ref", true},
		{"truncated after flag", "01", "optional_ref.ref_len", true},
		{"optional trailing", "00 00", "end of input", true},
	}
	for _, tt := range rejects {
		var err error
		if tt.opt {
			_, _, err = asl.DecodeOptionalEncodedRef(unhex(t, tt.hex))
		} else {
			_, err = asl.DecodeEncodedRef(unhex(t, tt.hex))
		}
		var de *enc.DecodeError
		if !errors.As(err, &de) || de.Field != tt.field {
			t.Errorf("%s: err = %v, want field %s", tt.name, err, tt.field)
		}
	}
}

func TestHasherLengthMismatch(t *testing.T) {
	h, err := asl.NewHasher(asl.HashSHA256, asl.Header{Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	h.Write([]byte("ab"))
	if _, err := h.Sum(); err == nil {
		t.Fatal("Sum accepted a short payload")
	}
	if _, err := asl.NewHasher(0x7777, asl.Header{}); !errors.Is(err, asl.ErrUnsupported) {
		t.Fatalf("unknown hash err = %v, want ErrUnsupported", err)
	}
}
