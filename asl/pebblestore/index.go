package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/amduat/amduat/asl"
)

// prefixIndexEntry keys hold asl.Indexer entries (SPECS.md §6.5):
// 'x' || space || 0x00 || key -> value. Space names contain no 0x00, so the
// keys of different spaces never collide.
const prefixIndexEntry = 'x'

var _ asl.Indexer = (*Store)(nil)

// indexExtra carries index entries into the commit of a batch of artifacts.
type indexExtra struct {
	entries []asl.IndexEntry
	done    bool
}

func (e *indexExtra) addTo(b *pebble.Batch) {
	for _, en := range e.entries {
		_ = b.Set(indexEntryKey(nil, en.Space, en.Key), en.Value, nil)
	}
}

func indexEntryKey(dst []byte, space string, key []byte) []byte {
	dst = append(dst, prefixIndexEntry)
	dst = append(dst, space...)
	dst = append(dst, 0)
	return append(dst, key...)
}

func checkSpace(space string) error {
	if space == "" || strings.IndexByte(space, 0) >= 0 {
		return fmt.Errorf("index space %q: must be non-empty and contain no NUL byte", space)
	}
	return nil
}

// PutIndexed implements asl.Indexer: the artifacts and the entries become
// durable with one synced batch in the common case (SPECS.md §6.5). When the
// batch had to wait for a concurrent put of the same artifacts, the entries
// follow in a second synced batch; either way no entry is durable before the
// artifacts of the same call.
func (s *Store) PutIndexed(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) ([]asl.Reference, error) {
	for _, e := range entries {
		if err := checkSpace(e.Space); err != nil {
			return nil, err
		}
	}
	derived, meta := splitMeta(entries)
	if len(meta) == 0 {
		return s.putBatch(ctx, id, arts, &indexExtra{entries: derived})
	}
	// Entries of metadata spaces (the run log, the cache salt) go to the
	// journal once the artifacts are durable (SPECS.md §6.4, "Metadata
	// journal"), with no collection in between.
	if err := s.acquireWrite(); err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	defer s.release()
	s.meta.hold.RLock()
	defer s.meta.hold.RUnlock()
	refs, err := s.putBatch(ctx, id, arts, &indexExtra{entries: derived})
	if err != nil {
		return nil, err
	}
	if err := s.writeMetaEntries(meta, false); err != nil {
		return nil, fmt.Errorf("put batch: index entries: %w", s.space.check(err))
	}
	return refs, nil
}

// LookupIndex implements asl.Indexer.
func (s *Store) LookupIndex(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	if err := checkSpace(space); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := s.acquire(); err != nil {
		return nil, false, err
	}
	defer s.release()
	v, closer, err := readerGet(s.metaReader(), indexEntryKey(nil, space, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, ioErr(err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, true, nil
}

// ScanIndex implements asl.Indexer.
func (s *Store) ScanIndex(ctx context.Context, space string, prefix []byte, fn func(key, value []byte) error) error {
	return s.ScanIndexAfter(ctx, space, prefix, nil, fn)
}

// ScanIndexAfter implements asl.IndexSeeker: the iterator starts at the
// first key after after, so a paged scan never re-reads earlier pages.
func (s *Store) ScanIndexAfter(ctx context.Context, space string, prefix, after []byte, fn func(key, value []byte) error) error {
	if err := checkSpace(space); err != nil {
		return err
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	lower := indexEntryKey(nil, space, prefix)
	upper := prefixEnd(lower)
	if after != nil {
		// The smallest key greater than after is after followed by 0x00.
		if from := append(indexEntryKey(nil, space, after), 0); bytes.Compare(from, lower) > 0 {
			lower = from
		}
	}
	it, err := s.metaReader().NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return ioErr(err)
	}
	defer it.Close()
	skip := len(space) + 2
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return ioErr(err)
		}
		if err := fn(bytes.Clone(it.Key()[skip:]), bytes.Clone(v)); err != nil {
			return err
		}
	}
	return ioErr(it.Error())
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Corrupt replaces the stored bytes of ref with b, for tests of integrity
// checking (the conformance damage vectors): the artifact's index value
// becomes an inline record of b, well-formed (its own CRC holds) but not
// hashing to ref, so every read of ref fails with asl.ErrIntegrity. It
// reports whether ref was present. Whatever ref's record named before (a
// blob, a pack record) is left unreferenced. Never use it on real data.
func (s *Store) Corrupt(ref asl.Reference, b []byte) bool {
	if err := s.acquire(); err != nil {
		return false
	}
	defer s.release()
	if s.idx.drain() != nil {
		return false
	}
	key := appendIndexKey(nil, ref)
	old, closer, err := dbGet(s.db, key)
	if err != nil {
		return false
	}
	rec, _, err := decodeIndexHead(old)
	closer.Close()
	if err != nil {
		return false
	}
	repl := indexRecord{Size: uint64(len(b)), Tag: rec.Tag, Stored: uint64(len(b))}
	v := appendIndexRecord(nil, repl)
	v = append(appendChunkHeader(v, chunkHeader{Codec: codecRaw, Raw: repl.Size, CRC: chunkCRC(0, 0, codecRaw, repl.Size, b)}), b...)
	return s.db.Set(key, v, pebble.Sync) == nil
}
