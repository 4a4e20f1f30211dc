package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
)

func checkRef(ref asl.Reference) error {
	if ref.IsZero() {
		return fmt.Errorf("reference is zero: %w", asl.ErrIntegrity)
	}
	if !ref.Known() {
		return fmt.Errorf("%s: hash id 0x%04x is not registered: %w", ref, uint16(ref.HashID()), asl.ErrUnsupported)
	}
	return nil
}

// getIndex reads the index value of ref and hands it to fn while the value
// is valid.
func (s *Store) getIndex(ref asl.Reference, fn func(v []byte) error) error {
	if v, ok := s.idx.lookup(ref); ok {
		if err := fn(v); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		return nil
	}
	var kb [64]byte
	v, closer, err := dbGet(s.db, appendIndexKey(kb[:0], ref))
	if errors.Is(err, pebble.ErrNotFound) {
		if derr := s.getDamaged(ref); derr != nil {
			return derr // its only pack record is damaged (packdamage.go)
		}
		return fmt.Errorf("%s: %w", ref, asl.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: reading index: %w", ref, ioErr(err))
	}
	defer closer.Close()
	if err := fn(v); err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	return nil
}

// Fetch implements asl.Fetcher (SPECS.md §6.2). An artifact stored inline
// is decoded and its digest verified before Fetch returns. A chunked one is
// read through a pipelined reader: each chunk's CRC is checked before any
// of its bytes are returned, and the last chunk is released only after the
// digest of the whole payload matches ref. Damage yields an error wrapping
// asl.ErrIntegrity, from Fetch or from Read; never wrong bytes.
func (s *Store) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	return s.fetch(ctx, ref, true)
}

// FetchForVerifier is Fetch for a reader that checks the whole payload's
// digest itself, as the HTTP client does (SPECS.md §18.4, "X-Amduat-Verify"):
// a chunked artifact's bytes are read exactly as by Fetch, each chunk's CRC
// checked before any of its bytes are returned and the record's summary
// fields after the last one, but the chunks are not hashed, so damage that
// only the digest would show (a CRC collision, chunks in the wrong place)
// reaches the caller, whose own digest fails. An artifact stored inline
// (in a Pebble block, whose checksum Pebble checks) or packed whole (its
// record's CRC checked) is returned without its digest computed either.
func (s *Store) FetchForVerifier(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	return s.fetch(ctx, ref, false)
}

