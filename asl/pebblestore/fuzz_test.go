package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"math/bits"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func indexSeeds() [][]byte {
	tag := uint32(0x101)
	inline := append(appendCBOR(appendCBOR(nil, indexRecord{Size: 3, Tag: &tag, Stored: 3}),
		chunkHeader{Codec: codecRaw, Raw: 3, CRC: chunkCRC(0, 0, codecRaw, 3, []byte("abc"))}), "abc"...)
	raw := genBytes(1, 8192, true)
	codec, z := compressChunk(raw, nil, 4096)
	zinline := append(appendCBOR(appendCBOR(nil, indexRecord{Size: 8192, Stored: uint64(len(z)), Compression: uint64(codec)}),
		chunkHeader{Codec: uint64(codec), Raw: 8192, CRC: chunkCRC(0, 0, codec, 8192, z)}), z...)
	return [][]byte{
		inline,
		zinline,
		appendCBOR(nil, indexRecord{Size: 3 << 20, Blob: 7, Chunk: 1 << 20, Stored: 3 << 20, Compression: compMixed}),
		appendCBOR(nil, indexRecord{Size: 1024, Tag: &tag, Stored: 900, Compression: compZstd, Pack: 3, Offset: 8}),
		appendCBOR(nil, indexRecord{Size: 1024, Stored: 1024, Pack: 1, Offset: 1 << 40}),
		appendCBOR(nil, indexRecord{}),
		{},
		{0xa0},
		{0xff},
		{0xa1, 0x01, 0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	}
}

// FuzzDecodeIndex: hostile index values never panic; whatever decodes is
// canonical (re-encodes to the same bytes) and self-consistent.
func FuzzDecodeIndex(f *testing.F) {
	for _, s := range indexSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, ch, payload, err := decodeIndex(b)
		if err != nil {
			if !isIntegrity(err) {
				t.Fatalf("error does not wrap ErrIntegrity: %v", err)
			}
			return
		}
		enc := appendCBOR(nil, rec)
		if rec.inline() {
			enc = append(appendCBOR(enc, ch), payload...)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("decoded record re-encodes to %x, input %x", enc, b)
		}
		if rec.Chunk != 0 {
			// The chunks cover the size exactly, however near 2^64.
			n := rec.chunks()
			hi, lo := bits.Mul64(n, rec.Chunk)
			if n == 0 || hi == 0 && lo < rec.Size || (n-1)*rec.Chunk >= rec.Size {
				t.Fatalf("%d chunks of %d bytes for a record of %d", n, rec.Chunk, rec.Size)
			}
		}
		if rec.inline() && ch.Codec == codecZstd {
			out, err := decompress(payload, ch.Raw, nil)
			if err == nil && uint64(len(out)) != rec.Size {
				t.Fatalf("decompressed %d bytes, record says %d", len(out), rec.Size)
			}
		}
	})
}

// FuzzDecodeChunk: hostile chunk values never panic and never decompress
// beyond the raw size the record states.
func FuzzDecodeChunk(f *testing.F) {
	raw := genBytes(2, 20000, true)
	codec, z := compressChunk(raw, nil, 4096)
	f.Add(append(appendCBOR(nil, chunkHeader{Codec: uint64(codec), Raw: 20000, CRC: chunkCRC(5, 1, codec, 20000, z)}), z...), uint64(20000))
	f.Add(append(appendCBOR(nil, chunkHeader{Codec: codecRaw, Raw: 4, CRC: chunkCRC(5, 1, codecRaw, 4, []byte("abcd"))}), "abcd"...), uint64(4))
	f.Add([]byte{0xa3, 0x01, 0x01, 0x02, 0x1a, 0x00, 0xff, 0xff, 0xff, 0x03, 0x00}, uint64(MaxChunkSize))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, want uint64) {
		ch, payload, err := decodeChunk(b, 5, 1, want)
		if err != nil {
			if !isIntegrity(err) {
				t.Fatalf("error does not wrap ErrIntegrity: %v", err)
			}
			return
		}
		if ch.Raw != want || ch.Raw > MaxChunkSize {
			t.Fatalf("accepted raw size %d, want %d", ch.Raw, want)
		}
		if ch.Codec == codecZstd {
			out, err := decompress(payload, ch.Raw, nil)
			if err == nil && uint64(len(out)) != ch.Raw {
				t.Fatalf("decompressed %d bytes, header says %d", len(out), ch.Raw)
			}
			if err != nil && !isIntegrity(err) {
				t.Fatalf("decompress error does not wrap ErrIntegrity: %v", err)
			}
		}
	})
}

// FuzzDecodeConfig: hostile config records never panic; what decodes is
// canonical.
func FuzzDecodeConfig(f *testing.F) {
	f.Add(encodeConfig(configRecord{Format: formatName, Version: formatVersion, Hash: 1}))
	f.Add(encodeConfig(configRecord{Format: formatName, Version: formatVersion, Hash: 0x8001}))
	f.Add([]byte{0xa3, 0x01, 0x60, 0x02, 0x01, 0x03, 0x01})
	f.Add([]byte{0xbf, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeConfig(b)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeConfig(c), b) {
			t.Fatalf("config re-encodes differently")
		}
	})
}

// FuzzDecodeCounter covers the blob id lease record.
func FuzzDecodeCounter(f *testing.F) {
	f.Add(appendCBOR(nil, uint64(4096)))
	f.Add([]byte{0x18, 0x05})
	f.Add([]byte{0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeCounter(b)
		if err == nil && !bytes.Equal(appendCBOR(nil, n), b) {
			t.Fatalf("counter re-encodes differently")
		}
	})
}

// FuzzPackRecovery: a pack file of hostile bytes never makes Open panic or
// index anything that does not verify; Open succeeds (garbage is skipped)
// or fails with an error.
func FuzzPackRecovery(f *testing.F) {
	hello := []byte("hello")
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged(hello))
	valid := appendPackHead(nil, ref, asl.Header{Size: 5}, 5)
	valid = append(appendCBOR(valid, chunkHeader{Codec: codecRaw, Raw: 5, CRC: chunkCRC(1, uint64(len(packMagic)+len(valid)), codecRaw, 5, hello)}), hello...)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(append(bytes.Clone(valid), valid...))
	f.Add([]byte{0xa2, 0x01, 0x58, 0xff})
	f.Add([]byte{})
	// A commit marker after the record, and the same with the record's
	// payload damaged (recorded as damage, not taken for a torn write).
	committed := appendCommitHead(bytes.Clone(valid), 1, uint64(len(packMagic)+len(valid)), uint64(len(packMagic)))
	f.Add(committed)
	hurt := bytes.Clone(committed)
	hurt[len(valid)-1] ^= 0x20
	f.Add(hurt)
	f.Add(committed[len(valid):])
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := vfs.NewMem()
		s, err := Create("store", &Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		pf, err := fs.Create("store/packs/000001.pack", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		pf.Write(append(packMagic[:], b...))
		pf.Close()
		s, err = Open("store", &Options{FS: fs})
		if err != nil {
			return
		}
		defer s.Close()
		// Enumerate may end with the damaged regions Open recorded
		// (ERR_INTEGRITY); every artifact it lists must read.
		err = s.Enumerate(context.Background(), asl.Reference{}, func(info asl.Info) error {
			if _, err := asl.Get(context.Background(), s, info.Ref, 0); err != nil {
				t.Fatalf("recovered artifact does not read: %v", err)
			}
			return nil
		})
		if err != nil && !errors.Is(err, asl.ErrIntegrity) {
			t.Fatalf("enumerate: %v", err)
		}
	})
}
