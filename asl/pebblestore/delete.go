package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2"

	"github.com/amduat/amduat/asl"
)

// prefixTomb keys hold tombstones (SPECS.md §6.4): 'd' || ReferenceBytes ->
// CBOR array of unsigned integers [pack, offset, pack, offset, ...], the
// positions of the deleted pack copies of the artifact. Open's recovery
// scan, and a full rescan of every pack, skip a pack record found at a
// listed position, so a deleted artifact does not come back; a copy put
// again later lies at another position and is recovered as usual.
const prefixTomb = 'd'

func tombKey(ref asl.Reference) []byte {
	return append([]byte{prefixTomb}, ref.Bytes()...)
}

// tombPositions decodes a tombstone value.
func tombPositions(v []byte) ([]uint64, error) {
	var ps []uint64
	if _, err := decodeCanonical(v, &ps, "tombstone"); err != nil {
		return nil, err
	}
	if len(ps)%2 != 0 {
		return nil, damaged("tombstone: odd number of integers")
	}
	return ps, nil
}

// tombstoned reports whether the pack record of ref at (pack, offset) was
// deleted.
func (s *Store) tombstoned(ref asl.Reference, pack, offset uint64) (bool, error) {
	v, closer, err := dbGet(s.db, tombKey(ref))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: reading tombstone: %w", ref, ioErr(err))
	}
	defer closer.Close()
	ps, err := tombPositions(v)
	if err != nil {
		return false, fmt.Errorf("%s: %w", ref, err)
	}
	for i := 0; i < len(ps); i += 2 {
		if ps[i] == pack && ps[i+1] == offset {
			return true, nil
		}
	}
	return false, nil
}

// claimAll takes the put claims of refs (put.go), waiting for the commits
// that hold them, so that no put of the same artifacts runs through the
// general path meanwhile. The returned function releases them.
func (s *Store) claimAll(ctx context.Context, refs []asl.Reference) (func(), error) {
	me := &claim{done: make(chan struct{})}
	var held []asl.Reference
	release := func() {
		for _, ref := range held {
			sh := s.shard(ref)
			sh.mu.Lock()
			if sh.m[ref] == me {
				delete(sh.m, ref)
			}
			sh.mu.Unlock()
		}
		close(me.done)
	}
	for _, ref := range refs {
		for {
			sh := s.shard(ref)
			sh.mu.Lock()
			owner, ok := sh.m[ref]
			if !ok {
				if sh.m == nil {
					sh.m = map[asl.Reference]*claim{}
				}
				sh.m[ref] = me
				held = append(held, ref)
				sh.mu.Unlock()
				break
			}
			sh.mu.Unlock()
			if owner == me {
				break
			}
			select {
			case <-owner.done:
			case <-ctx.Done():
				release()
				return nil, ctx.Err()
			}
		}
	}
	return release, nil
}

