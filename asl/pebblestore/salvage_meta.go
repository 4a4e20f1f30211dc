package pebblestore

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// packPos is a position (pack id, offset) a tombstone lists.
type packPos struct{ pack, offset uint64 }

// salvageMeta is what Salvage reads from the damaged store's metadata
// journal (SPECS.md §6.4, "Metadata journal", "Damage"): its records that
// check, and every tombstone position known (from the journal and from
// Pebble's copy), so that no deleted copy is salvaged back.
type salvageMeta struct {
	recs  []metaRec
	clean bool // the journal was read whole, without damage
	tombs map[packPos]bool
	// Records counts the records replayed into the new store.
	records int
}

// readJournal reads the old store's journal and the tombstones of its
// Pebble copy (db may be nil).
func (sv *salvager) readJournal(db *pebble.DB) {
	m := &salvageMeta{tombs: map[packPos]bool{}}
	sv.meta = m
	fs := sv.old.fs
	data, err := readWhole(fs, fs.PathJoin(sv.old.dir, journalName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		// A store from before the journal: its metadata is in Pebble only.
	case err != nil:
		sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("%s: %w", journalName, err))
	default:
		sc, err := scanJournal(data)
		if err != nil {
			sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("%s: %w", journalName, err))
			break
		}
		m.clean = len(sc.damage) == 0
		for _, d := range sc.damage {
			sv.rep.Damage = append(sv.rep.Damage, fmt.Errorf("%s: bytes %d to %d hold no record that checks: %w", journalName, d.from, d.to, d.err))
		}
		for _, e := range sc.recs {
			if e.rec.Kind == metaTomb {
				m.tombs[packPos{e.rec.Pack, e.rec.Offset}] = true
				continue
			}
			m.recs = append(m.recs, e.rec)
		}
	}
	if db == nil {
		return
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTomb}, UpperBound: []byte{prefixTomb + 1}})
	if err != nil {
		return
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			continue
		}
		ps, err := tombPositions(v)
		if err != nil {
			continue
		}
		for i := 0; i < len(ps); i += 2 {
			m.tombs[packPos{ps[i], ps[i+1]}] = true
		}
	}
}

// deleted reports whether the pack record whose index record would be rec
// was deleted (a tombstone lists its position).
func (sv *salvager) deleted(pack uint64, rec indexRecord) bool {
	return sv.meta != nil && sv.meta.tombs[packPos{pack, rec.Offset}]
}

// journal replays the old journal's records (but its tombstones, whose
// positions name the old packs) into the new store: the pins with their
// history, the run log, the cache salt.
func (sv *salvager) journal() error {
	if sv.meta == nil || len(sv.meta.recs) == 0 {
		return nil
	}
	for recs := sv.meta.recs; len(recs) > 0; {
		n := min(len(recs), salvageBatch)
		if err := sv.ns.importMeta(recs[:n]); err != nil {
			return fmt.Errorf("salvage into %s: %w", sv.ns.dir, err)
		}
		sv.meta.records += n
		recs = recs[n:]
	}
	return nil
}

// importMeta appends recs, as they are (pin changes keep their numbers,
// times and actors), to the journal and applies them to Pebble's copy.
func (s *Store) importMeta(recs []metaRec) error {
	if err := s.acquireWrite(); err != nil {
		return err
	}
	defer s.release()
	m := s.meta
	m.mu.Lock()
	defer m.mu.Unlock()
	seq := m.seq
	for i := range recs {
		if recs[i].Kind == metaPin {
			if recs[i].Seq <= seq {
				recs[i].Seq = seq + 1 // a history merged after the store's own
			}
			seq = recs[i].Seq
		}
	}
	if err := s.journalAppend(recs); err != nil {
		return err
	}
	b := s.db.NewIndexedBatch()
	defer b.Close()
	for _, r := range recs {
		if err := applyMeta(b, r); err != nil {
			return err
		}
	}
	if err := s.commitMeta(b, true); err != nil {
		return err
	}
	m.seq = seq
	return nil
}

// skipEntry reports whether entries() leaves an index entry of space to
// the journal: a metadata space, when the journal read clean (it holds
// them all, and Pebble's copy may be older).
func (sv *salvager) skipEntry(space string) bool {
	return metaSpaces[space] && sv.meta != nil && sv.meta.clean
}
