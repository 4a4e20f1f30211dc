package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	// DefaultPackMin is the payload size of a put or batch from which its
	// artifacts are appended to a pack file instead of being written
	// through Pebble: 0, every put is packed, so that no acknowledged
	// artifact rests on Pebble's log alone (SPECS.md §6.4, "Damage").
	DefaultPackMin = 0
	// packMaxBytes is the size from which a pack file takes no more
	// appends and the next one is started.
	packMaxBytes = 1 << 30
	// packWriteBytes is the size of the writes an append gathers its
	// records into: small enough that the first writes overlap the hashing
	// of the rest of a streamed batch.
	packWriteBytes = 256 << 10
	// packDir is the subdirectory of the store that holds the pack files.
	packDir = "packs"
	// packSuffix ends every pack file name: the pack id in decimal, padded
	// to at least 6 digits.
	packSuffix = ".pack"
	// maxChunkHeader is the longest canonical chunk header: map(3), codec
	// (at most 1), raw (at most 16 MiB: 5 bytes), crc (5 bytes).
	maxChunkHeader = 1 + 1 + 1 + 1 + 5 + 1 + 5
	// maxPackHead bounds a pack record head: a map, ReferenceBytes of at
	// most 255 bytes, a tag (5 bytes) and at most three more integers (9
	// bytes each).
	maxPackHead = 1 + 1 + 2 + 255 + 1 + 5 + 3*(1+9)
	// maxPartHead bounds the head of a part: map(2), stored and part (9
	// bytes each).
	maxPartHead = 1 + 2*(1+9)
	// packPaceBytes is how much a stream writes between two writeback
	// hints (sync_file_range), so that its final sync finds little to do.
	packPaceBytes = 8 << 20
)

// formatV3Packs, set only by tests, makes appends write no commit markers:
// the packs of a format version 3 store, which Open must still read.
var formatV3Packs = false

// packMagic starts every pack file; no record starts before its end, so a
// record offset is never 0.
var packMagic = [8]byte{'a', 'm', 'd', 'p', 'a', 'c', 'k', 1}

// packs is the append-only value log of a store (SPECS.md §6.4, "Pack
// files"): every payload the store writes (format version 3) is a record in
// a pack, and a pack record carries what Open or salvage needs to rebuild
// its index record. A record is a chunk value (chunk header || stored
// payload) whose CRC binds it to (pack id, offset); only an index record
// makes it visible. Appends go through a packWriter, which one appender
// holds at a time (take, put); every append is synced before its index
// records are committed, so an index record never names bytes that a crash
// can take back. Bytes of an append whose commit never happened are
// garbage that nothing names.
type packs struct {
	fs  vfs.FS
	dir string

	mu     sync.Mutex    // guards idle, nextID, reuse*
	idle   []*packWriter // writers no appender holds, most recently put last
	nextID uint64        // id of the next pack to create
	// reuseID, when not 0, is the newest pack, found whole by Open: the
	// first take continues it at reuseSize instead of creating a pack.
	reuseID   uint64
	reuseSize int64
	atOpen    []uint64 // ids of the packs present at Open, ascending
	// retire: packs with a lower id take no more appends (gc compaction,
	// gc.go); held counts the writers appenders hold, by pack id.
	retire uint64
	held   map[uint64]int
	// readOnly: a pack present at Open and gone since was removed by a
	// writer's garbage collection (ErrStale), not damaged.
	readOnly bool

	rmu     sync.RWMutex
	readers map[uint64]*packReader
}

// packWriter is one pack file open for appends. An appender takes it from
// packs, holds it alone while it appends and until the index commit of its
// records is applied or queued, and puts it back: so the commits that name
// one pack reach Pebble in the order of its records, as the watermark rule
// requires (SPECS.md §6.4). Records are gathered into writes of about
// packWriteBytes; nothing is written after bytes that may be torn: a failed
// write or sync breaks the writer, and put closes it for good.
type packWriter struct {
	id     uint64
	f      vfs.File
	size   int64  // end of the bytes written to the file
	buf    []byte // records not written yet; they go at size
	broken bool
	paced  int64 // size at the last writeback hint (streams)
	// committed is where the bytes not yet covered by a commit marker
	// begin: the end of the last marker this writer synced, or where the
	// writer took the pack up.
	committed uint64
}

func packName(id uint64) string {
	s := strconv.FormatUint(id, 10)
	if len(s) < 6 {
		s = strings.Repeat("0", 6-len(s)) + s
	}
	return s + packSuffix
}

