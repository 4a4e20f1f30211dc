package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/amduat/amduat/asl"
)

// Pebble keys of the derived copy of the journal (SPECS.md §6.4, "Metadata
// journal"): the journal watermark, and the pin history.
const (
	prefixJournal = 'j' // 'j': CBOR array [generation, offset]: every journal record below offset of that generation is applied
	prefixPinLog  = 'h' // 'h' || seq (u64 BE): the body of the journal record of pin change seq
)

func journalWMKey() []byte { return []byte{prefixJournal} }

func pinLogKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixPinLog}, seq)
}

// metaState is the store's side of the journal.
type metaState struct {
	// mu orders appends and the Pebble commits of their derived copy, so
	// that the watermark only grows.
	mu     sync.Mutex
	f      vfs.File // nil on a read-only store
	gen    uint64
	size   uint64
	seq    uint64 // last pin change
	broken error  // an append failed: nothing more is written until Open heals

	// hold is held for reading by a put that pins what it stores
	// (PutThenPin) and by Pin, for writing by GC for its whole run: no
	// collection starts between a put and its pin.
	hold sync.RWMutex

	// ro is, on a read-only store whose journal holds records Pebble
	// lacks, the indexed batch holding them: index entries, pins and their
	// history are read through it.
	ro *pebble.Batch

	report MetaReport
}

// MetaReport says what Open found in the journal.
type MetaReport struct {
	// Replayed counts the journal records applied to Pebble's copy (records
	// the index had lost, or all of them when it was rebuilt).
	Replayed int `json:"replayed"`
	// Full: the whole journal was replayed (Pebble's watermark was absent,
	// unreadable or of another generation of the journal).
	Full bool `json:"full"`
	// Healed: the journal was damaged, torn or missing and was written
	// anew from Pebble's copy.
	Healed bool `json:"healed"`
	// Damage names each journal region that held no record that checks,
	// wrapping asl.ErrIntegrity; Lost says whether records in it may be
	// lost (not in Pebble's copy either), as opposed to covered by it or a
	// torn write never acknowledged.
	Damage []error `json:"-"`
	Lost   bool    `json:"lost"`
}

// MetaReport returns what Open found in the metadata journal.
func (s *Store) MetaReport() MetaReport {
	if s.meta == nil {
		return MetaReport{}
	}
	return s.meta.report
}

// readJournalWM reads Pebble's journal watermark; ok is false when it is
// absent or does not decode.
func readJournalWM(r pebble.Reader) (gen, end uint64, ok bool, err error) {
	v, closer, err := readerGet(r, journalWMKey())
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, 0, false, nil
	}
	if err != nil {
		if errors.Is(ioErr(err), asl.ErrIntegrity) {
			return 0, 0, false, nil
		}
		return 0, 0, false, ioErr(err)
	}
	defer closer.Close()
	var a []uint64
	if _, derr := decodeCanonical(v, &a, "journal watermark"); derr != nil || len(a) != 2 {
		return 0, 0, false, nil
	}
	return a[0], a[1], true, nil
}

// readerGet is dbGet for any reader (the database or an indexed batch).
func readerGet(r pebble.Reader, key []byte) ([]byte, io.Closer, error) {
	if db, ok := r.(*pebble.DB); ok {
		return dbGet(db, key)
	}
	return r.Get(key)
}