func (s *Store) fetch(ctx context.Context, ref asl.Reference, digest bool) (io.ReadCloser, asl.Header, error) {
	if err := checkRef(ref); err != nil {
		return nil, asl.Header{}, fmt.Errorf("fetch: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, asl.Header{}, err
	}
	if err := s.acquire(); err != nil {
		return nil, asl.Header{}, fmt.Errorf("fetch %s: %w", ref, err)
	}
	defer s.release()
	defer s.gateRead(ref)()
	var (
		rec  indexRecord
		data []byte
	)
	err := s.getIndex(ref, func(v []byte) error {
		r, ch, payload, err := decodeIndex(v)
		if err != nil {
			return err
		}
		rec = r
		if !r.inline() {
			return nil
		}
		if ch.Codec == codecZstd {
			data, err = decompress(payload, ch.Raw, nil)
			return err
		}
		data = bytes.Clone(payload)
		return nil
	})
	if err != nil {
		return nil, asl.Header{}, fmt.Errorf("fetch %w", err)
	}
	hdr := rec.header()
	if rec.packedSingle() {
		if data, err = s.readPacked(rec); err != nil {
			return nil, asl.Header{}, fmt.Errorf("fetch %s: %w", ref, err)
		}
	} else if !rec.inline() {
		return s.newChunkReaderDigest(ctx, ref, rec, s.readChunk, fetchWorkers(), digest), hdr, nil
	}
	// decodeIndex and readPacked have checked the record's CRC and that
	// data holds hdr.Size bytes; the digest is left to a verifying caller.
	if digest {
		if err := verify(ref, hdr, data); err != nil {
			return nil, asl.Header{}, fmt.Errorf("fetch %w", err)
		}
	}
	rc := new(bytesReadCloser)
	rc.Reset(data)
	return rc, hdr, nil
}

// hashers holds reusable *asl.Hasher for verify.
var hashers = sync.Pool{New: func() any { return new(asl.Hasher) }}

// verify checks that hdr and data hash to ref. The common case, a match,
// does not allocate.
func verify(ref asl.Reference, hdr asl.Header, data []byte) error {
	h := hashers.Get().(*asl.Hasher)
	defer hashers.Put(h)
	if err := h.Reset(ref.HashID(), hdr); err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	h.Write(data)
	if h.Matches(ref) {
		return nil
	}
	got, err := h.Sum()
	if err != nil {
		return fmt.Errorf("%s: stored bytes do not match: %v: %w", ref, err, asl.ErrIntegrity)
	}
	return fmt.Errorf("%s: stored bytes hash to %s: %w", ref, got, asl.ErrIntegrity)
}

// bytesReadCloser is a bytes.Reader with a no-op Close, in one allocation.
type bytesReadCloser struct{ bytes.Reader }

func (*bytesReadCloser) Close() error { return nil }

// chunkData is one chunk as readChunk returns it.
type chunkData struct {
	data   []byte // the raw bytes, in the buffer readChunk was given
	stored int    // length of the stored payload
	codec  uint8
}

// readChunk reads chunk i of rec's artifact into buf (capacity at least
// rec.Chunk; with decodeSlack more, zstd decodes faster), checking its CRC
// and raw size: a part in a pack, at loc, for a packed record, else the
// chunk under the record's blob id in Pebble. It holds the store open
// (acquire/release) while it reads.
func (s *Store) readChunk(rec indexRecord, i uint64, loc partLoc, buf []byte) (chunkData, error) {
	if err := s.acquire(); err != nil {
		return chunkData{}, err
	}
	defer s.release()
	if rec.packed() {
		return s.packs.readPart(rec, i, loc, buf)
	}
	var kb [17]byte
	v, closer, err := dbGet(s.db, appendChunkKey(kb[:0], rec.Blob, i))
	if errors.Is(err, pebble.ErrNotFound) {
		return chunkData{}, damaged("chunk %d of blob %d is missing", i, rec.Blob)
	}
	if err != nil {
		return chunkData{}, fmt.Errorf("reading chunk %d of blob %d: %w", i, rec.Blob, ioErr(err))
	}
	defer closer.Close()
	ch, payload, err := decodeChunk(v, rec.Blob, i, rec.rawLen(i))
	if err != nil {
		return chunkData{}, fmt.Errorf("chunk %d of blob %d: %w", i, rec.Blob, err)
	}
	c := chunkData{stored: len(payload), codec: uint8(ch.Codec)}
	if ch.Codec == codecZstd {
		if c.data, err = decompress(payload, ch.Raw, buf); err != nil {
			return chunkData{}, err
		}
		return c, nil
	}
	c.data = append(buf[:0], payload...)
	return c, nil
}

// locatePart finds part i of the large packed artifact rec, whose head is
// at offset at of its pack, holding the store open while it reads.
func (s *Store) locatePart(rec indexRecord, at, i uint64) (partLoc, error) {
	if err := s.acquire(); err != nil {
		return partLoc{}, err
	}
	defer s.release()
	return s.packs.partAt(rec.Pack, at, i)
}

// chunkReadFunc reads chunk i of rec's artifact (at loc when it is packed)
// into buf: (*Store).readChunk, or a stand-in in tests.
type chunkReadFunc func(rec indexRecord, i uint64, loc partLoc, buf []byte) (chunkData, error)

const (
	// maxFetchWorkers bounds the goroutines that read chunks for one
	// reader (one per core below that).
	maxFetchWorkers = 4
	// fetchSpare is how many chunk buffers a reader has beyond one per
	// worker: the caller's current chunk and chunks read ahead, which
	// absorb uneven chunk costs and let the workers read several chunks
	// per wake-up (fetchWakeAt).
	fetchSpare = 10
	// fetchWakeAt is how many free buffers the consumer gathers before it
	// wakes a worker that waits for one: each wake-up of a goroutine costs
	// a few microseconds of the consumer's core, and the woken worker
	// first waits to be taken over by an idle core, so a worker woken for
	// one chunk at a time left the reads behind the hash (BENCHMARKS.md).
	fetchWakeAt = 4
)

// fetchWorkers is the number of goroutines that read chunks for one
// reader: one per core, at most maxFetchWorkers.
func fetchWorkers() int { return min(runtime.GOMAXPROCS(0), maxFetchWorkers) }

// fetchJob carries one chunk through a chunkReader's pipeline. A reader
// owns a fixed set of jobs, each with its own buffer, for its whole life.
type fetchJob struct {
	buf *[]byte // the job's chunk buffer, fixed
	// Set when the job is claimed, then by the worker that reads it; read
	// by whoever hashes it (after mu orders them) and, once it is hashed,
	// by the consumer.
	i     uint64
	loc   partLoc // where a packed part lies
	chunk chunkData
	err   error
	// Guarded by mu.
	ready  bool // the chunk is read (or failed)
	hashed bool // the chunk is hashed in order (or failed in order)
}

// chunkReader streams a chunked artifact (SPECS.md §6.2, §6.4 "Reading a
// large artifact").
//
// Worker goroutines read, CRC-check and decompress chunks concurrently,
// each into a buffer of its own job; the chunks are hashed strictly in
// chunk order by whoever holds the hashing token, and handed out by the
// consumer (the caller's goroutine, in Read and WriteTo) once hashed:
//
//   - While the consumer is inside WriteTo, or inside Read waiting for its
//     next chunk (pulling), it hashes the chunk it needs itself and the
//     workers only read ahead: the hash runs on the consumer's core,
//     reading, CRC and decompression on the others, and no goroutine
//     wakes another per chunk. `amduat get` (io.Copy, thus WriteTo) reads
//     this way.
//   - While the consumer is away (between Read calls, busy with the
//     bytes), a worker that completes the next chunk in order takes the
//     token and hashes every ready chunk in order, so that the hash
//     overlaps the consumer's own work; it hands the token back at the
//     next chunk boundary once the consumer pulls again.
//   - A record with compressed chunks is never pulled: decompression, not
//     the hash, bounds its reads, and there the workers hashing what they
//     just decompressed measured faster (large-text/get 0.557x and 0.576x
//     against 0.524x and 0.543x pulled, BENCHMARKS.md "Fifth session").
//
// Jobs are reused most recently freed first, so a worker writes into a
// buffer that is likely still in cache. The consumer wakes a waiting
// worker only once fetchWakeAt buffers are free (or it has nothing left
// to wait for), so each wake-up reads several chunks.
//
// Only len(jobs) chunk buffers exist, whatever the artifact's size. The
// chunks claimed and not yet consumed are a contiguous run of at most
// len(jobs): chunk i lives in slot i mod len(jobs) from its claim until the
// consumer takes it, and chunk i+len(jobs) can be claimed only once a job
// is free again, that is after chunk i was consumed.
//
// Invariants:
//   - a chunk's bytes are handed out only after its CRC has been checked
//     (readChunk) and it has been hashed (absorbed, without the hash, for
//     FetchForVerifier);
//   - the last chunk's bytes are withheld until the whole payload's digest
//     matches ref (not checked for FetchForVerifier) and the record's
//     summary fields (stored bytes, compression) agree with the chunks;
//     otherwise the read fails with an error wrapping asl.ErrIntegrity;
//   - errors surface in chunk order: a failure of chunk k is reported after
//     chunks 0..k-1 were delivered, even if a later chunk failed first.
//     After a failure no chunk is claimed or hashed any more (the failed
//     chunk keeps the hashing token);
//   - Close stops every goroutine, then returns each job's buffer exactly
//     once (to the store's pool when rec.Chunk is its chunk size).
type chunkReader struct {
	s    *Store
	ctx  context.Context
	ref  asl.Reference
	rec  indexRecord
	n    uint64 // chunks
	read chunkReadFunc

	jobs    []*fetchJob    // every job, for Close
	wg      sync.WaitGroup // the workers
	stopCtx func() bool    // unregisters the context's wake-up

	mu       sync.Mutex
	freed    sync.Cond   // workers wait here for a free job
	cwake    sync.Cond   // the consumer waits here for its next chunk
	free     []*fetchJob // jobs the workers may claim, most recently freed last
	idle     int         // workers waiting on freed
	cwaiting bool        // the consumer waits on cwake
	pulling  bool        // the consumer hashes (in WriteTo, or waiting in fill)
	pull     bool        // the consumer may pull at all (raw chunks); fixed
	stopped  bool        // Close was called
	slots    []*fetchJob // claimed, unconsumed jobs by chunk index mod len
	claimed  uint64      // chunks claimed
	nextHash uint64      // the next chunk to hash
	hashing  bool        // the hashing token is taken
	failed   bool        // a chunk failed: claim and hash no more
	pos      uint64      // packed record: the head of the next part to claim

	// Hashing state, used only by the holder of the hashing token.
	noDigest bool // FetchForVerifier: chunks pass the token unhashed
	h        *asl.Hasher
	absorbed uint64 // chunks hashed
	stored   uint64 // stored payload bytes of the chunks hashed
	codecs   [2]bool
	touched  byte // the sum touchLines returns, kept so that its loads stay

	// Consumer state.
	delivered uint64 // chunks made current
	cur       []byte
	curJob    *fetchJob
	err       error
	once      sync.Once
}

// newChunkReader starts the pipeline of a chunked record with the given
// number of workers, reading chunks with read.
func (s *Store) newChunkReader(ctx context.Context, ref asl.Reference, rec indexRecord, read chunkReadFunc, workers int) *chunkReader {
	return s.newChunkReaderDigest(ctx, ref, rec, read, workers, true)
}

// newChunkReaderDigest is newChunkReader that checks the whole digest only
// when digest is set (FetchForVerifier).
func (s *Store) newChunkReaderDigest(ctx context.Context, ref asl.Reference, rec indexRecord, read chunkReadFunc, workers int, digest bool) *chunkReader {
	h, _ := asl.NewHasher(ref.HashID(), rec.header()) // ref checked known
	n := rec.chunks()
	workers = max(workers, 1)
	nbuf := int(min(uint64(workers+fetchSpare), n))
	workers = min(workers, nbuf)
	r := &chunkReader{
		s: s, ctx: ctx, ref: ref, rec: rec, n: n, read: read, h: h, noDigest: !digest,
		jobs:  make([]*fetchJob, nbuf),
		slots: make([]*fetchJob, nbuf),
		pos:   rec.Offset,
		pull:  rec.Compression == compNone,
	}
	for k := range r.jobs {
		j := &fetchJob{buf: r.newBuf()}
		r.jobs[k] = j
		r.free = append(r.free, j)
	}
	r.freed.L = &r.mu
	r.cwake.L = &r.mu
	// A cancelled context wakes a waiting consumer (the workers look at
	// the context before each chunk).
	r.stopCtx = context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cwake.Broadcast()
		r.mu.Unlock()
	})
	r.wg.Add(workers)
	for range workers {
		go r.work()
	}
	return r
}

