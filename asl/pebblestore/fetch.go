package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	var kb [64]byte
	v, closer, err := s.db.Get(appendIndexKey(kb[:0], ref))
	if errors.Is(err, pebble.ErrNotFound) {
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
	if rec.packed() {
		if data, err = s.readPacked(rec); err != nil {
			return nil, asl.Header{}, fmt.Errorf("fetch %s: %w", ref, err)
		}
	} else if !rec.inline() {
		return s.newChunkReader(ctx, ref, rec), hdr, nil
	}
	if err := verify(ref, hdr, data); err != nil {
		return nil, asl.Header{}, fmt.Errorf("fetch %w", err)
	}
	return io.NopCloser(bytes.NewReader(data)), hdr, nil
}

func verify(ref asl.Reference, hdr asl.Header, data []byte) error {
	h, err := asl.NewHasher(ref.HashID(), hdr)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	h.Write(data)
	got, err := h.Sum()
	if err != nil || got != ref {
		return fmt.Errorf("%s: stored bytes hash to %s: %w", ref, got, asl.ErrIntegrity)
	}
	return nil
}

// readChunk reads chunk i of rec's blob into res.buf (capacity rec.Chunk),
// checking its CRC and raw size.
func (s *Store) readChunk(rec indexRecord, i uint64, res *chunkResult) {
	if res.err = s.acquire(); res.err != nil {
		return
	}
	defer s.release()
	var kb [17]byte
	v, closer, err := s.db.Get(appendChunkKey(kb[:0], rec.Blob, i))
	if errors.Is(err, pebble.ErrNotFound) {
		res.err = damaged("chunk %d of blob %d is missing", i, rec.Blob)
		return
	}
	if err != nil {
		res.err = fmt.Errorf("reading chunk %d of blob %d: %w", i, rec.Blob, ioErr(err))
		return
	}
	defer closer.Close()
	ch, payload, err := decodeChunk(v, rec.Blob, i, rec.rawLen(i))
	if err != nil {
		res.err = err
		return
	}
	res.stored, res.codec = len(payload), uint8(ch.Codec)
	if ch.Codec == codecZstd {
		res.data, res.err = decompress(payload, ch.Raw, (*res.buf)[:0])
		return
	}
	res.data = append((*res.buf)[:0], payload...)
}

type chunkResult struct {
	buf    *[]byte
	data   []byte
	stored int
	codec  uint8
	err    error
}

// chunkReader streams a chunked artifact. A producer goroutine reads,
// checks and decompresses chunks ahead of the consumer, which hashes them;
// nbuf buffers circulate, which bounds memory.
type chunkReader struct {
	s   *Store
	ctx context.Context
	ref asl.Reference
	rec indexRecord
	h   *asl.Hasher

	results chan chunkResult
	free    chan *[]byte
	stop    chan struct{}
	wg      sync.WaitGroup

	next   uint64 // chunks received
	stored uint64 // stored payload bytes of the chunks received
	codecs [2]bool
	cur    []byte
	curBuf *[]byte
	err    error
	once   sync.Once
}

const fetchBuffers = 3

func (s *Store) newChunkReader(ctx context.Context, ref asl.Reference, rec indexRecord) *chunkReader {
	h, _ := asl.NewHasher(ref.HashID(), rec.header()) // ref checked known
	r := &chunkReader{
		s: s, ctx: ctx, ref: ref, rec: rec, h: h,
		results: make(chan chunkResult, fetchBuffers),
		free:    make(chan *[]byte, fetchBuffers),
		stop:    make(chan struct{}),
	}
	for range fetchBuffers {
		r.free <- r.newBuf()
	}
	r.wg.Add(1)
	go r.produce()
	return r
}

func (r *chunkReader) newBuf() *[]byte {
	if r.rec.Chunk == uint64(r.s.chunkSize) {
		return r.s.getBuf()
	}
	b := make([]byte, r.rec.Chunk)
	return &b
}

func (r *chunkReader) produce() {
	defer r.wg.Done()
	n := r.rec.chunks()
	for i := uint64(0); i < n; i++ {
		var buf *[]byte
		select {
		case buf = <-r.free:
		case <-r.stop:
			return
		}
		res := chunkResult{buf: buf}
		if err := r.ctx.Err(); err != nil {
			res.err = err
		} else {
			r.s.readChunk(r.rec, i, &res)
		}
		select {
		case r.results <- res:
		case <-r.stop:
			r.free <- buf
			return
		}
		if res.err != nil {
			return
		}
	}
}

func (r *chunkReader) fill() error {
	if r.curBuf != nil {
		r.free <- r.curBuf
		r.curBuf = nil
	}
	if r.next == r.rec.chunks() {
		return io.EOF
	}
	var res chunkResult
	select {
	case res = <-r.results:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	if res.err != nil {
		r.free <- res.buf
		return fmt.Errorf("fetch %s: %w", r.ref, res.err)
	}
	r.h.Write(res.data)
	r.next++
	r.stored += uint64(res.stored)
	r.codecs[res.codec] = true
	if r.next == r.rec.chunks() {
		// The last chunk is withheld until the whole payload verifies,
		// and until the record's summary fields agree with the chunks.
		if comp := summarize(r.codecs); r.stored != r.rec.Stored || comp != r.rec.Compression {
			r.free <- res.buf
			return damaged("fetch %s: index record says %d stored bytes (compression %d), chunks hold %d (compression %d)", r.ref, r.rec.Stored, r.rec.Compression, r.stored, comp)
		}
		got, err := r.h.Sum()
		if err != nil || got != r.ref {
			r.free <- res.buf
			return fmt.Errorf("fetch %s: stored bytes hash to %s: %w", r.ref, got, asl.ErrIntegrity)
		}
	}
	r.cur, r.curBuf = res.data, res.buf
	return nil
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

// WriteTo implements io.WriterTo, sparing io.Copy a buffer copy.
func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
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

// Close stops the producer and returns the buffers.
func (r *chunkReader) Close() error {
	r.once.Do(func() {
		close(r.stop)
		r.wg.Wait()
		if r.curBuf != nil {
			r.free <- r.curBuf
			r.curBuf = nil
		}
		r.cur = nil
		if r.err == nil {
			r.err = errors.New("read after Close")
		}
		if r.rec.Chunk != uint64(r.s.chunkSize) {
			return
		}
		for {
			select {
			case b := <-r.free:
				r.s.putBuf(b)
			case res := <-r.results:
				r.s.putBuf(res.buf)
			default:
				return
			}
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
// after. A damaged index record stops the walk with an error wrapping
// asl.ErrIntegrity.
func (s *Store) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	if err := s.acquire(); err != nil {
		return fmt.Errorf("enumerate: %w", err)
	}
	defer s.release()
	lower := []byte{prefixIndex}
	if !after.IsZero() {
		lower = append(after.AppendBytes(lower), 0)
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixIndex + 1}})
	if err != nil {
		return fmt.Errorf("enumerate: %w", ioErr(err))
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		ref, err := asl.DecodeReference(it.Key()[1:])
		if err != nil {
			return fmt.Errorf("enumerate: index key %x: %w", it.Key(), err)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("enumerate %s: %w", ref, ioErr(err))
		}
		rec, _, err := decodeIndexHead(v)
		if err != nil {
			return fmt.Errorf("enumerate %s: %w", ref, err)
		}
		if err := fn(makeInfo(ref, rec)); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("enumerate: %w", ioErr(err))
	}
	return nil
}