// openMeta reads the journal at Open and brings Pebble's copy up to date
// (SPECS.md §6.4, "Metadata journal"): the records from the watermark on
// (all of them when the watermark is of another generation or unreadable)
// are applied in one synced batch, before the packs' recovery scan, so that
// the tombstones they hold keep deleted copies deleted. A journal that is
// damaged, torn, shorter than the watermark or missing is written anew from
// Pebble's copy. A read-only store writes nothing: what it replays stays in
// memory.
func (s *Store) openMeta() error {
	s.meta = &metaState{}
	path := s.fs.PathJoin(s.dir, journalName)
	data, err := readWhole(s.fs, path)
	if errors.Is(err, os.ErrNotExist) {
		// A store created before the journal (pins and the run log in
		// Pebble only), or a journal removed: Pebble's copy is all there is.
		if s.readOnly {
			return nil
		}
		gen, _, _, werr := readJournalWM(s.db)
		if werr != nil {
			return werr
		}
		if gen != 0 {
			s.meta.report.Damage = append(s.meta.report.Damage, damaged("%s is missing; written anew from the index", journalName))
			s.meta.report.Healed = true
		}
		return s.rewriteJournal(gen + 1)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", journalName, err)
	}
	sc, err := scanJournal(data)
	if err != nil {
		s.meta.report.Damage = append(s.meta.report.Damage, fmt.Errorf("%s: %w", journalName, err))
		if s.readOnly {
			return nil
		}
		s.meta.report.Healed = true
		gen, _, _, werr := readJournalWM(s.db)
		if werr != nil {
			return werr
		}
		return s.rewriteJournal(gen + 1)
	}
	b := s.db.NewIndexedBatch()
	keep := false
	defer func() {
		if !keep {
			b.Close()
		}
	}()
	rep, err := s.replayScan(b, sc, uint64(len(data)), false)
	if err != nil {
		return err
	}
	s.meta.report = rep
	if s.readOnly {
		if rep.Replayed > 0 {
			s.meta.ro, keep = b, true
		}
		return nil
	}
	if !b.Empty() {
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("replaying %s: %w", journalName, ioErr(err))
		}
	}
	if len(sc.damage) > 0 || sc.end != uint64(len(data)) {
		// Nothing is ever appended after bytes that do not check.
		s.meta.report.Healed = true
		return s.rewriteJournal(sc.gen + 1)
	}
	return s.openJournalAppend(sc.gen, sc.end)
}

// replayScan applies to b (an indexed batch) the records of sc from
// Pebble's watermark on, or all of them when full or when the watermark
// does not name this generation within size bytes, and sets the watermark
// to the end of the last record that checks.
func (s *Store) replayScan(b *pebble.Batch, sc journalScan, size uint64, full bool) (MetaReport, error) {
	var rep MetaReport
	gen, end, ok, err := readJournalWM(b)
	if err != nil {
		return rep, err
	}
	from := end
	if full || !ok || gen != sc.gen || end > size || end < journalHead {
		from, rep.Full = journalHead, true
		if ok && gen == sc.gen && end > size {
			rep.Damage = append(rep.Damage, damaged("%s is %d bytes, shorter than the %d the index has applied", journalName, size, end))
		}
	}
	for _, e := range sc.recs {
		if e.off < from {
			continue
		}
		if err := applyMeta(b, e.rec); err != nil {
			return rep, fmt.Errorf("%s: record at %d: %w", journalName, e.off, err)
		}
		rep.Replayed++
	}
	for i, d := range sc.damage {
		err := fmt.Errorf("%s: bytes %d to %d hold no record that checks: %w", journalName, d.from, d.to, d.err)
		rep.Damage = append(rep.Damage, err)
		tornTail := sc.tail && i == len(sc.damage)-1
		if d.to > from && !tornTail {
			// Records past the watermark that no longer read, followed by
			// records that do: written, acknowledged, and lost.
			rep.Lost = true
		}
	}
	if rep.Replayed > 0 || !ok || gen != sc.gen || end != sc.end {
		_ = b.Set(journalWMKey(), appendCBOR(nil, []uint64{sc.gen, sc.end}), nil)
	}
	return rep, nil
}

// ReplayMeta applies every record of the store's metadata journal to b, an
// indexed batch (pebble.DB.NewIndexedBatch) of the database being rebuilt,
// and sets the journal watermark in it: the pins and their history, the
// run log, the cache salt and the tombstones (SPECS.md §6.4, "Metadata
// journal"). A rebuild of a damaged index commits b before it scans the
// packs, so that the tombstones keep deleted copies deleted.
func (s *Store) ReplayMeta(b *pebble.Batch) (MetaReport, error) {
	data, err := readWhole(s.fs, s.fs.PathJoin(s.dir, journalName))
	if errors.Is(err, os.ErrNotExist) {
		return MetaReport{}, nil
	}
	if err != nil {
		return MetaReport{}, fmt.Errorf("reading %s: %w", journalName, err)
	}
	sc, err := scanJournal(data)
	if err != nil {
		return MetaReport{Damage: []error{err}, Lost: true}, nil
	}
	return s.replayScan(b, sc, uint64(len(data)), true)
}

