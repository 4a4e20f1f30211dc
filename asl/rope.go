package asl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrTooLarge is wrapped by the errors of operations that would build or
// hold more bytes than they may: a Rope longer than 2^64-1 bytes, or a
// materialisation above its limit (SPECS.md §12.9).
var ErrTooLarge = errors.New("too large")

// Rope is an artifact value whose payload need not be in memory (SPECS.md
// §12.9): its bytes are a sequence of segments, each a range of an
// in-memory byte slice or of a stored artifact read through a Fetcher.
// Concatenating and slicing ropes copies no payload bytes. A Rope is
// immutable and safe for concurrent use; its payload is read with Open,
// CopyTo or Bytes, which take the context of the I/O they may do.
//
// Every read of a store-backed segment is one Fetch of its artifact, read
// from the start of the payload through the end (bytes before and after the
// range are read and discarded, and consecutive ranges of one artifact in
// ascending order share one Fetch): the store's per-chunk checks apply to
// the bytes as they are read, and the read ends with the store's
// whole-digest check, so a reader of a Rope reaches io.EOF only when every
// stored artifact it read matched its reference.
type Rope struct {
	tag    TypeTag
	hasTag bool
	body   *rnode

	mu   sync.Mutex
	refs []Reference // cached references, at most one per hash id
}

type rkind uint8

const (
	kindMem rkind = iota // mem[0:size]
	kindSrc              // bytes [off, off+size) of src's payload
	kindCat              // kids in order
	kindWin              // bytes [off, off+size) of kids[0]
)

type rnode struct {
	kind rkind
	size uint64
	off  uint64
	mem  []byte
	src  *source
	kids []*rnode
	// stored is true when the node reads a stored artifact (kindSrc, or
	// a kindCat or kindWin over one).
	stored bool
}

// source is one stored artifact a rope reads.
type source struct {
	f   Fetcher
	ref Reference
	hdr Header
}

// maxFlatKids bounds how many children a concatenation copies from its
// parts' own concatenations to keep ropes shallow.
const maxFlatKids = 64

// NewRope returns the in-memory rope of a. It aliases a.Bytes, which must
// not be modified afterwards.
func NewRope(a Artifact) *Rope {
	return &Rope{tag: a.Tag, hasTag: a.HasTag, body: memNode(a.Bytes)}
}

func memNode(b []byte) *rnode { return &rnode{kind: kindMem, size: uint64(len(b)), mem: b} }

// StoredRope returns the rope of the artifact stored under ref in f, whose
// header is hdr (as Fetch or Stat reported it). Nothing is read until the
// rope is; a read fails with an error wrapping ErrIntegrity if the store
// then reports another header or bytes that do not hash to ref.
func StoredRope(f Fetcher, ref Reference, hdr Header) *Rope {
	s := &source{f: f, ref: ref, hdr: hdr}
	return &Rope{tag: hdr.Tag, hasTag: hdr.HasTag, body: &rnode{kind: kindSrc, size: hdr.Size, src: s, stored: true}, refs: []Reference{ref}}
}

// Header is the rope's artifact header.
func (r *Rope) Header() Header { return Header{Size: r.body.size, Tag: r.tag, HasTag: r.hasTag} }

// Size is the payload length in bytes.
func (r *Rope) Size() uint64 { return r.body.size }

// InMemory reports whether the payload is one in-memory slice, so that
// Bytes returns it without copying or reading.
func (r *Rope) InMemory() bool { return r.body.kind == kindMem }

// WithTag returns a rope with r's payload and the given tag.
func (r *Rope) WithTag(tag TypeTag, hasTag bool) *Rope {
	if tag == r.tag && hasTag == r.hasTag {
		return r
	}
	if !hasTag {
		tag = 0
	}
	return &Rope{tag: tag, hasTag: hasTag, body: r.body}
}