// newBuf returns a chunk buffer of length rec.Chunk. When rec.Chunk is the
// store's chunk size it comes from the store's pool. A record with
// compressed chunks wants decodeSlack spare capacity too: a pooled buffer
// without it is dropped for one with it, which Close puts back in the pool
// (same length, so the pool's other users see no difference).
func (r *chunkReader) newBuf() *[]byte {
	want := int(r.rec.Chunk)
	if r.rec.Compression != compNone {
		want += decodeSlack
	}
	if r.rec.Chunk == uint64(r.s.chunkSize) {
		if b := r.s.getBuf(); cap(*b) >= want {
			return b
		}
	}
	b := make([]byte, r.rec.Chunk, int(r.rec.Chunk)+decodeSlack)
	return &b
}

// work reads claimed chunks (and hashes them while the consumer is away)
// until every chunk is claimed, one failed, or the reader is closed.
func (r *chunkReader) work() {
	defer r.wg.Done()
	for {
		j := r.claim()
		if j == nil {
			return
		}
		if err := r.ctx.Err(); err != nil {
			j.err = err
		} else if j.err == nil {
			j.chunk, j.err = r.read(r.rec, j.i, j.loc, *j.buf)
		}
		r.advance(j)
	}
}

// claim takes a free job, waiting for one, and gives it the next chunk
// index. It returns nil once every chunk is claimed, a chunk failed, or
// the reader is closed; each of these wakes the waiting workers. It takes
// the most recently freed job, whose buffer is the likeliest to be in
// cache.
func (r *chunkReader) claim() *fetchJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.stopped || r.failed || r.claimed == r.n {
			return nil
		}
		if len(r.free) > 0 {
			break
		}
		r.idle++
		r.freed.Wait()
		r.idle--
	}
	j := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	j.i, j.chunk, j.err, j.ready, j.hashed = r.claimed, chunkData{}, nil, false, false
	if r.rec.packed() {
		// Parts follow each other in the pack: where part i lies is known
		// once part i-1's head and chunk header are read. A damaged head
		// fails this part (and, in order, the read).
		j.loc, j.err = r.s.locatePart(r.rec, r.pos, j.i)
		r.pos = j.loc.next
	}
	r.slots[j.i%uint64(len(r.slots))] = j
	if r.claimed++; r.claimed == r.n {
		r.freed.Broadcast() // the other workers may exit
	}
	return j
}

