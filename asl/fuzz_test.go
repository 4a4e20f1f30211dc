package asl_test

import (
	"bytes"
	"testing"

	"github.com/amduat/amduat/asl"
)

func FuzzDecodeArtifact(f *testing.F) {
	for _, s := range [][]byte{nil, {0}, {1}, {2}, asl.EncodeArtifact(asl.Untagged([]byte("hello"))), asl.EncodeArtifact(asl.Tagged(0x101, nil)), {0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := asl.DecodeArtifact(b)
		if err != nil {
			return
		}
		if !bytes.Equal(asl.EncodeArtifact(a), b) {
			t.Fatalf("accepted non-canonical bytes %x", b)
		}
	})
}

func FuzzDecodeReference(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1})
	f.Add(asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)).Bytes())
	f.Add(asl.MustDerive(asl.HashBLAKE3, asl.Untagged(nil)).Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		ref, err := asl.DecodeReference(b)
		if err != nil {
			return
		}
		if !bytes.Equal(ref.Bytes(), b) {
			t.Fatalf("round trip %x != %x", ref.Bytes(), b)
		}
		back, err := asl.ParseReference(ref.String())
		if err != nil || back != ref {
			t.Fatalf("text round trip failed: %v", err)
		}
	})
}

func FuzzParseReference(f *testing.F) {
	f.Add("0001" + "00")
	f.Add(asl.MustDerive(asl.HashSHA256, asl.Untagged(nil)).String())
	f.Add("ABCD")
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := asl.ParseReference(s)
		if err == nil && ref.String() != s {
			t.Fatalf("accepted non-canonical text %q", s)
		}
	})
}

func FuzzDecodeEncodedRef(f *testing.F) {
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged(nil))
	f.Add(asl.AppendEncodedRef(nil, ref), false)
	f.Add(asl.AppendOptionalEncodedRef(nil, ref, true), true)
	f.Add([]byte{0}, true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, false)
	f.Fuzz(func(t *testing.T, b []byte, optional bool) {
		if optional {
			r, ok, err := asl.DecodeOptionalEncodedRef(b)
			if err == nil && !bytes.Equal(asl.AppendOptionalEncodedRef(nil, r, ok), b) {
				t.Fatalf("optional ref round trip mismatch for %x", b)
			}
			return
		}
		r, err := asl.DecodeEncodedRef(b)
		if err == nil && !bytes.Equal(asl.AppendEncodedRef(nil, r), b) {
			t.Fatalf("encoded ref round trip mismatch for %x", b)
		}
	})
}
