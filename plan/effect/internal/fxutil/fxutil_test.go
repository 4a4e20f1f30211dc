package fxutil

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/amduat/amduat/asl/memstore"
)

func TestCanonical(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{map[string]any{"b": 1, "a": []string{"x", "y"}, "A": true}, `{"A":true,"a":["x","y"],"b":1}`},
		{"q\"\\\b\t\n\f\r\x01\x1f<>&\u2028é", `"q\"\\\b\t\n\f\r\u0001\u001f<>&` + "\u2028é\""},
		{"\xff", "\"\ufffd\""},
		{map[string]any{}, `{}`},
		{[]any{nil, 1.5, int64(1) << 60}, `[null,1.5,1152921504606846976]`},
	}
	for _, c := range cases {
		got, err := Canonical(c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%#v) = %s, %v; want %s", c.v, got, err, c.want)
		}
	}
}

func TestSpool(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	for _, n := range []int{0, 1, memSpool, memSpool + 1} {
		b := bytes.Repeat([]byte{'x'}, n)
		ref, got, err := Spool(ctx, st, bytes.NewReader(b), int64(n))
		if err != nil || got != int64(n) {
			t.Fatalf("%d bytes: %v %d", n, err, got)
		}
		rc, hdr, err := st.Fetch(ctx, ref)
		if err != nil || hdr.Size != uint64(n) {
			t.Fatalf("%d bytes: fetch %v %v", n, err, hdr)
		}
		back, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(back, b) {
			t.Fatalf("%d bytes: different bytes back", n)
		}
		if _, _, err := Spool(ctx, st, bytes.NewReader(append(b, 'y')), int64(n)); !errors.Is(err, ErrLimit) {
			t.Fatalf("%d+1 bytes under limit %d: err %v", n, n, err)
		}
	}
}

func TestCheckFileName(t *testing.T) {
	for _, ok := range []string{"a", "a.txt", "..a", "a..", "ü"} {
		if err := CheckFileName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "/a", "a\\b", "a\x00", string(make([]byte, 256))} {
		if err := CheckFileName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
