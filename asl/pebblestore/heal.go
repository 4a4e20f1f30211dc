package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// RebuildReport says what a writable Open did when Pebble's files were
// damaged (SPECS.md §6.4, "Rebuilding the index"): it moved them aside and
// rebuilt the index from the packs.
type RebuildReport struct {
	// Cause is the damage that kept the index from opening.
	Cause error
	// Aside is the directory (inside the store) the damaged files were
	// moved to, for inspection; nothing reads it again.
	Aside string
	// Hash is the default hash of the rebuilt store: the damaged config
	// record's, or, when it did not read (HashGuessed), the hash of the
	// first artifact of the packs (Options.DefaultHash when none reads).
	Hash        asl.HashID
	HashGuessed bool
	// Artifacts counts the pack records indexed; Damaged the damaged pack
	// regions recorded ("Recovery").
	Artifacts, Damaged int
	// Tombstones and Entries count the tombstones and index entries (pins
	// and the run log among them) read from the damaged files and kept;
	// Metadata the metadata records replayed (ReplayMetadata).
	Tombstones, Entries, Metadata int
	// Duration is how long the rebuild took.
	Duration time.Duration
}

// String is the one-line report the CLI prints on stderr.
func (r RebuildReport) String() string {
	hash := ""
	if r.HashGuessed {
		hash = fmt.Sprintf("; the config record was lost: default hash set to 0x%04x, the hash of the first packed artifact", uint16(r.Hash))
	}
	return fmt.Sprintf("the store's index was damaged (%v): rebuilt it from the packs: %d artifacts indexed, %d damaged pack regions recorded, %d tombstones and %d index entries (pins, run log) kept, %d metadata records replayed, in %v; the damaged files are in %s%s",
		oneLineErr(r.Cause), r.Artifacts, r.Damaged, r.Tombstones, r.Entries, r.Metadata, r.Duration.Round(time.Millisecond), r.Aside, hash)
}

func oneLineErr(err error) string {
	if err == nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// ReplayMetadata, when set, adds to b the store metadata that is not
// derived from the packs (pins and their history, the run log, cache salts,
// tombstones) from the records kept outside Pebble, and returns how many
// it added. A rebuild of the index calls it once, after the tombstones
// still readable in the damaged files were copied (so the records it adds
// win). It is nil: the metadata journal (meta.go) stays beside the packs
// through a rebuild (pebbleFile) and is replayed whole by the Open that
// follows, which finds no journal watermark in the fresh database.
var ReplayMetadata func(fs vfs.FS, dir string, b *pebble.Batch) (int, error)

// asidePrefix names the directories damaged index files are moved to.
const asidePrefix = "index-damaged-"

// pebbleFile reports whether name, in the store's directory, is one of
// Pebble's files (what a rebuild moves aside): everything but the packs,
// the ingest directory, the lock, the reserve and earlier asides.
func pebbleFile(name string) bool {
	switch {
	case name == packDir, name == ingestDir, name == "LOCK", name == ReserveFile,
		name == journalName, strings.HasPrefix(name, journalName+"."),
		strings.HasPrefix(name, asidePrefix):
		return false
	}
	return true
}

// rebuildIndex moves Pebble's damaged files in dir aside and creates a
// fresh database holding the config record, the tombstones still readable
// in the damaged files and the metadata ReplayMetadata gives; the caller
// then opens the store as usual, and its recovery scan indexes every pack
// record from the start of every pack (no watermark is left). Each step is
// safe to crash in: a move is a rename, and an Open that finds the fresh
// database incomplete (no config record) or still damaged rebuilds again.
func rebuildIndex(dir string, s settings, cause error) (RebuildReport, error) {
	rep := RebuildReport{Cause: cause, Hash: s.hash}
	fs := s.fs
	// What the damaged files still give (read in place, read-only): the
	// config, the tombstones, and whether artifacts live in Pebble itself
	// (the version 1-2 layout, PackMin > 0), which a rebuild from the packs
	// would lose: then salvage is the way.
	rep.HashGuessed = true
	var tombs [][2][]byte
	if old, _ := openSalvageDB(fs, dir, s); old != nil {
		inPebble, err := readDamagedIndex(old, &rep, &tombs)
		old.Close()
		if err != nil {
			return rep, err
		}
		if inPebble {
			return rep, fmt.Errorf("the index holds artifacts stored outside the packs (version 2 layout), which a rebuild from the packs would lose: run salvage")
		}
	}
	// Then the lock (Pebble's read-only open above takes it too).
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		if locked(err) {
			return rep, ErrLocked
		}
		return rep, fmt.Errorf("locking: %w", err)
	}
	unlock := sync.OnceValue(lock.Close)
	defer unlock()
	names, err := fs.List(dir)
	if err != nil {
		return rep, err
	}
	slices.Sort(names)
	n := 1
	for slices.Contains(names, asidePrefix+strconv.Itoa(n)) {
		n++
	}
	rep.Aside = fs.PathJoin(dir, asidePrefix+strconv.Itoa(n))
	if err := fs.MkdirAll(rep.Aside, 0o755); err != nil {
		return rep, err
	}
	for _, name := range names {
		if !pebbleFile(name) {
			continue
		}
		if err := fs.Rename(fs.PathJoin(dir, name), fs.PathJoin(rep.Aside, name)); err != nil {
			return rep, fmt.Errorf("moving %s aside: %w", name, err)
		}
	}
	if err := syncDir(fs, dir); err != nil {
		return rep, err
	}
	unlock()
	db, l2, g, err := openWritable(dir, s, false)
	if err != nil {
		return rep, err
	}
	defer l2.Close()
	defer db.Close()
	b := db.NewBatch()
	defer b.Close()
	for _, kv := range tombs {
		_ = b.Set(kv[0], kv[1], nil)
	}
	rep.Tombstones = len(tombs) - rep.Entries
	if ReplayMetadata != nil {
		m, err := ReplayMetadata(fs, dir, b)
		if err != nil {
			return rep, fmt.Errorf("replaying metadata records: %w", err)
		}
		rep.Metadata = m
	}
	if rep.HashGuessed {
		// The config record is lost: the packs' first artifact was put
		// under the store's default hash (put uses it unless told).
		if h, ok := packsHash(fs, dir); ok {
			rep.Hash = h
		}
	}
	// The config record last: until it is durable, the next Open finds
	// no config beside pack files (damage) and rebuilds again.
	cfg := configRecord{Format: formatName, Version: formatVersion, Hash: uint16(rep.Hash)}
	if err := b.Commit(pebble.Sync); err != nil {
		return rep, g.check(ioErr(err))
	}
	if err := db.Set(configKey(), encodeConfig(cfg), pebble.Sync); err != nil {
		return rep, g.check(ioErr(err))
	}
	return rep, nil
}