// openPacks creates the pack directory if needed and finds the highest pack
// id in it; appends after Open go to a fresh pack. A read-only store
// creates nothing: a missing directory holds no packs.
func openPacks(fs vfs.FS, storeDir string, readOnly bool) (*packs, error) {
	dir := fs.PathJoin(storeDir, packDir)
	if _, err := fs.Stat(dir); errors.Is(err, os.ErrNotExist) && readOnly {
		return &packs{fs: fs, dir: dir, nextID: 1, readers: map[uint64]*packReader{}}, nil
	} else if errors.Is(err, os.ErrNotExist) {
		// The directory's entry must be durable before any pack in it is.
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := syncDir(fs, storeDir); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	next := uint64(1)
	var ids []uint64
	for _, n := range names {
		id, err := strconv.ParseUint(strings.TrimSuffix(n, packSuffix), 10, 64)
		if err != nil || !strings.HasSuffix(n, packSuffix) || id == 0 || n != packName(id) {
			continue
		}
		ids = append(ids, id)
		next = max(next, id+1)
	}
	slices.Sort(ids)
	return &packs{fs: fs, dir: dir, nextID: next, atOpen: ids, readOnly: readOnly, readers: map[uint64]*packReader{}}, nil
}

// packItem is one payload for append: its reference and header (for the
// record head) and its chunk value's codec and stored bytes.
type packItem struct {
	ref    asl.Reference
	hdr    asl.Header
	codec  uint8
	stored []byte
}

// packHead heads every pack record (SPECS.md §6.4, "Pack files"); which
// fields are present says what the record is:
//
//   - a whole artifact (ref, tag, stored), followed by its chunk value;
//   - a part of a large artifact (stored, part), followed by the chunk value
//     of its chunk number part;
//   - a large artifact (ref, tag, size, first, chunk), followed by nothing:
//     its parts are the records from offset first up to this one;
//   - a commit marker (commit, crc), followed by nothing: the end of an
//     append that was synced, written in the same sync as its records.
//
// Each carries enough to rebuild the index record that names it from the
// pack alone.
type packHead struct {
	Ref    []byte  `cbor:"1,keyasint,omitempty"`
	Tag    *uint32 `cbor:"2,keyasint,omitempty"`
	Stored *uint64 `cbor:"3,keyasint,omitempty"`
	Part   *uint64 `cbor:"4,keyasint,omitempty"`
	Size   *uint64 `cbor:"5,keyasint,omitempty"`
	First  *uint64 `cbor:"6,keyasint,omitempty"`
	Chunk  *uint64 `cbor:"7,keyasint,omitempty"`
	Commit *uint64 `cbor:"8,keyasint,omitempty"`
	CRC    *uint32 `cbor:"9,keyasint,omitempty"`
}

// Kinds of pack records.
const (
	recordSingle = iota + 1
	recordPart
	recordLarge
	recordCommit
)

// kind says which record h heads, or 0 when its fields fit none.
func (h *packHead) kind() int {
	if h.Commit != nil || h.CRC != nil {
		if h.Commit != nil && h.CRC != nil && h.Ref == nil && h.Tag == nil && h.Stored == nil && h.Part == nil && h.Size == nil && h.First == nil && h.Chunk == nil {
			return recordCommit
		}
		return 0
	}
	switch {
	case h.Ref != nil && h.Stored != nil && h.Part == nil && h.Size == nil && h.First == nil && h.Chunk == nil:
		return recordSingle
	case h.Ref == nil && h.Tag == nil && h.Stored != nil && h.Part != nil && h.Size == nil && h.First == nil && h.Chunk == nil:
		return recordPart
	case h.Ref != nil && h.Stored == nil && h.Part == nil && h.Size != nil && h.First != nil && h.Chunk != nil:
		return recordLarge
	}
	return 0
}

// appendRefBytes appends ReferenceBytes as a CBOR byte string.
func appendRefBytes(dst []byte, ref asl.Reference) []byte {
	switch l := 2 + len(ref.Digest()); { // ReferenceBytes: hash id, digest
	case l < 24:
		dst = append(dst, 0x40+byte(l))
	default:
		dst = append(dst, 0x58, byte(l)) // ReferenceBytes are under 256 bytes
	}
	return ref.AppendBytes(dst)
}

// appendPackHead appends the canonical head of a whole artifact's record.
func appendPackHead(dst []byte, ref asl.Reference, hdr asl.Header, stored int) []byte {
	n := byte(2)
	if hdr.HasTag {
		n++
	}
	dst = appendRefBytes(append(dst, 0xa0+n, 0x01), ref)
	if hdr.HasTag {
		dst = appendUint(append(dst, 0x02), uint64(hdr.Tag))
	}
	return appendUint(append(dst, 0x03), uint64(stored))
}

// appendPartHead appends the canonical head of part i of a large artifact.
func appendPartHead(dst []byte, i uint64, stored int) []byte {
	dst = appendUint(append(dst, 0xa2, 0x03), uint64(stored))
	return appendUint(append(dst, 0x04), i)
}

// appendLargeHead appends the canonical head (the whole record) of a large
// artifact whose parts start at first.
func appendLargeHead(dst []byte, ref asl.Reference, hdr asl.Header, first, chunk uint64) []byte {
	n := byte(4)
	if hdr.HasTag {
		n++
	}
	dst = appendRefBytes(append(dst, 0xa0+n, 0x01), ref)
	if hdr.HasTag {
		dst = appendUint(append(dst, 0x02), uint64(hdr.Tag))
	}
	dst = appendUint(append(dst, 0x05), hdr.Size)
	dst = appendUint(append(dst, 0x06), first)
	return appendUint(append(dst, 0x07), chunk)
}

// appendCommitHead appends the commit marker at offset at of pack id that
// ends an append whose bytes began at start (SPECS.md §6.4, "Commit
// markers"): map(2) {8: start, 9: commitCRC(id, at, start)}.
func appendCommitHead(dst []byte, id, at, start uint64) []byte {
	dst = appendUint(append(dst, 0xa2, 0x08), start)
	return appendUint(append(dst, 0x09), uint64(commitCRC(id, at, start)))
}

// commitCRC is CRC-32C over pack id (u64 BE) || at (u64 BE) || start (u64
// BE): it binds a commit marker to its pack and position, so that one read
// from anywhere else does not check.
func commitCRC(id, at, start uint64) uint32 {
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], id)
	binary.BigEndian.PutUint64(b[8:], at)
	binary.BigEndian.PutUint64(b[16:], start)
	return crc32.Checksum(b[:], crcTable)
}

