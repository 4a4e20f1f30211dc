package pebblestore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/amduat/amduat/asl"
)

// liveSet records the references put, fetched or stated while a garbage
// collection runs: the collection keeps them (SPECS.md §6.4, "Garbage
// collection").
type liveSet struct {
	mu    sync.Mutex
	m     map[asl.Reference]struct{}
	fresh []asl.Reference
}

func (l *liveSet) add(refs ...asl.Reference) {
	l.mu.Lock()
	for _, r := range refs {
		if _, ok := l.m[r]; !ok {
			l.m[r] = struct{}{}
			l.fresh = append(l.fresh, r)
		}
	}
	l.mu.Unlock()
}

func (l *liveSet) has(r asl.Reference) bool {
	l.mu.Lock()
	_, ok := l.m[r]
	l.mu.Unlock()
	return ok
}

func (l *liveSet) takeFresh() []asl.Reference {
	l.mu.Lock()
	f := l.fresh
	l.fresh = nil
	l.mu.Unlock()
	return f
}

// gateRead is held around the index lookup of Fetch and Stat: while a
// collection runs, the reference read is recorded, and a read and the
// deletion of what it reads never interleave.
func (s *Store) gateRead(ref asl.Reference) func() {
	s.gcReadMu.RLock()
	if l := s.gcLive.Load(); l != nil {
		l.add(ref)
	}
	return s.gcReadMu.RUnlock
}

// keepPut records refs as put while a collection runs. The caller holds
// gcMu for reading.
func (s *Store) keepPut(refs ...asl.Reference) {
	if l := s.gcLive.Load(); l != nil {
		l.add(refs...)
	}
}

// GCOptions configure GC. Children is required.
type GCOptions struct {
	// Roots are marked besides the pins (PinSpace).
	Roots []asl.Reference
	// Children returns the references a stored artifact contributes
	// (SPECS.md §19.6; closure.Children). An error stops the collection
	// before anything is deleted.
	Children func(ctx context.Context, info asl.Info) ([]asl.Reference, error)
	// Trim lists the index spaces whose entries are deleted when an
	// artifact they name is gone.
	Trim []TrimRule
	// DryRun deletes nothing: the report says what would go.
	DryRun bool
	// CompactBelow is the live fraction under which a pack is compacted: 0
	// means DefaultCompactBelow, negative means no pack is compacted.
	CompactBelow float64
	// SweepBatch is how many artifacts one locked deletion takes (0: 1024).
	SweepBatch int
	// Started, if set, is called once the collection records what is put
	// and read: from then on, whatever is put or read survives it.
	Started func()

	// point, if set, is called at each step that leaves the store in a
	// new durable state (crash tests).
	point func(string)
	// compactBatch, if positive, replaces compactBatchBytes (crash tests:
	// a rewrite of several batches).
	compactBatch int64
}

// DefaultCompactBelow is the default live fraction under which gc rewrites
// a pack.
const DefaultCompactBelow = 0.5

// TrimRule names an index space and how to read the references its entry
// names; the entry is deleted when one of them is no longer stored. Refs
// returning nil keeps the entry.
type TrimRule struct {
	Space string
	Refs  func(key, value []byte) []asl.Reference
}

// GCReport says what a collection did (or, with DryRun, would do).
type GCReport struct {
	DryRun         bool           `json:"dry_run"`
	Roots          int            `json:"roots"`
	Stored         int64          `json:"stored"`          // artifacts before
	Reached        int64          `json:"reached"`         // references the mark reached (stored or not)
	Deleted        int64          `json:"deleted"`         // artifacts deleted
	DeletedBytes   int64          `json:"deleted_bytes"`   // their stored bytes
	KeptConcurrent int64          `json:"kept_concurrent"` // unreached but put or read during the collection
	Entries        map[string]int `json:"entries_deleted"` // index entries deleted, by space
	PacksCompacted int            `json:"packs_compacted"`
	PacksDeleted   int            `json:"packs_deleted"`
	Rewritten      int64          `json:"rewritten"` // live artifacts copied out of compacted packs
	RewrittenBytes int64          `json:"rewritten_bytes"`
	PackBytes      [2]int64       `json:"pack_bytes"` // before, after
	Duration       time.Duration  `json:"duration_ns"`
}

