package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
)

// prefixDamage keys the damage Open's recovery scan found in a pack
// (SPECS.md §6.4, "Recovery" and "Damage"): a run of bytes that holds no
// record that checks, followed by records that do. Two key forms share the
// prefix, both with a damageRecord as value:
//
//	'b' || 00 || pack u64 BE || from u64 BE: the damaged region
//	'b' || 01 || ReferenceBytes:             the artifact whose record it held
//
// The second exists only when the damaged record's head still named a
// reference that no index record names. Reads of that reference fail with
// ERR_INTEGRITY naming the region (getIndex), and Enumerate (so verify)
// reports it; an artifact put again later reads as usual (its index record
// is found first), and its region is then no longer reported. Garbage
// collection drops the records of packs it removed (pruneDead).
const prefixDamage = 'b'

const (
	damageRegion = 0x00
	damageRef    = 0x01
)

// damageRecord is the value of both key forms: the region [From, End) of
// pack Pack, the reference its head named (if any) and why its record did
// not check.
type damageRecord struct {
	Pack   uint64 `cbor:"1,keyasint"`
	From   uint64 `cbor:"2,keyasint"`
	End    uint64 `cbor:"3,keyasint"`
	Ref    []byte `cbor:"4,keyasint,omitempty"`
	Reason string `cbor:"5,keyasint,omitempty"`
}

func damageRegionKey(pack, from uint64) []byte {
	k := []byte{prefixDamage, damageRegion}
	k = appendUint64BE(k, pack)
	return appendUint64BE(k, from)
}

func damageRefKey(ref asl.Reference) []byte {
	return ref.AppendBytes([]byte{prefixDamage, damageRef})
}

func appendUint64BE(dst []byte, v uint64) []byte {
	return append(dst, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func decodeDamage(v []byte) (damageRecord, error) {
	var d damageRecord
	if _, err := decodeCanonical(v, &d, "pack damage record"); err != nil {
		return damageRecord{}, err
	}
	return d, nil
}

// err is the error a read of the damaged region's artifact, or verify,
// reports: it wraps asl.ErrIntegrity (never asl.ErrNotFound).
func (d damageRecord) err() error {
	what := fmt.Sprintf("pack %d (%s): bytes %d to %d hold no record that checks (found when the index was rebuilt from the pack)", d.Pack, packName(d.Pack), d.From, d.End)
	if d.Reason != "" {
		what += ": " + d.Reason
	}
	if len(d.Ref) > 0 {
		if ref, err := asl.DecodeReference(d.Ref); err == nil {
			return fmt.Errorf("%s: its record is damaged: %s: %w", ref, what, asl.ErrIntegrity)
		}
	}
	return fmt.Errorf("%s: %w", what, asl.ErrIntegrity)
}

// reasonOf is the part of a scan error worth keeping in a damage record.
func reasonOf(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// addDamage records, in b, the damaged region [from, end) of pack id found
// by the recovery scan and the reference its head named (ref, zero when
// none), and, when lost is set, that ref's only copy is damaged.
func addDamage(b *pebble.Batch, id, from, end uint64, ref asl.Reference, lost bool, cause error) {
	d := damageRecord{Pack: id, From: from, End: end, Reason: reasonOf(cause)}
	if !ref.IsZero() {
		d.Ref = ref.Bytes()
	}
	v := appendCBOR(nil, d)
	_ = b.Set(damageRegionKey(id, from), v, nil)
	if lost && !ref.IsZero() {
		_ = b.Set(damageRefKey(ref), v, nil)
	}
}

// getDamaged reads the damage record of ref, if the recovery scan recorded
// one: the error to report instead of "not found", or nil.
func (s *Store) getDamaged(ref asl.Reference) error {
	r := s.indexReader()
	v, closer, err := r.Get(damageRefKey(ref))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading damage record: %w", ioErr(err))
	}
	defer closer.Close()
	d, err := decodeDamage(v)
	if err != nil {
		return err
	}
	return d.err()
}

// damageReport lists the damaged regions the recovery scan recorded whose
// artifact has not been put again since (SPECS.md §6.4, "Damage"), each an
// error wrapping asl.ErrIntegrity, for Enumerate. A region whose artifact
// sorts at or before after is left out (it was reported on an earlier
// page), and so is an unnamed region unless after is zero.
func (s *Store) damageReport(after asl.Reference) ([]error, error) {
	r := s.indexReader()
	lower := []byte{prefixDamage, damageRegion}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixDamage, damageRegion + 1}})
	if err != nil {
		return nil, ioErr(err)
	}
	defer it.Close()
	var out []error
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			out = append(out, fmt.Errorf("damage record %x: %w", it.Key(), ioErr(err)))
			continue
		}
		d, err := decodeDamage(v)
		if err != nil {
			out = append(out, fmt.Errorf("damage record %x: %w", it.Key(), err))
			continue
		}
		if len(d.Ref) == 0 {
			if after.IsZero() {
				out = append(out, d.err())
			}
			continue
		}
		if !after.IsZero() && bytes.Compare(d.Ref, after.Bytes()) <= 0 {
			continue
		}
		ref, err := asl.DecodeReference(d.Ref)
		if err != nil {
			out = append(out, d.err())
			continue
		}
		present, err := s.indexed(ref)
		if err != nil {
			return nil, err
		}
		if !present {
			out = append(out, d.err())
		}
	}
	if err := it.Error(); err != nil {
		return out, ioErr(err)
	}
	return out, nil
}

