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
	// packDir is the subdirectory of the store that holds the pack files.
	packDir = "packs"
	// packSuffix ends every pack file name: the pack id in decimal, padded
	// to at least 6 digits.
	packSuffix = ".pack"
	// maxChunkHeader is the longest canonical chunk header: map(3), codec
	// (at most 1), raw (at most 16 MiB: 5 bytes), crc (5 bytes).
	maxChunkHeader = 1 + 1 + 1 + 1 + 5 + 1 + 5
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
	buf     []byte

	rmu     sync.RWMutex
	readers map[uint64]vfs.File
}

func packName(id uint64) string {
	s := strconv.FormatUint(id, 10)
	if len(s) < 6 {
		s = strings.Repeat("0", 6-len(s)) + s
	}
	return s + packSuffix
}

// openPacks creates the pack directory if needed and finds the highest pack
// id in it; appends after Open go to a fresh pack.
func openPacks(fs vfs.FS, storeDir string) (*packs, error) {
	dir := fs.PathJoin(storeDir, packDir)
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	next := uint64(1)
	for _, n := range names {
		id, err := strconv.ParseUint(strings.TrimSuffix(n, packSuffix), 10, 64)
		if err != nil || !strings.HasSuffix(n, packSuffix) || id == 0 {
			continue
		}
		next = max(next, id+1)
	}
	return &packs{fs: fs, dir: dir, nextID: next, readers: map[uint64]vfs.File{}}, nil
}

// packed is where append put one payload.
type packed struct {
	pack, offset uint64
}

// append writes the chunk values of payloads (codecs[i], raw sizes raws[i],
// stored bytes stored[i]) to the current pack in one write, syncs it, and
// returns where each went. On any failure the pack is abandoned: the next
// append starts a new one, so a failed write never leaves a hole that a
// later record is written after without a sync in between.
func (p *packs) append(codecs []uint8, raws []uint64, stored [][]byte) ([]packed, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	for _, b := range stored {
		total += maxChunkHeader + len(b)
	}
	if p.cur == nil || p.curSize+int64(total) > packMaxBytes && p.curSize > int64(len(packMagic)) {
		if err := p.rollLocked(); err != nil {
			return nil, err
		}
	}
	out := make([]packed, len(stored))
	buf := p.buf[:0]
	for i, b := range stored {
		off := uint64(p.curSize) + uint64(len(buf))
		out[i] = packed{pack: p.curID, offset: off}
		ch := chunkHeader{Codec: uint64(codecs[i]), Raw: raws[i], CRC: chunkCRC(p.curID, off, codecs[i], raws[i], b)}
		buf = append(appendChunkHeader(buf, ch), b...)
	}
	if cap(buf) <= 4<<20 {
		p.buf = buf[:0]
	}
	if _, err := p.cur.WriteAt(buf, p.curSize); err != nil {
		p.abandonLocked()
		return nil, fmt.Errorf("writing pack %d at %d: %w", p.curID, p.curSize, err)
	}
	if err := p.cur.SyncData(); err != nil {
		p.abandonLocked()
		return nil, fmt.Errorf("syncing pack %d: %w", p.curID, err)
	}
	p.curSize += int64(len(buf))
	return out, nil
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
	d, err := p.fs.OpenDir(p.dir)
	if err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", p.dir, err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		f.Close()
		return fmt.Errorf("syncing %s: %w", p.dir, err)
	}
	p.cur, p.curID, p.curSize = f, id, int64(len(packMagic))
	return nil
}

func (p *packs) abandonLocked() {
	if p.cur != nil {
		_ = p.cur.Close()
		p.cur = nil
	}
}

// reader returns a read handle of pack id, opened once and kept.
func (p *packs) reader(id uint64) (vfs.File, error) {
	p.rmu.RLock()
	f := p.readers[id]
	p.rmu.RUnlock()
	if f != nil {
		return f, nil
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if f := p.readers[id]; f != nil {
		return f, nil
	}
	f, err := p.fs.Open(p.fs.PathJoin(p.dir, packName(id)))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, damaged("pack %d is missing", id)
		}
		return nil, fmt.Errorf("opening pack %d: %w", id, err)
	}
	p.readers[id] = f
	return f, nil
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
	hl, err := chunkHeaderLen(buf)
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
		if err := p.readers[id].Close(); err != nil && first == nil {
			first = fmt.Errorf("closing pack %d: %w", id, err)
		}
	}
	p.readers = map[uint64]vfs.File{}
	return first
}

// chunkHeaderLen is the length of the chunk header at the start of b.
func chunkHeaderLen(b []byte) (int, error) {
	if _, rest, ok := parseChunkHeader(b); ok {
		return len(b) - len(rest), nil
	}
	var h chunkHeader
	rest, err := decMode.UnmarshalFirst(b, &h)
	if err != nil {
		return 0, damaged("chunk header: %v", err)
	}
	return len(b) - len(rest), nil
}

// readPacked returns the raw payload of a pack record, its chunk value
// decoded and CRC-checked against its position; the caller verifies the
// digest.
func (s *Store) readPacked(rec indexRecord) ([]byte, error) {
	v, err := s.packs.read(rec.Pack, rec.Offset, rec.Stored)
	if err != nil {
		return nil, err
	}
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