// GC deletes every artifact that neither the pins nor opts.Roots reach
// through opts.Children, the index entries of opts.Trim that name a
// deleted artifact, and then gives the space back: packs whose live
// fraction is below opts.CompactBelow are rewritten and deleted, and
// Pebble compacts its whole key range (SPECS.md §6.4, "Garbage
// collection"). Everything put, fetched or stated while it runs is kept.
// A crash at any point loses nothing reachable; a second GC finishes the
// work. One collection runs at a time per store.
func (s *Store) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	start := time.Now()
	rep := GCReport{DryRun: opts.DryRun, Entries: map[string]int{}}
	if opts.Children == nil {
		return rep, errors.New("gc: no Children function")
	}
	if err := s.acquireWrite(); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	defer s.release()
	s.gcRun.Lock()
	defer s.gcRun.Unlock()
	point := func(p string) {
		if opts.point != nil {
			opts.point(p)
		}
	}
	batchN := opts.SweepBatch
	if batchN <= 0 {
		batchN = 1024
	}

	// Puts wait for the whole collection: each holds gcMu for reading from
	// start to end, so none interleaves with the sweep, the trim or the
	// compaction, and everything put while a collection runs is written
	// after it and survives. Reads go on, recorded and gated per batch by
	// gcReadMu (lockGC).
	// No collection starts between a put and its pin (PutThenPin, Pin,
	// PutIndexed with run log records): they hold meta.hold for reading.
	s.meta.hold.Lock()
	defer s.meta.hold.Unlock()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()

	// Start recording before the mark reads anything.
	live := &liveSet{m: map[asl.Reference]struct{}{}}
	s.lockGC()
	s.gcLive.Store(live)
	s.unlockGC()
	if opts.Started != nil {
		opts.Started()
	}
	defer func() {
		s.lockGC()
		s.gcLive.Store(nil)
		s.unlockGC()
	}()
	var err error
	if rep.PackBytes[0], err = s.packBytes(); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}

	// Mark.
	pins, err := s.Pins(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	roots := slices.Clone(opts.Roots)
	for _, p := range pins {
		roots = append(roots, p.Ref)
	}
	rep.Roots = len(roots)
	marked := map[asl.Reference]struct{}{}
	if err := s.mark(ctx, opts.Children, marked, roots); err != nil {
		return rep, fmt.Errorf("gc: mark: %w", err)
	}
	point("marked")

	// Sweep.
	var cands []asl.Info
	err = s.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error {
		rep.Stored++
		if _, ok := marked[in.Ref]; !ok {
			cands = append(cands, in)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("gc: listing the store: %w", err)
	}
	gone := map[asl.Reference]bool{} // deleted (or, dry run, would be)
	for len(cands) > 0 {
		batch := cands[:min(batchN, len(cands))]
		cands = cands[len(batch):]
		// What was put or read since the mark began is kept, and so is
		// what it reaches (best effort: the rule under the lock is exact).
		if err := s.mark(ctx, opts.Children, marked, live.takeFresh()); err != nil {
			return rep, fmt.Errorf("gc: mark: %w", err)
		}
		s.lockGC()
		var del []asl.Reference
		var bytesN int64
		for _, in := range batch {
			if _, ok := marked[in.Ref]; ok {
				continue
			}
			if live.has(in.Ref) {
				rep.KeptConcurrent++
				continue
			}
			del = append(del, in.Ref)
			bytesN += in.StoredSize
		}
		if !opts.DryRun && len(del) > 0 {
			if _, err := s.delete(ctx, del); err != nil {
				s.unlockGC()
				return rep, fmt.Errorf("gc: %w", err)
			}
		}
		s.unlockGC()
		for _, r := range del {
			gone[r] = true
		}
		rep.Deleted += int64(len(del))
		rep.DeletedBytes += bytesN
		point("swept")
	}
	rep.Reached = int64(len(marked))

	// Index entries that name what is gone.
	for _, rule := range opts.Trim {
		n, err := s.trim(ctx, rule, gone, opts.DryRun)
		if err != nil {
			return rep, fmt.Errorf("gc: index space %s: %w", rule.Space, err)
		}
		if n > 0 {
			rep.Entries[rule.Space] = n
		}
		point("trimmed " + rule.Space)
	}
	if opts.DryRun {
		rep.PackBytes[1] = rep.PackBytes[0]
		rep.Duration = time.Since(start)
		return rep, nil
	}

	// Space.
	if opts.CompactBelow >= 0 {
		below := opts.CompactBelow
		if below == 0 {
			below = DefaultCompactBelow
		}
		batch := compactBatchBytes
		if opts.compactBatch > 0 {
			batch = opts.compactBatch
		}
		if err := s.compactPacks(ctx, below, batch, &rep, point); err != nil {
			return rep, fmt.Errorf("gc: compacting packs: %w", err)
		}
	}
	if err := s.pruneDead(point); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, false); err != nil {
		return rep, fmt.Errorf("gc: compacting the index: %w", ioErr(err))
	}
	point("compacted")
	if rep.PackBytes[1], err = s.packBytes(); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

// lockGC holds off reads (Fetch and Stat's index lookups) for one step of
// a collection; GC holds gcMu, which holds off puts, for its whole run.
func (s *Store) lockGC() { s.gcReadMu.Lock() }

func (s *Store) unlockGC() { s.gcReadMu.Unlock() }

// mark adds to marked everything from refs reaches, breadth first. A
// reference that is not stored contributes nothing; damage or an I/O error
// stops the mark.
func (s *Store) mark(ctx context.Context, children func(context.Context, asl.Info) ([]asl.Reference, error), marked map[asl.Reference]struct{}, refs []asl.Reference) error {
	var queue []asl.Reference
	for _, r := range refs {
		if _, ok := marked[r]; !ok && !r.IsZero() {
			marked[r] = struct{}{}
			queue = append(queue, r)
		}
	}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		ref := queue[0]
		queue = queue[1:]
		in, err := s.Stat(ctx, ref)
		switch {
		case err == nil:
		case errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity), errors.Is(err, asl.ErrUnsupported):
			continue
		default:
			return err
		}
		kids, err := children(ctx, in)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if _, ok := marked[k]; !ok && !k.IsZero() {
				marked[k] = struct{}{}
				queue = append(queue, k)
			}
		}
	}
	return nil
}

