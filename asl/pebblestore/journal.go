package pebblestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf8"

	"github.com/amduat/amduat/asl"
)

// The metadata journal (SPECS.md §6.4, "Metadata journal"): the store
// metadata that nothing rebuilds (pins and their history, the run log,
// the action cache salt, tombstones) is written as checksummed records
// appended to one file, <store>/meta.journal, synced before the change is
// acknowledged, as pack records are. Pebble holds a derived copy, which
// Open rebuilds from the journal: from the journal watermark (key 'j') on,
// or from the first record when the watermark names another generation of
// the file or cannot be read.
//
// File: the 8-byte magic "amdjrnl" 01, the generation (u64 BE), then
// records. Record at offset o:
//
//	length (u32 BE, 1..journalMaxBody) || crc (u32 BE) || body (length bytes)
//
// crc is CRC-32C of generation (u64 BE) || o (u64 BE) || length (u32 BE) ||
// body: a record read from another place or another generation of the file
// does not check. body is one metaRec map in deterministic CBOR.

const (
	journalName = "meta.journal"
	// journalMaxBody bounds a record's body: what a read allocates for a
	// damaged length, and what a resynchronising scan checks per offset.
	journalMaxBody = 64 << 10
	journalHead    = 16 // magic and generation
	journalRecHead = 8  // length and crc
)

var journalMagic = [8]byte{'a', 'm', 'd', 'j', 'r', 'n', 'l', 1}

// Kinds of journal records.
const (
	metaSet   = 1 // an index entry of a metadata space is set
	metaDel   = 2 // an index entry of a metadata space is deleted
	metaPin   = 3 // a pin changed (asl.PinChange)
	metaTomb  = 4 // a packed copy of an artifact was deleted
	metaKinds = 4
)

// metaSpaces are the index spaces (SPECS.md §6.5) that hold store metadata,
// not derived data: their entries go through the journal. The names are
// those of surf.LogIndexSpace and surf.ConfigIndexSpace (§19.7, §14.6) and
// PinSpace (§19.8); this package cannot import surf.
var metaSpaces = map[string]bool{"surf.log": true, "surf.config": true, PinSpace: true}

// IsMetaSpace reports whether the entries of space are store metadata kept
// on the journal's guarantee (SPECS.md §6.5).
func IsMetaSpace(space string) bool { return metaSpaces[space] }

// metaRec is the body of a journal record. Which fields are present
// depends on Kind (checkMetaRec); an absent byte or text field is empty.
type metaRec struct {
	Kind   uint64 `cbor:"1,keyasint"`
	Space  string `cbor:"2,keyasint,omitempty"`
	Key    []byte `cbor:"3,keyasint,omitempty"`
	Value  []byte `cbor:"4,keyasint,omitempty"`
	Seq    uint64 `cbor:"5,keyasint,omitempty"`
	Name   string `cbor:"6,keyasint,omitempty"`
	Old    []byte `cbor:"7,keyasint,omitempty"`
	New    []byte `cbor:"8,keyasint,omitempty"`
	Time   uint64 `cbor:"9,keyasint,omitempty"`
	Actor  string `cbor:"10,keyasint,omitempty"`
	Ref    []byte `cbor:"11,keyasint,omitempty"`
	Pack   uint64 `cbor:"12,keyasint,omitempty"`
	Offset uint64 `cbor:"13,keyasint,omitempty"`
}

// checkMetaRec applies the field rules of r's kind; anything wrong is
// ErrIntegrity.
func checkMetaRec(r *metaRec) error {
	pinFields := r.Seq != 0 || r.Name != "" || r.Old != nil || r.New != nil || r.Time != 0 || r.Actor != ""
	tombFields := r.Ref != nil || r.Pack != 0 || r.Offset != 0
	entryFields := r.Space != "" || r.Key != nil || r.Value != nil
	switch r.Kind {
	case metaSet, metaDel:
		switch {
		case pinFields || tombFields:
			return damaged("journal record: kind %d with pin or tombstone fields", r.Kind)
		case !metaSpaces[r.Space]:
			return damaged("journal record: space %q holds no store metadata", r.Space)
		case r.Kind == metaDel && r.Value != nil:
			return damaged("journal record: a deletion with a value")
		}
	case metaPin:
		switch {
		case entryFields || tombFields:
			return damaged("journal record: pin change with entry or tombstone fields")
		case r.Seq == 0:
			return damaged("journal record: pin change with sequence number 0")
		case CheckPinName(r.Name) != nil:
			return damaged("journal record: %v", CheckPinName(r.Name))
		case r.Old == nil && r.New == nil, bytes.Equal(r.Old, r.New):
			return damaged("journal record: pin change of %q changes nothing", r.Name)
		case !utf8.ValidString(r.Actor) || len(r.Actor) > 255:
			return damaged("journal record: actor is not UTF-8 of at most 255 bytes")
		}
		for _, b := range [][]byte{r.Old, r.New} {
			if b == nil {
				continue
			}
			if _, err := asl.DecodeReference(b); err != nil {
				return damaged("journal record: pin %q: %v", r.Name, err)
			}
		}
	case metaTomb:
		switch {
		case entryFields || pinFields:
			return damaged("journal record: tombstone with entry or pin fields")
		case r.Pack == 0 || r.Offset < uint64(len(packMagic)):
			return damaged("journal record: tombstone at pack %d, offset %d", r.Pack, r.Offset)
		}
		if _, err := asl.DecodeReference(r.Ref); err != nil {
			return damaged("journal record: tombstone: %v", err)
		}
	default:
		return damaged("journal record: kind %d is unknown", r.Kind)
	}
	return nil
}