// applyMeta applies one journal record to b, reading through b.
func applyMeta(b *pebble.Batch, r metaRec) error {
	switch r.Kind {
	case metaSet:
		return b.Set(indexEntryKey(nil, r.Space, r.Key), r.Value, nil)
	case metaDel:
		return b.Delete(indexEntryKey(nil, r.Space, r.Key), nil)
	case metaPin:
		key := indexEntryKey(nil, PinSpace, []byte(r.Name))
		if r.New == nil {
			_ = b.Delete(key, nil)
		} else {
			_ = b.Set(key, r.New, nil)
		}
		body, err := encMode.Marshal(r)
		if err != nil {
			return err
		}
		return b.Set(pinLogKey(r.Seq), body, nil)
	case metaTomb:
		ref, err := asl.DecodeReference(r.Ref)
		if err != nil {
			return damaged("tombstone: %v", err)
		}
		var ps []uint64
		v, closer, err := b.Get(tombKey(ref))
		switch {
		case err == nil:
			ps, err = tombPositions(v)
			closer.Close()
			if err != nil {
				ps = nil
			}
		case !errors.Is(err, pebble.ErrNotFound):
			return ioErr(err)
		}
		have := false
		for i := 0; i+1 < len(ps); i += 2 {
			have = have || ps[i] == r.Pack && ps[i+1] == r.Offset
		}
		if !have {
			_ = b.Set(tombKey(ref), appendCBOR(nil, append(ps, r.Pack, r.Offset)), nil)
		}
		// The deletion itself: the index record, if it still names the
		// deleted copy (a copy put again later lies elsewhere).
		key := appendIndexKey(nil, ref)
		v, closer, err = b.Get(key)
		switch {
		case err == nil:
			rec, _, derr := decodeIndexHead(v)
			closer.Close()
			if derr == nil && rec.Pack == r.Pack && rec.Offset == r.Offset {
				_ = b.Delete(key, nil)
			}
		case !errors.Is(err, pebble.ErrNotFound):
			return ioErr(err)
		}
	}
	return nil
}

// openJournalAppend opens the journal for appends at end.
func (s *Store) openJournalAppend(gen, end uint64) error {
	f, err := s.fs.OpenReadWrite(s.fs.PathJoin(s.dir, journalName), vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("opening %s: %w", journalName, err)
	}
	s.meta.f, s.meta.gen, s.meta.size = f, gen, end
	seq, err := s.lastPinSeq()
	if err != nil {
		return err
	}
	s.meta.seq = seq
	return nil
}

func (s *Store) lastPinSeq() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPinLog}, UpperBound: []byte{prefixPinLog + 1}})
	if err != nil {
		return 0, ioErr(err)
	}
	var seq uint64
	if it.Last() && len(it.Key()) == 9 {
		seq = beUint64(it.Key()[1:])
	}
	return seq, ioErr(it.Close())
}

// rewriteJournal writes the journal anew, generation gen, from Pebble's
// copy: the pin history, the entries of the metadata spaces, the
// tombstones. It is written beside the old one, synced and renamed over it
// (the directory synced), and Pebble's watermark then names it.
func (s *Store) rewriteJournal(gen uint64) error {
	tmp := s.fs.PathJoin(s.dir, journalName+".tmp")
	f, err := s.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("writing %s: %w", journalName, err)
	}
	buf := appendJournalHead(nil, gen)
	off := uint64(len(buf))
	var written uint64
	add := func(r metaRec) error {
		body, err := encodeMetaRec(r)
		if err != nil {
			return err
		}
		buf = appendJournalRecord(buf, gen, off, body)
		off += journalRecHead + uint64(len(body))
		if len(buf) >= 1<<20 {
			if _, err := f.Write(buf); err != nil {
				return err
			}
			written += uint64(len(buf))
			buf = buf[:0]
		}
		return nil
	}
	err = s.metaSnapshot(add)
	if err == nil && len(buf) > 0 {
		_, err = f.Write(buf)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, s.fs.PathJoin(s.dir, journalName))
	}
	if err == nil {
		err = syncDir(s.fs, s.dir)
	}
	if err != nil {
		_ = s.fs.Remove(tmp)
		return fmt.Errorf("writing %s from the index: %w", journalName, err)
	}
	if err := s.db.Set(journalWMKey(), appendCBOR(nil, []uint64{gen, off}), pebble.Sync); err != nil {
		return fmt.Errorf("writing %s: %w", journalName, ioErr(err))
	}
	return s.openJournalAppend(gen, off)
}

