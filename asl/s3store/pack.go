package s3store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/zcodec"
	"github.com/amduat/amduat/enc"
)

// Pack objects and their index objects (SPECS.md §6.7, "Packs"). A pack
// holds the stored records of many small artifacts back to back, in
// ascending ReferenceBytes order, followed by its index; the same index
// bytes are written as an object of their own, which is what readers list
// and load. The index also carries the index entries (§6.5) written with
// the pack's artifacts.

var (
	packMagic  = [8]byte{'a', 'm', 'd', 's', '3', 'p', 'k', 1}
	indexMagic = [8]byte{'a', 'm', 'd', 's', '3', 'p', 'x', 1}
)

const (
	// packTrailer is the index length (u32) and the end magic after a
	// pack's index.
	packTrailer = 4 + 8
	// minArtifactRecord and minEntryRecord are the smallest encodings of
	// an index's artifact and entry records (count checks).
	minArtifactRecord = 1 + 2 + 1 + 4 + 8 + 1 + 8 + 8
	minEntryRecord    = 8 + 2 + 1 + 4 + 4
	// maxIndexObject bounds an index object read into memory.
	maxIndexObject = 64 << 20
	// packNameTime is the width of the time field of a pack name.
	packNameTime = 16
)

// packArt is one artifact of a pack index.
type packArt struct {
	Ref    asl.Reference
	Hdr    asl.Header
	Codec  uint8
	Off    uint64 // the record's offset in the pack
	Stored uint64 // the record's length
}

// packEntry is one index entry of a pack index; Stamp (the writer's clock,
// unix nanoseconds, when it was first written) orders the values of one
// (Space, Key) across packs: the highest wins.
type packEntry struct {
	Stamp uint64
	Space string
	Key   []byte
	Value []byte
}

// packIndex is the decoded index of one pack.
type packIndex struct {
	PackLen uint64 // 0: an index of entries only, with no pack object
	Arts    []packArt
	Entries []packEntry
}

// encodeIndex writes the index bytes (SPECS.md §6.7, "Index object").
// Arts must be in ascending ReferenceBytes order with contiguous records
// from offset 8; Entries in ascending (Space, Key) order.
func encodeIndex(x *packIndex) []byte {
	w := &enc.Writer{}
	w.Raw(indexMagic[:])
	w.U64(x.PackLen)
	w.U32(uint32(len(x.Arts)))
	for _, a := range x.Arts {
		rb := a.Ref.Bytes()
		w.U8(uint8(len(rb)))
		w.Raw(rb)
		if a.Hdr.HasTag {
			w.U8(1)
		} else {
			w.U8(0)
		}
		w.U32(uint32(a.Hdr.Tag))
		w.U64(a.Hdr.Size)
		w.U8(a.Codec)
		w.U64(a.Off)
		w.U64(a.Stored)
	}
	w.U32(uint32(len(x.Entries)))
	for _, e := range x.Entries {
		w.U64(e.Stamp)
		w.U16(uint16(len(e.Space)))
		w.Raw([]byte(e.Space))
		w.Bytes32(e.Key)
		w.Bytes32(e.Value)
	}
	sum := sha256.Sum256(w.Buf)
	w.Raw(sum[:])
	return w.Buf
}

// decodeIndex parses index bytes strictly: every rule of SPECS.md §6.7,
// "Index object". Errors wrap asl.ErrIntegrity.
func decodeIndex(b []byte) (*packIndex, error) {
	x, err := decodeIndexBytes(b)
	if err != nil {
		return nil, fmt.Errorf("index object: %w: %w", err, asl.ErrIntegrity)
	}
	return x, nil
}