// healable reports whether a writable Open that failed with err should
// rebuild the index: damage to Pebble's files (not a full disk, a lock, a
// missing store), in a store that has packs to rebuild from.
func healable(fs vfs.FS, dir string, err error) bool {
	if !errors.Is(err, asl.ErrIntegrity) || errors.Is(err, ErrLocked) || errors.As(err, new(*noSpaceError)) {
		return false
	}
	if _, serr := fs.Stat(fs.PathJoin(dir, packDir)); errors.Is(serr, os.ErrNotExist) {
		return false
	}
	return hasPacks(fs, dir)
}

// readDamagedIndex reads what a rebuild keeps from the damaged database old:
// the config record's hash, the tombstones that decode; and reports
// whether it names artifacts kept in Pebble itself (chunk keys, inline or
// chunked index records).
func readDamagedIndex(old *pebble.DB, rep *RebuildReport, tombs *[][2][]byte) (bool, error) {
	if v, closer, err := dbGet(old, configKey()); err == nil {
		if cfg, err := decodeConfig(v); err == nil {
			rep.Hash, rep.HashGuessed = asl.HashID(cfg.Hash), false
			if cfg.Version < packedVersion {
				closer.Close()
				return true, nil
			}
		}
		closer.Close()
	}
	if it, err := old.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTomb}, UpperBound: []byte{prefixTomb + 1}}); err == nil {
		for ok := it.First(); ok; ok = it.Next() {
			if v, err := it.ValueAndErr(); err == nil {
				if _, err := tombPositions(v); err == nil {
					*tombs = append(*tombs, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(v)})
				}
			}
		}
		it.Close()
	}
	// The index entries that still read (pins and the run log among
	// them, SPECS.md §6.5), kept as they are.
	if it, err := old.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndexEntry}, UpperBound: []byte{prefixIndexEntry + 1}}); err == nil {
		for ok := it.First(); ok; ok = it.Next() {
			if v, err := it.ValueAndErr(); err == nil {
				*tombs = append(*tombs, [2][]byte{bytes.Clone(it.Key()), bytes.Clone(v)})
				rep.Entries++
			}
		}
		it.Close()
	}
	it, err := old.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixChunk}, UpperBound: []byte{prefixChunk + 1}})
	if err == nil {
		chunks := it.First()
		it.Close()
		if chunks {
			return true, nil
		}
	}
	it, err = old.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixIndex + 1}})
	if err != nil {
		return false, nil
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			continue
		}
		if rec, _, err := decodeIndexHead(v); err == nil && !rec.packed() {
			return true, nil
		}
	}
	return false, nil
}

// packsHash is the hash id of the first whole or large artifact record of
// the lowest pack that checks.
func packsHash(fs vfs.FS, dir string) (asl.HashID, bool) {
	pk, err := listPacks(fs, dir)
	if err != nil {
		return 0, false
	}
	defer pk.close()
	for _, id := range pk.atOpen {
		st, err := fs.Stat(fs.PathJoin(pk.dir, packName(id)))
		if err != nil {
			continue
		}
		size := uint64(st.Size())
		for p := uint64(len(packMagic)); p < size; {
			sc, err := pk.scan(id, p)
			if err != nil {
				if p = pk.resync(id, p+1, size); p >= size {
					break
				}
				continue
			}
			if sc.kind == recordSingle || sc.kind == recordLarge {
				return sc.ref.HashID(), true
			}
			p = sc.next
		}
	}
	return 0, false
}