// metaSnapshot calls add with records that rebuild the metadata Pebble holds:
// the pin history in order, then the entries of the metadata spaces (the
// pins as they are last), then one record per tombstone position.
func (s *Store) metaSnapshot(add func(metaRec) error) error {
	each := func(lower, upper []byte, fn func(k, v []byte) error) error {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return ioErr(err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return ioErr(err)
			}
			if err := fn(it.Key(), v); err != nil {
				return err
			}
		}
		return ioErr(it.Error())
	}
	err := each([]byte{prefixPinLog}, []byte{prefixPinLog + 1}, func(k, v []byte) error {
		r, err := decodeMetaRec(v)
		if err != nil || r.Kind != metaPin || len(k) != 9 || r.Seq != beUint64(k[1:]) {
			return fmt.Errorf("pin history key %x: %w", k, errors.Join(err, damaged("not a pin change of its sequence number")))
		}
		return add(r)
	})
	if err != nil {
		return err
	}
	spaces := make([]string, 0, len(metaSpaces))
	for sp := range metaSpaces {
		spaces = append(spaces, sp)
	}
	slices.Sort(spaces)
	for _, sp := range spaces {
		lower := indexEntryKey(nil, sp, nil)
		err := each(lower, prefixEnd(lower), func(k, v []byte) error {
			return add(metaRec{Kind: metaSet, Space: sp, Key: bytes.Clone(k[len(lower):]), Value: nilIfEmpty(v)})
		})
		if err != nil {
			return err
		}
	}
	return each([]byte{prefixTomb}, []byte{prefixTomb + 1}, func(k, v []byte) error {
		ps, err := tombPositions(v)
		if err != nil {
			return fmt.Errorf("tombstone key %x: %w", k, err)
		}
		for i := 0; i < len(ps); i += 2 {
			if err := add(metaRec{Kind: metaTomb, Ref: bytes.Clone(k[1:]), Pack: ps[i], Offset: ps[i+1]}); err != nil {
				return err
			}
		}
		return nil
	})
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// journalAppend appends recs to the journal and syncs it; the caller holds
// meta.mu. A failed write leaves the journal refusing appends until the
// next Open writes it anew.
func (s *Store) journalAppend(recs []metaRec) error {
	m := s.meta
	if m.f == nil {
		return fmt.Errorf("store %s: %w", s.dir, ErrReadOnly)
	}
	if m.broken != nil {
		return fmt.Errorf("%s: an earlier append failed (%v); reopen the store", journalName, m.broken)
	}
	var buf []byte
	off := m.size
	for _, r := range recs {
		body, err := encodeMetaRec(r)
		if err != nil {
			return err
		}
		buf = appendJournalRecord(buf, m.gen, off, body)
		off = m.size + uint64(len(buf))
	}
	if _, err := m.f.WriteAt(buf, int64(m.size)); err != nil {
		m.broken = err
		return fmt.Errorf("appending to %s: %w", journalName, err)
	}
	if err := m.f.SyncData(); err != nil {
		m.broken = err
		return fmt.Errorf("syncing %s: %w", journalName, err)
	}
	m.size = off
	return nil
}

// commitMeta sets the journal watermark in b and commits it; the caller
// holds meta.mu and appended the records b's metadata changes come from.
func (s *Store) commitMeta(b *pebble.Batch, sync bool) error {
	_ = b.Set(journalWMKey(), appendCBOR(nil, []uint64{s.meta.gen, s.meta.size}), nil)
	opt := pebble.Sync
	if !sync {
		opt = pebble.NoSync
	}
	if err := b.Commit(opt); err != nil {
		return ioErr(err)
	}
	if !sync {
		s.unsynced.Store(true)
	}
	return nil
}