// take returns a writer for an append of about need bytes, which the
// caller holds alone until put. It continues the newest pack when Open found
// it whole, or an idle writer with room; otherwise it creates a pack.
func (p *packs) take(need int64) (*packWriter, error) {
	p.mu.Lock()
	if p.reuseID != 0 {
		id, size := p.reuseID, p.reuseSize
		p.reuseID = 0
		if f, err := p.fs.OpenReadWrite(p.fs.PathJoin(p.dir, packName(id)), vfs.WriteCategoryUnspecified); err == nil {
			p.idle = append(p.idle, &packWriter{id: id, f: f, size: size, paced: size, committed: uint64(size)})
		}
	}
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if w.id >= p.retire && (w.size+need <= packMaxBytes || w.size <= int64(len(packMagic))) {
			p.hold(w.id, 1)
			p.mu.Unlock()
			return w, nil
		}
		// Too full for this append, or retired: it takes no more.
		_ = w.f.Close()
	}
	id := p.nextID
	p.nextID++
	p.hold(id, 1)
	p.mu.Unlock()
	w, err := p.create(id)
	if err != nil {
		p.mu.Lock()
		p.hold(id, -1)
		p.mu.Unlock()
	}
	return w, err
}

// hold counts the writers of pack id that appenders hold. p.mu is held.
func (p *packs) hold(id uint64, d int) {
	if p.held == nil {
		p.held = map[uint64]int{}
	}
	if p.held[id] += d; p.held[id] <= 0 {
		delete(p.held, id)
	}
}

// retireBelow makes every pack present now take no more appends: the next
// append creates a pack. It returns the first id that is not retired and
// whether a writer of a retired pack is still held (its appender is
// running).
func (p *packs) retireBelow() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.retire = p.nextID
	p.reuseID = 0
	for _, w := range p.idle {
		_ = w.f.Close()
	}
	p.idle = nil
	return p.retire, len(p.held) > 0
}

// busy reports whether an appender holds a writer of pack id.
func (p *packs) busy(id uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[id] > 0
}

// put gives w back. A broken writer, or one past packMaxBytes, is closed
// and never appended to again; bytes it buffered but did not write are
// dropped.
func (p *packs) put(w *packWriter) {
	w.buf = w.buf[:0]
	if cap(w.buf) > 2*packWriteBytes {
		w.buf = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold(w.id, -1)
	if w.broken || w.size >= packMaxBytes || w.id < p.retire {
		_ = w.f.Close()
		return
	}
	p.idle = append(p.idle, w)
}

// create creates pack id: its magic is written and the file and the
// directory are synced before any record.
func (p *packs) create(id uint64) (*packWriter, error) {
	path := p.fs.PathJoin(p.dir, packName(id))
	f, err := p.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("creating pack %d: %w", id, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("creating pack %d: %w", id, err)
	}
	if f, err = p.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified); err != nil {
		return nil, fmt.Errorf("opening pack %d: %w", id, err)
	}
	if _, err := f.WriteAt(packMagic[:], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing pack %d: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("syncing pack %d: %w", id, err)
	}
	if err := syncDir(p.fs, p.dir); err != nil {
		f.Close()
		return nil, err
	}
	return &packWriter{id: id, f: f, size: int64(len(packMagic)), paced: int64(len(packMagic)), committed: uint64(len(packMagic))}, nil
}

// end is the offset the next record starts at.
func (w *packWriter) end() uint64 { return uint64(w.size) + uint64(len(w.buf)) }

// flush writes the buffered records.
func (w *packWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		w.broken = true
		return fmt.Errorf("writing pack %d at %d: %w", w.id, w.size, err)
	}
	w.size += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// chunkValue appends a chunk value at the current end (after a head the