// present reports whether an index record names ref (no gate: the caller
// may hold the gc locks).
func (s *Store) present(ref asl.Reference) (bool, error) {
	if _, ok := s.idx.lookup(ref); ok {
		return true, nil
	}
	return s.has(appendIndexKey(nil, ref))
}

// trim deletes the entries of rule.Space that name an artifact no longer
// stored (or, dry run, in gone), and returns how many.
func (s *Store) trim(ctx context.Context, rule TrimRule, gone map[asl.Reference]bool, dry bool) (int, error) {
	dead := func(key, value []byte) (bool, error) {
		for _, r := range rule.Refs(key, value) {
			if gone[r] {
				return true, nil
			}
			ok, err := s.present(r)
			if err != nil {
				return false, err
			}
			if !ok {
				return true, nil
			}
		}
		return false, nil
	}
	var stale [][]byte
	err := s.ScanIndex(ctx, rule.Space, nil, func(k, v []byte) error {
		d, err := dead(k, v)
		if d {
			stale = append(stale, k)
		}
		return err
	})
	if err != nil || dry || len(stale) == 0 {
		return len(stale), err
	}
	// Judge each again under the lock: a put may have rewritten it.
	s.lockGC()
	defer s.unlockGC()
	b := s.db.NewBatch()
	defer b.Close()
	n := 0
	var trimmed []asl.IndexEntry // of a metadata space: journaled (SPECS.md §6.4)
	for _, k := range stale {
		key := indexEntryKey(nil, rule.Space, k)
		v, closer, err := dbGet(s.db, key)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, ioErr(err)
		}
		d, derr := dead(k, v)
		closer.Close()
		if derr != nil {
			return n, derr
		}
		if d {
			b.Delete(key, nil)
			trimmed = append(trimmed, asl.IndexEntry{Space: rule.Space, Key: k})
			n++
		}
	}
	if b.Empty() {
		return 0, nil
	}
	if metaSpaces[rule.Space] {
		return n, s.writeMetaEntries(trimmed, true)
	}
	return n, ioErr(b.Commit(pebble.Sync))
}

