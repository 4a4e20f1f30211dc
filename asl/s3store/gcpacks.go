package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/zcodec"
)

// What a collection does with packs (SPECS.md §6.7, "Garbage collection",
// "Packs"): a pack last written before the cutoff whose copies are all
// dead (unmarked, or an older copy of an artifact packed again since) and
// whose entries have all been written again since is removed; one whose
// dead bytes are at least its live ones, or a small one beside other small
// ones, is repacked: its live records (verified) and winning entries (with
// their stamps) are written into new packs, and only then are its index
// object and pack object removed, in that order.

// packPlan is one pack's fate.
type packPlan struct {
	m       *packMeta
	keep    []artLoc        // live copies, carried into a new pack
	ents    []packEntry     // winning entries, carried with their stamps
	removed []asl.Reference // unmarked artifacts (named in deletion records)
	dead    int             // dead copies
	bytes   int64           // the pack's and its index's bytes
}

// packContents groups the copies and winning entries this process knows
// by pack.
func (p *packSet) packContents() map[*packMeta]*packPlan {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := map[*packMeta]*packPlan{}
	get := func(m *packMeta) *packPlan {
		pl := out[m]
		if pl == nil {
			pl = &packPlan{m: m}
			out[m] = pl
		}
		return pl
	}
	for _, m := range p.packs {
		if m.live {
			get(m)
		}
	}
	for _, l := range p.arts {
		if l.p.live {
			get(l.p).keep = append(get(l.p).keep, l)
		}
	}
	for _, ds := range p.dups {
		for _, d := range ds {
			if d.p.live {
				pl := get(d.p)
				pl.dead++
				pl.removed = append(pl.removed, d.a.Ref) // an older copy: harmless to name
			}
		}
	}
	for k, e := range p.ents {
		if e.p.live {
			i := 0
			for k[i] != 0 {
				i++
			}
			get(e.p).ents = append(get(e.p).ents, packEntry{Stamp: e.stamp, Space: k[:i], Key: []byte(k[i+1:]), Value: e.value})
		}
	}
	return out
}

// planPacks decides, for every pack last written before cutoff, whether
// it stays, is repacked or is removed.
func (s *Store) planPacks(marked map[asl.Reference]bool, cutoff time.Time) []*packPlan {
	target := int64(s.opts.PartSize)
	var plans, small []*packPlan
	for _, pl := range s.packs.packContents() {
		if pl.m.mod.IsZero() || !pl.m.mod.Before(cutoff) {
			continue
		}
		var live, dead int64
		kept := pl.keep[:0]
		for _, l := range pl.keep {
			if marked[l.a.Ref] {
				kept = append(kept, l)
				live += int64(l.a.Stored)
			} else {
				pl.dead++
				pl.removed = append(pl.removed, l.a.Ref)
				dead += int64(l.a.Stored)
			}
		}
		pl.keep = kept
		deadEnts := pl.m.ents - len(pl.ents)
		pl.bytes = int64(pl.m.len)
		isSmall := int64(pl.m.len) < target/8
		switch {
		case len(pl.keep) == 0 && len(pl.ents) == 0:
			plans = append(plans, pl)
		case (pl.dead > 0 || deadEnts > 0) && (dead >= live || isSmall):
			plans = append(plans, pl)
		case isSmall:
			small = append(small, pl)
		}
	}
	if len(small) >= 2 {
		plans = append(plans, small...)
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].m.name < plans[j].m.name })
	return plans
}

// carryPacks writes the live records and entries of plans into new packs
// and then removes the plans' index objects and pack objects. A plan
// whose pack cannot be read whole and verified is left as it is (its
// error is returned beside the others' progress).
func (s *Store) carryPacks(ctx context.Context, plans []*packPlan) (removed int, removedBytes, carried int64, err error) {
	const chunk = 4 // packs read at once
	var errs []error
	for lo := 0; lo < len(plans); lo += chunk {
		part := plans[lo:min(lo+chunk, len(plans))]
		recs := make([][]packRecord, len(part))
		perr := make([]error, len(part))
		var wg sync.WaitGroup
		for i, pl := range part {
			if len(pl.keep) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				recs[i], perr[i] = s.liveRecords(ctx, pl)
			}()
		}
		wg.Wait()
		var all []packRecord
		var ents []packEntry
		var done []*packPlan
		for i, pl := range part {
			if perr[i] != nil {
				errs = append(errs, perr[i])
				continue
			}
			all = append(all, recs[i]...)
			ents = append(ents, pl.ents...)
			done = append(done, pl)
		}
		for _, r := range all {
			carried += int64(len(r.Stored))
		}
		if err := s.writeRecords(ctx, all, ents); err != nil {
			return removed, removedBytes, carried, errors.Join(append(errs, err)...)
		}
		n, b, err := s.removePacks(ctx, done)
		removed += n
		removedBytes += b
		if err != nil {
			return removed, removedBytes, carried, errors.Join(append(errs, err)...)
		}
	}
	return removed, removedBytes, carried, errors.Join(errs...)
}

