package pebblestore

import (
	"errors"
	"fmt"
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
	// DefaultPackMin is the payload size of a batch from which its
	// single-chunk artifacts are appended to a pack file instead of being
	// written through Pebble.
	DefaultPackMin = 64 << 10
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
	// maxPackHead bounds a pack record head: map(3), ReferenceBytes of at
	// most 255 bytes, tag (5 bytes), stored (9 bytes).
	maxPackHead = 1 + 1 + 2 + 255 + 1 + 5 + 1 + 9
)

// packMagic starts every pack file; no record starts before its end, so a
// record offset is never 0.
var packMagic = [8]byte{'a', 'm', 'd', 'p', 'a', 'c', 'k', 1}

// packs is the append-only value log of a store (SPECS.md §6.4, "Pack
// files"). A record is a chunk value (chunk header || stored payload) whose
// CRC binds it to (pack id, offset); only an index record makes it visible.
// Appends are serialized; every append is synced before its index records
// are committed, so an index record never names bytes that a crash can take
// back. Bytes of an append whose commit never happened are garbage that
// nothing names.
type packs struct {
	fs  vfs.FS
	dir string

	mu      sync.Mutex // serializes appends
	cur     vfs.File   // the pack appended to; nil until the first append
	curID   uint64
	curSize int64
	nextID  uint64 // id of the next pack to create
	// reuseID, when not 0, is the newest pack, found whole by Open: the
	// first append continues it at reuseSize instead of creating a pack.
	reuseID   uint64
	reuseSize int64
	atOpen    []uint64 // ids of the packs present at Open, ascending
	buf       []byte

	rmu     sync.RWMutex
	readers map[uint64]*packReader
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
	return &packs{fs: fs, dir: dir, nextID: next, atOpen: ids, readers: map[uint64]*packReader{}}, nil
}

// packItem is one payload for append: its reference and header (for the
// record head) and its chunk value's codec and stored bytes.
type packItem struct {
	ref    asl.Reference
	hdr    asl.Header
	codec  uint8
	stored []byte
}

// packHead heads every pack record (SPECS.md §6.4, "Pack files"): enough to
// rebuild the record's index record from the pack alone.
type packHead struct {
	Ref    []byte  `cbor:"1,keyasint"`
	Tag    *uint32 `cbor:"2,keyasint,omitempty"`
	Stored uint64  `cbor:"3,keyasint"`
}

// appendPackHead appends the canonical encoding of a packHead.
func appendPackHead(dst []byte, ref asl.Reference, hdr asl.Header, stored int) []byte {
	n := byte(2)
	if hdr.HasTag {
		n++
	}
	dst = append(dst, 0xa0+n, 0x01)
	switch l := 2 + len(ref.Digest()); { // ReferenceBytes: hash id, digest
	case l < 24:
		dst = append(dst, 0x40+byte(l))
	default:
		dst = append(dst, 0x58, byte(l)) // ReferenceBytes are under 256 bytes
	}
	dst = ref.AppendBytes(dst)
	if hdr.HasTag {
		dst = appendUint(append(dst, 0x02), uint64(hdr.Tag))
	}
	return appendUint(append(dst, 0x03), uint64(stored))
}

// appendLocked writes the records of items to the current pack and syncs
// it (appendEachLocked).
func (p *packs) appendLocked(items []packItem) (offs []uint64, pack, end uint64, err error) {
	bound := 0
	for _, it := range items {
		bound += len(it.stored)
	}
	return p.appendEachLocked(len(items), bound, func(k int) (packItem, error) { return items[k], nil })
}

