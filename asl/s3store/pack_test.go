package s3store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
)

// examplePack is the worked example of SPECS.md §6.7, "Packs": two
// artifacts and one index entry.
func examplePack(t testing.TB) (pack, index []byte) {
	t.Helper()
	a := asl.Untagged([]byte("hello"))
	b := asl.Tagged(0x101, []byte("amduat"))
	recs := []packRecord{
		{Ref: asl.MustDerive(asl.HashSHA256, b), Hdr: b.Header(), Payload: b.Bytes},
		{Ref: asl.MustDerive(asl.HashSHA256, a), Hdr: a.Header(), Payload: a.Bytes},
	}
	ents := []packEntry{{Stamp: 0x188c2a6e8f3b2000, Space: "surf.log", Key: []byte{0x01}, Value: []byte("v")}}
	pack, index, _ = buildPack(recs, ents)
	return pack, index
}

// readHex reads a golden file of hex, ignoring white space and
// everything from '#' to the end of a line.
func readHex(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		b.WriteString(strings.Join(strings.Fields(line), ""))
	}
	out, err := hex.DecodeString(b.String())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// TestPackExample checks the pack and index of SPECS.md §6.7 byte for
// byte against testdata/pack-example.hex and index-example.hex.
func TestPackExample(t *testing.T) {
	pack, index := examplePack(t)
	if want := readHex(t, "testdata/pack-example.hex"); !bytes.Equal(pack, want) {
		t.Fatalf("pack =\n%x\nwant\n%x", pack, want)
	}
	if want := readHex(t, "testdata/index-example.hex"); !bytes.Equal(index, want) {
		t.Fatalf("index =\n%x\nwant\n%x", index, want)
	}
	x, err := decodeIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	if _, built, x2 := buildPack(nil, x.Entries); len(built) != indexSize(x2) {
		t.Fatalf("indexSize of an index of entries only = %d, encoded %d", indexSize(x2), len(built))
	}
	if len(x.Arts) != 2 || len(x.Entries) != 1 || x.PackLen != uint64(len(pack)) {
		t.Fatalf("decoded %+v", x)
	}
	y, err := indexOfPack(pack)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encodeIndex(y), index) {
		t.Fatal("the pack's own index differs from the index object")
	}
	for _, a := range x.Arts {
		if err := verifyRecord(artLoc{a: a}, pack[a.Off:a.Off+a.Stored]); err != nil {
			t.Errorf("record of %s: %v", a.Ref, err)
		}
	}
}

// TestIndexRejects checks the decoder's rules (SPECS.md §6.7, "Index
// object"), each on the example changed in one place; the checksum is
// recomputed so that the rule under test is the one that refuses.
func TestIndexRejects(t *testing.T) {
	_, index := examplePack(t)
	x, err := decodeIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	clone := func() *packIndex {
		y := *x
		y.Arts = append([]packArt(nil), x.Arts...)
		y.Entries = append([]packEntry(nil), x.Entries...)
		return &y
	}
	cases := []struct {
		name string
		b    func() []byte
		want string
	}{
		{"short", func() []byte { return index[:40] }, "shorter than any index"},
		{"checksum", func() []byte {
			b := bytes.Clone(index)
			b[20] ^= 1
			return b
		}, "checksum"},
		{"magic", func() []byte {
			b := bytes.Clone(index[:len(index)-32])
			b[7] = 2
			return reseal(b)
		}, "magic"},
		{"trailing", func() []byte { return reseal(append(bytes.Clone(index[:len(index)-32]), 0)) }, "trailing"},
		{"count past the end", func() []byte {
			b := bytes.Clone(index[:len(index)-32])
			b[16+3] = 0xff
			return reseal(b)
		}, "count"},
		{"codec", func() []byte { y := clone(); y.Arts[0].Codec = 2; return encodeIndex(y) }, "codec 2"},
		{"raw length", func() []byte { y := clone(); y.Arts[0].Hdr.Size++; return encodeIndex(y) }, "raw record"},
		{"tag without has_type_tag", func() []byte {
			y := clone()
			y.Arts[1].Hdr.Tag = 7
			y.Arts[1].Hdr.HasTag = false
			return encodeIndex(y)
		}, "type_tag"},
		{"offset", func() []byte { y := clone(); y.Arts[1].Off++; return encodeIndex(y) }, "offset"},
		{"order", func() []byte { y := clone(); y.Arts[0], y.Arts[1] = y.Arts[1], y.Arts[0]; return encodeIndex(y) }, "offset"},
		{"pack_len", func() []byte { y := clone(); y.PackLen++; return encodeIndex(y) }, "pack_len"},
		{"entries only with pack_len", func() []byte { y := clone(); y.Arts = nil; return encodeIndex(y) }, "pack_len"},
		{"empty space", func() []byte { y := clone(); y.Entries[0].Space = ""; return encodeIndex(y) }, "space"},
		{"repeated entry", func() []byte { y := clone(); y.Entries = append(y.Entries, y.Entries[0]); return encodeIndex(y) }, "not above"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeIndex(c.b())
			if err == nil || !errors.Is(err, asl.ErrIntegrity) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrIntegrity naming %q", err, c.want)
			}
		})
	}
}

// reseal appends the checksum of body.
func reseal(body []byte) []byte {
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

func FuzzPackIndex(f *testing.F) {
	pack, index := examplePack(f)
	f.Add(index)
	f.Add(pack)
	_, entriesOnly, _ := buildPack(nil, []packEntry{{Stamp: 1, Space: "a", Key: nil, Value: nil}})
	f.Add(entriesOnly)
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := decodeIndex(b)
		if err != nil {
			if !errors.Is(err, asl.ErrIntegrity) {
				t.Fatalf("error without ErrIntegrity: %v", err)
			}
			return
		}
		if got := encodeIndex(x); !bytes.Equal(got, b) {
			t.Fatalf("decoded index re-encodes to other bytes")
		}
		_, _ = indexOfPack(b)
	})
}