// caller appended) and returns its offset, to which its CRC is bound. A
// large stored payload is written directly rather than copied into the
// buffer.
func (w *packWriter) chunkValue(codec uint8, raw uint64, stored []byte) (uint64, error) {
	off := w.end()
	ch := chunkHeader{Codec: uint64(codec), Raw: raw, CRC: chunkCRC(w.id, off, codec, raw, stored)}
	w.buf = appendChunkHeader(w.buf, ch)
	if len(stored) < packWriteBytes/2 {
		w.buf = append(w.buf, stored...)
		if len(w.buf) >= packWriteBytes {
			return off, w.flush()
		}
		return off, nil
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	if _, err := w.f.WriteAt(stored, w.size); err != nil {
		w.broken = true
		return 0, fmt.Errorf("writing pack %d at %d: %w", w.id, w.size, err)
	}
	w.size += int64(len(stored))
	return off, nil
}

// single appends the record of a whole artifact (head with its reference)
// and returns the offset of its chunk value.
func (w *packWriter) single(it packItem) (uint64, error) {
	w.buf = appendPackHead(w.buf, it.ref, it.hdr, len(it.stored))
	return w.chunkValue(it.codec, it.hdr.Size, it.stored)
}

// part appends part i of a large artifact: a chunk of it, raw bytes of raw
// payload stored as stored under codec. It returns the offset of the part's
// head. Nothing is synced.
func (w *packWriter) part(i uint64, codec uint8, raw uint64, stored []byte) (uint64, error) {
	at := w.end()
	w.buf = appendPartHead(w.buf, i, len(stored))
	if _, err := w.chunkValue(codec, raw, stored); err != nil {
		return 0, err
	}
	// A hint to start writing back what a long stream wrote, so that its
	// final sync does not find a large backlog.
	if w.size-w.paced >= packPaceBytes {
		if _, err := w.f.SyncTo(w.size); err != nil {
			w.broken = true
			return 0, fmt.Errorf("syncing pack %d: %w", w.id, err)
		}
		w.paced = w.size
	}
	return at, nil
}

// large appends the record that completes a large artifact whose parts
// start at first (the offset of part 0's head) and end here.
func (w *packWriter) large(ref asl.Reference, hdr asl.Header, first, chunk uint64) {
	w.buf = appendLargeHead(w.buf, ref, hdr, first, chunk)
}

// sync ends the append with a commit marker after its records, writes what
// is buffered and syncs the pack (fdatasync), marker and records in the
// one sync: a record followed by a marker that checks was acknowledged,
// so damage to it is told from a torn write (SPECS.md §6.4, "Commit
// markers"). Readers learn the pack's new size.
func (w *packWriter) sync(p *packs) error {
	if at := w.end(); at > w.committed && !formatV3Packs {
		w.buf = appendCommitHead(w.buf, w.id, at, w.committed)
	}
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.f.SyncData(); err != nil {
		w.broken = true
		return fmt.Errorf("syncing pack %d: %w", w.id, err)
	}
	w.committed = w.end()
	p.grew(w.id, w.size)
	return nil
}

// appendEach appends the records of n whole artifacts, which item returns
// in order (it may block until item k is ready), in writes of about
// packWriteBytes, and syncs the pack. It returns the offset of each item's
// chunk value (what its index record names) and the pack's end. On any
// failure (of item too) the writer is broken: put closes it, and the next
// append goes to another pack, so nothing is ever written after bytes that
// may be torn.
func (w *packWriter) appendEach(p *packs, n int, item func(k int) (packItem, error)) (offs []uint64, end uint64, err error) {
	offs = make([]uint64, n)
	for i := range n {
		it, err := item(i)
		if err != nil {
			w.broken = true
			return nil, 0, err
		}
		if offs[i], err = w.single(it); err != nil {
			return nil, 0, err
		}
	}
	if err := w.sync(p); err != nil {
		return nil, 0, err
	}
	return offs, w.end(), nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// reader returns the reader of pack id, opened once and kept.
func (p *packs) reader(id uint64) (*packReader, error) {
	p.rmu.RLock()
	r := p.readers[id]
	p.rmu.RUnlock()
	if r != nil {
		return r, nil
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if r := p.readers[id]; r != nil {
		return r, nil
	}
	f, err := p.fs.Open(p.fs.PathJoin(p.dir, packName(id)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, found := slices.BinarySearch(p.atOpen, id); found && p.readOnly {
				return nil, fmt.Errorf("pack %d was removed (a writer's gc compacted it): %w; run the command again", id, ErrStale)
			}
			return nil, damaged("pack %d is missing", id)
		}
		return nil, fmt.Errorf("opening pack %d: %w", id, err)
	}
	r = openPackReader(f)
	p.readers[id] = r
	return r, nil
}

// grew tells the reader of pack id, if open, that the pack is at least
// size bytes long.
func (p *packs) grew(id uint64, size int64) {
	p.rmu.RLock()
	if r := p.readers[id]; r != nil {
		r.grew(size)
	}
	p.rmu.RUnlock()
}

// read returns the chunk value of stored payload length stored at
// (id, offset), without checking it: the header and exactly stored payload
// bytes. A record that runs past the end of the pack is damaged.
func (p *packs) read(id, offset, stored uint64) ([]byte, error) {
	if stored > MaxChunkSize || offset < uint64(len(packMagic)) || offset > 1<<62 {
		return nil, damaged("pack record at %d of pack %d with %d stored bytes", offset, id, stored)
	}
	f, err := p.reader(id)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, maxChunkHeader+stored)
	n, err := f.ReadAt(buf, int64(offset))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading pack %d at %d: %w", id, offset, err)
	}
	buf = buf[:n]
	_, hl, err := chunkHead(buf)
	if err != nil {
		return nil, err
	}
	if uint64(len(buf)-hl) < stored {
		return nil, damaged("pack %d ends inside the record at %d", id, offset)
	}
	return buf[:hl+int(stored)], nil
}

// close closes every pack handle.
func (p *packs) close() error {
	p.mu.Lock()
	for _, w := range p.idle {
		_ = w.f.Close()
	}
	p.idle = nil
	p.mu.Unlock()
	p.rmu.Lock()
	defer p.rmu.Unlock()
	var first error
	ids := make([]uint64, 0, len(p.readers))
	for id := range p.readers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := p.readers[id].close(); err != nil && first == nil {
			first = fmt.Errorf("closing pack %d: %w", id, err)
		}
	}
	p.readers = map[uint64]*packReader{}
	return first
}

