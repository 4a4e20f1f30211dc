package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
)

// A claim marks references that one commit is writing. Another put of the
// same reference waits for the claim to end and then re-checks the index,
// so an artifact is written once even under concurrent puts and no blob is
// orphaned by a lost race.
type claim struct{ done chan struct{} }

type claimShard struct {
	mu sync.Mutex
	m  map[asl.Reference]*claim
}

func (s *Store) shard(ref asl.Reference) *claimShard {
	d := ref.Digest()
	var b byte
	if len(d) > 0 {
		b = d[len(d)-1]
	}
	return &s.claims[b]
}

// item is one artifact on its way into the index.
type item struct {
	ref asl.Reference
	hdr asl.Header
	// payload is the whole artifact for a single-chunk item (nil when
	// staged).
	payload []byte
	// staged: blob holds the chunks already written under a staging record;
	// stored and comp summarise them.
	staged bool
	blob   uint64
	chunk  uint64
	stored uint64
	comp   uint64

	state   itemState
	claimed bool // this commit holds the claim on ref
	repair  bool // write a fresh copy even if an index record names ref (Repair)
	// checked: the presence probe checked the stored copy (cheapCheck);
	// damaged: and found it damaged.
	checked, damaged bool
	owner            *claim // the claim to wait for when state == itemWait
}

type itemState uint8

const (
	itemTodo itemState = iota
	itemMine
	itemWait
	itemDone    // written by this commit
	itemPresent // already stored (or a duplicate within the batch)
)

// Put implements asl.Receiver. An artifact up to the chunk size is hashed
// first and then appended to a pack, which is synced before Put returns;
// a larger one is streamed: its chunks are appended to a pack as parts
// while the payload is hashed, then the large record that completes them,
// and the pack is synced. The index record follows without a sync of its
// own: Open rebuilds it from the pack if it is lost (SPECS.md §6.1, §6.4).
//
// A read-only store refuses it (ErrReadOnly); a put that runs out of space
// fails with ErrNoSpace, and the store refuses writes from then on
// (SPECS.md §6.6).
func (s *Store) Put(ctx context.Context, id asl.HashID, hdr asl.Header, r io.Reader) (ref asl.Reference, err error) {
	defer func() { err = s.space.check(err) }()
	h, err := asl.NewHasher(id, hdr)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return asl.Reference{}, err
	}
	if err := s.acquireWrite(); err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	defer s.release()
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	defer func() { s.keepPut(ref) }()
	if hdr.Size > uint64(s.chunkSize) {
		return s.putStream(ctx, h, hdr, r)
	}
	bp := s.getBuf()
	defer s.putBuf(bp)
	buf := (*bp)[:hdr.Size]
	if err := readPayload(r, buf, hdr.Size, 0); err != nil {
		return asl.Reference{}, err
	}
	if err := expectEOF(r, hdr.Size); err != nil {
		return asl.Reference{}, err
	}
	h.Write(buf)
	ref, err = h.Sum()
	if err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	items := []item{{ref: ref, hdr: hdr, payload: buf}}
	if err := s.commit(ctx, items, nil); err != nil {
		return asl.Reference{}, fmt.Errorf("put %s: %w", ref, err)
	}
	if err := s.repairPresent(ctx, items); err != nil {
		return asl.Reference{}, fmt.Errorf("put %s: %w", ref, err)
	}
	return ref, nil
}

// readPayload fills buf from r; a short payload is the caller's error.
func readPayload(r io.Reader, buf []byte, size, off uint64) error {
	n, err := io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("put: payload is %d bytes, header says %d", off+uint64(n), size)
	}
	if err != nil {
		return fmt.Errorf("put: reading payload at byte %d: %w", off+uint64(n), err)
	}
	return nil
}

// expectEOF checks that r has nothing after size bytes.
func expectEOF(r io.Reader, size uint64) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	switch {
	case n > 0:
		return fmt.Errorf("put: payload is longer than the %d bytes the header says", size)
	case err == io.EOF:
		return nil
	default:
		return fmt.Errorf("put: reading payload at byte %d: %w", size, err)
	}
}

// PutBatch implements asl.BatchReceiver: every artifact is hashed, those not
// yet stored are appended to a pack (the larger ones as parts and a large
// record), and one sync of that pack makes them durable (packFresh,
// packNew, writeMine). With Options.PackMin < 0 (the version 2 layout) the
// sync is that of one Pebble batch instead, and artifacts larger than the
// chunk size are staged first (SPECS.md §6.4). Like Put, it is refused on a
// read-only store and on a store that ran out of space (SPECS.md §6.6).
func (s *Store) PutBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, error) {
	return s.putBatch(ctx, id, arts, nil)
}