// indexed reports whether ref has an index record (in the pending set of
// a read-only open, in the index queue or in Pebble).
func (s *Store) indexed(ref asl.Reference) (bool, error) {
	if _, ok := s.idx.lookup(ref); ok {
		return true, nil
	}
	_, closer, err := s.indexReader().Get(appendIndexKey(nil, ref))
	if err == nil {
		closer.Close()
		return true, nil
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	return false, ioErr(err)
}

// pruneDamage adds to b the deletion of the damage records of the packs
// dead reports gone (garbage collection removed them).
func (s *Store) pruneDamage(b *pebble.Batch, dead func(uint64) bool) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixDamage}, UpperBound: []byte{prefixDamage + 1}})
	if err != nil {
		return ioErr(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			continue
		}
		if d, err := decodeDamage(v); err == nil && dead(d.Pack) {
			b.Delete(bytes.Clone(it.Key()), nil)
		}
	}
	return ioErr(it.Close())
}

// recordDamage handles a record of pack id at from that does not check
// (cause) while records that do follow it from end on: the region is
// recorded in b, and so is the reference the record's head named, when it
// still decodes, no index record names it and no tombstone says it was
// deleted. What is recorded is durable with the rebuilt index records and
// the watermark, in the same batch.
func (s *Store) recordDamage(b *pebble.Batch, id, from, end uint64, sc scanned, cause error) error {
	ref := asl.Reference{}
	if sc.kind == recordSingle || sc.kind == recordLarge {
		ref = sc.ref
	}
	lost := false
	if !ref.IsZero() {
		present, err := s.has(appendIndexKey(nil, ref))
		if err != nil {
			return err
		}
		if !present {
			_, closer, err := s.db.Get(tombKey(ref))
			switch {
			case err == nil:
				closer.Close()
				ref = asl.Reference{} // deleted: this may be the copy deleted
			case !errors.Is(err, pebble.ErrNotFound):
				return fmt.Errorf("%s: reading tombstone: %w", ref, ioErr(err))
			}
		}
		lost = !present
	}
	addDamage(b, id, from, end, ref, lost, cause)
	if sc.kind == recordSingle && sc.data != nil {
		// The payload checked but hashes to another reference than the
		// head's: the head is damaged, and the artifact the payload is
		// (what the bytes hash to, with the head's tag) is the one lost.
		// Both are named; the region record names the second.
		if got, err := asl.Derive(sc.ref.HashID(), asl.Artifact{Bytes: sc.data, HasTag: sc.rec.Tag != nil, Tag: sc.rec.header().Tag}); err == nil && got != sc.ref {
			return s.recordDamage(b, id, from, end, scanned{kind: recordSingle, ref: got}, cause)
		}
	}
	s.packDamaged++
	return nil
}

// maxRepairHead bounds how many leading bytes of a damaged head
// nameDamaged tries to repair: the head of a record naming a registered
// hash's reference (34 bytes of ReferenceBytes) is shorter.
const maxRepairHead = 96