// packFiles lists the pack files present: id -> size.
func (s *Store) packFiles() (map[uint64]int64, error) {
	names, err := s.fs.List(s.packs.dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", s.packs.dir, err)
	}
	out := map[uint64]int64{}
	for _, n := range names {
		id, err := strconv.ParseUint(strings.TrimSuffix(n, packSuffix), 10, 64)
		if err != nil || !strings.HasSuffix(n, packSuffix) || id == 0 || n != packName(id) {
			continue
		}
		st, err := s.fs.Stat(s.fs.PathJoin(s.packs.dir, n))
		if err != nil {
			return nil, fmt.Errorf("pack %d: %w", id, err)
		}
		out[id] = st.Size()
	}
	return out, nil
}

func (s *Store) packBytes() (int64, error) {
	files, err := s.packFiles()
	var n int64
	for _, sz := range files {
		n += sz
	}
	return n, err
}

// packedRecords calls fn with every index record that names a pack.
func (s *Store) packedRecords(fn func(ref asl.Reference, rec indexRecord) error) error {
	if err := s.idx.drain(); err != nil {
		return err
	}
	it, err := s.indexReader().NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixIndex + 1}})
	if err != nil {
		return ioErr(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return ioErr(err)
		}
		rec, _, err := decodeIndexHead(v)
		if err != nil || !rec.packed() {
			continue // a damaged record names nothing gc can move
		}
		ref, err := asl.DecodeReference(it.Key()[1:])
		if err != nil {
			continue
		}
		if err := fn(ref, rec); err != nil {
			return err
		}
	}
	return ioErr(it.Error())
}

// compactBatchBytes bounds the payload one rewrite batch holds in memory
// (GCOptions.compactBatch lowers it in the crash tests).
const compactBatchBytes int64 = 32 << 20

// compactPacks rewrites the live artifacts of every pack whose live
// fraction is below below into new packs, batchBytes of payload at most
// per rewrite batch, then deletes the pack:
//
//  1. every pack present takes no more appends (retireBelow);
//  2. the live artifacts of the pack are read (verified) and written to a
//     new pack, synced, and their index records repointed in a synced
//     batch, a batch at a time with puts held off (gcMu);
//  3. once no index record names the pack, and a pack with a higher id
//     exists (so that its id is never reused), its file is removed and
//     the directory synced;
//  4. pruneDead then drops the watermarks and tombstone positions of packs
//     that are gone.
//
// A crash between any two steps leaves every artifact named by an index
// record whose pack exists.
func (s *Store) compactPacks(ctx context.Context, below float64, batchBytes int64, rep *GCReport, point func(string)) error {
	retire, _ := s.packs.retireBelow()
	files, err := s.packFiles()
	if err != nil {
		return err
	}
	liveBytes := map[uint64]int64{}
	err = s.packedRecords(func(_ asl.Reference, rec indexRecord) error {
		liveBytes[rec.Pack] += int64(rec.Stored) + 64
		return nil
	})
	if err != nil {
		return err
	}
	var chosen []uint64
	for id, size := range files {
		if id >= retire || size <= int64(len(packMagic)) || s.packs.busy(id) {
			continue
		}
		if float64(liveBytes[id]) < below*float64(size) {
			chosen = append(chosen, id)
		}
	}
	slices.Sort(chosen)
	for _, id := range chosen {
		if err := ctx.Err(); err != nil {
			return err
		}
		ok, err := s.compactPack(ctx, id, batchBytes, rep, point)
		if err != nil {
			return err
		}
		point("copied " + packName(id))
		if !ok {
			continue
		}
		rep.PacksCompacted++
		files, err := s.packFiles()
		if err != nil {
			return err
		}
		higher := false
		for other := range files {
			higher = higher || other > id
		}
		if !higher {
			// Nothing was copied out of the newest pack: start an empty
			// one above it (synced), so that its id is never used again.
			w, err := s.packs.take(0)
			if err != nil {
				return err
			}
			s.packs.put(w)
		}
		// Readers that found a record of this pack before it was
		// repointed read on through the open handle.
		if _, err := s.packs.reader(id); err != nil {
			return err
		}
		if err := s.fs.Remove(s.fs.PathJoin(s.packs.dir, packName(id))); err != nil {
			return fmt.Errorf("removing pack %d: %w", id, err)
		}
		if err := syncDir(s.fs, s.packs.dir); err != nil {
			return err
		}
		rep.PacksDeleted++
		point("removed " + packName(id))
	}
	return nil
}