// appendEachLocked appends the records of n items, which item returns in
// order (it may block until item k is ready), to the current pack, in writes
// of about packWriteBytes, and syncs it; bound is at least the total of
// their stored lengths. It returns the offset of each item's chunk value
// (what its index record names) and the pack id and end offset. On any
// failure (of item too) the pack is abandoned: the next append starts a new
// one, so nothing is ever written after bytes that may be torn. The caller
// holds mu and keeps it until the index records are committed or queued,
// so index commits follow the pack order (the watermark rule of SPECS.md
// §6.4).
func (p *packs) appendEachLocked(n, bound int, item func(k int) (packItem, error)) (offs []uint64, pack, end uint64, err error) {
	total := n*(maxPackHead+maxChunkHeader) + bound
	if p.cur == nil && p.reuseID != 0 {
		id, size := p.reuseID, p.reuseSize
		p.reuseID = 0
		if f, err := p.fs.OpenReadWrite(p.fs.PathJoin(p.dir, packName(id)), vfs.WriteCategoryUnspecified); err == nil {
			p.cur, p.curID, p.curSize = f, id, size
		}
	}
	if p.cur == nil || p.curSize+int64(total) > packMaxBytes && p.curSize > int64(len(packMagic)) {
		if err := p.rollLocked(); err != nil {
			return nil, 0, 0, err
		}
	}
	offs = make([]uint64, n)
	// Records are gathered into writes of about packWriteBytes, so the
	// buffer stays small whatever the batch size.
	buf, at := p.buf[:0], p.curSize
	flush := func() error {
		if _, err := p.cur.WriteAt(buf, at); err != nil {
			p.abandonLocked()
			return fmt.Errorf("writing pack %d at %d: %w", p.curID, at, err)
		}
		at += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	for i := range n {
		it, err := item(i)
		if err != nil {
			p.abandonLocked()
			return nil, 0, 0, err
		}
		buf = appendPackHead(buf, it.ref, it.hdr, len(it.stored))
		off := uint64(at) + uint64(len(buf))
		offs[i] = off
		ch := chunkHeader{Codec: uint64(it.codec), Raw: it.hdr.Size, CRC: chunkCRC(p.curID, off, it.codec, it.hdr.Size, it.stored)}
		buf = append(appendChunkHeader(buf, ch), it.stored...)
		if len(buf) >= packWriteBytes {
			if err := flush(); err != nil {
				return nil, 0, 0, err
			}
		}
	}
	if len(buf) > 0 {
		if err := flush(); err != nil {
			return nil, 0, 0, err
		}
	}
	if cap(buf) <= 2*packWriteBytes+MaxChunkSize/8 {
		p.buf = buf[:0]
	}
	if err := p.cur.SyncData(); err != nil {
		p.abandonLocked()
		return nil, 0, 0, fmt.Errorf("syncing pack %d: %w", p.curID, err)
	}
	p.curSize = at
	p.grew(p.curID, at)
	return offs, p.curID, uint64(p.curSize), nil
}

// rollLocked closes the current pack and creates the next one: its magic
// is written and the file and the directory are synced before any record.
func (p *packs) rollLocked() error {
	p.abandonLocked()
	id := p.nextID
	path := p.fs.PathJoin(p.dir, packName(id))
	f, err := p.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("creating pack %d: %w", id, err)
	}
	p.nextID++
	if err := f.Close(); err != nil {
		return fmt.Errorf("creating pack %d: %w", id, err)
	}
	if f, err = p.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified); err != nil {
		return fmt.Errorf("opening pack %d: %w", id, err)
	}
	if _, err := f.WriteAt(packMagic[:], 0); err != nil {
		f.Close()
		return fmt.Errorf("writing pack %d: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing pack %d: %w", id, err)
	}
	if err := syncDir(p.fs, p.dir); err != nil {
		f.Close()
		return err
	}
	p.cur, p.curID, p.curSize = f, id, int64(len(packMagic))
	return nil
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

