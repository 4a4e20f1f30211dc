package pebblestore

import (
	"bytes"
	"hash/crc32"
	"math"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestFastCodecsMatchCBOR holds the hand-written record codecs to the
// general CBOR codec: the same bytes out, and the same values in.
func TestFastCodecsMatchCBOR(t *testing.T) {
	t.Parallel()
	tag0, tagMax := uint32(0), uint32(math.MaxUint32)
	vals := []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	var recs []indexRecord
	for _, v := range vals {
		recs = append(recs,
			indexRecord{Size: v, Stored: v, Compression: v % 3},
			indexRecord{Size: v, Tag: &tag0, Blob: v | 1, Chunk: v | 4096, Stored: v / 2, Compression: compMixed},
			indexRecord{Size: 5, Tag: &tagMax, Blob: v, Stored: v},
			indexRecord{Size: v, Chunk: v, Stored: 1},
			indexRecord{Size: v, Tag: &tag0, Stored: v, Compression: v % 2, Pack: v | 1, Offset: v},
			indexRecord{Size: v, Stored: v, Pack: v, Offset: v | 8, Blob: v})
	}
	for _, r := range recs {
		want := appendCBOR(nil, r)
		got := appendIndexRecord(nil, r)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: fast %x, cbor %x", r, got, want)
		}
		p, rest, ok := parseIndexRecord(append(got, 0xee))
		if !ok || len(rest) != 1 || !bytes.Equal(appendCBOR(nil, p), want) {
			t.Fatalf("%x: parsed %+v, %v", got, p, ok)
		}
	}
	for _, v := range vals {
		h := chunkHeader{Codec: v, Raw: v, CRC: uint32(v)}
		want := appendCBOR(nil, h)
		got := appendChunkHeader(nil, h)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: fast %x, cbor %x", h, got, want)
		}
		p, rest, ok := parseChunkHeader(append(got, 0xee))
		if !ok || len(rest) != 1 || p != h {
			t.Fatalf("%x: parsed %+v, %v", got, p, ok)
		}
	}
	// Non-canonical or incomplete forms are left to the general decoder.
	for _, b := range [][]byte{
		{0xa3, 0x01, 0x18, 0x05, 0x05, 0x00, 0x06, 0x00},                               // size not shortest
		{0xa3, 0x02, 0x00, 0x05, 0x00, 0x06, 0x00},                                     // size missing
		{0xa3, 0x01, 0x00, 0x06, 0x00, 0x05, 0x00},                                     // keys out of order
		{0xa4, 0x01, 0x00, 0x03, 0x00, 0x05, 0x00, 0x06, 0x00},                         // blob 0
		{0xa3, 0x01, 0x00, 0x05, 0x00},                                                 // truncated
		{0xa4, 0x01, 0x00, 0x02, 0x1b, 0, 0, 0, 1, 0, 0, 0, 0, 0x05, 0x00, 0x06, 0x00}, // tag > u32
	} {
		if r, _, ok := parseIndexRecord(b); ok {
			t.Fatalf("%x parsed as %+v", b, r)
		}
		if _, _, err := decodeIndexHead(b); err == nil {
			t.Fatalf("%x decoded", b)
		}
	}
}

// FuzzParseRecords: whatever the fast parsers accept, the general decoder
// accepts with the same values.
func FuzzParseRecords(f *testing.F) {
	for _, s := range indexSeeds() {
		f.Add(s)
	}
	f.Add(appendChunkHeader(nil, chunkHeader{Codec: 1, Raw: 300, CRC: 0xdeadbeef}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, rest, ok := parseIndexRecord(b); ok {
			var g indexRecord
			grest, err := decodeCanonical(b, &g, "index")
			if err != nil || len(grest) != len(rest) || !bytes.Equal(appendCBOR(nil, g), appendCBOR(nil, r)) {
				t.Fatalf("%x: fast %+v, general %+v (%v)", b, r, g, err)
			}
		}
		if h, rest, ok := parseChunkHeader(b); ok {
			var g chunkHeader
			grest, err := decodeCanonical(b, &g, "chunk")
			if err != nil || len(grest) != len(rest) || g != h {
				t.Fatalf("%x: fast %+v, general %+v (%v)", b, h, g, err)
			}
		}
	})
}