func (s *Store) putBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact, extra *indexExtra) (refs []asl.Reference, err error) {
	defer func() { err = s.space.check(err) }()
	if _, ok := asl.LookupHash(id); !ok {
		return nil, fmt.Errorf("put batch: hash id 0x%04x: %w", uint16(id), asl.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquireWrite(); err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	defer s.release()
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	defer func() { s.keepPut(refs...) }()
	if extra == nil {
		fresh, done, err := s.packFresh(ctx, id, arts)
		if done {
			if err != nil {
				return nil, fmt.Errorf("put batch: %w", err)
			}
			return fresh, nil
		}
	}
	refs = make([]asl.Reference, len(arts))
	items := make([]item, len(arts))
	if err := hashBatch(id, arts, refs, items); err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	// Stage the large artifacts; a staged artifact that turns out to be
	// stored already has its staging deleted by commit. The largest share
	// one ingest.
	var g *ingester
	for i := range items {
		if items[i].hdr.Size <= uint64(s.chunkSize) || s.packMin >= 0 {
			// Packed: large artifacts in memory are written as parts by
			// packItems, with the rest of the batch.
			continue
		}
		var gi *ingester
		if items[i].hdr.Size >= s.ingestMin {
			if g == nil {
				g = s.newIngester()
			}
			gi = g
		}
		if err := s.stage(ctx, &items[i], gi); err != nil {
			if g != nil {
				g.abort()
			}
			s.discardStaged(items[:i])
			return nil, fmt.Errorf("put batch: artifact %d (%s): %w", i, refs[i], err)
		}
	}
	if g != nil {
		if err := g.ingest(ctx); err != nil {
			g.abort()
			s.discardStaged(items)
			return nil, fmt.Errorf("put batch: %w", err)
		}
	}
	if err := s.commit(ctx, items, extra); err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	if err := s.repairPresent(ctx, items); err != nil {
		return nil, fmt.Errorf("put batch: %w", err)
	}
	return refs, nil
}

// repairPresent checks the stored copy of every item that the commit found
// stored already (checkStored), and writes a fresh copy of each one that
// is damaged (SPECS.md §6.4, "Repair"): a re-put repairs.
func (s *Store) repairPresent(ctx context.Context, items []item) error {
	var fix []item
	seen := map[asl.Reference]bool{}
	for _, it := range items {
		if it.state != itemPresent || seen[it.ref] || it.staged {
			continue
		}
		seen[it.ref] = true
		bad := it.checked && it.damaged
		if !it.checked {
			bad = errors.Is(s.checkStored(ctx, it.ref), asl.ErrIntegrity)
		}
		if bad {
			it.repair, it.claimed, it.owner, it.checked = true, false, nil, false
			fix = append(fix, it)
		}
	}
	if len(fix) == 0 {
		return nil
	}
	if err := s.commit(ctx, fix, nil); err != nil {
		return fmt.Errorf("repairing %s: %w", fix[0].ref, err)
	}
	return nil
}

// parallelHashMin is the batch payload size from which hashBatch spreads
// the hashing over all processors.
const parallelHashMin = 64 << 10

// hashBatch derives the references of arts into refs and fills items. Large
// batches are hashed on GOMAXPROCS goroutines, each over a contiguous range;
// the error reported is that of the lowest failing index.
func hashBatch(id asl.HashID, arts []asl.Artifact, refs []asl.Reference, items []item) error {
	hashRange := func(lo, hi int) (int, error) {
		var h asl.Hasher
		for i := lo; i < hi; i++ {
			ref, err := deriveRef(&h, id, arts[i])
			if err != nil {
				return i, err
			}
			refs[i] = ref
			items[i] = item{ref: ref, hdr: arts[i].Header(), payload: arts[i].Bytes}
		}
		return hi, nil
	}
	total := 0
	for i := range arts {
		total += len(arts[i].Bytes)
	}
	procs := min(runtime.GOMAXPROCS(0), len(arts))
	if total < parallelHashMin || procs < 2 {
		if i, err := hashRange(0, len(arts)); err != nil {
			return fmt.Errorf("artifact %d: %w", i, err)
		}
		return nil
	}
	// Split by bytes, not count, so that the ranges take about as long.
	bounds := make([]int, 0, procs+1)
	bounds = append(bounds, 0)
	acc := 0
	for i := range arts {
		acc += len(arts[i].Bytes)
		if len(bounds) < procs && acc*procs >= total*len(bounds) {
			bounds = append(bounds, i+1)
		}
	}
	bounds = append(bounds, len(arts))
	errs := make([]error, len(bounds)-1)
	at := make([]int, len(bounds)-1)
	var wg sync.WaitGroup
	for r := 1; r < len(bounds)-1; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at[r], errs[r] = hashRange(bounds[r], bounds[r+1])
		}()
	}
	at[0], errs[0] = hashRange(bounds[0], bounds[1])
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("artifact %d: %w", at[r], err)
		}
	}
	return nil
}