// writeMetaEntries writes entries of metadata spaces: journal first
// (synced), then Pebble's copy (unsynced, as a packed batch's index
// records: Open replays what it lost). del deletes the keys instead.
func (s *Store) writeMetaEntries(entries []asl.IndexEntry, del bool) error {
	if len(entries) == 0 {
		return nil
	}
	recs := make([]metaRec, len(entries))
	b := s.db.NewBatch()
	defer b.Close()
	for i, e := range entries {
		recs[i] = metaRec{Kind: metaSet, Space: e.Space, Key: nilIfEmpty(e.Key), Value: nilIfEmpty(e.Value)}
		if del {
			recs[i] = metaRec{Kind: metaDel, Space: e.Space, Key: nilIfEmpty(e.Key)}
			_ = b.Delete(indexEntryKey(nil, e.Space, e.Key), nil)
		} else {
			_ = b.Set(indexEntryKey(nil, e.Space, e.Key), e.Value, nil)
		}
	}
	s.meta.mu.Lock()
	defer s.meta.mu.Unlock()
	if err := s.journalAppend(recs); err != nil {
		return err
	}
	// The journal is the durable copy; Close and Sync sync Pebble's log.
	return s.commitMeta(b, false)
}

// splitMeta separates the entries of metadata spaces from the others.
func splitMeta(entries []asl.IndexEntry) (derived, meta []asl.IndexEntry) {
	for _, e := range entries {
		if metaSpaces[e.Space] {
			meta = append(meta, e)
		} else {
			derived = append(derived, e)
		}
	}
	return derived, meta
}

// setPin changes the pin name to ref (the zero Reference removes it) and
// records the change in the pin history: journal first, synced, then
// Pebble's copy, synced. Without force a name that names another reference
// is not re-pointed (asl.ErrPinExists). changed is false when nothing was
// to change.
func (s *Store) setPin(ctx context.Context, name string, ref asl.Reference, force bool) (changed bool, err error) {
	m := s.meta
	m.mu.Lock()
	defer m.mu.Unlock()
	key := indexEntryKey(nil, PinSpace, []byte(name))
	var old []byte
	v, closer, err := dbGet(s.db, key)
	switch {
	case err == nil:
		old = bytes.Clone(v)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return false, ioErr(err)
	}
	var nb []byte
	if !ref.IsZero() {
		nb = ref.Bytes()
	}
	if bytes.Equal(old, nb) || old == nil && nb == nil {
		return false, nil
	}
	if old != nil && nb != nil && !force {
		return false, fmt.Errorf("names %x already (re-point it with --force): %w", old, asl.ErrPinExists)
	}
	if old != nil {
		if _, err := asl.DecodeReference(old); err != nil {
			old = nil // a damaged value: the history says it named nothing readable
		}
	}
	rec := metaRec{Kind: metaPin, Seq: m.seq + 1, Name: name, Old: old, New: nb, Time: uint64(max(time.Now().UnixNano(), 0)), Actor: asl.Actor(ctx)}
	if bytes.Equal(rec.Old, rec.New) {
		rec.Old = nil
	}
	body, err := encodeMetaRec(rec)
	if err != nil {
		return false, err
	}
	if err := s.journalAppend([]metaRec{rec}); err != nil {
		return false, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if nb == nil {
		_ = b.Delete(key, nil)
	} else {
		_ = b.Set(key, nb, nil)
	}
	_ = b.Set(pinLogKey(rec.Seq), body, nil)
	if err := s.commitMeta(b, true); err != nil {
		return false, err
	}
	m.seq = rec.Seq
	return true, nil
}

// metaReader is what index entries, pins and their history are read
// through: the database, or on a read-only store whose Open found journal
// records Pebble lacks, the batch holding them.
func (s *Store) metaReader() pebble.Reader {
	if s.meta != nil && s.meta.ro != nil {
		return s.meta.ro
	}
	return s.db
}

// closeMeta closes the journal.
func (s *Store) closeMeta() error {
	if s.meta == nil {
		return nil
	}
	var err error
	if s.meta.f != nil {
		err = s.meta.f.Close()
		s.meta.f = nil
	}
	if s.meta.ro != nil {
		_ = s.meta.ro.Close()
		s.meta.ro = nil
	}
	return err
}

// PinLog implements asl.PinLogger: every change of the pin name (of every
// pin when name is empty), oldest first, from Pebble's copy of the pin
// history (SPECS.md §19.8).
func (s *Store) PinLog(ctx context.Context, name string) ([]asl.PinChange, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	it, err := s.metaReader().NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPinLog}, UpperBound: []byte{prefixPinLog + 1}})
	if err != nil {
		return nil, fmt.Errorf("pin log: %w", ioErr(err))
	}
	defer it.Close()
	out := []asl.PinChange{}
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("pin log: %w", ioErr(err))
		}
		r, err := decodeMetaRec(v)
		if err == nil && (r.Kind != metaPin || len(it.Key()) != 9 || beUint64(it.Key()[1:]) != r.Seq) {
			err = damaged("pin history key %x holds no pin change of its number", it.Key())
		}
		if err != nil {
			return nil, fmt.Errorf("pin log: %w", err)
		}
		if name != "" && r.Name != name {
			continue
		}
		c := asl.PinChange{Seq: r.Seq, Name: r.Name, UnixNano: int64(min(r.Time, 1<<63-1)), Actor: r.Actor}
		if r.Old != nil {
			c.Old, _ = asl.DecodeReference(r.Old)
		}
		if r.New != nil {
			c.New, _ = asl.DecodeReference(r.New)
		}
		out = append(out, c)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pin log: %w", ioErr(err))
	}
	return out, nil
}