// liveRecords reads pl's pack whole and returns its live records, each
// verified against its reference.
func (s *Store) liveRecords(ctx context.Context, pl *packPlan) ([]packRecord, error) {
	key := s.PackKey(pl.m.name)
	pack, err := s.getValueMax(ctx, key, int64(pl.m.len), "gc (read pack)")
	if err != nil {
		return nil, err
	}
	out := make([]packRecord, 0, len(pl.keep))
	for _, l := range pl.keep {
		if l.a.Off+l.a.Stored > uint64(len(pack)) {
			return nil, fmt.Errorf("s3store: gc: s3://%s/%s: record of %s past the pack's end: %w", s.bucket, key, l.a.Ref, asl.ErrIntegrity)
		}
		stored := pack[l.a.Off : l.a.Off+l.a.Stored]
		if err := verifyRecord(l, stored); err != nil {
			return nil, fmt.Errorf("s3store: gc: s3://%s/%s bytes %d+%d: %w", s.bucket, key, l.a.Off, l.a.Stored, err)
		}
		out = append(out, packRecord{Ref: l.a.Ref, Hdr: l.a.Hdr, Codec: l.a.Codec, Stored: stored})
	}
	return out, nil
}

// verifyRecord checks that stored decodes to a payload hashing to l's
// reference.
func verifyRecord(l artLoc, stored []byte) error {
	_, err := decodeRecord(l, stored)
	return err
}

// decodeRecord is the payload of the record stored of l, verified against
// its reference (errors wrap asl.ErrIntegrity).
func decodeRecord(l artLoc, stored []byte) ([]byte, error) {
	payload := stored
	if l.a.Codec == codecZstd {
		var err error
		if payload, err = zcodec.DecodeExact(stored, l.a.Hdr.Size, nil); err != nil {
			return nil, fmt.Errorf("%s: %v: %w", l.a.Ref, err, asl.ErrIntegrity)
		}
	}
	vr, err := asl.VerifyReader(l.a.Ref, l.a.Hdr, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	return asl.ReadWhole(vr, l.a.Hdr.Size)
}

// writeRecords writes records already encoded and entries with their own
// stamps into new packs (the entries in an index of their own, last).
func (s *Store) writeRecords(ctx context.Context, recs []packRecord, ents []packEntry) error {
	groups := groupRecords(recs, s.opts.PartSize)
	errs := make([]error, len(groups))
	s.parallel(len(groups), func(i int) { errs[i] = s.writePack(ctx, groups[i], nil) })
	if err := firstErr(errs); err != nil {
		return err
	}
	if len(ents) > 0 {
		return s.writePack(ctx, nil, ents)
	}
	return nil
}

// groupRecords cuts recs (sorted here) into packs of at most target bytes
// of records each (a larger record alone).
func groupRecords(recs []packRecord, target uint64) [][]packRecord {
	sort.Slice(recs, func(i, j int) bool { return bytes.Compare(recs[i].Ref.Bytes(), recs[j].Ref.Bytes()) < 0 })
	var groups [][]packRecord
	var size uint64
	for _, r := range recs {
		n := uint64(len(r.Payload) + len(r.Stored))
		if len(groups) == 0 || size > 0 && size+n > target {
			groups = append(groups, nil)
			size = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], r)
		size += n
	}
	return groups
}

// removePacks removes the index objects of plans, then their pack
// objects, and forgets them.
func (s *Store) removePacks(ctx context.Context, plans []*packPlan) (int, int64, error) {
	var idx, packs []minio.ObjectInfo
	for _, pl := range plans {
		idx = append(idx, minio.ObjectInfo{Key: s.PackIndexKey(pl.m.name)})
		if pl.m.len > 0 {
			packs = append(packs, minio.ObjectInfo{Key: s.PackKey(pl.m.name), Size: int64(pl.m.len)})
		}
	}
	if _, _, err := s.removeObjects(ctx, idx); err != nil {
		return 0, 0, err
	}
	_, b, err := s.removeObjects(ctx, packs)
	for _, pl := range plans {
		s.packs.forget(pl.m)
	}
	return len(plans), b, err
}

// deletePacks removes every packed copy of ref this process can learn of
// (asl.Deleter, rm): each pack holding one is repacked without it (its
// other live records and entries carried into a new pack first).
func (s *Store) deletePacked(ctx context.Context, ref asl.Reference) (bool, error) {
	// One at a time: two deletes from one pack would each carry the
	// other's artifact.
	s.packs.delMu.Lock()
	defer s.packs.delMu.Unlock()
	if err := s.refreshPacks(ctx); err != nil {
		return false, err
	}
	var plans []*packPlan
	for _, pl := range s.packs.packContents() {
		holds := false
		kept := pl.keep[:0]
		for _, l := range pl.keep {
			if l.a.Ref == ref {
				holds = true
			} else {
				kept = append(kept, l)
			}
		}
		for _, r := range pl.removed {
			holds = holds || r == ref
		}
		if holds {
			pl.keep = kept
			plans = append(plans, pl)
		}
	}
	if len(plans) == 0 {
		return false, nil
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].m.name < plans[j].m.name })
	if _, _, _, err := s.carryPacks(ctx, plans); err != nil {
		return false, fmt.Errorf("s3store: delete %s: %w", ref, err)
	}
	return true, nil
}