// advance marks j ready. Unless the consumer pulls, the worker then hashes
// the ready chunks in order (hashInOrder). A failed chunk stops the claims.
func (r *chunkReader) advance(j *fetchJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j.ready = true
	if j.err != nil {
		r.failed = true
		r.freed.Broadcast() // the other workers may exit
	}
	r.hashInOrder(true)
	r.wakeConsumer()
}

// hashInOrder hashes ready chunks in order, from nextHash, if the hashing
// token is free, and reports whether it hashed any. A worker hashes while
// the consumer does not pull; the consumer hashes one chunk, the one it
// waits for. It is called, and returns, with mu held; mu is released while
// a chunk is hashed. A failed chunk is marked hashed with its error and
// keeps the token: nothing after it is hashed.
func (r *chunkReader) hashInOrder(worker bool) bool {
	did := false
	for !r.hashing && r.nextHash < r.n && !(worker && r.pulling) {
		k := r.slots[r.nextHash%uint64(len(r.slots))]
		if k == nil || k.i != r.nextHash || !k.ready {
			break
		}
		r.hashing = true
		r.mu.Unlock()
		if k.err == nil {
			k.err = r.absorb(k.chunk)
		}
		r.mu.Lock()
		k.hashed = true
		r.nextHash++
		did = true
		if k.err != nil {
			r.failed = true
			r.freed.Broadcast()
			break // the token stays taken
		}
		r.hashing = false
		if !worker {
			break
		}
		r.wakeConsumer()
	}
	return did
}