var _ asl.PinLogger = (*Store)(nil)

// PutThenPin runs put, which stores artifacts through s (Put, PutBatch,
// PutIndexed without entries of metadata spaces; never Pin, Unpin, GC or
// a PutIndexed with run log entries, which would wait for it), then pins
// the pins it returns, with no garbage collection in between: a
// collection waits for the whole call, so nothing put is garbage between
// the put and its pin (SPECS.md §19.8). Each pin is durable, with its
// history record, when PutThenPin returns. A name that names another
// reference is re-pointed only with opts.Force (asl.ErrPinExists; the
// artifacts stay stored).
func (s *Store) PutThenPin(ctx context.Context, opts asl.PinOptions, put func(ctx context.Context) ([]asl.Pin, error)) ([]asl.Pin, error) {
	if err := s.acquireWrite(); err != nil {
		return nil, fmt.Errorf("put and pin: %w", err)
	}
	defer s.release()
	s.meta.hold.RLock()
	defer s.meta.hold.RUnlock()
	pins, err := put(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		if err := s.pinHeld(ctx, p.Name, p.Ref, opts); err != nil {
			return pins, err
		}
	}
	return pins, nil
}

// PutBatchPinned stores arts as PutBatch does and pins name to the
// artifact arts[root] in the same step (PutThenPin): the call `put -r
// --pin` makes once its tree artifact is in the batch.
func (s *Store) PutBatchPinned(ctx context.Context, id asl.HashID, arts []asl.Artifact, root int, name string, opts asl.PinOptions) ([]asl.Reference, error) {
	if root < 0 || root >= len(arts) {
		return nil, fmt.Errorf("put and pin %s: root %d of a batch of %d artifacts", name, root, len(arts))
	}
	if err := CheckPinName(name); err != nil {
		return nil, err
	}
	var refs []asl.Reference
	_, err := s.PutThenPin(ctx, opts, func(ctx context.Context) ([]asl.Pin, error) {
		var err error
		if refs, err = s.PutBatch(ctx, id, arts); err != nil {
			return nil, err
		}
		return []asl.Pin{{Name: name, Ref: refs[root]}}, nil
	})
	return refs, err
}

// pinHeld is Pin for a caller that holds meta.hold.
func (s *Store) pinHeld(ctx context.Context, name string, ref asl.Reference, opts asl.PinOptions) error {
	if err := CheckPinName(name); err != nil {
		return err
	}
	if _, err := s.Stat(ctx, ref); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	if _, err := s.setPin(ctx, name, ref, opts.Force); err != nil {
		return fmt.Errorf("pin %s: %w", name, s.space.check(err))
	}
	return nil
}