// chunkHead decodes the chunk header at the start of b and returns it with
// its encoded length.
func chunkHead(b []byte) (chunkHeader, int, error) {
	if h, rest, ok := parseChunkHeader(b); ok {
		return h, len(b) - len(rest), nil
	}
	var h chunkHeader
	rest, err := decodeCanonical(b, &h, "chunk")
	if err != nil {
		return chunkHeader{}, 0, err
	}
	return h, len(b) - len(rest), nil
}

// readPacked returns the raw payload of a pack record, its chunk value
// decoded and CRC-checked against its position; the caller verifies the
// digest.
func (s *Store) readPacked(rec indexRecord) ([]byte, error) {
	v, err := s.packs.read(rec.Pack, rec.Offset, rec.Stored)
	if err != nil {
		return nil, err
	}
	return decodePacked(rec, v)
}

// decodePacked decodes v, the chunk value rec names, into the raw payload.
func decodePacked(rec indexRecord, v []byte) ([]byte, error) {
	h, payload, err := decodeChunk(v, rec.Pack, rec.Offset, rec.Size)
	if err != nil {
		return nil, fmt.Errorf("pack %d at %d: %w", rec.Pack, rec.Offset, err)
	}
	if h.Codec != rec.Compression {
		return nil, damaged("pack %d at %d: codec %d, index record says compression %d", rec.Pack, rec.Offset, h.Codec, rec.Compression)
	}
	if h.Codec == codecZstd {
		return decompress(payload, h.Raw, nil)
	}
	return payload, nil
}

// recoverPacks indexes the pack records above each pack's watermark that
// no index record names: the index records of a packed batch are committed
// without a sync of their own, so a crash can take them back while the
// pack, synced first, keeps the records (SPECS.md §6.4, "Pack files"). A
// record is indexed only if it parses, its chunk values pass every check,
// and its payload hashes to the reference in its head; the scan of a pack
// stops at the first record that does not (a torn or abandoned tail), and
// seals the pack (watermark one past its end) so that nothing is ever
// appended after such bytes. With full set (the log or MANIFEST lost
// records they had: recoverFull), every pack is scanned from its start.
// The watermarks move to the ends of the packs in one synced batch with the
// rebuilt index records; the newest pack, when whole, takes the next
// appends.
//
// A read-only store writes nothing (SPECS.md §6.6): it syncs no pack and
// moves no watermark; the index records it rebuilds are returned as a
// pending set (what getIndex consults first) and kept in an indexed batch
// that Enumerate reads through.
func (s *Store) recoverPacks(full bool) (map[asl.Reference]pendingRecord, error) {
	var b *pebble.Batch
	if s.readOnly {
		b = s.db.NewIndexedBatch()
	} else {
		b = s.db.NewBatch()
		defer b.Close()
	}
	pending, err := s.scanPacks(b, full)
	if err != nil || !s.readOnly {
		if s.readOnly {
			b.Close()
		}
		return nil, err
	}
	if b.Empty() {
		b.Close()
		return nil, nil
	}
	s.roIndex = b
	return pending, nil
}