// TestPackHeadMatchesCBOR: the hand-written pack head encoder gives the
// core deterministic encoding of packHead.
func TestPackHeadMatchesCBOR(t *testing.T) {
	t.Parallel()
	tag := uint32(0xffffffff)
	for _, c := range []struct {
		hdr    asl.Header
		stored int
	}{{asl.Header{Size: 5}, 5}, {asl.Header{Size: 1 << 20, HasTag: true, Tag: 0}, 1000}, {asl.Header{Size: 7, HasTag: true, Tag: asl.TypeTag(tag)}, 1 << 24}} {
		for _, id := range []asl.HashID{asl.HashSHA256, asl.HashBLAKE3} {
			ref := asl.MustDerive(id, asl.Untagged([]byte("x")))
			stored := uint64(c.stored)
			h := packHead{Ref: ref.AppendBytes(nil), Stored: &stored}
			if c.hdr.HasTag {
				t := uint32(c.hdr.Tag)
				h.Tag = &t
			}
			want := appendCBOR(nil, h)
			if got := appendPackHead(nil, ref, c.hdr, c.stored); !bytes.Equal(got, want) {
				t.Fatalf("%+v: appendPackHead %x, CBOR %x", c, got, want)
			}
			var back packHead
			if _, err := decodeCanonical(want, &back, "pack head"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPartAndLargeHeadsMatchCBOR: the hand-written encoders of the heads of
// parts and large records give the core deterministic encoding of packHead,
// which decodes to the right kind.
func TestPartAndLargeHeadsMatchCBOR(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ part, stored uint64 }{{0, 1}, {23, 24}, {1 << 20, MaxChunkSize}, {1 << 40, 255}} {
		h := packHead{Stored: &c.stored, Part: &c.part}
		want := appendCBOR(nil, h)
		if got := appendPartHead(nil, c.part, int(c.stored)); !bytes.Equal(got, want) {
			t.Fatalf("%+v: appendPartHead %x, CBOR %x", c, got, want)
		}
		var back packHead
		if _, err := decodeCanonical(want, &back, "pack head"); err != nil || back.kind() != recordPart {
			t.Fatalf("%+v: decoded %+v, %v", c, back, err)
		}
	}
	tag := uint32(0x101)
	for _, hdr := range []asl.Header{{Size: 1 << 30}, {Size: 300 << 10, HasTag: true, Tag: asl.TypeTag(tag)}} {
		ref := asl.MustDerive(asl.HashBLAKE3, asl.Untagged([]byte("y")))
		first, chunk := uint64(8), uint64(256<<10)
		h := packHead{Ref: ref.AppendBytes(nil), Size: &hdr.Size, First: &first, Chunk: &chunk}
		if hdr.HasTag {
			h.Tag = &tag
		}
		want := appendCBOR(nil, h)
		if got := appendLargeHead(nil, ref, hdr, first, chunk); !bytes.Equal(got, want) {
			t.Fatalf("%+v: appendLargeHead %x, CBOR %x", hdr, got, want)
		}
		var back packHead
		if _, err := decodeCanonical(want, &back, "pack head"); err != nil || back.kind() != recordLarge {
			t.Fatalf("%+v: decoded %+v, %v", hdr, back, err)
		}
	}
}

// TestChunkCRC: the hand-rolled prefix gives crc32.Checksum of the whole
// input, and costs no allocation.
func TestChunkCRC(t *testing.T) {
	// Not parallel: testing.AllocsPerRun counts the whole process's allocations.
	payload := []byte("hello")
	in := append(bytes.Clone([]byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 5}), payload...)
	if got, want := chunkCRC(7, 2, 1, 5, payload), crc32.Checksum(in, crcTable); got != want {
		t.Fatalf("chunkCRC %08x, crc32 %08x", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { chunkCRC(1, 2, 0, 5, payload) }); n != 0 {
		t.Fatalf("chunkCRC allocates %v times", n)
	}
}

// TestCommitHeadMatchesCBOR: the hand-written encoder of a commit marker
// gives the core deterministic encoding of packHead, which decodes to a
// commit marker; a marker with any other field is no known kind.
func TestCommitHeadMatchesCBOR(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ id, at, start uint64 }{{3, 64, 8}, {1, 1 << 30, 1<<30 - 5}, {1 << 40, 1 << 33, 23}} {
		crc := commitCRC(c.id, c.at, c.start)
		h := packHead{Commit: &c.start, CRC: &crc}
		want := appendCBOR(nil, h)
		if got := appendCommitHead(nil, c.id, c.at, c.start); !bytes.Equal(got, want) {
			t.Fatalf("%+v: appendCommitHead %x, CBOR %x", c, got, want)
		}
		var back packHead
		if _, err := decodeCanonical(want, &back, "pack head"); err != nil || back.kind() != recordCommit {
			t.Fatalf("%+v: decoded %+v, %v", c, back, err)
		}
		stored := uint64(1)
		back.Stored = &stored
		if back.kind() != 0 {
			t.Fatalf("%+v: a marker with a stored size is of kind %d", c, back.kind())
		}
	}
}
