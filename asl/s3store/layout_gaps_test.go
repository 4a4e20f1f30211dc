package s3store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestEscapeSpaceUppercase: index space names escape every byte outside
// A-Z a-z 0-9 . _ - as %XX with uppercase hex digits (SPECS.md §6.7).
func TestEscapeSpaceUppercase(t *testing.T) {
	if got := escapeSpace("surf.trace"); got != "surf.trace" {
		t.Errorf("escapeSpace(surf.trace) = %s", got)
	}
	if got, want := escapeSpace("a/b c~\xff"), "a%2Fb%20c%7E%FF"; got != want {
		t.Errorf("escapeSpace = %s, want %s", got, want)
	}
}

// TestManifestPartSizes (SPECS.md §6.7): a manifest whose payload is no
// larger than part_size (one part, which this implementation never writes)
// is accepted; when bytes_len is a multiple of part_size the last part is
// a full part_size; a count that disagrees is refused.
func TestManifestPartSizes(t *testing.T) {
	for _, c := range []struct {
		size, part uint64
		count      int
		last       int
		ok         bool
	}{
		{3, 4, 1, 3, true},  // smaller than one part
		{4, 4, 1, 4, true},  // exactly one part
		{8, 4, 2, 4, true},  // the last part is full
		{9, 4, 3, 1, true},  // the last part is short
		{8, 4, 3, 0, false}, // one part too many
		{8, 4, 1, 0, false}, // one part too few
	} {
		m := &manifest{hdr: asl.Header{Size: c.size}, partSize: c.part, digests: make([][32]byte, c.count)}
		b := m.encode()
		d, err := decodeManifest(b)
		if !c.ok {
			if !errors.Is(err, asl.ErrIntegrity) {
				t.Errorf("size %d part %d count %d: %v, want ErrIntegrity", c.size, c.part, c.count, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(d.encode(), b) || d.partLen(c.count-1) != c.last {
			t.Errorf("size %d part %d: %v, last part %d want %d", c.size, c.part, err, d.partLen(c.count-1), c.last)
		}
	}
}
