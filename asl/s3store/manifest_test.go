package s3store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/bits"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
)

func exampleManifest() *manifest {
	m := &manifest{hdr: asl.Header{HasTag: true, Tag: 0x101, Size: 10}, partSize: 4, digests: make([][32]byte, 3)}
	for i := range m.digests {
		m.digests[i] = [32]byte(bytes.Repeat([]byte{byte(0xa1 + i)}, 32))
	}
	return m
}

// TestManifestExample checks the worked example of SPECS.md §6.7 byte for
// byte.
func TestManifestExample(t *testing.T) {
	want := strings.Join([]string{
		"616d647333 6d6601",            // magic "amds3mf" 01
		"01 00000101 000000000000000a", // header: tagged 0x101, size 10
		"0000000000000004",             // part size 4
		"00000003",                     // 3 parts
		strings.Repeat("a1", 32), strings.Repeat("a2", 32), strings.Repeat("a3", 32),
	}, "")
	wantB, err := hex.DecodeString(strings.ReplaceAll(want, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	m := exampleManifest()
	if got := m.encode(); !bytes.Equal(got, wantB) {
		t.Fatalf("encode = %x\nwant     %x", got, wantB)
	}
	d, err := decodeManifest(wantB)
	if err != nil || !bytes.Equal(d.encode(), wantB) || d.partLen(2) != 2 {
		t.Fatalf("decode = %+v, %v", d, err)
	}
}

func TestManifestRejects(t *testing.T) {
	good := exampleManifest().encode()
	set := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] = v; return b }
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"Empty", nil},
		{"Magic", set(6, 'x')},
		{"Version", set(7, 2)},
		{"Flag", set(8, 2)},
		{"ZeroSize", func() []byte { b := bytes.Clone(good); copy(b[13:21], make([]byte, 8)); return b }()},
		{"ZeroPartSize", set(28, 0)},
		{"Count", set(32, 4)},
		{"Short", good[:len(good)-1]},
		{"Long", append(bytes.Clone(good), 0)},
		{"HeaderCut", good[:12]},
		// ⌈(2^64-1)/2⌉ is 2^63 parts (too many), not the 0 that
		// (size+part_size-1)/part_size gives when the sum wraps.
		{"CountWraps", unhex(t, "616d6473336d6601"+"00ffffffffffffffff"+"0000000000000002"+"00000000")},
		{"CountWrapsLargeParts", unhex(t, "616d6473336d6601"+"00ffffffffffffffff"+"8000000000000001"+"00000000")},
	} {
		if _, err := decodeManifest(c.b); !errors.Is(err, asl.ErrIntegrity) {
			t.Errorf("%s: decode = %v, want ErrIntegrity", c.name, err)
		}
	}
}

// FuzzManifest: any bytes decode to a manifest that encodes back to them,
// or are refused with ErrIntegrity; never a panic or a huge allocation.
func FuzzManifest(f *testing.F) {
	f.Add(exampleManifest().encode())
	f.Add([]byte("amds3mf\x01\x00"))
	f.Add(append([]byte("amds3mf\x01\x00\x00\x00\x00\x00\x00\x00\x00\x10"), make([]byte, 12)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			if !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("decode error %v is no ErrIntegrity", err)
			}
			return
		}
		if !bytes.Equal(m.encode(), b) {
			t.Fatalf("re-encoding differs")
		}
		// The parts cover the payload exactly: (count-1) × part_size <
		// bytes_len <= count × part_size, computed without wrapping.
		n := uint64(len(m.digests))
		hi, lo := bits.Mul64(n, m.partSize)
		phi, plo := bits.Mul64(n-1, m.partSize)
		if n == 0 || hi == 0 && lo < m.hdr.Size || phi != 0 || plo >= m.hdr.Size {
			t.Fatalf("%d parts of %d bytes accepted for a payload of %d bytes", n, m.partSize, m.hdr.Size)
		}
	})
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
