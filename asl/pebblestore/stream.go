package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
)

// stager writes the chunks of one blob, either in unsynced batches or (for
// an artifact of at least ingestMin bytes) into an ingester. The staging
// record 's' || blob is committed first (in batch mode with the first
// batch) and deleted by the final synced batch of the put; a staging record
// found at Open marks a put that never committed, and its chunks are
// deleted.
type stager struct {
	s       *Store
	ctx     context.Context
	blob    uint64
	b       *pebble.Batch // batch mode
	g       *ingester     // ingest mode
	next    uint64
	stored  uint64
	codecs  [2]bool // which codecs the chunks used
	scratch *[]byte
	wrote   bool // some batch was committed
}

// newStageBatch returns a batch sized for stageBytes plus one chunk, so it
// never grows, and which Pebble's batch pool keeps for reuse.
func (s *Store) newStageBatch() *pebble.Batch {
	n := s.stageBytes + s.chunkSize + s.chunkSize/64 + 4096
	return s.db.NewBatch(pebble.WithInitialSizeBytes(n), pebble.WithMaxRetainedSizeBytes(n))
}

// newStager starts a blob. With g nil its chunks go into unsynced batches;
// otherwise into g, and the staging record is committed at once: synced
// when sync is set (a streaming put, which may run for long), else
// unsynced, and g.ingest syncs it before the chunks become part of the
// database.
func (s *Store) newStager(ctx context.Context, g *ingester, sync bool) (*stager, error) {
	blob, err := s.allocBlob()
	if err != nil {
		return nil, err
	}
	w := &stager{s: s, ctx: ctx, blob: blob, g: g, scratch: s.getBuf()}
	if g != nil {
		opt := pebble.Sync
		if !sync {
			opt, g.unsynced = pebble.NoSync, true
		}
		if err := s.db.Set(stagingKey(blob), nil, opt); err != nil {
			w.release()
			return nil, fmt.Errorf("staging blob %d: %w", blob, ioErr(err))
		}
		s.commits.Add(1)
		w.wrote = true
		return w, nil
	}
	w.b = s.newStageBatch()
	_ = w.b.Set(stagingKey(blob), nil, nil)
	return w, nil
}

// add compresses (where it pays) and writes the next chunk.
func (w *stager) add(raw []byte) error {
	codec, stored := compressChunk(raw, *w.scratch, w.s.minCompress)
	return w.write(len(raw), codec, stored)
}

// write appends the next chunk, already through compressChunk: rawLen
// payload bytes stored as stored under codec. Chunks must arrive in order.
func (w *stager) write(rawLen int, codec uint8, stored []byte) error {
	var kb [17]byte
	key := appendChunkKey(kb[:0], w.blob, w.next)
	if w.g != nil {
		ch := chunkHeader{Codec: uint64(codec), Raw: uint64(rawLen), CRC: chunkCRC(w.blob, w.next, codec, uint64(rawLen), stored)}
		var hb [32]byte
		if err := w.g.set(key, appendChunkHeader(hb[:0], ch), stored); err != nil {
			return fmt.Errorf("staging blob %d: %w", w.blob, err)
		}
	} else {
		addChunk(w.b, key, w.blob, w.next, codec, uint64(rawLen), stored)
	}
	w.next++
	w.stored += uint64(len(stored))
	w.codecs[codec] = true
	if w.b != nil && w.b.Len() >= w.s.stageBytes {
		return w.flush()
	}
	return nil
}

func (w *stager) flush() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	// Once the store is out of space, Pebble must not be given more to
	// flush (SPECS.md §6.6).
	if err := w.s.space.err(); err != nil {
		return err
	}
	err := w.b.Commit(pebble.NoSync)
	w.b.Close()
	w.b = w.s.newStageBatch()
	if err != nil {
		return fmt.Errorf("staging blob %d: %w", w.blob, ioErr(err))
	}
	w.s.commits.Add(1)
	w.wrote = true
	return nil
}

// finish commits the last unsynced batch. In ingest mode the owner of the
// ingester ingests.
func (w *stager) finish() error {
	defer w.release()
	if w.b == nil || w.b.Empty() {
		return nil
	}
	return w.flush()
}

func (w *stager) release() {
	if w.scratch != nil {
		w.s.putBuf(w.scratch)
		w.scratch = nil
	}
}