// ConcatRopes returns the untagged rope whose payload is the parts'
// payloads in order. It fails with ErrTooLarge when the total length does
// not fit a uint64.
func ConcatRopes(parts ...*Rope) (*Rope, error) {
	if len(parts) == 1 {
		return parts[0].WithTag(0, false), nil
	}
	var size uint64
	n := 0
	stored := false
	for _, p := range parts {
		stored = stored || p.body.stored
		if size+p.body.size < size {
			return nil, fmt.Errorf("concatenation of %d ropes: total length above 2^64-1 bytes: %w", len(parts), ErrTooLarge)
		}
		size += p.body.size
		switch {
		case p.body.size == 0:
		case p.body.kind == kindCat:
			n += len(p.body.kids)
		default:
			n++
		}
	}
	if !stored && size <= coalesceBytes {
		buf := bytes.NewBuffer(make([]byte, 0, size))
		for _, p := range parts {
			// In memory: no I/O, so no error.
			if err := p.CopyTo(context.Background(), buf); err != nil {
				return nil, err
			}
		}
		return &Rope{body: memNode(buf.Bytes())}, nil
	}
	flat := n <= maxFlatKids
	kids := make([]*rnode, 0, len(parts))
	if flat {
		kids = make([]*rnode, 0, n)
	}
	for _, p := range parts {
		switch {
		case p.body.size == 0:
		case flat && p.body.kind == kindCat:
			for _, k := range p.body.kids {
				kids = appendKid(kids, k)
			}
		default:
			kids = appendKid(kids, p.body)
		}
	}
	switch len(kids) {
	case 0:
		return &Rope{body: memNode([]byte{})}, nil
	case 1:
		return &Rope{body: kids[0]}, nil
	}
	return &Rope{body: &rnode{kind: kindCat, size: size, kids: kids, stored: stored}}, nil
}

// coalesceBytes is the largest concatenation of in-memory ropes that
// ConcatRopes copies into one slice instead of referring to its parts: a
// rope never has leaves that are both tiny and numerous because of
// concatenation (a doubling chain of one-byte consts would otherwise be
// read one byte per leaf, at about 40 MB/s instead of SHA-256's speed),
// and copying at most this many bytes costs no more than the hash of the
// node's output that the trace needs anyway.
const coalesceBytes = 64 << 10

// appendKid appends k, merging it into the last kid when both are
// contiguous ranges of one stored artifact.
func appendKid(kids []*rnode, k *rnode) []*rnode {
	if n := len(kids); n > 0 {
		last := kids[n-1]
		if last.kind == kindSrc && k.kind == kindSrc && last.src == k.src && last.off+last.size == k.off {
			kids[n-1] = &rnode{kind: kindSrc, src: k.src, off: last.off, size: last.size + k.size, stored: true}
			return kids
		}
	}
	return append(kids, k)
}

// Slice returns the untagged rope of bytes [off, off+n) of r's payload,
// which must lie within it.
func (r *Rope) Slice(off, n uint64) (*Rope, error) {
	b := r.body
	if off > b.size || n > b.size-off {
		return nil, fmt.Errorf("slice offset %d + length %d exceeds rope length %d", off, n, b.size)
	}
	if n == 0 {
		return &Rope{body: memNode([]byte{})}, nil
	}
	// Descend while the range lies within one node's child.
	for {
		if off == 0 && n == b.size {
			return &Rope{body: b}, nil
		}
		switch b.kind {
		case kindMem:
			return &Rope{body: memNode(b.mem[off : off+n : off+n])}, nil
		case kindSrc:
			return &Rope{body: &rnode{kind: kindSrc, src: b.src, off: b.off + off, size: n, stored: true}}, nil
		case kindWin:
			off += b.off
			b = b.kids[0]
			continue
		}
		start := uint64(0)
		inner := false
		for _, k := range b.kids {
			if off < start+k.size {
				if off+n <= start+k.size {
					b, off, inner = k, off-start, true
				}
				break
			}
			start += k.size
		}
		if !inner {
			return &Rope{body: &rnode{kind: kindWin, off: off, size: n, kids: []*rnode{b}, stored: b.stored}}, nil
		}
	}
}

// Ref derives the rope's Reference under hash id (SPECS.md §5.1), reading
// its payload once; the result is cached.
func (r *Rope) Ref(ctx context.Context, id HashID) (Reference, error) {
	r.mu.Lock()
	for _, ref := range r.refs {
		if ref.HashID() == id {
			r.mu.Unlock()
			return ref, nil
		}
	}
	r.mu.Unlock()
	h, err := NewHasher(id, r.Header())
	if err != nil {
		return Reference{}, err
	}
	if err := r.CopyTo(ctx, h); err != nil {
		return Reference{}, err
	}
	ref, err := h.Sum()
	if err != nil {
		return Reference{}, err
	}
	r.mu.Lock()
	r.refs = append(r.refs, ref)
	r.mu.Unlock()
	return ref, nil
}