// decodeMetaRec decodes and checks a record body.
func decodeMetaRec(b []byte) (metaRec, error) {
	var r metaRec
	rest, err := decodeCanonical(b, &r, "journal")
	if err != nil {
		return metaRec{}, err
	}
	if len(rest) != 0 {
		return metaRec{}, damaged("journal record: %d trailing bytes", len(rest))
	}
	if err := checkMetaRec(&r); err != nil {
		return metaRec{}, err
	}
	return r, nil
}

func encodeMetaRec(r metaRec) ([]byte, error) {
	if err := checkMetaRec(&r); err != nil {
		return nil, fmt.Errorf("encoding journal record: %w", err)
	}
	b, err := encMode.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding journal record: %w", err)
	}
	if len(b) > journalMaxBody {
		return nil, fmt.Errorf("journal record of %d bytes exceeds %d", len(b), journalMaxBody)
	}
	return b, nil
}

func journalCRC(gen, off uint64, body []byte) uint32 {
	var h [20]byte
	binary.BigEndian.PutUint64(h[0:], gen)
	binary.BigEndian.PutUint64(h[8:], off)
	binary.BigEndian.PutUint32(h[16:], uint32(len(body)))
	return crc32.Update(crc32.Update(0, crcTable, h[:]), crcTable, body)
}

// appendJournalRecord appends the framed record of body, at offset off of
// a journal of generation gen, to dst.
func appendJournalRecord(dst []byte, gen, off uint64, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	dst = binary.BigEndian.AppendUint32(dst, journalCRC(gen, off, body))
	return append(dst, body...)
}

func appendJournalHead(dst []byte, gen uint64) []byte {
	dst = append(dst, journalMagic[:]...)
	return binary.BigEndian.AppendUint64(dst, gen)
}

// journalRecordAt checks the framed record at off of a journal file's
// bytes b and returns its body and the offset after it. A record that does
// not check is ErrIntegrity; torn reports whether it runs past the end of
// b (what a write cut short leaves).
func journalRecordAt(b []byte, gen, off uint64) (body []byte, next uint64, torn bool, err error) {
	if off+journalRecHead > uint64(len(b)) {
		return nil, 0, true, damaged("journal record at %d: %d bytes left, header needs %d", off, uint64(len(b))-off, journalRecHead)
	}
	n := uint64(binary.BigEndian.Uint32(b[off:]))
	crc := binary.BigEndian.Uint32(b[off+4:])
	if n == 0 || n > journalMaxBody {
		return nil, 0, false, damaged("journal record at %d: length %d outside [1, %d]", off, n, journalMaxBody)
	}
	end := off + journalRecHead + n
	if end > uint64(len(b)) {
		return nil, 0, true, damaged("journal record at %d: %d bytes run past the end of the file (%d)", off, n, len(b))
	}
	body = b[off+journalRecHead : end]
	if got := journalCRC(gen, off, body); got != crc {
		return nil, 0, false, damaged("journal record at %d: crc32c %08x, header says %08x", off, got, crc)
	}
	return body, end, false, nil
}

// journalScan is what scanJournal found in a journal file.
type journalScan struct {
	gen  uint64
	recs []journalEntry
	// end is the offset after the last record that checks.
	end uint64
	// damage names each region that holds no record that checks, in file
	// order; tail is set when the last region runs to the end of the file
	// (a torn write looks like that, and so does damage to the last record).
	damage []journalDamage
	tail   bool
}

type journalEntry struct {
	off uint64
	rec metaRec
}

type journalDamage struct {
	from, to uint64
	err      error
}

// scanJournal reads every record of the journal bytes b, resynchronising
// past a damaged record as salvage does in a pack: from the next offset on
// where a record checks (its CRC is bound to its offset, so a record found
// there was written there). A damaged head (magic) is ErrIntegrity: the
// generation is unknown, and no record can be checked.
func scanJournal(b []byte) (journalScan, error) {
	var sc journalScan
	if len(b) < journalHead || !bytes.Equal(b[:8], journalMagic[:]) {
		return sc, damaged("journal: no journal magic and generation in its first %d bytes", journalHead)
	}
	sc.gen = binary.BigEndian.Uint64(b[8:])
	sc.end = journalHead
	for off := uint64(journalHead); off < uint64(len(b)); {
		body, next, _, err := journalRecordAt(b, sc.gen, off)
		if err == nil {
			var rec metaRec
			if rec, err = decodeMetaRec(body); err == nil {
				sc.recs = append(sc.recs, journalEntry{off: off, rec: rec})
				sc.end, off = next, next
				continue
			}
		}
		// Resynchronise: the next offset where a record checks.
		q := off + 1
		for ; q < uint64(len(b)); q++ {
			if !maybeJournalRecord(b, q) {
				continue
			}
			if body, _, _, e := journalRecordAt(b, sc.gen, q); e == nil {
				if _, e := decodeMetaRec(body); e == nil {
					break
				}
			}
		}
		sc.damage = append(sc.damage, journalDamage{from: off, to: q, err: err})
		sc.tail = q >= uint64(len(b))
		off = q
	}
	return sc, nil
}

// maybeJournalRecord is the cheap test of a resynchronising scan: a body
// is a map of 1 to 13 pairs whose first key is 1 (kind) with a known kind,
// so only offsets that look like one have their CRC computed.
func maybeJournalRecord(b []byte, q uint64) bool {
	if q+journalRecHead+3 > uint64(len(b)) {
		return false
	}
	n := binary.BigEndian.Uint32(b[q:])
	h := b[q+journalRecHead:]
	return n >= 3 && n <= journalMaxBody && h[0] >= 0xa1 && h[0] <= 0xad && h[1] == 0x01 && h[2] >= 1 && h[2] <= metaKinds
}