// packLoose writes the loose artifact objects of live (the marked ones)
// that are small and were last written before cutoff into packs, and
// returns their objects, for the caller to remove under the shard claims
// (SPECS.md §6.7, "Versions"). A dry run reads and writes nothing and
// returns what it would move.
func (s *Store) packLoose(ctx context.Context, marked map[asl.Reference]bool, cutoff time.Time, dry bool) ([]minio.ObjectInfo, error) {
	var objs []minio.ObjectInfo
	lo := minio.ListObjectsOptions{Prefix: s.prefix + "a/", Recursive: true}
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return nil, s.errorf("gc (list loose artifacts)", lo.Prefix, asl.Reference{}, obj.Err)
		}
		ref, err := asl.ParseReference(path.Base(obj.Key))
		if err != nil || s.ArtifactKey(ref) != obj.Key || !marked[ref] || !obj.LastModified.Before(cutoff) {
			continue
		}
		objs = append(objs, obj)
	}
	if dry {
		return objs, nil
	}
	var moved []minio.ObjectInfo
	const batch = 1024
	for lo := 0; lo < len(objs); lo += batch {
		part := objs[lo:min(lo+batch, len(objs))]
		recs := make([]*packRecord, len(part))
		errs := make([]error, len(part))
		s.parallel(len(part), func(i int) {
			ref, _ := asl.ParseReference(path.Base(part[i].Key))
			in, err := s.stat(ctx, ref, part[i].Key)
			if err != nil || in.Size > s.opts.PartSize {
				errs[i] = err // a large artifact keeps its manifest and parts
				return
			}
			rc, hdr, err := s.fetchLoose(ctx, ref)
			if err != nil {
				errs[i] = err
				return
			}
			defer rc.Close()
			b, err := asl.ReadWhole(rc, hdr.Size)
			if err != nil {
				errs[i] = err
				return
			}
			recs[i] = &packRecord{Ref: ref, Hdr: hdr, Payload: b}
		})
		var todo []packRecord
		var done []minio.ObjectInfo
		for i, r := range recs {
			switch {
			case errs[i] != nil && !asl.IsContentError(errs[i]):
				return moved, errs[i]
			case r != nil:
				todo = append(todo, *r)
				done = append(done, part[i])
			}
		}
		if err := s.putPacks(ctx, todo, nil); err != nil {
			return moved, err
		}
		moved = append(moved, done...)
	}
	return moved, nil
}

// packLooseEntries writes every loose index entry into index objects,
// each with its object's modification time as its stamp, and then removes
// the loose objects written.
func (s *Store) packLooseEntries(ctx context.Context, dry bool) (int, error) {
	base := s.prefix + "i/"
	lo := minio.ListObjectsOptions{Prefix: base, Recursive: true}
	var objs []minio.ObjectInfo
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return 0, s.errorf("gc (list loose entries)", base, asl.Reference{}, obj.Err)
		}
		objs = append(objs, obj)
	}
	if dry {
		return len(objs), nil
	}
	n := 0
	const batch = 4096
	for lo := 0; lo < len(objs); lo += batch {
		part := objs[lo:min(lo+batch, len(objs))]
		ents := make([]packEntry, len(part))
		ok := make([]bool, len(part))
		errs := make([]error, len(part))
		s.parallel(len(part), func(i int) {
			space, key, good := s.parseIndexKey(part[i].Key)
			if !good {
				return // not an entry's key: left alone
			}
			v, err := s.getValue(ctx, part[i].Key)
			if errors.Is(err, asl.ErrNotFound) {
				return
			}
			if err != nil {
				errs[i] = err
				return
			}
			ents[i] = packEntry{Stamp: uint64(part[i].LastModified.UnixNano()), Space: space, Key: key, Value: v}
			ok[i] = true
		})
		if err := errors.Join(errs...); err != nil {
			return n, err
		}
		var todo []packEntry
		var done []minio.ObjectInfo
		for i := range part {
			if ok[i] {
				todo = append(todo, ents[i])
				done = append(done, part[i])
			}
		}
		if len(todo) == 0 {
			continue
		}
		if err := s.writePack(ctx, nil, sortEntries(todo)); err != nil {
			return n, err
		}
		if _, _, err := s.removeObjects(ctx, done); err != nil {
			return n, err
		}
		n += len(done)
	}
	s.looseIx.mu.Lock()
	s.looseIx.checked = false
	s.looseIx.mu.Unlock()
	return n, nil
}