// scanPacks does the work of recoverPacks, adding the index records it
// rebuilds (and, for a writable store, the watermarks) to b.
func (s *Store) scanPacks(b *pebble.Batch, full bool) (map[asl.Reference]pendingRecord, error) {
	var pending map[asl.Reference]pendingRecord
	added := map[asl.Reference]bool{}
	for _, id := range s.packs.atOpen {
		st, err := s.fs.Stat(s.fs.PathJoin(s.packs.dir, packName(id)))
		if err != nil {
			return nil, fmt.Errorf("pack %d: %w", id, err)
		}
		size := uint64(st.Size())
		wm := uint64(len(packMagic))
		v, closer, err := dbGet(s.db, watermarkKey(id))
		switch {
		case err == nil:
			n, derr := decodeUintRecord(v, "pack watermark")
			closer.Close()
			if derr != nil {
				return nil, fmt.Errorf("pack %d: %w", id, derr)
			}
			wm = max(wm, n)
		case !errors.Is(err, pebble.ErrNotFound):
			return nil, fmt.Errorf("pack %d: reading watermark: %w", id, ioErr(err))
		}
		sealed := wm > size
		if full {
			wm = uint64(len(packMagic))
		}
		clean := !sealed
		found := 0
		for p := wm; p < size; {
			sc, err := s.packs.scan(id, p)
			if errors.Is(err, asl.ErrIntegrity) {
				clean = false
				q := s.packs.resync(id, p+1, size)
				if q >= size {
					break // a torn write: nothing after it checks
				}
				// Damage: records that check follow it. Record it, and
				// index what follows (SPECS.md §6.4, "Recovery"). A head
				// that names no artifact is repaired to name it.
				if sc.kind != recordSingle && sc.kind != recordLarge {
					if ref, ok := s.packs.nameDamaged(id, p, q); ok {
						sc = scanned{kind: recordSingle, ref: ref}
					}
				}
				if err := s.recordDamage(b, id, p, q, sc, err); err != nil {
					return nil, err
				}
				p = q
				continue
			}
			if err != nil {
				return nil, err
			}
			p = sc.next
			if sc.kind == recordPart || sc.kind == recordCommit {
				continue
			}
			found++
			if added[sc.ref] {
				continue
			}
			key := appendIndexKey(nil, sc.ref)
			present, err := s.has(key)
			if err != nil {
				return nil, err
			}
			if !present {
				// A deleted copy stays deleted (SPECS.md §6.4, "Deletion").
				dead, err := s.tombstoned(sc.ref, id, sc.rec.Offset)
				if err != nil {
					return nil, fmt.Errorf("pack %d: %w", id, err)
				}
				present = dead
			}
			if !present {
				val := appendIndexRecord(nil, sc.rec)
				_ = b.Set(key, val, nil)
				added[sc.ref] = true
				s.packRecovered++
				if s.readOnly {
					if pending == nil {
						pending = map[asl.Reference]pendingRecord{}
					}
					pending[sc.ref] = pendingRecord{val: val}
				}
			}
		}
		if s.readOnly {
			continue
		}
		if found > 0 {
			// The records just found may not have been synced before the
			// crash: sync them before any index record names them.
			r, err := s.packs.reader(id)
			if err == nil {
				err = r.f.Sync()
			}
			if err != nil {
				return nil, fmt.Errorf("syncing pack %d: %w", id, err)
			}
		}
		// A pack whose scan stopped early is sealed: its watermark goes one
		// past its end, so no later Open lets an append continue it.
		switch end := size + 1; {
		case !clean && !sealed:
			_ = b.Set(watermarkKey(id), appendCBOR(nil, end), nil)
		case clean && wm != size:
			_ = b.Set(watermarkKey(id), appendCBOR(nil, size), nil)
		}
		// The newest pack takes further appends if everything in it is
		// whole: nothing may ever be written after bytes that are not.
		if id == s.packs.atOpen[len(s.packs.atOpen)-1] && clean && size < packMaxBytes {
			s.packs.reuseID, s.packs.reuseSize = id, int64(size)
		}
	}
	if s.readOnly || b.Empty() {
		return pending, nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("indexing pack records: %w", ioErr(err))
	}
	return nil, nil
}

// scanned is a pack record that scan read and checked: its kind,
// for a whole or large artifact its reference and the index record that
// names it, for a whole one its payload, and where the next record starts.
// When scan fails after the record's head decoded, it still returns the
// kind and reference (and, for a large record, next): what was lost can be
// named; for a whole artifact whose chunk value checks but whose payload
// hashes to another reference (a damaged head), rec and data too.
type scanned struct {
	kind int
	ref  asl.Reference
	rec  indexRecord
	data []byte
	next uint64
}

// scan reads and checks the pack record at p of pack id. A whole
// artifact's record is decoded and its digest verified; a part's chunk
// value is CRC-checked; a large artifact's record has its parts read back
// from its first one (they must end exactly at p) and the digest of all of
// them verified. Anything wrong with the record wraps asl.ErrIntegrity.
func (pk *packs) scan(id, p uint64) (scanned, error) {
	f, err := pk.reader(id)
	if err != nil {
		return scanned{}, err
	}
	win := make([]byte, maxPackHead)
	n, err := f.ReadAt(win, int64(p))
	if err != nil && !errors.Is(err, io.EOF) {
		return scanned{}, fmt.Errorf("reading pack %d at %d: %w", id, p, err)
	}
	return pk.scanHead(id, p, win[:n])
}

