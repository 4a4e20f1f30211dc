package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/big"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// How the store meets damage to its files (SPECS.md §6.4, "Damage"):
//
//   - Every payload lives in a pack record whose head names its reference,
//     synced before the put returns; Pebble holds only an index that Open
//     rebuilds from the packs where Pebble lost part of it (recoverPacks).
//   - Pebble's own checksum failures, wherever they surface, are
//     asl.ErrIntegrity (ioErr); so are a MANIFEST or OPTIONS file that does
//     not read back (checkMetadata) and a file the MANIFEST names that is
//     gone.
//   - What cannot be opened any more is read by Salvage, from the packs
//     directly, into a new store.

// ioErr maps a Pebble error: corruption detected by Pebble's own checks
// (block checksums, the log's and MANIFEST's record checksums, malformed
// tables) is an integrity failure; anything else stays an I/O error.
// Pebble marks corruption with github.com/cockroachdb/errors, whose marks
// the standard library's errors.Is cannot see: pebble.IsCorruptionError
// can, and the wrapping here lets callers test with errors.Is(err,
// asl.ErrIntegrity).
func ioErr(err error) error {
	if err == nil {
		return nil
	}
	if pebble.IsCorruptionError(err) && !errors.Is(err, asl.ErrIntegrity) {
		return fmt.Errorf("damaged store file: %w: %w", err, asl.ErrIntegrity)
	}
	return err
}

// pebbleOpenErr maps an error of pebble.Open on a directory that holds a store:
// corruption, and a file that the MANIFEST names but that is gone, are
// damage (asl.ErrIntegrity); anything else (permissions, a lock held, a
// full disk) stays an I/O error.
func pebbleOpenErr(err error) error {
	if errors.Is(err, os.ErrNotExist) && !errors.Is(err, asl.ErrIntegrity) {
		return fmt.Errorf("a file the store's MANIFEST names is missing: %w: %w", err, asl.ErrIntegrity)
	}
	return ioErr(err)
}

// checkMetadata reads the two files of Pebble's own metadata that Pebble
// does not check, or checks in a way that hides damage, before pebble.Open
// reads them:
//
//   - the OPTIONS file Pebble checks the new options against: one that no
//     longer parses is damage, named;
//   - the current MANIFEST: Pebble stops reading it at the first record
//     whose checksum fails and opens the database as that prefix of its
//     history, silently, even when valid records follow (a flushed
//     memtable, whose log is gone, would be lost with its index records).
//     A damaged record followed by valid ones is damage, named with its
//     offset; a damaged last record cannot be told from a write torn by a
//     crash, so full is set: Open then rebuilds the index from every pack
//     record, not only those above the watermarks.
func checkMetadata(fs vfs.FS, desc *pebble.DBDesc, dir string, po *pebble.Options) (full bool, err error) {
	if desc.OptionsFilename != "" {
		b, err := readWhole(fs, desc.OptionsFilename)
		if errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("%s is missing: %w: %w", desc.OptionsFilename, err, asl.ErrIntegrity)
		}
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", desc.OptionsFilename, err)
		}
		o := po.Clone()
		o.EnsureDefaults()
		if err := o.CheckCompatibility(dir, string(b)); err != nil {
			return false, fmt.Errorf("%s does not parse: %v: %w", desc.OptionsFilename, err, asl.ErrIntegrity)
		}
	}
	if desc.ManifestFilename == "" {
		return false, nil
	}
	f, err := fs.Open(desc.ManifestFilename)
	if errors.Is(err, os.ErrNotExist) {
		// The manifest marker names it: a MANIFEST gone is damage.
		return false, fmt.Errorf("%s, which the manifest marker names, is missing: %w: %w", desc.ManifestFilename, err, asl.ErrIntegrity)
	}
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", desc.ManifestFilename, err)
	}
	defer f.Close()
	r := record.NewReader(f, 0)
	for {
		at := r.Offset()
		rr, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rr)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return false, nil
		case !record.IsInvalidRecord(err):
			return false, fmt.Errorf("reading %s: %w", desc.ManifestFilename, err)
		}
		// Pebble's reader confirms damage only from the sync offsets of
		// the write-ahead log's chunks, which a MANIFEST does not have:
		// look for a valid chunk after the bad one ourselves.
		b, rerr := readWhole(fs, desc.ManifestFilename)
		if rerr != nil {
			return false, fmt.Errorf("reading %s: %w", desc.ManifestFilename, rerr)
		}
		if q, ok := chunkAfter(b, at); ok {
			return false, fmt.Errorf("%s: the record at offset %d is damaged and a valid chunk follows at %d: %v: %w", desc.ManifestFilename, at, q, err, asl.ErrIntegrity)
		}
		return true, nil
	}
}