// Delete removes the artifacts refs from the store (SPECS.md §6.4,
// "Deletion"): their index records go, and a tombstone names the position
// of each packed copy so that no recovery brings it back; the chunks of an
// artifact kept in Pebble (version 2 layout) go too. The pack bytes stay
// until the pack is compacted. deleted[i] reports whether refs[i] was
// stored. One synced batch for all of them. Delete does not check whether
// anything still refers to them (closure.Protected does).
//
// A put of the same artifact concurrent with Delete through the general
// path waits for it (and then stores a fresh copy); a put that had already
// returned before Delete began is deleted.
func (s *Store) Delete(ctx context.Context, refs []asl.Reference) (deleted []bool, err error) {
	defer func() { err = s.space.check(err) }()
	for _, ref := range refs {
		if err := checkRef(ref); err != nil {
			return nil, fmt.Errorf("delete: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquireWrite(); err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	defer s.release()
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	return s.delete(ctx, refs)
}

// delete is Delete without its checks and locks (gc holds them).
func (s *Store) delete(ctx context.Context, refs []asl.Reference) (deleted []bool, err error) {
	release, err := s.claimAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	defer release()
	// Index commits still queued reach Pebble first: the records deleted
	// are then all in Pebble.
	if err := s.idx.drain(); err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	deleted = make([]bool, len(refs))
	seen := map[asl.Reference]bool{}
	for i, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		key := appendIndexKey(nil, ref)
		v, closer, err := dbGet(s.db, key)
		if errors.Is(err, pebble.ErrNotFound) {
			if s.getDamaged(ref) != nil {
				// Only a damaged pack record named it: forget it.
				b.Delete(damageRefKey(ref), nil)
				deleted[i] = true
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delete %s: reading index: %w", ref, ioErr(err))
		}
		rec, _, derr := decodeIndexHead(v)
		closer.Close()
		deleted[i] = true
		b.Delete(key, nil)
		b.Delete(damageRefKey(ref), nil)
		if derr != nil {
			// A damaged record: nothing says where its copy lies. A full
			// rescan may find that copy again if it still verifies.
			continue
		}
		switch {
		case rec.packed():
			if err := s.addTomb(b, ref, rec.Pack, rec.Offset); err != nil {
				return nil, fmt.Errorf("delete %s: %w", ref, err)
			}
		case rec.chunked():
			b.DeleteRange(appendChunkKey(nil, rec.Blob, 0), appendChunkKey(nil, rec.Blob+1, 0), nil)
		}
	}
	if b.Empty() {
		return deleted, nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("delete: %w", ioErr(err))
	}
	return deleted, nil
}

// addTomb adds (pack, offset) to ref's tombstone in b.
func (s *Store) addTomb(b *pebble.Batch, ref asl.Reference, pack, offset uint64) error {
	var ps []uint64
	v, closer, err := dbGet(s.db, tombKey(ref))
	switch {
	case err == nil:
		ps, err = tombPositions(v)
		closer.Close()
		if err != nil {
			ps = nil // a damaged tombstone is replaced
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("reading tombstone: %w", ioErr(err))
	}
	for i := 0; i < len(ps); i += 2 {
		if ps[i] == pack && ps[i+1] == offset {
			return nil
		}
	}
	ps = append(ps, pack, offset)
	_ = b.Set(tombKey(ref), appendCBOR(nil, ps), nil)
	return nil
}

// PinSpace is the index space of named roots (SPECS.md §6.5): key the
// pin's name, value the ReferenceBytes it names. Pins are store metadata,
// not derived data.
const PinSpace = "store.pin"

// CheckPinName reports whether name can name a pin: 1 to 255 bytes of
// UTF-8 without control characters.
func CheckPinName(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("pin name %q: must be 1 to 255 bytes", name)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("pin name %q: not UTF-8", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("pin name %q: control character or invalid UTF-8", name)
		}
	}
	return nil
}

// Pin names ref as a root (SPECS.md §19.8). A name that names another
// reference is re-pointed only with opts.Force (asl.ErrPinExists
// otherwise). The artifact must be stored (ErrNotFound otherwise). Durable
// when Pin returns.
func (s *Store) Pin(ctx context.Context, name string, ref asl.Reference, opts asl.PinOptions) error {
	if err := CheckPinName(name); err != nil {
		return err
	}
	if _, err := s.Stat(ctx, ref); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	if err := s.acquireWrite(); err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	defer s.release()
	old, found, err := s.LookupIndex(ctx, PinSpace, []byte(name))
	if err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	if found && !opts.Force && string(old) != string(ref.Bytes()) {
		return fmt.Errorf("pin %s: names %x already (re-point it with --force): %w", name, old, asl.ErrPinExists)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(indexEntryKey(nil, PinSpace, []byte(name)), ref.Bytes(), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return s.space.check(fmt.Errorf("pin %s: %w", name, ioErr(err)))
	}
	return nil
}

// Unpin removes the pin name and reports whether it existed.
func (s *Store) Unpin(ctx context.Context, name string) (bool, error) {
	if err := CheckPinName(name); err != nil {
		return false, err
	}
	_, found, err := s.LookupIndex(ctx, PinSpace, []byte(name))
	if err != nil || !found {
		return false, err
	}
	if err := s.acquireWrite(); err != nil {
		return false, fmt.Errorf("unpin %s: %w", name, err)
	}
	defer s.release()
	b := s.db.NewBatch()
	defer b.Close()
	b.Delete(indexEntryKey(nil, PinSpace, []byte(name)), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return false, s.space.check(fmt.Errorf("unpin %s: %w", name, ioErr(err)))
	}
	return true, nil
}

// Pin is one named root.
type Pin = asl.Pin

// Pins returns every pin in name order. A pin whose value is not a
// reference is damaged: ErrIntegrity naming it.
func (s *Store) Pins(ctx context.Context) ([]Pin, error) {
	var out []Pin
	err := s.ScanIndex(ctx, PinSpace, nil, func(k, v []byte) error {
		ref, err := asl.DecodeReference(v)
		if err != nil {
			return fmt.Errorf("pin %q: %w: %w", k, asl.ErrIntegrity, err)
		}
		out = append(out, Pin{Name: string(k), Ref: ref})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return out, nil
}

// DeleteIndex removes the entries keys of space in one synced batch (an
// absent key is no error).
func (s *Store) DeleteIndex(ctx context.Context, space string, keys [][]byte) error {
	if err := checkSpace(space); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.acquireWrite(); err != nil {
		return fmt.Errorf("delete index entries: %w", err)
	}
	defer s.release()
	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		b.Delete(indexEntryKey(nil, space, k), nil)
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return s.space.check(fmt.Errorf("delete index entries of %s: %w", space, ioErr(err)))
	}
	return nil
}

// RepairResult says what Repair did with one artifact.
type RepairResult struct {
	Ref asl.Reference `json:"ref"`
	// State: "ok" (stored and verified, nothing written), "repaired"
	// (stored but damaged: a fresh copy replaced it), "stored" (was not
	// stored: put).
	State string `json:"state"`
	// Damage is the error the stored copy gave, for "repaired".
	Damage string `json:"damage,omitempty"`
}

// Repair puts arts, and for each one already stored reads and verifies the
// stored copy first: a copy that fails with ErrIntegrity (damaged payload,
// pack or index record) is replaced by a fresh copy written to a pack and
// synced, its index record repointed in a synced batch (SPECS.md §6.4,
// "Repair"). Its cost is one verified read of every artifact already
// stored, plus the put of those that were damaged.
func (s *Store) Repair(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]RepairResult, error) {
	refs := make([]asl.Reference, len(arts))
	items := make([]item, len(arts))
	if err := hashBatch(id, arts, refs, items); err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	out := make([]RepairResult, len(arts))
	var fix []asl.Artifact
	var fixAt []int
	for i, ref := range refs {
		out[i].Ref = ref
		_, err := s.Stat(ctx, ref)
		if errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity) {
			out[i].State = "stored"
			fix, fixAt = append(fix, arts[i]), append(fixAt, i)
			continue
		}
		if err == nil {
			err = s.verifyStored(ctx, ref)
		}
		switch {
		case err == nil:
			out[i].State = "ok"
		case errors.Is(err, asl.ErrIntegrity):
			out[i].State, out[i].Damage = "repaired", err.Error()
			fix, fixAt = append(fix, arts[i]), append(fixAt, i)
		default:
			return nil, fmt.Errorf("repair %s: %w", ref, err)
		}
	}
	if len(fix) == 0 {
		return out, nil
	}
	if err := s.putRepair(ctx, id, fix); err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	return out, nil
}

// verifyStored reads ref whole, verified; ErrIntegrity when it is damaged.
func (s *Store) verifyStored(ctx context.Context, ref asl.Reference) error {
	rc, _, err := s.Fetch(ctx, ref)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// putRepair writes every artifact of arts as new, whether or not an index
// record names it, and commits their index records with a sync.
func (s *Store) putRepair(ctx context.Context, id asl.HashID, arts []asl.Artifact) (err error) {
	defer func() { err = s.space.check(err) }()
	if err := s.acquireWrite(); err != nil {
		return err
	}
	defer s.release()
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	return s.rewrite(ctx, id, arts)
}

// rewrite writes a fresh copy of every artifact of arts and repoints its
// index record, synced (repair, and gc compaction).
func (s *Store) rewrite(ctx context.Context, id asl.HashID, arts []asl.Artifact) error {
	refs := make([]asl.Reference, len(arts))
	items := make([]item, len(arts))
	if err := hashBatch(id, arts, refs, items); err != nil {
		return err
	}
	for i := range items {
		items[i].repair = true
	}
	defer s.keepPut(refs...)
	return s.commit(ctx, items, nil)
}

var _ asl.Pinner = (*Store)(nil)
var _ asl.Deleter = (*Store)(nil)