// compactPack copies the live artifacts of pack id to new packs, a batch
// of at most batchBytes of payload at a time, and reports whether none is
// left in it (false: one could not be read, and the pack stays).
func (s *Store) compactPack(ctx context.Context, id uint64, batchBytes int64, rep *GCReport, point func(string)) (bool, error) {
	var refs []asl.Reference
	err := s.packedRecords(func(ref asl.Reference, rec indexRecord) error {
		if rec.Pack == id {
			refs = append(refs, ref)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	whole := true
	for len(refs) > 0 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s.lockGC()
		var arts []asl.Artifact
		var hashes []asl.HashID
		var n int
		var size int64
		for n < len(refs) && size < batchBytes {
			ref := refs[n]
			n++
			var rec indexRecord
			err := s.getIndex(ref, func(v []byte) error {
				r, _, err := decodeIndexHead(v)
				rec = r
				return err
			})
			if errors.Is(err, asl.ErrNotFound) && !errors.Is(err, asl.ErrIntegrity) {
				continue // deleted meanwhile
			}
			if err != nil || rec.Pack != id {
				whole = whole && err == nil
				continue
			}
			if rec.Chunk != 0 {
				if err := s.copyLarge(ctx, ref, rec); err != nil {
					if errors.Is(err, asl.ErrIntegrity) {
						whole = false
						continue
					}
					s.unlockGC()
					return false, err
				}
				rep.Rewritten++
				rep.RewrittenBytes += int64(rec.Size)
				point("rewrote a large artifact")
				continue
			}
			data, err := s.readPacked(rec)
			if err == nil {
				err = verify(ref, rec.header(), data)
			}
			if err != nil {
				whole = false // damaged: left where it is
				continue
			}
			hdr := rec.header()
			a := asl.Artifact{Bytes: data, Tag: hdr.Tag, HasTag: hdr.HasTag}
			arts, hashes = append(arts, a), append(hashes, ref.HashID())
			size += int64(len(data))
		}
		refs = refs[n:]
		// One rewrite per hash id (a batch has one).
		for len(arts) > 0 {
			h := hashes[0]
			var same, rest []asl.Artifact
			var restH []asl.HashID
			for i, a := range arts {
				if hashes[i] == h {
					same = append(same, a)
				} else {
					rest, restH = append(rest, a), append(restH, hashes[i])
				}
			}
			if err := s.rewrite(ctx, h, same); err != nil {
				s.unlockGC()
				return false, err
			}
			for _, a := range same {
				rep.Rewritten++
				rep.RewrittenBytes += int64(len(a.Bytes))
			}
			arts, hashes = rest, restH
			point("rewrote a batch")
		}
		s.unlockGC()
	}
	if !whole {
		return false, nil
	}
	// Nothing may name the pack any more.
	left := 0
	err = s.packedRecords(func(_ asl.Reference, rec indexRecord) error {
		if rec.Pack == id {
			left++
		}
		return nil
	})
	return err == nil && left == 0, err
}

type forceRewriteKey struct{}

// copyLarge streams the large packed artifact ref into a new pack and
// repoints its index record (synced). The caller holds the gc locks.
func (s *Store) copyLarge(ctx context.Context, ref asl.Reference, rec indexRecord) error {
	h, err := asl.NewHasher(ref.HashID(), rec.header())
	if err != nil {
		return err
	}
	rd := s.newChunkReader(ctx, ref, rec, s.readChunk, fetchWorkers())
	defer rd.Close()
	got, err := s.putStreamPacked(context.WithValue(ctx, forceRewriteKey{}, true), h, rec.header(), rd)
	if err != nil {
		return err
	}
	if got != ref {
		return fmt.Errorf("%s: copy hashed to %s: %w", ref, got, asl.ErrIntegrity)
	}
	return nil
}

// pruneDead deletes the watermarks of packs that are gone and the tombstone
// positions that name them; tombstones left with no position go. Only
// packs below the highest present are pruned (a higher id may be created
// again otherwise).
func (s *Store) pruneDead(point func(string)) error {
	files, err := s.packFiles()
	if err != nil {
		return err
	}
	var top uint64
	for id := range files {
		top = max(top, id)
	}
	deadPack := func(id uint64) bool {
		_, ok := files[id]
		return !ok && id < top
	}
	b := s.db.NewBatch()
	defer b.Close()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPack}, UpperBound: []byte{prefixPack + 1}})
	if err != nil {
		return ioErr(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); len(k) == 9 && deadPack(beUint64(k[1:])) {
			b.Delete(bytes.Clone(k), nil)
		}
	}
	if err := it.Close(); err != nil {
		return ioErr(err)
	}
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTomb}, UpperBound: []byte{prefixTomb + 1}})
	if err != nil {
		return ioErr(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return ioErr(err)
		}
		ps, err := tombPositions(v)
		if err != nil {
			continue
		}
		var keep []uint64
		for i := 0; i < len(ps); i += 2 {
			if !deadPack(ps[i]) {
				keep = append(keep, ps[i], ps[i+1])
			}
		}
		switch {
		case len(keep) == len(ps):
		case len(keep) == 0:
			b.Delete(bytes.Clone(it.Key()), nil)
		default:
			_ = b.Set(bytes.Clone(it.Key()), appendCBOR(nil, keep), nil)
		}
	}
	if err := it.Close(); err != nil {
		return ioErr(err)
	}
	if err := s.pruneDamage(b, deadPack); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return ioErr(err)
	}
	point("pruned")
	return nil
}