// deriveRef derives the Reference of a, reusing h.
func deriveRef(h *asl.Hasher, id asl.HashID, a asl.Artifact) (asl.Reference, error) {
	if err := h.Reset(id, a.Header()); err != nil {
		return asl.Reference{}, err
	}
	h.Write(a.Bytes)
	return h.Sum()
}

// stage writes the payload of an in-memory artifact larger than a chunk
// into a staging blob (through g when it is not nil).
func (s *Store) stage(ctx context.Context, it *item, g *ingester) error {
	w, err := s.newStager(ctx, g, false)
	if err != nil {
		return err
	}
	for off := uint64(0); off < it.hdr.Size; off += uint64(s.chunkSize) {
		end := min(off+uint64(s.chunkSize), it.hdr.Size)
		if err := w.add(it.payload[off:end]); err != nil {
			w.abort()
			return err
		}
	}
	if err := w.finish(); err != nil {
		w.abort()
		return err
	}
	it.staged, it.blob, it.chunk, it.stored, it.comp, it.payload = true, w.blob, uint64(s.chunkSize), w.stored, w.comp(), nil
	return nil
}

// discardStaged deletes the staging blobs of items (best effort: what is
// left is deleted at the next Open).
func (s *Store) discardStaged(items []item) {
	b := s.db.NewBatch()
	defer b.Close()
	for i := range items {
		if items[i].staged {
			addUnstage(b, items[i].blob, true)
		}
	}
	if !b.Empty() {
		_ = b.Commit(pebble.NoSync)
		s.commits.Add(1)
	}
}

// addUnstage adds the deletion of a staging record and, when drop is set,
// of the blob's chunks.
func addUnstage(b *pebble.Batch, blob uint64, drop bool) {
	if drop {
		_ = b.DeleteRange(appendChunkKey(nil, blob, 0), appendChunkKey(nil, blob+1, 0), nil)
	}
	_ = b.Delete(stagingKey(blob), nil)
}

// commit writes the index records (and single-chunk payloads) of items not
// yet stored, in one synced batch, and resolves duplicates: an item already
// stored, or repeated within items, is not written again, and its staging
// blob (if any) is dropped. While some items are claimed by concurrent
// commits it waits for them and looks again.
// commit writes items durably; extra, if non-nil, holds index entries to
// commit in the same synced batch as the final write (or alone, after it).
func (s *Store) commit(ctx context.Context, items []item, extra *indexExtra) error {
	for i := range items {
		items[i].state = itemTodo
	}
	for {
		pending, err := s.commitOnce(ctx, items, extra)
		if err != nil {
			var staged []item
			for _, it := range items {
				if it.staged && it.state != itemDone {
					staged = append(staged, it)
				}
			}
			s.discardStaged(staged)
			return err
		}
		if !pending {
			break
		}
	}
	var dup []item
	for _, it := range items {
		if it.staged && it.state == itemPresent {
			dup = append(dup, it)
		}
	}
	s.discardStaged(dup)
	if extra != nil && !extra.done && len(extra.entries) > 0 {
		b := s.db.NewBatch()
		defer b.Close()
		extra.addTo(b)
		if err := b.Commit(pebble.Sync); err != nil {
			return ioErr(err)
		}
		extra.done = true
	}
	return nil
}