// scanHead is scan with the bytes from p on (at least the record's head)
// in win: the rest of the record is read from the pack.
func (pk *packs) scanHead(id, p uint64, win []byte) (scanned, error) {
	var head packHead
	n := len(win)
	rest, err := decodeCanonical(win, &head, "pack head")
	if err != nil {
		return scanned{}, fmt.Errorf("pack %d at %d: %w", id, p, err)
	}
	c := p + uint64(n-len(rest)) // where the record's chunk value starts
	kind := head.kind()
	var ref asl.Reference
	if kind == recordSingle || kind == recordLarge {
		if ref, err = asl.DecodeReference(head.Ref); err != nil || !ref.Known() {
			return scanned{}, damaged("pack %d at %d: reference %x", id, p, head.Ref)
		}
	}
	switch kind {
	case recordCommit:
		if *head.Commit < uint64(len(packMagic)) || *head.Commit >= p || *head.CRC != commitCRC(id, p, *head.Commit) {
			return scanned{}, damaged("pack %d at %d: commit marker from %d does not check", id, p, *head.Commit)
		}
		return scanned{kind: kind, next: c}, nil
	case recordSingle:
		named := scanned{kind: kind, ref: ref}
		v, err := pk.read(id, c, *head.Stored)
		if err != nil {
			return named, err
		}
		ch, _, err := chunkHead(v)
		if err != nil {
			return named, fmt.Errorf("pack %d at %d: %w", id, c, err)
		}
		rec := indexRecord{Size: ch.Raw, Tag: head.Tag, Stored: *head.Stored, Compression: ch.Codec, Pack: id, Offset: c}
		data, err := decodePacked(rec, v)
		if err != nil {
			return named, err
		}
		if err := verify(ref, rec.header(), data); err != nil {
			// The chunk value checks but the head names another
			// reference: keep what the bytes hash to (recordDamage).
			named.rec, named.data = rec, data
			return named, fmt.Errorf("pack %d at %d: %w", id, p, err)
		}
		return scanned{kind: kind, ref: ref, rec: rec, data: data, next: c + uint64(len(v))}, nil
	case recordPart:
		v, err := pk.read(id, c, *head.Stored)
		if err != nil {
			return scanned{}, err
		}
		ch, _, err := chunkHead(v)
		if err != nil {
			return scanned{}, fmt.Errorf("pack %d at %d: %w", id, c, err)
		}
		if _, _, err := decodeChunk(v, id, c, ch.Raw); err != nil {
			return scanned{}, fmt.Errorf("pack %d at %d: %w", id, c, err)
		}
		return scanned{kind: kind, next: c + uint64(len(v))}, nil
	case recordLarge:
		rec := indexRecord{Size: *head.Size, Tag: head.Tag, Chunk: *head.Chunk, Pack: id, Offset: *head.First}
		named := scanned{kind: kind, ref: ref, rec: rec, next: c}
		if rec.Chunk < MinChunkSize || rec.Chunk > MaxChunkSize || rec.Size <= rec.Chunk || rec.Offset < uint64(len(packMagic)) || rec.Offset >= p {
			return named, damaged("pack %d at %d: large record of %d bytes in %d-byte chunks from %d", id, p, rec.Size, rec.Chunk, rec.Offset)
		}
		end, err := pk.checkParts(ref, &rec, nil)
		if err != nil {
			return named, fmt.Errorf("pack %d at %d: %w", id, p, err)
		}
		if end != p {
			return named, damaged("pack %d at %d: the parts of the large record end at %d", id, p, end)
		}
		return scanned{kind: kind, ref: ref, rec: rec, next: c}, nil
	}
	return scanned{}, damaged("pack %d at %d: pack head of no known kind", id, p)
}

// checkParts reads every part of the large packed artifact rec names, in
// order, checks each chunk value (CRC bound to its pack and offset, raw
// size) and the digest of the whole payload against ref, and fills in rec's
// stored size and compression summary. It returns the offset after the
// last part. fn, if not nil, receives each chunk's raw bytes in order
// (valid until it returns), before the digest is known.
func (pk *packs) checkParts(ref asl.Reference, rec *indexRecord, fn func([]byte) error) (uint64, error) {
	h, err := asl.NewHasher(ref.HashID(), rec.header())
	if err != nil {
		return 0, err
	}
	var (
		codecs [2]bool
		stored uint64
		buf    []byte
	)
	pos := rec.Offset
	for i := range rec.chunks() {
		loc, err := pk.partAt(rec.Pack, pos, i)
		if err != nil {
			return 0, err
		}
		c, err := pk.readPart(*rec, i, loc, buf)
		if err != nil {
			return 0, err
		}
		if cap(c.data) > cap(buf) {
			buf = c.data[:0]
		}
		h.Write(c.data)
		if fn != nil {
			if err := fn(c.data); err != nil {
				return 0, err
			}
		}
		stored += uint64(c.stored)
		codecs[c.codec] = true
		pos = loc.next
	}
	rec.Stored, rec.Compression = stored, summarize(codecs)
	if got, err := h.Sum(); err != nil || got != ref {
		return 0, fmt.Errorf("stored bytes hash to %s: %w", got, asl.ErrIntegrity)
	}
	return pos, nil
}

// partLoc is where part i of a large packed artifact lies: its chunk value
// at c, with stored payload bytes, and the next part's head at next.
type partLoc struct{ c, stored, next uint64 }