// chunkAfter reports the offset of the first valid chunk that starts a
// record (full or first chunk; legacy or recyclable header of Pebble's
// record format, masked CRC-32C over its type and payload, inside one
// 32 KiB block) after offset at of b: the proof that the record at at was
// not torn by a crash but damaged, since records after it were written.
func chunkAfter(b []byte, at int64) (int64, bool) {
	const block = 32 << 10
	for q := at + 1; q+7 <= int64(len(b)); q++ {
		typ := b[q+6]
		hl := int64(7)
		switch typ {
		case 1, 2: // full or first chunk of a record, legacy header
		case 5, 6: // the same, recyclable header
			hl = 11
		default:
			// Not the start of a record: the middle or last chunks of
			// the record a crash tore may be valid.
			continue
		}
		n := int64(binary.LittleEndian.Uint16(b[q+4:]))
		end := q + hl + n
		if n == 0 || end > int64(len(b)) || end > (q/block+1)*block {
			continue
		}
		c := crc32.Checksum(b[q+6:end], crcTable)
		if binary.LittleEndian.Uint32(b[q:]) == (c>>15|c<<17)+0xa282ead8 {
			return q, true
		}
	}
	return 0, false
}

func readWhole(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// hasPacks reports whether the store in dir holds a pack file.
func hasPacks(fs vfs.FS, dir string) bool {
	names, err := fs.List(fs.PathJoin(dir, packDir))
	if err != nil {
		return false
	}
	for _, n := range names {
		if strings.HasSuffix(n, packSuffix) {
			return true
		}
	}
	return false
}

// walkRange calls fn with every key of [lower, upper) and its value, in key
// order, over one iterator. Damage that Pebble reports on the way does not
// stop the walk: a value that cannot be read is skipped, and so are the keys
// of a block that cannot be read: probePast finds the first readable key
// after it, and the walk goes on from there. Each skip is returned in
// damage, an error wrapping asl.ErrIntegrity that names the keys and the
// file; err is fn's error, an I/O error, or ctx's.
func (s *Store) walkRange(ctx context.Context, lower, upper []byte, fn func(k, v []byte) error) (damage []error, err error) {
	it, err := s.indexReader().NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, ioErr(err)
	}
	defer it.Close()
	var last []byte // the last key visited
	for ok := it.First(); ; {
		for ; ok; ok = it.Next() {
			if err := ctx.Err(); err != nil {
				return damage, err
			}
			k := it.Key()
			last = append(last[:0], k...)
			v, verr := it.ValueAndErr()
			if verr != nil {
				if !pebble.IsCorruptionError(verr) {
					return damage, ioErr(verr)
				}
				damage = append(damage, fmt.Errorf("value of key %x: %w", k, ioErr(verr)))
				continue
			}
			if err := fn(k, v); err != nil {
				return damage, err
			}
		}
		ierr := it.Error()
		if ierr == nil {
			return damage, nil
		}
		if !pebble.IsCorruptionError(ierr) {
			return damage, ioErr(ierr)
		}
		from := lower
		if last != nil {
			from = append(bytes.Clone(last), 0)
		}
		file := "a table"
		if m := tableNum().FindStringSubmatch(ierr.Error()); m != nil {
			file = fmt.Sprintf("table %06s.sst", m[1])
		}
		resume, found := probePast(ctx, it, from, upper)
		if !found {
			damage = append(damage, fmt.Errorf("keys from %x on unreadable (%s damaged): %w", from, file, ioErr(ierr)))
			return damage, ctx.Err()
		}
		damage = append(damage, fmt.Errorf("keys from %x up to %x unreadable (%s damaged): %w", from, resume, file, ioErr(ierr)))
		last = nil
		lower = resume
		ok = it.SeekGE(resume)
	}
}

