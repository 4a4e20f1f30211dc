package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/amduat/amduat/asl"
	"github.com/fxamacker/cbor/v2"
)

// Key prefixes (SPECS.md §6.4). Every key starts with one
// prefix byte; the key spaces never overlap.
const (
	prefixConfig  = 'c' // 'c': the store config record
	prefixIndex   = 'i' // 'i' || ReferenceBytes: the index record of an artifact
	prefixChunk   = 'k' // 'k' || blob u64 BE || chunk u64 BE: one chunk of a blob
	prefixCounter = 'n' // 'n': the blob id lease (CBOR unsigned integer)
	prefixStaging = 's' // 's' || blob u64 BE: a blob whose put has not committed
	prefixPack    = 'p' // 'p' || pack u64 BE: the pack's watermark (CBOR unsigned integer)
)

const (
	formatName = "amduat-pebblestore"
	// formatVersion is written by Create; Open also reads versions 1 (no
	// pack records), 2 (no parts of large artifacts in packs) and 3 (no
	// commit markers in packs) and upgrades their config record.
	formatVersion = 4
	// packedVersion is the first version whose artifacts all live in
	// packs (the default layout): from it on, Pebble holds derived data
	// only.
	packedVersion = 3

	codecRaw  = 0
	codecZstd = 1

	compNone  = 0
	compZstd  = 1
	compMixed = 2

	// MaxChunkSize caps the raw size of one chunk. Records claiming more are
	// damaged: the cap bounds what a read allocates for any record.
	MaxChunkSize = 16 << 20
	// MinChunkSize is the smallest chunk size a store accepts.
	MinChunkSize = 4 << 10
)

var (
	encMode cbor.EncMode
	decMode cbor.DecMode

	crcTable = crc32.MakeTable(crc32.Castagnoli)
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   4,
		MaxArrayElements:  16,
		MaxMapPairs:       16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
		IntDec:            cbor.IntDecConvertNone,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// configRecord is the value under key 'c'.
type configRecord struct {
	Format  string `cbor:"1,keyasint"`
	Version uint64 `cbor:"2,keyasint"`
	Hash    uint16 `cbor:"3,keyasint"`
}

// indexRecord heads the value under 'i' || ReferenceBytes. With neither
// Blob nor Pack set the artifact is inline: a chunk header and the stored
// payload follow the record in the same value. With Blob set the payload is
// in ceil(Size/Chunk) chunks under blob id Blob; with Pack set it is one
// chunk value at byte Offset of pack file Pack. Nothing follows those.
type indexRecord struct {
	Size        uint64  `cbor:"1,keyasint"`
	Tag         *uint32 `cbor:"2,keyasint,omitempty"`
	Blob        uint64  `cbor:"3,keyasint,omitempty"`
	Chunk       uint64  `cbor:"4,keyasint,omitempty"`
	Stored      uint64  `cbor:"5,keyasint"`
	Compression uint64  `cbor:"6,keyasint"`
	Pack        uint64  `cbor:"7,keyasint,omitempty"`
	Offset      uint64  `cbor:"8,keyasint,omitempty"`
}

// chunkHeader heads every stored chunk (inline or under 'k'); the stored
// payload follows it. CRC is CRC-32C over chunkCRCInput.
type chunkHeader struct {
	Codec uint64 `cbor:"1,keyasint"`
	Raw   uint64 `cbor:"2,keyasint"`
	CRC   uint32 `cbor:"3,keyasint"`
}

func (r indexRecord) header() asl.Header {
	h := asl.Header{Size: r.Size}
	if r.Tag != nil {
		h.HasTag, h.Tag = true, asl.TypeTag(*r.Tag)
	}
	return h
}

func (r indexRecord) inline() bool { return r.Blob == 0 && r.Pack == 0 }

// packed: the payload is in a pack, as one record (packedSingle) or as
// parts that a large record completes (Chunk set).
func (r indexRecord) packed() bool { return r.Pack != 0 }

func (r indexRecord) packedSingle() bool { return r.Pack != 0 && r.Chunk == 0 }

func (r indexRecord) chunked() bool { return r.Blob != 0 }

// chunks is the number of chunks of a chunked record: ⌈Size/Chunk⌉,
// computed without (Size+Chunk-1)/Chunk, whose sum wraps for a (damaged)
// size near 2^64 and would count no chunks, so that a read ended with
// nothing read, nothing verified and no error.
func (r indexRecord) chunks() uint64 {
	n := r.Size / r.Chunk
	if r.Size%r.Chunk != 0 {
		n++
	}
	return n
}

// rawLen is the raw size chunk i of a chunked record must have.
func (r indexRecord) rawLen(i uint64) uint64 {
	if i == r.chunks()-1 {
		return r.Size - i*r.Chunk
	}
	return r.Chunk
}

func compressionName(c uint64) string {
	switch c {
	case compNone:
		return "none"
	case compZstd:
		return "zstd"
	default:
		return "mixed"
	}
}

func configKey() []byte  { return []byte{prefixConfig} }
func counterKey() []byte { return []byte{prefixCounter} }

func appendIndexKey(dst []byte, ref asl.Reference) []byte {
	return ref.AppendBytes(append(dst, prefixIndex))
}

func appendChunkKey(dst []byte, blob, chunk uint64) []byte {
	dst = append(dst, prefixChunk)
	dst = binary.BigEndian.AppendUint64(dst, blob)
	return binary.BigEndian.AppendUint64(dst, chunk)
}

func watermarkKey(pack uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixPack}, pack)
}