func (s *Store) commitOnce(ctx context.Context, items []item, extra *indexExtra) (pending bool, err error) {
	me := &claim{done: make(chan struct{})}
	var mine, waiting int
	for i := range items {
		it := &items[i]
		if it.state != itemTodo {
			continue
		}
		sh := s.shard(it.ref)
		sh.mu.Lock()
		switch owner, ok := sh.m[it.ref]; {
		case !ok:
			sh.m[it.ref] = me
			it.state, it.claimed = itemMine, true
			mine++
		case owner == me:
			it.state = itemPresent // repeated within this batch
		default:
			it.state, it.owner = itemWait, owner
			waiting++
		}
		sh.mu.Unlock()
	}
	if mine > 0 {
		// Index entries ride in this batch only if it is the last write:
		// with items waiting on other commits, more writes may follow.
		var ex *indexExtra
		if waiting == 0 {
			ex = extra
		}
		err = s.writeMine(ctx, items, ex)
	}
	// Release before waiting, so that two batches waiting on each other's
	// claims cannot deadlock.
	for i := range items {
		it := &items[i]
		if !it.claimed {
			continue
		}
		sh := s.shard(it.ref)
		sh.mu.Lock()
		delete(sh.m, it.ref)
		sh.mu.Unlock()
		it.claimed = false
	}
	close(me.done)
	if err != nil || waiting == 0 {
		return false, err
	}
	// Wait for the other commits, then look again: what they stored is
	// present; what they failed to store is ours to write.
	for i := range items {
		it := &items[i]
		if it.state != itemWait {
			continue
		}
		select {
		case <-it.owner.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		it.state, it.owner = itemTodo, nil
	}
	return true, nil
}

// writeMine writes the claimed items that are not yet in the index and
// moves them to itemDone or itemPresent. A batch of new single-chunk
// artifacts large enough to pack takes the packed path (packNew); anything
// else is probed for presence and written in one synced batch.
func (s *Store) writeMine(ctx context.Context, items []item, extra *indexExtra) error {
	if err := s.idx.failed(); err != nil {
		return err
	}
	mine := make([]int, 0, len(items))
	for i := range items {
		if items[i].state == itemMine {
			mine = append(mine, i)
		}
	}
	repair := false
	for _, i := range mine {
		repair = repair || items[i].repair
	}
	if extra == nil && !repair && s.packable(items, mine) && allSingle(items, mine) {
		if done, err := s.packNew(ctx, items, mine); done || err != nil {
			return err
		}
	}
	key, order := indexKeys(len(mine), func(j int) asl.Reference { return items[mine[j]].ref })
	// Presence is checked with one iterator per range, probed in key order
	// (SeekPrefixGE uses the bloom filters and keeps the per-file iterators
	// of earlier probes).
	present := make([]bool, len(mine))
	probe := func(js []int) error {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixIndex + 1}, UseL6Filters: true})
		if err != nil {
			return ioErr(err)
		}
		for _, j := range js {
			if items[mine[j]].repair {
				continue // replaces whatever is stored
			}
			if _, ok := s.idx.lookup(items[mine[j]].ref); ok {
				present[j] = true
				continue
			}
			k := key(j)
			present[j] = it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k)
			if present[j] {
				// The repair check of a re-put (SPECS.md §6.4, "Repair"),
				// on the value the probe found.
				if v, err := it.ValueAndErr(); err == nil {
					it := &items[mine[j]]
					it.checked, it.damaged = s.cheapCheck(v)
				}
			}
		}
		return ioErr(it.Close())
	}
	if err := probeParallel(probe, order); err != nil {
		return err
	}
	for j, ok := range present {
		if ok {
			items[mine[j]].state = itemPresent
		}
	}
	var (
		pk     packResult
		packed map[int][]byte
	)
	if s.packable(items, mine) {
		// The pack writer is held from the append to the commit, and queued
		// index commits go first: index commits follow the pack order
		// (SPECS.md §6.4).
		w, err := s.packs.take(packNeed(items, mine))
		if err != nil {
			return err
		}
		defer s.packs.put(w)
		if pk, err = s.packItems(w, items, mine); err != nil {
			return err
		}
		packed = pk.byJ()
		if err := s.idx.drain(); err != nil {
			return err
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	var scratch *[]byte
	defer func() {
		if scratch != nil {
			s.putBuf(scratch)
		}
	}()
	// In key order: each memtable insert starts from the previous one's
	// position in the skiplist.
	for _, j := range order {
		i := mine[j]
		it := &items[i]
		if it.state != itemMine {
			continue
		}
		if v, ok := packed[j]; ok {
			_ = b.Set(key(j), v, nil)
			continue
		}
		if it.staged {
			rec := indexRecord{Size: it.hdr.Size, Blob: it.blob, Chunk: it.chunk, Stored: it.stored, Compression: it.comp}
			setTag(&rec, it.hdr)
			var rb [64]byte
			_ = b.Set(key(j), appendIndexRecord(rb[:0], rec), nil)
			addUnstage(b, it.blob, false)
			continue
		}
		if scratch == nil {
			scratch = s.getBuf()
		}
		if err := s.addSingle(b, key(j), it, *scratch); err != nil {
			return err
		}
	}
	if extra != nil {
		extra.addTo(b)
	}
	// A batch whose only payloads are in the synced pack needs no sync of
	// its own: Open rebuilds index records above the pack's watermark from
	// the pack. Index entries (extra) have no such copy.
	sync := pebble.Sync
	if packed != nil {
		var vb [16]byte
		_ = b.Set(watermarkKey(pk.pack), appendCBOR(vb[:0], pk.end), nil)
		if extra == nil && !repair && allPacked(items, mine, packed) {
			sync = pebble.NoSync
		}
	}
	if !b.Empty() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.Commit(sync); err != nil {
			return ioErr(err)
		}
		if sync == pebble.NoSync {
			s.unsynced.Store(true)
		}
		s.commits.Add(1)
	}
	if extra != nil {
		extra.done = true
	}
	for _, i := range mine {
		if items[i].state == itemMine {
			items[i].state = itemDone
		}
	}
	return nil
}