func decodeIndexBytes(b []byte) (*packIndex, error) {
	if len(b) < 8+8+4+4+32 {
		return nil, fmt.Errorf("%d bytes, shorter than any index", len(b))
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	if !bytes.Equal(body[:8], indexMagic[:]) {
		return nil, fmt.Errorf("magic %x, want %x", body[:8], indexMagic[:])
	}
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("checksum %x, the bytes hash to %x", sum, got[:])
	}
	r := enc.NewReader(body)
	r.Raw(8, "magic")
	x := &packIndex{PackLen: r.U64("pack_len")}
	n := r.Count("count", minArtifactRecord)
	if n > 0 {
		x.Arts = make([]packArt, 0, n)
	}
	next := uint64(len(packMagic))
	for i := range n {
		rl := int(r.U8("ref_len"))
		rb := r.Raw(rl, "ref")
		if r.Err() != nil {
			break
		}
		ref, err := asl.DecodeReference(rb)
		if err != nil {
			return nil, fmt.Errorf("artifact %d: ref: %v", i, err)
		}
		if _, ok := asl.LookupHash(ref.HashID()); !ok {
			return nil, fmt.Errorf("artifact %d: ref %s: hash id not registered", i, ref)
		}
		var a packArt
		a.Ref = ref
		switch t := r.U8("has_type_tag"); t {
		case 0, 1:
			a.Hdr.HasTag = t == 1
		default:
			return nil, fmt.Errorf("artifact %d: has_type_tag %d", i, t)
		}
		a.Hdr.Tag = asl.TypeTag(r.U32("type_tag"))
		if !a.Hdr.HasTag && a.Hdr.Tag != 0 {
			return nil, fmt.Errorf("artifact %d: type_tag 0x%08x without has_type_tag", i, uint32(a.Hdr.Tag))
		}
		a.Hdr.Size = r.U64("size")
		a.Codec = r.U8("codec")
		a.Off = r.U64("offset")
		a.Stored = r.U64("stored_len")
		if r.Err() != nil {
			break
		}
		switch {
		case a.Codec > codecZstd:
			return nil, fmt.Errorf("artifact %d: codec %d", i, a.Codec)
		case a.Codec == codecRaw && a.Stored != a.Hdr.Size:
			return nil, fmt.Errorf("artifact %d: raw record of %d bytes for a payload of %d", i, a.Stored, a.Hdr.Size)
		case a.Codec == codecZstd && a.Stored == 0:
			return nil, fmt.Errorf("artifact %d: empty zstd record", i)
		case a.Off != next:
			return nil, fmt.Errorf("artifact %d: offset %d, want %d (records are contiguous)", i, a.Off, next)
		case a.Stored > maxIndexObject<<2:
			return nil, fmt.Errorf("artifact %d: record of %d bytes", i, a.Stored)
		case i > 0 && bytes.Compare(x.Arts[i-1].Ref.Bytes(), rb) >= 0:
			return nil, fmt.Errorf("artifact %d: ref %s not above the previous one", i, ref)
		}
		next += a.Stored
		x.Arts = append(x.Arts, a)
	}
	m := r.Count("entry_count", minEntryRecord)
	if m > 0 {
		x.Entries = make([]packEntry, 0, m)
	}
	for i := range m {
		var e packEntry
		e.Stamp = r.U64("stamp")
		sl := int(r.U16("space_len"))
		e.Space = string(r.Raw(sl, "space"))
		e.Key = r.Bytes32("key")
		e.Value = r.Bytes32("value")
		if r.Err() != nil {
			break
		}
		if e.Space == "" || strings.IndexByte(e.Space, 0) >= 0 {
			return nil, fmt.Errorf("entry %d: space %q", i, e.Space)
		}
		if i > 0 && !entryLess(x.Entries[i-1], e) {
			return nil, fmt.Errorf("entry %d: (space, key) not above the previous one", i)
		}
		x.Entries = append(x.Entries, e)
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	switch {
	case len(x.Arts) == 0 && x.PackLen != 0:
		return nil, fmt.Errorf("pack_len %d with no artifacts", x.PackLen)
	case len(x.Arts) > 0 && x.PackLen != next+uint64(len(b))+packTrailer:
		return nil, fmt.Errorf("pack_len %d, want %d (records, index and trailer)", x.PackLen, next+uint64(len(b))+packTrailer)
	}
	return x, nil
}

// entryLess orders entries by (Space, Key).
func entryLess(a, b packEntry) bool {
	if a.Space != b.Space {
		return a.Space < b.Space
	}
	return bytes.Compare(a.Key, b.Key) < 0
}

// packRecord is one artifact to pack: its reference, header and payload.
type packRecord struct {
	Ref asl.Reference
	Hdr asl.Header
	// Payload is the raw payload; Stored, when set, the record already
	// encoded with Codec (a repack copies records as they are).
	Payload []byte
	Codec   uint8
	Stored  []byte
}

// buildPack encodes a pack of recs (sorted here; no duplicates) and
// entries (sorted here; the last of a repeated (space, key) kept): the
// pack object's bytes (nil without recs), its index bytes and the index
// they encode. Payloads are compressed where it pays (asl/zcodec, the
// embedded store's rule).
func buildPack(recs []packRecord, entries []packEntry) (pack, index []byte, x *packIndex) {
	sort.Slice(recs, func(i, j int) bool { return bytes.Compare(recs[i].Ref.Bytes(), recs[j].Ref.Bytes()) < 0 })
	entries = sortEntries(entries)
	x = &packIndex{Entries: entries}
	var body []byte
	if len(recs) > 0 {
		body = append(body, packMagic[:]...)
	}
	for _, r := range recs {
		stored, codec := r.Stored, r.Codec
		if stored == nil {
			codec = codecRaw
			z, out := zcodec.Compress(r.Payload, nil, zcodec.DefaultMinSize)
			stored = out
			if z {
				codec = codecZstd
			}
		}
		x.Arts = append(x.Arts, packArt{Ref: r.Ref, Hdr: r.Hdr, Codec: codec, Off: uint64(len(body)), Stored: uint64(len(stored))})
		body = append(body, stored...)
	}
	if len(recs) == 0 {
		return nil, encodeIndex(x), x
	}
	x.PackLen = uint64(len(body) + indexSize(x) + packTrailer)
	index = encodeIndex(x)
	body = append(body, index...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(index)))
	body = append(body, packMagic[:]...)
	return body, index, x
}

