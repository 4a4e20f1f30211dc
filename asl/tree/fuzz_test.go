package tree_test

import (
	"bytes"
	"testing"

	"github.com/amduat/amduat/asl/tree"
)

// FuzzDecode: Decode never panics, and whatever it accepts Encode gives
// back byte for byte (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	good, _ := tree.Encode(example())
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := tree.Decode(b)
		if err != nil {
			return
		}
		again, err := tree.Encode(es)
		if err != nil {
			t.Fatalf("accepted tree does not re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted %x re-encodes to %x", b, again)
		}
	})
}