// packNew is the path of a batch of new small artifacts. A sample of
// presenceSample references, spread over the batch, is probed; if none is
// stored, the batch is taken to be new without probing the rest: its
// payloads are appended to a pack and synced, and its index records are
// queued for an unsynced commit (indexQueue), so the put returns once the
// pack is durable. An artifact of the batch that was stored after all
// gets a second copy in the pack, which its index record then names (the
// old copy becomes unreferenced). It reports false, having written
// nothing, when the sample finds a stored artifact: the batch is then
// probed in full.
func (s *Store) packNew(ctx context.Context, items []item, mine []int) (bool, error) {
	stored, err := s.anyStored(items, mine)
	if err != nil || stored {
		return false, err
	}
	w, err := s.packs.take(packNeed(items, mine))
	if err != nil {
		return true, err
	}
	defer s.packs.put(w)
	pk, err := s.packItems(w, items, mine)
	if err != nil {
		return true, err
	}
	if err := ctx.Err(); err != nil {
		return true, err
	}
	job := &indexJob{refs: make([]asl.Reference, len(pk.js)), vals: pk.vals, pack: pk.pack, end: pk.end}
	for k, j := range pk.js {
		job.refs[k] = items[mine[j]].ref
	}
	if err := s.idx.enqueue(job); err != nil {
		return true, err
	}
	for _, i := range mine {
		items[i].state = itemDone
	}
	return true, nil
}

// anyStored probes presenceSample of the references of items[mine[j]],
// evenly spread over the batch, and reports whether one is stored.
func (s *Store) anyStored(items []item, mine []int) (bool, error) {
	n := min(len(mine), presenceSample)
	refs := make([]asl.Reference, n)
	for k := range n {
		refs[k] = items[mine[k*len(mine)/n]].ref
	}
	return s.anyStoredRefs(refs)
}

// anyStoredRefs reports whether one of refs is stored (or pending).
func (s *Store) anyStoredRefs(refs []asl.Reference) (bool, error) {
	keys := make([][]byte, len(refs))
	for k, ref := range refs {
		if _, ok := s.idx.lookup(ref); ok {
			return true, nil
		}
		keys[k] = appendIndexKey(nil, ref)
	}
	slices.SortFunc(keys, bytes.Compare)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIndex}, UpperBound: []byte{prefixIndex + 1}, UseL6Filters: true})
	if err != nil {
		return false, ioErr(err)
	}
	found := false
	for _, k := range keys {
		if it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k) {
			found = true
			break
		}
	}
	if err := it.Close(); err != nil {
		return false, ioErr(err)
	}
	return found, nil
}

// freshSegment is how many artifacts packFresh hashes between two reports
// to the pack writer (fewer when they are large: see freshSegmentBytes).
const (
	freshSegment      = 64
	freshSegmentBytes = 256 << 10
)