// partAt reads the head of part want at offset at of pack id and the chunk
// header after it, and returns where the part lies. A head that is not
// part want's, or an unreadable chunk header, is damage.
func (p *packs) partAt(id, at, want uint64) (partLoc, error) {
	r, err := p.reader(id)
	if err != nil {
		return partLoc{}, err
	}
	var win [maxPartHead + maxChunkHeader]byte
	// Not through the mapping: a mapped read of each part's head made the
	// kernel map the large folios around it, so streaming a 1 GiB artifact
	// left most of its pack resident (about 300 MiB of RSS).
	n, err := r.f.ReadAt(win[:], int64(at))
	if err != nil && !errors.Is(err, io.EOF) {
		return partLoc{}, fmt.Errorf("reading pack %d at %d: %w", id, at, err)
	}
	b := win[:n]
	bad := func() (partLoc, error) {
		return partLoc{}, damaged("pack %d at %d: no head of part %d", id, at, want)
	}
	if len(b) < 2 || b[0] != 0xa2 || b[1] != 0x03 {
		return bad()
	}
	stored, k, ok := readUint(b[2:])
	if !ok || len(b) < 3+k || b[2+k] != 0x04 {
		return bad()
	}
	part, m, ok := readUint(b[3+k:])
	if !ok || part != want || stored > MaxChunkSize {
		return bad()
	}
	hl := 3 + k + m
	_, rest, ok := parseChunkHeader(b[hl:])
	if !ok {
		return partLoc{}, damaged("pack %d at %d: chunk header of part %d", id, at+uint64(hl), want)
	}
	c := at + uint64(hl)
	return partLoc{c: c, stored: stored, next: c + uint64(len(b)-hl-len(rest)) + stored}, nil
}

// readPart reads part i of the large packed artifact rec, located at loc,
// into buf (reused when its capacity suffices), checking its CRC (bound to
// the pack and offset) and raw size.
//
// When buf can hold the whole chunk value, it is read straight into buf
// and a raw part is handed out where it lies, with no copy and no fresh
// (zeroed) buffer per part; a compressed part's payload is set apart
// before it is decoded into buf.
func (pk *packs) readPart(rec indexRecord, i uint64, loc partLoc, buf []byte) (chunkData, error) {
	var (
		v     []byte
		err   error
		inBuf bool // v lies in buf
	)
	if total := loc.next - loc.c; loc.next > loc.c && loc.stored <= MaxChunkSize && total <= uint64(cap(buf)) {
		v, err = pk.readInto(rec.Pack, loc.c, buf[:total])
		inBuf = true
	} else {
		v, err = pk.read(rec.Pack, loc.c, loc.stored)
	}
	if err != nil {
		return chunkData{}, err
	}
	ch, payload, err := decodeChunk(v, rec.Pack, loc.c, rec.rawLen(i))
	if err != nil {
		return chunkData{}, fmt.Errorf("part %d: %w", i, err)
	}
	c := chunkData{stored: len(payload), codec: uint8(ch.Codec)}
	if ch.Codec == codecZstd {
		if inBuf {
			payload = bytes.Clone(payload) // decoding writes over buf
		}
		if c.data, err = decompress(payload, ch.Raw, buf); err != nil {
			return chunkData{}, fmt.Errorf("part %d: %w", i, err)
		}
		return c, nil
	}
	if inBuf {
		c.data = payload
		return c, nil
	}
	c.data = append(buf[:0], payload...)
	return c, nil
}

// readInto reads the len(dst) bytes of a chunk value at (id, offset) into
// dst; a pack that ends before them is damaged.
func (p *packs) readInto(id, offset uint64, dst []byte) ([]byte, error) {
	if offset < uint64(len(packMagic)) || offset > 1<<62 {
		return nil, damaged("pack record at %d of pack %d", offset, id)
	}
	f, err := p.reader(id)
	if err != nil {
		return nil, err
	}
	n, err := f.ReadAt(dst, int64(offset))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading pack %d at %d: %w", id, offset, err)
	}
	if n < len(dst) {
		return nil, damaged("pack %d ends inside the record at %d", id, offset)
	}
	return dst, nil
}

// resync finds the first offset from p on where a pack record that checks
// starts (or size): the bytes of a damaged record are skipped. Salvage and
// Open's recovery scan use it alike (SPECS.md §6.4, "Recovery", "Damage").
func (pk *packs) resync(id, p, size uint64) uint64 {
	r, err := pk.reader(id)
	if err != nil {
		return size
	}
	const window = 1 << 20
	buf := make([]byte, window+1)
	for at := p; at < size; at += window {
		n, err := r.ReadAt(buf, int64(at))
		if err != nil && !errors.Is(err, io.EOF) {
			return size
		}
		for i := 0; i+1 < n; i++ {
			// A record head is a map of 2 to 5 pairs whose first key is 1
			// (a reference) or 3 (a part's stored size), or a commit
			// marker's map of 2 pairs whose first key is 8.
			if (buf[i] < 0xa2 || buf[i] > 0xa5 || buf[i+1] != 0x01 && buf[i+1] != 0x03) && (buf[i] != 0xa2 || buf[i+1] != 0x08) {
				continue
			}
			if _, err := pk.scan(id, at+uint64(i)); err == nil {
				return at + uint64(i)
			}
		}
	}
	return size
}
