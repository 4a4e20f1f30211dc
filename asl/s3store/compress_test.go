package s3store

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
)

// exampleZ is SPECS.md §6.7's worked example of a compressed artifact
// object: the untagged artifact of 4096 bytes "amduat amduat am…".
const exampleZ = "616d6473337a6101" + // magic "amds3za", version 1
	"00" + "0000000000001000" + // header: untagged, 4096 bytes
	"28b52ffd64000f7d000038616d6475617420015407032ff657c3d5bc98" // one zstd frame (29 bytes)

func examplePayload() []byte {
	raw := make([]byte, 4096)
	for i := range raw {
		raw[i] = "amduat "[i%7]
	}
	return raw
}

func TestZObjectExample(t *testing.T) {
	obj, _ := hex.DecodeString(exampleZ)
	hdr, payload, err := decodeZObject(obj)
	if err != nil || hdr != (asl.Header{Size: 4096}) || !bytes.Equal(payload, examplePayload()) {
		t.Fatalf("decode example = %+v, %d bytes, %v", hdr, len(payload), err)
	}
	a := asl.Untagged(examplePayload())
	got, sha := encodeObject(asl.MustDerive(asl.HashSHA256, a), asl.EncodeArtifact(a))
	if sha == "" || !isZObject(got) {
		t.Fatalf("encodeObject of compressible text is not compressed: %x", got[:16])
	}
	if hex.EncodeToString(got) != exampleZ {
		// The frame is the encoder's choice (a newer klauspost/compress
		// may pick other bytes); magic and header are fixed.
		t.Logf("encoder's frame differs from the example's: %x", got)
		if !bytes.Equal(got[:17], obj[:17]) {
			t.Fatalf("magic and header = %x, want %x", got[:17], obj[:17])
		}
	}
	// Small or incompressible payloads stay ArtifactBytes.
	for _, p := range [][]byte{[]byte("short"), bytes.Repeat([]byte{7}, 4095)} {
		a := asl.Untagged(p)
		if got, _ := encodeObject(asl.MustDerive(asl.HashSHA256, a), asl.EncodeArtifact(a)); !bytes.Equal(got, asl.EncodeArtifact(a)) {
			t.Errorf("a %d-byte payload was compressed", len(p))
		}
	}
}

// TestZObjectRejects: every rule of SPECS.md §6.7's compressed object.
func TestZObjectRejects(t *testing.T) {
	good, _ := hex.DecodeString(exampleZ)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		obj  []byte
		want string
	}{
		{"bad magic", mod(func(b []byte) []byte { b[7] = 2; return b }), "no compressed"},
		{"cut in header", good[:12], "ends inside its header"},
		{"has_type_tag 2", mod(func(b []byte) []byte { b[8] = 2; return b }), "has_type_tag"},
		{"size differs from frame", mod(func(b []byte) []byte { b[16] = 0x01; return b }), "declares"},
		{"no frame", good[:17], "header"},
		{"frame cut", good[:len(good)-3], "zstd frame"},
		{"trailing frame bytes", append(bytes.Clone(good), good[17:]...), "more than"},
		{"huge size", mod(func(b []byte) []byte { b[9] = 0xff; return b }), "more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := decodeZObject(c.obj)
			if !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decode = %v, want ErrIntegrity containing %q", err, c.want)
			}
		})
	}
}

func FuzzZObject(f *testing.F) {
	good, _ := hex.DecodeString(exampleZ)
	f.Add(good)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, b []byte) {
		hdr, payload, err := decodeZObject(b)
		if err != nil {
			if !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("error without ErrIntegrity: %v", err)
			}
			return
		}
		if uint64(len(payload)) != hdr.Size {
			t.Fatalf("payload of %d bytes, header says %d", len(payload), hdr.Size)
		}
	})
}

// TestManifestV2: a manifest naming a compressed part is version 2 (a
// codec byte before each digest); every raw one stays version 1.
func TestManifestV2(t *testing.T) {
	m := exampleManifest()
	m.codecs = []uint8{codecRaw, codecZstd, codecRaw}
	b := m.encode()
	want := "616d6473336d6602" + "0100000101000000000000000a" + "0000000000000004" + "00000003" +
		"00" + strings.Repeat("a1", 32) + "01" + strings.Repeat("a2", 32) + "00" + strings.Repeat("a3", 32)
	if hex.EncodeToString(b) != want {
		t.Fatalf("encode = %x\nwant     %s", b, want)
	}
	d, err := decodeManifest(b)
	if err != nil || !bytes.Equal(d.encode(), b) || d.codec(1) != codecZstd {
		t.Fatalf("decode = %+v, %v", d, err)
	}
	for name, bad := range map[string][]byte{
		"codec 2":         func() []byte { c := bytes.Clone(b); c[33+33] = 2; return c }(),
		"no zstd part":    func() []byte { c := bytes.Clone(b); c[33+33] = 0; return c }(),
		"version 1 sized": b[:len(b)-3],
	} {
		if _, err := decodeManifest(bad); !errors.Is(err, asl.ErrIntegrity) {
			t.Errorf("%s: decode = %v, want ErrIntegrity", name, err)
		}
	}
	m.codecs = []uint8{0, 0, 0}
	if b := m.encode(); b[7] != 1 {
		t.Fatalf("all-raw manifest written as version %d", b[7])
	}
}