// packFresh is PutBatch for a batch that is probably new: every artifact
// fits in one chunk, they total at least PackMin bytes, and none of
// presenceSample references spread over the batch (positions k·n/16) is
// stored. Then the batch is hashed on one goroutine while the pack writer
// appends the records of the artifacts hashed so far, so hashing overlaps
// the writes; the pack is synced and the index commit queued (indexQueue),
// as in packNew, whose rules apply: nothing else is probed, and an artifact
// of the batch stored already (or repeated in it) gets another pack record,
// which its index record then names. Concurrent puts of the same artifact
// are not coordinated here (no claims): each writes a complete record, and
// the last index record wins. It reports false, having written nothing,
// when the batch does not qualify; the caller then takes the general path.
func (s *Store) packFresh(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, bool, error) {
	if s.packMin < 0 || len(arts) == 0 {
		return nil, false, nil
	}
	bound := 0
	for _, a := range arts {
		if len(a.Bytes) > s.chunkSize {
			return nil, false, nil
		}
		bound += len(a.Bytes)
	}
	if int64(bound) < s.packMin {
		return nil, false, nil
	}
	if err := s.idx.failed(); err != nil {
		return nil, true, err
	}
	n := len(arts)
	m := min(n, presenceSample)
	sample := make([]asl.Reference, m)
	var h asl.Hasher
	for k := range m {
		ref, err := deriveRef(&h, id, arts[k*n/m])
		if err != nil {
			return nil, false, nil // the general path reports it
		}
		sample[k] = ref
	}
	if stored, err := s.anyStoredRefs(sample); err != nil || stored {
		return nil, false, nil
	}

	refs := make([]asl.Reference, n)
	ready := make(chan int, n/freshSegment+2) // counts of artifacts hashed
	var (
		hashErr error // set before ready is closed
		stop    atomic.Bool
	)
	go func() {
		defer close(ready)
		var h asl.Hasher
		seg := 0
		for i, a := range arts {
			if stop.Load() {
				return
			}
			var err error
			if refs[i], err = deriveRef(&h, id, a); err != nil {
				hashErr = fmt.Errorf("artifact %d: %w", i, err)
				return
			}
			if seg += len(a.Bytes); seg >= freshSegmentBytes || (i+1)%freshSegment == 0 || i == n-1 {
				ready <- i + 1
				seg = 0
			}
		}
	}()
	hashed := 0
	pis := make([]packItem, n)
	next := func(k int) (packItem, error) {
		for k >= hashed {
			c, ok := <-ready
			if !ok {
				if hashErr == nil {
					hashErr = errors.New("hashing stopped")
				}
				return packItem{}, hashErr
			}
			hashed = c
		}
		pis[k] = packItem{ref: refs[k], hdr: arts[k].Header()}
		pis[k].codec, pis[k].stored = compressChunk(arts[k].Bytes, nil, s.minCompress)
		return pis[k], nil
	}
	w, err := s.packs.take(int64(n*(maxPackHead+maxChunkHeader) + bound))
	if err != nil {
		stop.Store(true)
		for range ready {
		}
		return nil, true, err
	}
	defer s.packs.put(w)
	offs, end, err := w.appendEach(s.packs, n, next)
	pack := w.id
	// The hasher reads arts, which are the caller's once this returns.
	stop.Store(true)
	for range ready {
	}
	if err != nil {
		return nil, true, err
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	job := &indexJob{refs: slices.Clone(refs), vals: packedVals(pis, offs, pack), pack: pack, end: end}
	if err := s.idx.enqueue(job); err != nil {
		return nil, true, err
	}
	return refs, true, nil
}

// indexKeys encodes the index keys of n references (ref(j) for j < n) into
// one buffer and returns them by j, with the js in key order.
func indexKeys(n int, ref func(j int) asl.Reference) (key func(j int) []byte, order []int) {
	keys := make([]byte, 0, n*40)
	offs := make([]int, 0, n+1)
	for j := range n {
		offs = append(offs, len(keys))
		keys = appendIndexKey(keys, ref(j))
	}
	offs = append(offs, len(keys))
	key = func(j int) []byte { return keys[offs[j]:offs[j+1]] }
	order = make([]int, n)
	for j := range order {
		order[j] = j
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(key(a), key(b)) })
	return key, order
}

// parallelProbeMin is the number of keys from which probeParallel spreads
// the probes over all processors.
const parallelProbeMin = 256