// wakeConsumer wakes the consumer if it waits and its next chunk can now be
// taken, or hashed by it. Called with mu held.
func (r *chunkReader) wakeConsumer() {
	if !r.cwaiting {
		return
	}
	k := r.slots[r.delivered%uint64(len(r.slots))]
	if k != nil && k.i == r.delivered && (k.hashed || r.pull && k.ready && !r.hashing) {
		r.cwaiting = false
		r.cwake.Signal()
	}
}

// absorb hashes the next chunk in order. After the last chunk it checks
// the record's summary fields and the whole digest; an error then means
// the last chunk's bytes must not be handed out.
func (r *chunkReader) absorb(c chunkData) error {
	if !r.noDigest {
		r.touched += touchLines(c.data)
		r.h.Write(c.data)
	}
	r.absorbed++
	r.stored += uint64(c.stored)
	r.codecs[c.codec] = true
	if r.absorbed < r.n {
		return nil
	}
	if comp := summarize(r.codecs); r.stored != r.rec.Stored || comp != r.rec.Compression {
		return damaged("index record says %d stored bytes (compression %d), chunks hold %d (compression %d)", r.rec.Stored, r.rec.Compression, r.stored, comp)
	}
	if r.noDigest {
		return nil
	}
	got, err := r.h.Sum()
	if err != nil || got != r.ref {
		return fmt.Errorf("stored bytes hash to %s: %w", got, asl.ErrIntegrity)
	}
	return nil
}