func (p *packs) abandonLocked() {
	if p.cur != nil {
		_ = p.cur.Close()
		p.cur = nil
	}
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
	p.abandonLocked()
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
// record is indexed only if it parses, its chunk value passes every check,
// and its payload hashes to the reference in its head; the scan of a pack
// stops at the first record that does not (a torn or abandoned tail), and
// seals the pack (watermark one past its end) so that nothing is ever
// appended after such bytes. The watermarks move to the ends of the packs
// in one synced batch with the rebuilt index records; the newest pack, when
// whole, takes the next appends.
//
// A read-only store writes nothing (SPECS.md §6.6): it syncs no pack and
// moves no watermark; the index records it rebuilds are returned as a
// pending set (what getIndex consults first) and kept in an indexed batch
// that Enumerate reads through.
func (s *Store) recoverPacks() (map[asl.Reference]pendingRecord, error) {
	var b *pebble.Batch
	if s.readOnly {
		b = s.db.NewIndexedBatch()
	} else {
		b = s.db.NewBatch()
		defer b.Close()
	}
	pending, err := s.scanPacks(b)
	if err != nil || !s.readOnly {
		if s.readOnly {
			b.Close()
		}
		return nil, err
	}
	if len(pending) == 0 {
		b.Close()
		return nil, nil
	}
	s.roIndex = b
	return pending, nil
}

// scanPacks does the work of recoverPacks, adding the index records it
// rebuilds (and, for a writable store, the watermarks) to b.
func (s *Store) scanPacks(b *pebble.Batch) (map[asl.Reference]pendingRecord, error) {
	var pending map[asl.Reference]pendingRecord
	added := map[asl.Reference]bool{}
	for _, id := range s.packs.atOpen {
		st, err := s.fs.Stat(s.fs.PathJoin(s.packs.dir, packName(id)))
		if err != nil {
			return nil, fmt.Errorf("pack %d: %w", id, err)
		}
		size := uint64(st.Size())
		wm := uint64(len(packMagic))
		v, closer, err := s.db.Get(watermarkKey(id))
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
		clean := wm <= size
		found := 0
		for p := wm; p < size; {
			rec, ref, next, err := s.scanPackRecord(id, p)
			if errors.Is(err, asl.ErrIntegrity) {
				clean = false // the rest of the pack is garbage
				break
			}
			if err != nil {
				return nil, err
			}
			p = next
			found++
			if added[ref] {
				continue
			}
			key := appendIndexKey(nil, ref)
			present, err := s.has(key)
			if err != nil {
				return nil, err
			}
			if !present {
				val := appendIndexRecord(nil, rec)
				_ = b.Set(key, val, nil)
				added[ref] = true
				s.packRecovered++
				if s.readOnly {
					if pending == nil {
						pending = map[asl.Reference]pendingRecord{}
					}
					pending[ref] = pendingRecord{val: val}
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
		case !clean && wm != end && wm <= size:
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

// scanPackRecord reads and checks the pack record at p of pack id and
// returns the index record that names it, its reference, and where the next
// record starts. Anything wrong with the record wraps asl.ErrIntegrity.
func (s *Store) scanPackRecord(id, p uint64) (indexRecord, asl.Reference, uint64, error) {
	f, err := s.packs.reader(id)
	if err != nil {
		return indexRecord{}, asl.Reference{}, 0, err
	}
	win := make([]byte, maxPackHead)
	n, err := f.ReadAt(win, int64(p))
	if err != nil && !errors.Is(err, io.EOF) {
		return indexRecord{}, asl.Reference{}, 0, fmt.Errorf("reading pack %d at %d: %w", id, p, err)
	}
	var head packHead
	rest, err := decodeCanonical(win[:n], &head, "pack head")
	if err != nil {
		return indexRecord{}, asl.Reference{}, 0, err
	}
	ref, err := asl.DecodeReference(head.Ref)
	if err != nil || !ref.Known() {
		return indexRecord{}, asl.Reference{}, 0, damaged("pack %d at %d: reference %x", id, p, head.Ref)
	}
	c := p + uint64(n-len(rest))
	v, err := s.packs.read(id, c, head.Stored)
	if err != nil {
		return indexRecord{}, asl.Reference{}, 0, err
	}
	ch, _, err := chunkHead(v)
	if err != nil {
		return indexRecord{}, asl.Reference{}, 0, err
	}
	rec := indexRecord{Size: ch.Raw, Tag: head.Tag, Stored: head.Stored, Compression: ch.Codec, Pack: id, Offset: c}
	data, err := decodePacked(rec, v)
	if err != nil {
		return indexRecord{}, asl.Reference{}, 0, err
	}
	if err := verify(ref, rec.header(), data); err != nil {
		return indexRecord{}, asl.Reference{}, 0, err
	}
	return rec, ref, c + uint64(len(v)), nil
}