// indexSize is the length of encodeIndex(x), which pack_len does not
// change (it is fixed width).
func indexSize(x *packIndex) int {
	n := 8 + 8 + 4 + 4 + 32
	for _, a := range x.Arts {
		n += 1 + len(a.Ref.Bytes()) + 1 + 4 + 8 + 1 + 8 + 8
	}
	for _, e := range x.Entries {
		n += 8 + 2 + len(e.Space) + 4 + len(e.Key) + 4 + len(e.Value)
	}
	return n
}

// sortEntries orders entries by (space, key), keeping of a repeated
// (space, key) the last one given.
func sortEntries(entries []packEntry) []packEntry {
	sort.SliceStable(entries, func(i, j int) bool { return entryLess(entries[i], entries[j]) })
	out := entries[:0]
	for _, e := range entries {
		if n := len(out); n > 0 && !entryLess(out[n-1], e) {
			out[n-1] = e
			continue
		}
		out = append(out, e)
	}
	return out
}

// indexOfPack reads the index from the tail of a whole pack object (the
// pack's own copy, SPECS.md §6.7): used when the index object is damaged.
func indexOfPack(pack []byte) (*packIndex, error) {
	if len(pack) < 8+packTrailer || !bytes.Equal(pack[:8], packMagic[:]) || !bytes.Equal(pack[len(pack)-8:], packMagic[:]) {
		return nil, fmt.Errorf("pack: no pack magic at its start and end: %w", asl.ErrIntegrity)
	}
	ilen := uint64(binary.BigEndian.Uint32(pack[len(pack)-packTrailer:]))
	if ilen > uint64(len(pack)-8-packTrailer) {
		return nil, fmt.Errorf("pack: index length %d exceeds the pack: %w", ilen, asl.ErrIntegrity)
	}
	start := uint64(len(pack)) - packTrailer - ilen
	x, err := decodeIndex(pack[start : start+ilen])
	if err != nil {
		return nil, err
	}
	if x.PackLen != uint64(len(pack)) {
		return nil, fmt.Errorf("pack: its index says %d bytes, it has %d: %w", x.PackLen, len(pack), asl.ErrIntegrity)
	}
	return x, nil
}

// packName is the name of a pack and of its index object: the writer's
// clock in unix nanoseconds (16 lowercase hex digits, so names list in time
// order), "-", and the SHA-256 of the pack object (of the index object for
// an index of entries only), 64 lowercase hex digits.
func packName(unixNano uint64, sum [32]byte) string {
	return fmt.Sprintf("%016x-%s", unixNano, hex.EncodeToString(sum[:]))
}

// parsePackName splits a pack name into its time and hash; ok is false for
// anything else.
func parsePackName(name string) (unixNano uint64, sum [32]byte, ok bool) {
	if len(name) != packNameTime+1+64 || name[packNameTime] != '-' {
		return 0, sum, false
	}
	t, err := strconv.ParseUint(name[:packNameTime], 16, 64)
	if err != nil || strings.ToLower(name[:packNameTime]) != name[:packNameTime] {
		return 0, sum, false
	}
	h, err := hex.DecodeString(name[packNameTime+1:])
	if err != nil || hex.EncodeToString(h) != name[packNameTime+1:] {
		return 0, sum, false
	}
	copy(sum[:], h)
	return t, sum, true
}

// PackKey and PackIndexKey are the object keys of the pack name (SPECS.md
// §6.7): PREFIX k/NAME and PREFIX x/NAME.
func (s *Store) PackKey(name string) string      { return s.prefix + "k/" + name }
func (s *Store) PackIndexKey(name string) string { return s.prefix + "x/" + name }