// touchLines reads one byte of every 64-byte cache line of b, and returns
// their sum (for the caller to keep, so that the loads are not optimised
// away). The chunk to hash was just written by another core (the worker
// that read it); these independent loads bring it into the hashing core's
// cache many lines at a time, whereas SHA-256 alone waits for each line in
// turn: on the 2-core test machine, touching a chunk first and then
// hashing it took the hash from about 0.8x to about 0.93x the speed of
// hashing bytes already in cache (BENCHMARKS.md, "Fifth session").
func touchLines(b []byte) byte {
	var x byte
	for i := 0; i < len(b); i += 64 {
		x += b[i]
	}
	return x
}

// fill makes the next chunk current, returning the previous one's job to
// the workers first. It hashes the next chunk itself when that chunk is
// read and nobody hashes; otherwise it waits.
func (r *chunkReader) fill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.curJob != nil {
		r.free = append(r.free, r.curJob)
		r.curJob = nil
		if r.idle > 0 && (len(r.free) >= fetchWakeAt || r.n-r.claimed <= uint64(len(r.free))) {
			r.freed.Signal()
		}
	}
	if r.delivered == r.n {
		r.stopCtx()
		return io.EOF
	}
	pulling := r.pulling
	r.pulling = r.pull
	defer func() { r.pulling = pulling }()
	for {
		if r.stopped {
			return errors.New("read after Close")
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		slot := &r.slots[r.delivered%uint64(len(r.slots))]
		if k := *slot; k != nil && k.i == r.delivered && k.hashed {
			if k.err != nil {
				r.stopCtx()
				return fmt.Errorf("fetch %s: %w", r.ref, k.err)
			}
			*slot = nil
			r.delivered++
			r.cur, r.curJob = k.chunk.data, k
			return nil
		}
		if r.pull && r.hashInOrder(false) {
			continue
		}
		// Nothing to take or hash: the workers must be reading.
		if r.idle > 0 && len(r.free) > 0 {
			r.freed.Broadcast()
		}
		r.cwaiting = true
		r.cwake.Wait()
		r.cwaiting = false
	}
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.fill()
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// WriteTo implements io.WriterTo: it writes each chunk where it lies, with
// no copy, and hashes the chunks itself (the consumer pulls throughout).
func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
	r.setPulling(true)
	defer r.setPulling(false)
	var total int64
	for {
		if len(r.cur) > 0 {
			n, err := w.Write(r.cur)
			total += int64(n)
			r.cur = r.cur[n:]
			if err != nil {
				return total, err
			}
			continue
		}
		if r.err != nil {
			if r.err == io.EOF {
				return total, nil
			}
			return total, r.err
		}
		r.err = r.fill()
	}
}

func (r *chunkReader) setPulling(on bool) {
	r.mu.Lock()
	r.pulling = on && r.pull
	r.mu.Unlock()
}

