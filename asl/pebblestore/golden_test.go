package pebblestore

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
)

var update = flag.Bool("update", false, "rewrite testdata/records.golden")

// goldenRecords are the worked examples of SPECS.md §6.4.
func goldenRecords() []struct{ name, hex string } {
	hello := []byte("hello")
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged(hello))
	tag := uint32(0x101)
	inline := appendCBOR(appendCBOR(nil, indexRecord{Size: 5, Tag: &tag, Stored: 5}),
		chunkHeader{Codec: codecRaw, Raw: 5, CRC: chunkCRC(0, 0, codecRaw, 5, hello)})
	inline = append(inline, hello...)
	packRecord := appendPackHead(nil, ref, asl.Header{Size: 5}, 5)
	packRecord = append(appendCBOR(packRecord, chunkHeader{Codec: codecRaw, Raw: 5, CRC: chunkCRC(3, uint64(len(packMagic)+len(packRecord)), codecRaw, 5, hello)}), hello...)
	part := appendPartHead(nil, 2, 5)
	part = append(appendCBOR(part, chunkHeader{Codec: codecRaw, Raw: 5, CRC: chunkCRC(3, uint64(len(packMagic)+len(part)), codecRaw, 5, hello)}), hello...)
	rows := []struct {
		name string
		b    []byte
	}{
		{"config key", configKey()},
		{"config value (sha256 default)", encodeConfig(configRecord{Format: formatName, Version: formatVersion, Hash: uint16(asl.HashSHA256)})},
		{"counter key", counterKey()},
		{"counter value (lease end 4097)", appendCBOR(nil, uint64(4097))},
		{"index key of untagged \"hello\" (sha256)", appendIndexKey(nil, ref)},
		{"inline index value of \"hello\" tagged 0x00000101", inline},
		{"chunked index value (3 MiB + 5, blob 7, 256 KiB chunks, mixed)", appendCBOR(nil, indexRecord{Size: 3<<20 + 5, Blob: 7, Chunk: 256 << 10, Stored: 1234567, Compression: compMixed})},
		{"chunk key (blob 7, chunk 2)", appendChunkKey(nil, 7, 2)},
		{"chunk header (raw, 5 bytes \"hello\", blob 7, chunk 2)", appendCBOR(nil, chunkHeader{Codec: codecRaw, Raw: 5, CRC: chunkCRC(7, 2, codecRaw, 5, hello)})},
		{"staging key (blob 7)", stagingKey(7)},
		{"pack record (\"hello\" untagged, raw, first record of pack 3: head at 8, chunk value at 48)", packRecord},
		{"pack index value (\"hello\" untagged, pack 3, offset 48)", appendCBOR(nil, indexRecord{Size: 5, Stored: 5, Pack: 3, Offset: 48})},
		{"pack part (part 2 of a large artifact, raw, 5 bytes \"hello\", first record of pack 3: head at 8, chunk value at 13)", part},
		{"large record (size 3 MiB + 5, untagged, parts from offset 8, 256 KiB chunks; the reference of \"hello\" stands in for the artifact's)", appendLargeHead(nil, ref, asl.Header{Size: 3<<20 + 5}, 8, 256<<10)},
		{"packed index value of a large artifact (3 MiB + 5, 256 KiB chunks, stored 1234567, mixed, pack 3, parts from offset 8)", appendCBOR(nil, indexRecord{Size: 3<<20 + 5, Chunk: 256 << 10, Stored: 1234567, Compression: compMixed, Pack: 3, Offset: 8})},
		{"commit marker (pack 3 at 64, after that record, its append from 8)", appendCommitHead(nil, 3, 64, 8)},
		{"pack watermark key (pack 3)", watermarkKey(3)},
		{"pack watermark value (end 73, after that record and its commit marker)", appendCBOR(nil, uint64(73))},
		{"pack file magic", packMagic[:]},
		{"pack file name (pack 3)", []byte(packName(3))},
	}
	out := make([]struct{ name, hex string }, len(rows))
	for i, r := range rows {
		out[i].name, out[i].hex = r.name, hex.EncodeToString(r.b)
	}
	return out
}

func TestRecordGolden(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	for _, r := range goldenRecords() {
		fmt.Fprintf(&sb, "%s\n%s\n\n", r.name, r.hex)
	}
	const path = "testdata/records.golden"
	if *update {
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != sb.String() {
		t.Fatalf("records differ from %s (run with -update after an intended change):\n%s", path, sb.String())
	}
}