// Bytes returns the payload in memory: the slice itself when InMemory,
// else a new buffer of Size bytes, refused (ErrTooLarge) above limit
// (limit <= 0: DefaultGetLimit). The buffer is returned only after every
// stored artifact read for it matched its reference.
func (r *Rope) Bytes(ctx context.Context, limit int64) ([]byte, error) {
	if r.body.kind == kindMem {
		return r.body.mem, nil
	}
	if limit <= 0 {
		limit = DefaultGetLimit
	}
	if r.body.size > uint64(limit) {
		return nil, fmt.Errorf("materialising a %d-byte value: above the in-memory limit of %d: %w", r.body.size, limit, ErrTooLarge)
	}
	rc := r.Open(ctx)
	defer rc.Close()
	return ReadWhole(rc, r.body.size)
}

// Artifact is Bytes with the rope's tag.
func (r *Rope) Artifact(ctx context.Context, limit int64) (Artifact, error) {
	b, err := r.Bytes(ctx, limit)
	if err != nil {
		return Artifact{}, err
	}
	return Artifact{Bytes: b, Tag: r.tag, HasTag: r.hasTag}, nil
}

// CopyTo writes the payload to w, in-memory segments without copying. It
// returns nil only when every stored artifact read matched its reference.
func (r *Rope) CopyTo(ctx context.Context, w io.Writer) error {
	rr := r.Open(ctx).(*ropeReader)
	defer rr.Close()
	_, err := rr.WriteTo(w)
	return err
}

// Open returns a reader of the payload. It yields exactly Size bytes and
// then io.EOF, or an error (wrapping ErrIntegrity for damaged stored
// bytes). ctx bounds the fetches it makes.
func (r *Rope) Open(ctx context.Context) io.ReadCloser {
	rr := &ropeReader{ctx: ctx}
	if r.body.size > 0 {
		rr.stack = append(rr.stack, frame{n: r.body, len: r.body.size})
	}
	return rr
}

// frame is a pending range [off, off+len) of node n; for a concatenation,
// k and kstart are the child at which the walk resumes and its offset.
type frame struct {
	n        *rnode
	off, len uint64
	k        int
	kstart   uint64
}

type ropeReader struct {
	ctx   context.Context
	stack []frame
	mem   []byte // rest of the current in-memory segment
	left  uint64 // bytes of the current stored segment still to read
	cur   *source
	rc    io.ReadCloser
	pos   uint64 // payload offset of rc
	buf   []byte
	err   error
}

// next pops the next leaf segment; ok is false at the end.
func (rr *ropeReader) next() (n *rnode, off, length uint64, ok bool) {
	for len(rr.stack) > 0 {
		top := len(rr.stack) - 1
		f := rr.stack[top]
		if f.len == 0 {
			rr.stack = rr.stack[:top]
			continue
		}
		switch f.n.kind {
		case kindMem, kindSrc:
			rr.stack = rr.stack[:top]
			return f.n, f.off, f.len, true
		case kindWin:
			rr.stack[top] = frame{n: f.n.kids[0], off: f.n.off + f.off, len: f.len}
			continue
		}
		for f.kstart+f.n.kids[f.k].size <= f.off {
			f.kstart += f.n.kids[f.k].size
			f.k++
		}
		kid := f.n.kids[f.k]
		take := min(f.len, f.kstart+kid.size-f.off)
		child := frame{n: kid, off: f.off - f.kstart, len: take}
		f.off += take
		f.len -= take
		rr.stack[top] = f
		rr.stack = append(rr.stack, child)
	}
	return nil, 0, 0, false
}

// advance sets up the next segment; false at the end of the payload.
func (rr *ropeReader) advance() (bool, error) {
	if err := rr.ctx.Err(); err != nil {
		return false, err
	}
	n, off, length, ok := rr.next()
	if !ok {
		return false, rr.finish()
	}
	if n.kind == kindMem {
		rr.mem = n.mem[off : off+length]
		return true, nil
	}
	if err := rr.seek(n.src, n.off+off); err != nil {
		return false, err
	}
	rr.left = length
	return true, nil
}