// probeParallel runs probe over order, in GOMAXPROCS contiguous ranges on
// as many goroutines (each with its own iterator) for large batches.
func probeParallel(probe func([]int) error, order []int) error {
	procs := runtime.GOMAXPROCS(0)
	if len(order) < parallelProbeMin || procs < 2 {
		return probe(order)
	}
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for r := range procs {
		lo, hi := r*len(order)/procs, (r+1)*len(order)/procs
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = probe(order[lo:hi])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// presenceSample is how many references of a batch of new small artifacts
// are probed before it is packed: when one of them is stored already the
// batch is probably a re-put, and all of it is probed before anything is
// written.
const presenceSample = 16

// singles lists the j of the single-chunk items among items[mine[j]] still
// to be written, with their payload total.
func singles(items []item, mine []int) ([]int, int64) {
	var total int64
	var js []int
	for j, i := range mine {
		if it := &items[i]; it.state == itemMine && !it.staged {
			total += int64(len(it.payload))
			js = append(js, j)
		}
	}
	return js, total
}

// packable reports whether the items still to be written are packed.
func (s *Store) packable(items []item, mine []int) bool {
	js, total := singles(items, mine)
	return s.packMin >= 0 && len(js) > 0 && total >= s.packMin
}

// allPacked reports whether every item among items[mine[j]] still to be
// written has its payload in the pack.
func allPacked(items []item, mine []int, packed map[int][]byte) bool {
	for j, i := range mine {
		if _, ok := packed[j]; items[i].state == itemMine && !ok {
			return false
		}
	}
	return true
}

// allSingle reports whether every item among items[mine[j]] is a
// single-chunk artifact (not staged).
func allSingle(items []item, mine []int) bool {
	for _, i := range mine {
		if items[i].staged {
			return false
		}
	}
	return true
}

// packResult is what packItems appended: for each packed item its
// j and its encoded index record, and the pack's id and end offset after
// the append.
type packResult struct {
	js        []int
	vals      [][]byte
	pack, end uint64
}

// byJ maps the j of each packed item to its encoded index record.
func (pk packResult) byJ() map[int][]byte {
	if pk.js == nil {
		return nil
	}
	m := make(map[int][]byte, len(pk.js))
	for k, j := range pk.js {
		m[j] = pk.vals[k]
	}
	return m
}

// packNeed bounds the pack bytes that packItems appends for the items still
// to be written.
func packNeed(items []item, mine []int) int64 {
	js, total := singles(items, mine)
	return total + int64(len(js))*(maxPackHead+maxChunkHeader)
}

// packItems appends the payloads of the in-memory items among
// items[mine[j]] still to be written to the pack of w, and syncs it once: an
// artifact of up to one chunk as one record, a larger one as parts (one per
// chunk) completed by its large record. It returns their index records.
// The caller holds w until the records are committed or queued, and has
// checked packable: below PackMin the payloads travel in the Pebble batch
// instead (SPECS.md §6.4, "Pack files").
func (s *Store) packItems(w *packWriter, items []item, mine []int) (packResult, error) {
	js, _ := singles(items, mine)
	vals := make([][]byte, len(js))
	arena := make([]byte, 0, len(js)*48)
	scratch := s.getBuf()
	defer s.putBuf(scratch)
	for k, j := range js {
		it := &items[mine[j]]
		var rec indexRecord
		if it.hdr.Size <= uint64(s.chunkSize) {
			codec, stored := compressChunk(it.payload, *scratch, s.minCompress)
			off, err := w.single(packItem{ref: it.ref, hdr: it.hdr, codec: codec, stored: stored})
			if err != nil {
				return packResult{}, err
			}
			rec = indexRecord{Size: it.hdr.Size, Stored: uint64(len(stored)), Compression: uint64(codec), Pack: w.id, Offset: off}
		} else {
			first := w.end()
			var codecs [2]bool
			var total uint64
			for i, off := uint64(0), uint64(0); off < it.hdr.Size; i, off = i+1, off+uint64(s.chunkSize) {
				raw := it.payload[off:min(off+uint64(s.chunkSize), it.hdr.Size)]
				codec, stored := compressChunk(raw, *scratch, s.minCompress)
				if _, err := w.part(i, codec, uint64(len(raw)), stored); err != nil {
					return packResult{}, err
				}
				codecs[codec] = true
				total += uint64(len(stored))
			}
			w.large(it.ref, it.hdr, first, uint64(s.chunkSize))
			rec = indexRecord{Size: it.hdr.Size, Chunk: uint64(s.chunkSize), Stored: total, Compression: summarize(codecs), Pack: w.id, Offset: first}
		}
		setTag(&rec, it.hdr)
		at := len(arena)
		arena = appendIndexRecord(arena, rec)
		vals[k] = arena[at:len(arena):len(arena)]
	}
	if err := w.sync(s.packs); err != nil {
		return packResult{}, err
	}
	return packResult{js: js, vals: vals, pack: w.id, end: w.end()}, nil
}

// packedVals encodes the index records of pis, appended to pack with their
// chunk values at offs. One arena holds them: they live on in the index
// queue's pending set until their commit.
func packedVals(pis []packItem, offs []uint64, pack uint64) [][]byte {
	vals := make([][]byte, len(pis))
	arena := make([]byte, 0, len(pis)*48)
	for k := range pis {
		pi := &pis[k]
		rec := indexRecord{Size: pi.hdr.Size, Stored: uint64(len(pi.stored)), Compression: uint64(pi.codec), Pack: pack, Offset: offs[k]}
		setTag(&rec, pi.hdr)
		at := len(arena)
		arena = appendIndexRecord(arena, rec)
		vals[k] = arena[at:len(arena):len(arena)]
	}
	return vals
}

func setTag(rec *indexRecord, hdr asl.Header) {
	if hdr.HasTag {
		t := uint32(hdr.Tag)
		rec.Tag = &t
	}
}

// addSingle adds a single-chunk artifact: inline in its index record up to
// inlineMax bytes, otherwise as chunk 0 of a fresh blob.
func (s *Store) addSingle(b *pebble.Batch, key []byte, it *item, scratch []byte) error {
	codec, stored := compressChunk(it.payload, scratch, s.minCompress)
	rec := indexRecord{Size: it.hdr.Size, Stored: uint64(len(stored)), Compression: uint64(codec)}
	setTag(&rec, it.hdr)
	if int64(it.hdr.Size) <= int64(s.inlineMax) {
		ch := chunkHeader{Codec: uint64(codec), Raw: it.hdr.Size, CRC: chunkCRC(0, 0, codec, it.hdr.Size, stored)}
		var hb [64]byte
		head := appendChunkHeader(appendIndexRecord(hb[:0], rec), ch)
		op := b.SetDeferred(len(key), len(head)+len(stored))
		copy(op.Key, key)
		copy(op.Value[copy(op.Value, head):], stored)
		return op.Finish()
	}
	blob, err := s.allocBlob()
	if err != nil {
		return err
	}
	rec.Blob, rec.Chunk = blob, uint64(s.chunkSize)
	var kb [17]byte
	addChunk(b, appendChunkKey(kb[:0], blob, 0), blob, 0, codec, it.hdr.Size, stored)
	var rb [64]byte
	return b.Set(key, appendIndexRecord(rb[:0], rec), nil)
}

// addChunk adds chunk value = chunk header || stored payload.
func addChunk(b *pebble.Batch, key []byte, blob, chunk uint64, codec uint8, raw uint64, stored []byte) {
	ch := chunkHeader{Codec: uint64(codec), Raw: raw, CRC: chunkCRC(blob, chunk, codec, raw, stored)}
	var hb [32]byte
	head := appendChunkHeader(hb[:0], ch)
	op := b.SetDeferred(len(key), len(head)+len(stored))
	copy(op.Key, key)
	copy(op.Value[copy(op.Value, head):], stored)
	_ = op.Finish()
}

// has reports whether key is present.
func (s *Store) has(key []byte) (bool, error) {
	_, closer, err := s.db.Get(key)
	if err == nil {
		closer.Close()
		return true, nil
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	return false, ioErr(err)
}

// checkStored is the repair check of a re-put: for an artifact packed
// whole, its index record and its chunk value (header and CRC, bound to
// its position) are checked, without hashing or decompressing; anything
// else is read whole and verified (verifyStored). ErrIntegrity when the
// stored copy is damaged.
func (s *Store) checkStored(ctx context.Context, ref asl.Reference) error {
	var rec indexRecord
	err := s.getIndex(ref, func(v []byte) error {
		r, _, err := decodeIndexHead(v)
		rec = r
		return err
	})
	if err != nil {
		return err
	}
	if !rec.packedSingle() {
		return s.verifyStored(ctx, ref)
	}
	v, err := s.packs.read(rec.Pack, rec.Offset, rec.Stored)
	if err != nil {
		return err
	}
	h, _, err := decodeChunk(v, rec.Pack, rec.Offset, rec.Size)
	if err != nil {
		return err
	}
	if h.Codec != rec.Compression {
		return damaged("pack %d at %d: codec %d, index record says compression %d", rec.Pack, rec.Offset, h.Codec, rec.Compression)
	}
	return nil
}

// cheapCheck checks an index value v and, for an artifact packed whole,
// its chunk value's header and CRC. checked is false when v names
// anything else (the caller then uses checkStored).
func (s *Store) cheapCheck(v []byte) (checked, damaged bool) {
	rec, _, err := decodeIndexHead(v)
	if err != nil {
		return true, true
	}
	if !rec.packedSingle() {
		return false, false
	}
	cv, err := s.packs.read(rec.Pack, rec.Offset, rec.Stored)
	if err != nil {
		bad := errors.Is(err, asl.ErrIntegrity)
		return bad, bad // an I/O error: checkStored decides
	}
	h, _, err := decodeChunk(cv, rec.Pack, rec.Offset, rec.Size)
	return true, err != nil || h.Codec != rec.Compression
}