// abort drops what was staged (unsynced: a crash leaves the staging record,
// and Open finishes the job).
func (w *stager) abort() {
	w.release()
	if w.b != nil {
		w.b.Close()
		w.b = nil
	}
	if w.wrote {
		w.s.discardStaged([]item{{staged: true, blob: w.blob}})
	}
}

func (w *stager) comp() uint64 { return summarize(w.codecs) }

// summarize names the compression of a set of chunks by the codecs used.
func summarize(codecs [2]bool) uint64 {
	switch {
	case codecs[codecRaw] && codecs[codecZstd]:
		return compMixed
	case codecs[codecZstd]:
		return compZstd
	default:
		return compNone
	}
}

// chunkSlot is one chunk in flight through putStream's pipeline: its raw
// bytes, a scratch buffer for the compressed form, and the result of
// compressChunk, published by a send on ready.
type chunkSlot struct {
	buf, scratch *[]byte
	n            int
	codec        uint8
	stored       []byte
	ready        chan struct{}
}

// putStream stores an artifact larger than one chunk, through
// chunkPipeline: as parts in a pack (putStreamPacked), or, in the version 2
// layout (PackMin < 0), as chunks staged in Pebble under a fresh blob id
// (the staging batches and ingested tables need ascending keys, which the
// pipeline's in-order writer gives).
func (s *Store) putStream(ctx context.Context, h *asl.Hasher, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	if s.packMin >= 0 {
		return s.putStreamPacked(ctx, h, hdr, r)
	}
	var g *ingester
	if hdr.Size >= s.ingestMin {
		g = s.newIngester()
	}
	w, err := s.newStager(ctx, g, true)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	rerr := s.chunkPipeline(ctx, h, hdr, r, w.write)
	if rerr == nil {
		rerr = w.finish()
	}
	if rerr == nil && g != nil {
		rerr = g.ingest(ctx)
	}
	if rerr != nil {
		if g != nil {
			g.abort()
		}
		w.abort()
		return asl.Reference{}, rerr
	}
	ref, err := h.Sum()
	if err != nil {
		w.abort()
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	items := []item{{ref: ref, hdr: hdr, staged: true, blob: w.blob, chunk: uint64(s.chunkSize), stored: w.stored, comp: w.comp()}}
	if err := s.commit(ctx, items, nil); err != nil {
		return asl.Reference{}, fmt.Errorf("put %s: %w", ref, err)
	}
	return ref, nil
}

// chunkPipeline reads an artifact's payload of hdr.Size bytes from r in
// chunks on the caller's goroutine, hashing each into h; GOMAXPROCS
// compressor goroutines compress chunks in parallel; write receives them
// strictly in chunk order, on one goroutine. A fixed set of chunk slots
// circulates between them, which bounds memory. It returns the first error
// of the reader, of the payload's length, or of write.
func (s *Store) chunkPipeline(ctx context.Context, h *asl.Hasher, hdr asl.Header, r io.Reader, write func(rawLen int, codec uint8, stored []byte) error) error {
	workers := max(1, runtime.GOMAXPROCS(0))
	nslot := workers + 3
	free := make(chan *chunkSlot, nslot)
	for range nslot {
		free <- &chunkSlot{buf: s.getBuf(), scratch: s.getBuf(), ready: make(chan struct{}, 1)}
	}
	work := make(chan *chunkSlot, nslot)  // to the compressors, any order
	order := make(chan *chunkSlot, nslot) // to the writer, in chunk order
	done := make(chan error, 1)
	var failed atomic.Bool
	for range workers {
		go func() {
			for sl := range work {
				sl.codec, sl.stored = compressChunk((*sl.buf)[:sl.n], *sl.scratch, s.minCompress)
				sl.ready <- struct{}{}
			}
		}()
	}
	go func() {
		var err error
		for sl := range order {
			<-sl.ready
			if err == nil {
				if err = write(sl.n, sl.codec, sl.stored); err != nil {
					failed.Store(true)
				}
			}
			sl.stored = nil
			free <- sl
		}
		done <- err
	}()
	var rerr error
	for off := uint64(0); off < hdr.Size && !failed.Load(); {
		if rerr = ctx.Err(); rerr != nil {
			break
		}
		sl := <-free
		n := int(min(uint64(s.chunkSize), hdr.Size-off))
		if rerr = readPayload(r, (*sl.buf)[:n], hdr.Size, off); rerr != nil {
			free <- sl
			break
		}
		h.Write((*sl.buf)[:n])
		sl.n = n
		work <- sl
		order <- sl
		off += uint64(n)
	}
	if rerr == nil && !failed.Load() {
		rerr = expectEOF(r, hdr.Size)
	}
	close(work)
	close(order)
	werr := <-done
	for range nslot {
		sl := <-free
		s.putBuf(sl.buf)
		s.putBuf(sl.scratch)
	}
	if rerr == nil {
		rerr = werr
	}
	return rerr
}

// putStreamPacked stores an artifact larger than one chunk in a pack
// (SPECS.md §6.4, "Pack files"): it holds one pack writer for the whole
// put, appends the chunks as parts (unsynced) while the payload is read and
// hashed, and once the reference is known and the artifact is not stored
// yet, appends the large record that completes them and syncs the pack: the
// put is durable then. Its index record is queued for an unsynced commit,
// as for a batch of new small artifacts. A put that fails, or whose
// artifact turns out to be stored already, leaves parts that nothing names.
func (s *Store) putStreamPacked(ctx context.Context, h *asl.Hasher, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	if err := s.idx.failed(); err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	w, err := s.packs.take(int64(hdr.Size) + int64(hdr.Size/uint64(s.chunkSize)+2)*(maxPartHead+maxChunkHeader) + maxPackHead)
	if err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	defer s.packs.put(w)
	first := w.end()
	var (
		part   uint64
		stored uint64
		codecs [2]bool
	)
	err = s.chunkPipeline(ctx, h, hdr, r, func(rawLen int, codec uint8, st []byte) error {
		if _, err := w.part(part, codec, uint64(rawLen), st); err != nil {
			return err
		}
		part++
		stored += uint64(len(st))
		codecs[codec] = true
		return nil
	})
	if err != nil {
		return asl.Reference{}, err
	}
	ref, err := h.Sum()
	if err != nil {
		return asl.Reference{}, fmt.Errorf("put: %w", err)
	}
	rec := indexRecord{Size: hdr.Size, Chunk: uint64(s.chunkSize), Stored: stored, Compression: summarize(codecs), Pack: w.id, Offset: first}
	setTag(&rec, hdr)
	if err := s.commitLarge(ctx, w, ref, hdr, rec); err != nil {
		return asl.Reference{}, fmt.Errorf("put %s: %w", ref, err)
	}
	return ref, nil
}

// commitLarge completes the parts of a large artifact that w holds: unless
// the artifact is stored already, it appends the large record, syncs the
// pack and queues the index record. The reference is claimed meanwhile, so
// a concurrent put of the same artifact waits and then finds it stored.
func (s *Store) commitLarge(ctx context.Context, w *packWriter, ref asl.Reference, hdr asl.Header, rec indexRecord) error {
	me := &claim{done: make(chan struct{})}
	sh := s.shard(ref)
	for {
		sh.mu.Lock()
		owner, ok := sh.m[ref]
		if !ok {
			sh.m[ref] = me
			sh.mu.Unlock()
			break
		}
		sh.mu.Unlock()
		select {
		case <-owner.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		sh.mu.Lock()
		delete(sh.m, ref)
		sh.mu.Unlock()
		close(me.done)
	}()
	stored, err := s.anyStoredRefs([]asl.Reference{ref})
	if err != nil {
		return err
	}
	if stored && ctx.Value(forceRewriteKey{}) == nil {
		// Stored already: a re-put repairs a damaged copy (SPECS.md §6.4,
		// "Repair") at the cost of one verified read of the stored copy.
		// (gc compaction forces the copy, and must not read through the
		// gate it holds.)
		if verr := s.verifyStored(ctx, ref); !errors.Is(verr, asl.ErrIntegrity) {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.large(ref, hdr, rec.Offset, rec.Chunk)
	if err := w.sync(s.packs); err != nil {
		return err
	}
	if stored {
		// The repaired record replaces a present one, which recovery
		// would keep: commit it synced, after the queued commits.
		if err := s.idx.drain(); err != nil {
			return err
		}
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(appendIndexKey(nil, ref), appendIndexRecord(nil, rec), nil)
		_ = b.Set(watermarkKey(w.id), appendCBOR(nil, w.end()), nil)
		return ioErr(b.Commit(pebble.Sync))
	}
	return s.idx.enqueue(&indexJob{refs: []asl.Reference{ref}, vals: [][]byte{appendIndexRecord(nil, rec)}, pack: w.id, end: w.end()})
}