// tableNum finds the table number Pebble's corruption errors name ("file
// 000123", "backing file 000123", "table 000123"). It is compiled on first
// use: only damage handling needs it.
var tableNum = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:file|table) 0*([0-9]+)`) })

// probePast finds the first key after from (below upper) that it can seek
// to without an error: the end of the damaged block (or table) that
// stopped a walk at from. Keys are taken as numbers of a fixed width; it
// probes at distances that double from 1/2^32 of the range left, then
// searches back between the last failing probe and the first good one. A
// failing probe costs one read of a damaged block.
func probePast(ctx context.Context, it *pebble.Iterator, from, upper []byte) ([]byte, bool) {
	width := max(len(from), len(upper), 1) + 1
	num := func(k []byte) *big.Int {
		b := make([]byte, width)
		copy(b, k)
		return new(big.Int).SetBytes(b)
	}
	key := func(n *big.Int) []byte {
		b := n.FillBytes(make([]byte, width))
		return bytes.TrimRight(b, "\x00")
	}
	lo := num(from)
	hi := new(big.Int).Lsh(big.NewInt(1), uint(8*width))
	if upper != nil {
		hi = num(upper)
	}
	if lo.Cmp(hi) >= 0 {
		return nil, false
	}
	// seek reports whether seeking to n works, and the key it lands on
	// (nil past the end).
	seek := func(n *big.Int) (bool, []byte) {
		if it.SeekGE(key(n)) {
			return true, bytes.Clone(it.Key())
		}
		return it.Error() == nil, nil
	}
	span := new(big.Int).Sub(hi, lo)
	step := new(big.Int).Rsh(span, 32)
	if step.Sign() == 0 {
		step.SetInt64(1)
	}
	bad := new(big.Int).Set(lo) // seeking here fails
	var good *big.Int
	var landed []byte
	for {
		if ctx.Err() != nil {
			return nil, false
		}
		p := new(big.Int).Add(lo, step)
		if p.Cmp(hi) >= 0 {
			p.Sub(hi, big.NewInt(1))
		}
		ok, k := seek(p)
		if ok {
			good, landed = p, k
			break
		}
		bad = p
		if p.Cmp(new(big.Int).Sub(hi, big.NewInt(1))) >= 0 {
			return nil, false
		}
		step.Lsh(step, 1)
	}
	// Search back for the first key that reads: between bad (fails) and
	// good (lands on landed), at most 8·width halvings.
	for range 8 * width {
		if ctx.Err() != nil {
			break
		}
		gap := new(big.Int).Sub(good, bad)
		if gap.Cmp(big.NewInt(1)) <= 0 {
			break
		}
		mid := new(big.Int).Add(bad, gap.Rsh(gap, 1))
		if ok, k := seek(mid); ok {
			good, landed = mid, k
		} else {
			bad = mid
		}
	}
	if landed == nil {
		return nil, false // nothing readable after the damage
	}
	return landed, true
}

// dbGet is db.Get without its blind spot: Pebble's Get returns a value
// kept in a blob file (value separation) as nil when that file cannot be
// read, and keeps the error in the iterator it returns as the closer; that
// error, corruption most likely, is returned here instead of an empty
// value.
func dbGet(db *pebble.DB, key []byte) ([]byte, io.Closer, error) {
	v, closer, err := db.Get(key)
	if err != nil {
		return nil, nil, err
	}
	if it, ok := closer.(*pebble.Iterator); ok {
		if verr := it.Error(); verr != nil {
			closer.Close()
			return nil, nil, verr
		}
	}
	return v, closer, nil
}