func stagingKey(blob uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixStaging}, blob)
}

// chunkCRC is CRC-32C over blob (u64 BE) || chunk (u64 BE) || codec (u8) ||
// raw (u64 BE) || stored payload. Binding the position and the header fields
// catches a chunk that is damaged, misplaced, or whose header was altered.
// Inline chunks use blob 0, chunk 0.
func chunkCRC(blob, chunk uint64, codec uint8, raw uint64, payload []byte) uint32 {
	var b [25]byte
	binary.BigEndian.PutUint64(b[0:], blob)
	binary.BigEndian.PutUint64(b[8:], chunk)
	b[16] = codec
	binary.BigEndian.PutUint64(b[17:], raw)
	// The 25 position bytes go through the table by hand: handing a local
	// array to crc32.Update moves it to the heap.
	c := ^uint32(0)
	for _, x := range b {
		c = crcTable[byte(c)^x] ^ c>>8
	}
	return crc32.Update(^c, crcTable, payload)
}

// damaged wraps a description of a damaged record in ErrIntegrity.
func damaged(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), asl.ErrIntegrity)
}

// decodeCanonical decodes the first CBOR item of b into v and requires it to
// be in core deterministic form: re-encoding v must give the same bytes. It
// returns the bytes after the item.
func decodeCanonical(b []byte, v any, what string) ([]byte, error) {
	rest, err := decMode.UnmarshalFirst(b, v)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, damaged("%s record is truncated (%d bytes)", what, len(b))
	}
	if err != nil {
		return nil, damaged("%s record: %v", what, err)
	}
	item := b[:len(b)-len(rest)]
	again, err := encMode.Marshal(v)
	if err != nil || !bytes.Equal(again, item) {
		return nil, damaged("%s record is not in deterministic CBOR form", what)
	}
	return rest, nil
}

func encodeConfig(c configRecord) []byte {
	b, err := encMode.Marshal(c)
	if err != nil {
		panic(err) // fixed struct of integers and a string: cannot fail
	}
	return b
}

// decodeConfig decodes and validates a config record strictly. An unknown
// format version is ErrUnsupported; anything else wrong is ErrIntegrity.
func decodeConfig(b []byte) (configRecord, error) {
	var c configRecord
	rest, err := decodeCanonical(b, &c, "config")
	if err != nil {
		return configRecord{}, err
	}
	if len(rest) != 0 {
		return configRecord{}, damaged("config record: %d trailing bytes", len(rest))
	}
	if c.Format != formatName {
		return configRecord{}, damaged("config record: format %q, want %q", c.Format, formatName)
	}
	if c.Version < 1 || c.Version > formatVersion {
		return configRecord{}, fmt.Errorf("config record: format version %d, this build reads %d: %w", c.Version, formatVersion, asl.ErrUnsupported)
	}
	if _, ok := asl.LookupHash(asl.HashID(c.Hash)); !ok {
		return configRecord{}, fmt.Errorf("config record: default hash id 0x%04x: %w", c.Hash, asl.ErrUnsupported)
	}
	return c, nil
}

func appendCBOR(dst []byte, v any) []byte {
	b, err := encMode.Marshal(v)
	if err != nil {
		panic(err) // fixed structs of integers: cannot fail
	}
	return append(dst, b...)
}

