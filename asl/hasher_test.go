package asl

import (
	"errors"
	"testing"
)

func TestHasherResetMatches(t *testing.T) {
	var h Hasher
	for _, c := range []struct {
		id HashID
		a  Artifact
	}{{HashSHA256, Untagged([]byte("hello"))}, {HashBLAKE3, Tagged(7, []byte("x"))}, {HashSHA256, Tagged(0, nil)}, {HashSHA256, Untagged([]byte("hello"))}} {
		ref := MustDerive(c.id, c.a)
		if err := h.Reset(c.id, c.a.Header()); err != nil {
			t.Fatal(err)
		}
		if h.Matches(ref) && len(c.a.Bytes) > 0 {
			t.Fatal("matched before the payload was written")
		}
		h.Write(c.a.Bytes)
		if !h.Matches(ref) {
			t.Fatalf("%s: no match", ref)
		}
		if got, err := h.Sum(); err != nil || got != ref {
			t.Fatalf("Sum after Matches: %s, %v", got, err)
		}
		other := MustDerive(c.id, Untagged([]byte("other")))
		if h.Matches(other) {
			t.Fatal("matched another reference")
		}
	}
	if err := h.Reset(0x7777, Header{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Reset with an unregistered id: %v", err)
	}
	a := Untagged(make([]byte, 1024))
	ref := MustDerive(HashSHA256, a)
	if n := testing.AllocsPerRun(100, func() {
		h.Reset(HashSHA256, a.Header())
		h.Write(a.Bytes)
		if !h.Matches(ref) {
			t.Fatal("no match")
		}
	}); n != 0 {
		t.Fatalf("Reset+Write+Matches allocates %v times", n)
	}
}
