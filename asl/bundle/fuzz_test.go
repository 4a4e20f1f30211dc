package bundle_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/bundle"
)

// FuzzReader: the reader never panics, and whatever it accepts re-encodes
// to the same bytes.
func FuzzReader(f *testing.F) {
	good, _ := build(f, asl.HashSHA256, []asl.Artifact{{Bytes: []byte("hello")}, {Bytes: []byte("hi"), HasTag: true, Tag: 0x101}}, 0, 1)
	f.Add(good)
	f.Add(good[:len(good)-1])
	empty, _ := build(f, asl.HashSHA256, nil)
	f.Add(empty)
	f.Add([]byte("AMDUATBN\x00\x01\x00\x00\x01\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		arts, refs, roots, err := readAll(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		w, _ := bundle.NewWriter(&buf)
		for i, a := range arts {
			if err := w.Add(refs[i], a.Header(), bytes.NewReader(a.Bytes)); err != nil {
				t.Fatalf("accepted entry %d does not re-encode: %v", i, err)
			}
		}
		if err := w.Close(roots); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), b) {
			t.Fatalf("accepted bundle re-encodes differently")
		}
		_ = io.EOF
	})
}