// decodeIndexHead decodes and validates the index record at the start of an
// index value and returns the bytes after it: for an inline record the
// chunk header and stored payload, for a chunked record nothing.
func decodeIndexHead(b []byte) (indexRecord, []byte, error) {
	r, rest, ok := parseIndexRecord(b)
	if !ok {
		// Not in the form parseIndexRecord reads; the general decoder
		// decides and names what is wrong.
		var err error
		r = indexRecord{}
		if rest, err = decodeCanonical(b, &r, "index"); err != nil {
			return indexRecord{}, nil, err
		}
	}
	if r.Compression > compMixed {
		return indexRecord{}, nil, damaged("index record: compression %d is unknown", r.Compression)
	}
	if (r.Pack != 0 || r.Offset != 0) && r.Chunk != 0 {
		// A large packed artifact: parts from the head at Offset.
		switch {
		case r.Pack == 0 || r.Offset < uint64(len(packMagic)) || r.Blob != 0:
			return indexRecord{}, nil, damaged("index record: pack %d, offset %d with blob %d, chunk size %d", r.Pack, r.Offset, r.Blob, r.Chunk)
		case r.Chunk < MinChunkSize || r.Chunk > MaxChunkSize || r.Size <= r.Chunk:
			return indexRecord{}, nil, damaged("index record: packed parts of %d bytes, size %d", r.Chunk, r.Size)
		case len(rest) != 0:
			return indexRecord{}, nil, damaged("index record: %d trailing bytes after a packed record", len(rest))
		}
		return r, rest, nil
	}
	if r.Pack != 0 || r.Offset != 0 {
		switch {
		case r.Pack == 0 || r.Blob != 0:
			return indexRecord{}, nil, damaged("index record: pack %d, offset %d with blob %d, chunk size %d", r.Pack, r.Offset, r.Blob, r.Chunk)
		case r.Offset < uint64(len(packMagic)) || r.Size > MaxChunkSize || r.Stored > MaxChunkSize || r.Compression == compMixed:
			return indexRecord{}, nil, damaged("index record: pack record at offset %d with size %d, stored %d, compression %d", r.Offset, r.Size, r.Stored, r.Compression)
		case len(rest) != 0:
			return indexRecord{}, nil, damaged("index record: %d trailing bytes after a pack record", len(rest))
		}
		return r, rest, nil
	}
	if r.inline() {
		if r.Chunk != 0 || r.Size > MaxChunkSize || r.Compression == compMixed {
			return indexRecord{}, nil, damaged("index record: inline record with chunk size %d, size %d, compression %d", r.Chunk, r.Size, r.Compression)
		}
		return r, rest, nil
	}
	switch {
	case r.Chunk < MinChunkSize || r.Chunk > MaxChunkSize:
		return indexRecord{}, nil, damaged("index record: chunk size %d outside [%d, %d]", r.Chunk, MinChunkSize, MaxChunkSize)
	case r.Size == 0:
		return indexRecord{}, nil, damaged("index record: chunked record of size 0")
	case len(rest) != 0:
		return indexRecord{}, nil, damaged("index record: %d trailing bytes after a chunked record", len(rest))
	}
	return r, rest, nil
}

// decodeIndex decodes an index value. For an inline record it also decodes
// the chunk header and returns it with the stored payload (aliasing b),
// whose CRC is checked.
func decodeIndex(b []byte) (indexRecord, chunkHeader, []byte, error) {
	r, rest, err := decodeIndexHead(b)
	if err != nil || !r.inline() {
		return r, chunkHeader{}, nil, err
	}
	h, payload, err := decodeChunk(rest, 0, 0, r.Size)
	if err != nil {
		return indexRecord{}, chunkHeader{}, nil, err
	}
	if r.Stored != uint64(len(payload)) || r.Compression != h.Codec {
		return indexRecord{}, chunkHeader{}, nil, damaged("index record: stored %d/compression %d disagree with the inline chunk", r.Stored, r.Compression)
	}
	return r, h, payload, nil
}

// decodeChunk decodes a chunk value (header then stored payload) at position
// (blob, chunk) whose raw size must be raw, and checks its CRC. The payload
// aliases b.
func decodeChunk(b []byte, blob, chunk, raw uint64) (chunkHeader, []byte, error) {
	h, payload, ok := parseChunkHeader(b)
	if !ok {
		var err error
		h = chunkHeader{}
		if payload, err = decodeCanonical(b, &h, "chunk"); err != nil {
			return chunkHeader{}, nil, err
		}
	}
	switch {
	case h.Raw > MaxChunkSize:
		return chunkHeader{}, nil, damaged("chunk %d of blob %d: raw size %d exceeds %d", chunk, blob, h.Raw, MaxChunkSize)
	case h.Raw != raw:
		return chunkHeader{}, nil, damaged("chunk %d of blob %d: raw size %d, want %d", chunk, blob, h.Raw, raw)
	case h.Codec == codecRaw && uint64(len(payload)) != h.Raw:
		return chunkHeader{}, nil, damaged("chunk %d of blob %d: raw payload is %d bytes, header says %d", chunk, blob, len(payload), h.Raw)
	case h.Codec == codecZstd && (len(payload) == 0 || uint64(len(payload)) >= h.Raw):
		return chunkHeader{}, nil, damaged("chunk %d of blob %d: zstd payload of %d bytes for %d raw bytes", chunk, blob, len(payload), h.Raw)
	case h.Codec > codecZstd:
		return chunkHeader{}, nil, damaged("chunk %d of blob %d: codec %d is unknown", chunk, blob, h.Codec)
	}
	if got := chunkCRC(blob, chunk, uint8(h.Codec), h.Raw, payload); got != h.CRC {
		return chunkHeader{}, nil, damaged("chunk %d of blob %d: crc32c %08x, header says %08x", chunk, blob, got, h.CRC)
	}
	return h, payload, nil
}

// decodeCounter decodes the blob id lease value.
func decodeCounter(b []byte) (uint64, error) { return decodeUintRecord(b, "counter") }

// decodeUintRecord decodes a record that is one CBOR unsigned integer.
func decodeUintRecord(b []byte, what string) (uint64, error) {
	var n uint64
	rest, err := decodeCanonical(b, &n, what)
	if err != nil {
		return 0, err
	}
	if len(rest) != 0 {
		return 0, damaged("%s record: %d trailing bytes", what, len(rest))
	}
	return n, nil
}