// PackStat describes one pack file (SPECS.md §6.4): its size, the index
// records that name it, and the bytes they take, estimated as gc estimates
// them (stored bytes plus 64 per record), so that LiveBytes/Size is the
// live fraction gc compares with GCOptions.CompactBelow.
type PackStat struct {
	ID        uint64 `json:"id"`
	Size      int64  `json:"size"`
	Records   int64  `json:"records"`
	LiveBytes int64  `json:"live_bytes"`
}

// PackStats lists the pack files in ascending id order with what is live
// in them. It reads the index only; a read-only store answers too.
func (s *Store) PackStats(ctx context.Context) ([]PackStat, error) {
	if err := s.acquire(); err != nil {
		return nil, fmt.Errorf("pack stats: %w", err)
	}
	defer s.release()
	files, err := s.packFiles()
	if err != nil {
		return nil, fmt.Errorf("pack stats: %w", err)
	}
	byID := map[uint64]*PackStat{}
	for id, size := range files {
		byID[id] = &PackStat{ID: id, Size: size}
	}
	err = s.packedRecords(func(_ asl.Reference, rec indexRecord) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if ps := byID[rec.Pack]; ps != nil {
			ps.Records++
			ps.LiveBytes += int64(rec.Stored) + 64
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pack stats: %w", err)
	}
	out := make([]PackStat, 0, len(byID))
	for _, ps := range byID {
		out = append(out, *ps)
	}
	slices.SortFunc(out, func(a, b PackStat) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