// maxRepairChecks bounds how many repaired heads nameDamaged reads the
// record of (a payload read and hashed, or a large artifact's parts): a
// head damaged in one byte has few repairs that decode to a known kind
// and a registered hash.
const maxRepairChecks = 64

// nameDamaged names the artifact of the record at p of pack id that does
// not check and whose head names none (it does not decode, is of no known
// kind, or names no registered hash), when records that check start again
// at q (SPECS.md §6.4, "Recovery"): the head is read as if one of its
// first bytes held another value, and a head so repaired whose record
// checks in full (for a whole artifact: its chunk value, ending at or
// before q, and its payload hashing to the head's reference; for a large
// record: its parts, read back, hashing to it) names the artifact. A flip
// of one byte of a head so never hides which artifact it held. It returns
// false when no repair of one byte checks among the first maxRepairChecks
// that decode to a known kind and a registered hash.
func (pk *packs) nameDamaged(id, p, q uint64) (asl.Reference, bool) {
	r, err := pk.reader(id)
	if err != nil || q <= p {
		return asl.Reference{}, false
	}
	win := make([]byte, min(uint64(maxPackHead), q-p))
	n, err := r.ReadAt(win, int64(p))
	if err != nil && !errors.Is(err, io.EOF) {
		return asl.Reference{}, false
	}
	win = win[:n]
	budget := maxRepairChecks
	for i := range min(len(win), maxRepairHead) {
		orig := win[i]
		for v := range 256 {
			if byte(v) == orig {
				continue
			}
			win[i] = byte(v)
			if ref, ok := pk.repairedHead(id, p, q, win, &budget); ok {
				return ref, true
			}
			if budget <= 0 {
				return asl.Reference{}, false
			}
		}
		win[i] = orig
	}
	return asl.Reference{}, false
}

// repairedHead reports the reference of the whole or large artifact whose
// record, with win as the bytes at p, checks in full and ends by q. The
// head is decoded and its bounds checked first, so that a candidate
// claiming a long payload costs no read.
func (pk *packs) repairedHead(id, p, q uint64, win []byte, budget *int) (asl.Reference, bool) {
	if !skimHead(win) {
		return asl.Reference{}, false
	}
	var head packHead
	rest, err := decodeCanonical(win, &head, "pack head")
	if err != nil {
		return asl.Reference{}, false
	}
	c := p + uint64(len(win)-len(rest))
	switch head.kind() {
	case recordSingle:
		if *head.Stored > q-c {
			return asl.Reference{}, false
		}
	case recordLarge:
		if c > q || *head.First >= p {
			return asl.Reference{}, false
		}
	default:
		return asl.Reference{}, false
	}
	if ref, err := asl.DecodeReference(head.Ref); err != nil || !ref.Known() {
		return asl.Reference{}, false
	}
	*budget--
	sc, err := pk.scanHead(id, p, win)
	if err != nil {
		return asl.Reference{}, false
	}
	return sc.ref, true
}

// skimHead reports whether b starts with the shape of a pack head that
// names an artifact: a map of 2 to 5 pairs, keys 1 to 7 ascending, key 1's
// value a byte string (ReferenceBytes, under 256 bytes), every other value
// an unsigned integer, all in shortest form. It costs a few nanoseconds,
// against microseconds for the full decoder it screens for.
func skimHead(b []byte) bool {
	if len(b) == 0 || b[0] < 0xa2 || b[0] > 0xa5 {
		return false
	}
	i, last := 1, byte(0)
	for range int(b[0] - 0xa0) {
		if i >= len(b) || b[i] <= last || b[i] > 7 {
			return false
		}
		last = b[i]
		i++
		if last != 1 {
			_, n, ok := readUint(b[i:])
			if !ok {
				return false
			}
			i += n
			continue
		}
		switch {
		case i < len(b) && b[i] >= 0x40 && b[i] < 0x58:
			i += 1 + int(b[i]-0x40)
		case i+1 < len(b) && b[i] == 0x58 && b[i+1] >= 24:
			i += 2 + int(b[i+1])
		default:
			return false
		}
	}
	return i <= len(b)
}