// Close stops the workers, waiting for chunk reads in flight (each holds
// the store open), then returns every job's buffer exactly once. It may be
// called at any point, repeatedly; later reads fail.
func (r *chunkReader) Close() error {
	r.once.Do(func() {
		r.stopCtx()
		r.mu.Lock()
		r.stopped = true
		r.freed.Broadcast()
		r.cwake.Broadcast()
		r.mu.Unlock()
		r.wg.Wait()
		// No goroutine holds a job any more, wherever it was left.
		pooled := r.rec.Chunk == uint64(r.s.chunkSize)
		for _, j := range r.jobs {
			if pooled {
				r.s.putBuf(j.buf)
			}
			j.buf = nil
		}
		r.jobs, r.free, r.slots, r.cur, r.curJob = nil, nil, nil, nil, nil
		if r.err == nil {
			r.err = errors.New("read after Close")
		}
	})
	return nil
}

// Stat implements asl.Statter: it reads the index record only.
func (s *Store) Stat(ctx context.Context, ref asl.Reference) (asl.Info, error) {
	if err := checkRef(ref); err != nil {
		return asl.Info{}, fmt.Errorf("stat: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return asl.Info{}, err
	}
	if err := s.acquire(); err != nil {
		return asl.Info{}, fmt.Errorf("stat %s: %w", ref, err)
	}
	defer s.release()
	defer s.gateRead(ref)()
	var info asl.Info
	err := s.getIndex(ref, func(v []byte) error {
		rec, _, err := decodeIndexHead(v)
		if err != nil {
			return err
		}
		info = makeInfo(ref, rec)
		return nil
	})
	if err != nil {
		return asl.Info{}, fmt.Errorf("stat %w", err)
	}
	return info, nil
}

func makeInfo(ref asl.Reference, rec indexRecord) asl.Info {
	return asl.Info{Ref: ref, Header: rec.header(), StoredSize: int64(rec.Stored), Compression: compressionName(rec.Compression)}
}

// Enumerate implements asl.Enumerator: it walks the index ('i' keys) in
// ReferenceBytes order over a consistent snapshot, starting strictly after
// after. Damage does not stop the walk (SPECS.md §6.4, "Damage"): an index
// key or record that does not decode, a value Pebble cannot read, and the
// keys of a table whose blocks Pebble cannot read are skipped, and once the
// walk is over Enumerate returns an error wrapping asl.ErrIntegrity that
// names each (the reference, or the key range and the table file). fn
// returning an error stops the walk with that error.
func (s *Store) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	if err := s.acquire(); err != nil {
		return fmt.Errorf("enumerate: %w", err)
	}
	defer s.release()
	if err := s.idx.drain(); err != nil {
		return fmt.Errorf("enumerate: %w", err)
	}
	lower := []byte{prefixIndex}
	if !after.IsZero() {
		lower = append(after.AppendBytes(lower), 0)
	}
	var (
		bad   []error
		fnErr error
	)
	damage, err := s.walkRange(ctx, lower, []byte{prefixIndex + 1}, func(k, v []byte) error {
		ref, err := asl.DecodeReference(k[1:])
		if err != nil {
			bad = append(bad, fmt.Errorf("index key %x: %w", k, err))
			return nil
		}
		rec, _, err := decodeIndexHead(v)
		if err != nil {
			bad = append(bad, fmt.Errorf("%s: %w", ref, err))
			return nil
		}
		fnErr = fn(makeInfo(ref, rec))
		return fnErr
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return fmt.Errorf("enumerate: %w", err)
	}
	// Regions of packs the recovery scan found damaged (packdamage.go).
	packDamage, err := s.damageReport(after)
	if err != nil {
		return fmt.Errorf("enumerate: %w", err)
	}
	if bad = append(append(bad, damage...), packDamage...); len(bad) > 0 {
		return fmt.Errorf("enumerate: %w", errors.Join(bad...))
	}
	return nil
}