// seek positions the fetch of s at payload offset off: continuing the open
// one when it is of s and not past off, else finishing it and fetching s.
func (rr *ropeReader) seek(s *source, off uint64) error {
	if rr.rc == nil || rr.cur != s || rr.pos > off {
		if err := rr.finish(); err != nil {
			return err
		}
		rc, hdr, err := s.f.Fetch(rr.ctx, s.ref)
		if err != nil {
			return fmt.Errorf("reading %s: %w", s.ref, err)
		}
		if hdr != s.hdr {
			rc.Close()
			return fmt.Errorf("reading %s: store reports header %+v, expected %+v: %w", s.ref, hdr, s.hdr, ErrIntegrity)
		}
		rr.cur, rr.rc, rr.pos = s, rc, 0
	}
	return rr.discard(off - rr.pos)
}

// discard reads and drops n payload bytes of the open fetch.
func (rr *ropeReader) discard(n uint64) error {
	if n == 0 {
		return nil
	}
	if rr.buf == nil {
		rr.buf = make([]byte, 256<<10)
	}
	for n > 0 {
		k, err := rr.rc.Read(rr.buf[:min(n, uint64(len(rr.buf)))])
		rr.pos += uint64(k)
		n -= uint64(k)
		if err == io.EOF && n > 0 {
			return fmt.Errorf("reading %s: payload ends %d bytes early: %w", rr.cur.ref, n, ErrIntegrity)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading %s: %w", rr.cur.ref, err)
		}
	}
	return nil
}

// finish reads the open fetch to its end, so that the store checks the
// whole digest, and closes it.
func (rr *ropeReader) finish() error {
	if rr.rc == nil {
		return nil
	}
	err := rr.discard(rr.cur.hdr.Size - rr.pos)
	if err == nil {
		if err = ExpectEnd(rr.rc); err != nil {
			err = fmt.Errorf("reading %s: %w", rr.cur.ref, err)
		}
	}
	rr.rc.Close()
	rr.rc, rr.cur = nil, nil
	return err
}

func (rr *ropeReader) Read(p []byte) (int, error) {
	for rr.err == nil {
		if len(p) == 0 {
			return 0, nil
		}
		if len(rr.mem) > 0 {
			n := copy(p, rr.mem)
			rr.mem = rr.mem[n:]
			return n, nil
		}
		if rr.left > 0 {
			return rr.readSrc(p)
		}
		ok, err := rr.advance()
		if err != nil {
			rr.err = err
		} else if !ok {
			rr.err = io.EOF
		}
	}
	return 0, rr.err
}

func (rr *ropeReader) readSrc(p []byte) (int, error) {
	n, err := rr.rc.Read(p[:min(uint64(len(p)), rr.left)])
	rr.pos += uint64(n)
	rr.left -= uint64(n)
	switch {
	case err == io.EOF && rr.left > 0:
		rr.err = fmt.Errorf("reading %s: payload ends %d bytes early: %w", rr.cur.ref, rr.left, ErrIntegrity)
	case err != nil && err != io.EOF:
		rr.err = fmt.Errorf("reading %s: %w", rr.cur.ref, err)
	}
	if rr.err != nil {
		return 0, rr.err
	}
	return n, nil
}

// WriteTo writes the rest of the payload to w: in-memory segments directly,
// stored ones through one buffer.
func (rr *ropeReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for rr.err == nil {
		switch {
		case len(rr.mem) > 0:
			n, err := w.Write(rr.mem)
			total += int64(n)
			rr.mem = rr.mem[n:]
			if err != nil {
				return total, err
			}
		case rr.left > 0:
			if rr.buf == nil {
				rr.buf = make([]byte, 256<<10)
			}
			n, err := rr.readSrc(rr.buf)
			if err != nil {
				return total, err
			}
			m, err := w.Write(rr.buf[:n])
			total += int64(m)
			if err != nil {
				return total, err
			}
		default:
			ok, err := rr.advance()
			if err != nil {
				rr.err = err
			} else if !ok {
				rr.err = io.EOF
				return total, nil
			}
		}
	}
	if rr.err == io.EOF {
		return total, nil
	}
	return total, rr.err
}

// Close ends any open fetch without waiting for its verdict.
func (rr *ropeReader) Close() error {
	if rr.rc != nil {
		rr.rc.Close()
		rr.rc, rr.cur = nil, nil
	}
	if rr.err == nil {
		rr.err = errors.New("rope reader closed")
	}
	rr.stack, rr.mem, rr.left = nil, nil, 0
	return nil
}
