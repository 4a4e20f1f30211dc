package s3store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/amduat/amduat/asl"
)

// The packs a process knows (SPECS.md §6.7, "Learning packs"): the
// index objects it listed and read, merged into one map from reference to
// the newest copy and one from (space, key) to the winning entry. Nothing
// here is shared between processes: each learns new packs by listing
// PREFIX x/ from a little before the newest name it has seen.

// refreshWindow: a refresh lists the index objects named from this long
// before the newest time seen, so that a pack written by a process whose
// clock is behind by less than this is still listed.
const refreshWindow = 2 * time.Minute

type packMeta struct {
	name string
	time uint64    // the writer's clock, from the name
	mod  time.Time // the index object's modification time (the object store's clock)
	len  uint64    // the pack object's length; 0 for an index of entries only
	arts int       // artifacts in the pack
	ents int       // entries in the pack's index
	live bool      // false once the pack is known to be gone
}

type artLoc struct {
	p *packMeta
	a packArt
}

type entVal struct {
	stamp uint64
	p     *packMeta
	value []byte
}

type packSet struct {
	mu      sync.RWMutex
	packs   map[string]*packMeta
	arts    map[asl.Reference]artLoc
	dups    map[asl.Reference][]artLoc // older copies than arts' (a collection drops them)
	ents    map[string]entVal          // space ‖ 0x00 ‖ key
	maxTime uint64
	loaded  bool
	damaged map[string]error // index key -> why neither copy of the index reads

	rmu       sync.Mutex // one refresh at a time
	lastStart time.Time
	lastErr   error

	stampMu   sync.Mutex
	lastStamp uint64

	delMu sync.Mutex // deletePacked
}

func newPackSet() *packSet {
	return &packSet{
		packs:   map[string]*packMeta{},
		arts:    map[asl.Reference]artLoc{},
		dups:    map[asl.Reference][]artLoc{},
		ents:    map[string]entVal{},
		damaged: map[string]error{},
	}
}

func entKey(space string, key []byte) string { return space + "\x00" + string(key) }

// stamp is this process's clock in unix nanoseconds, strictly increasing
// from one call to the next.
func (p *packSet) stamp() uint64 {
	p.stampMu.Lock()
	defer p.stampMu.Unlock()
	t := uint64(time.Now().UnixNano())
	if t <= p.lastStamp {
		t = p.lastStamp + 1
	}
	p.lastStamp = t
	return t
}

// merge adds a decoded index. A copy in a newer pack (by name) replaces
// an older one; an entry replaces another of its (space, key) with a lower
// (stamp, name).
func (p *packSet) merge(m *packMeta, x *packIndex) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.packs[m.name]; ok && old.live {
		return
	}
	m.live = true
	m.len, m.arts, m.ents = x.PackLen, len(x.Arts), len(x.Entries)
	p.packs[m.name] = m
	if m.time > p.maxTime {
		p.maxTime = m.time
	}
	for _, a := range x.Arts {
		l := artLoc{p: m, a: a}
		if cur, ok := p.arts[a.Ref]; ok && cur.p.live {
			if cur.p.name > m.name {
				p.dups[a.Ref] = append(p.dups[a.Ref], l)
				continue
			}
			p.dups[a.Ref] = append(p.dups[a.Ref], cur)
		}
		p.arts[a.Ref] = l
	}
	for _, e := range x.Entries {
		k := entKey(e.Space, e.Key)
		if cur, ok := p.ents[k]; ok && (cur.stamp > e.Stamp || cur.stamp == e.Stamp && cur.p.name > m.name) {
			continue
		}
		p.ents[k] = entVal{stamp: e.Stamp, p: m, value: e.Value}
	}
}

// forget drops a pack found gone, with the copies and entries it held.
func (p *packSet) forget(m *packMeta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.live = false
	delete(p.packs, m.name)
	for r, ds := range p.dups {
		kept := ds[:0]
		for _, d := range ds {
			if d.p != m {
				kept = append(kept, d)
			}
		}
		if len(kept) == 0 {
			delete(p.dups, r)
		} else {
			p.dups[r] = kept
		}
	}
	for r, l := range p.arts {
		if l.p != m {
			continue
		}
		delete(p.arts, r)
		// The newest of the other copies, if any, takes its place.
		ds := p.dups[r]
		best := -1
		for i, d := range ds {
			if best < 0 || d.p.name > ds[best].p.name {
				best = i
			}
		}
		if best >= 0 {
			p.arts[r] = ds[best]
			p.dups[r] = append(ds[:best], ds[best+1:]...)
			if len(p.dups[r]) == 0 {
				delete(p.dups, r)
			}
		}
	}
	for k, e := range p.ents {
		if e.p == m {
			delete(p.ents, k)
		}
	}
}

func (p *packSet) lookup(ref asl.Reference) (artLoc, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	l, ok := p.arts[ref]
	return l, ok && l.p.live
}

func (p *packSet) entry(space string, key []byte) ([]byte, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	e, ok := p.ents[entKey(space, key)]
	return e.value, ok
}

// young says whether ref has a copy in a pack written less than age ago
// (by the object store's clock against this one's).
func (p *packSet) young(ref asl.Reference, age time.Duration) bool {
	l, ok := p.lookup(ref)
	return ok && !l.p.mod.IsZero() && time.Since(l.p.mod) < age
}

// refreshPacks lists the index objects this process has not read and
// reads them. Callers that arrive while a refresh runs wait for it and
// then run one of their own unless one began after they arrived, so that
// every caller sees every index object acknowledged before it called.
func (s *Store) refreshPacks(ctx context.Context) error {
	p := s.packs
	arrived := time.Now()
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if p.lastStart.After(arrived) && p.lastErr == nil {
		return nil
	}
	p.lastStart = time.Now()
	p.lastErr = s.listPacks(ctx)
	return p.lastErr
}

// ensurePacks makes the first, full listing of a process.
func (s *Store) ensurePacks(ctx context.Context) error {
	s.packs.mu.RLock()
	loaded := s.packs.loaded
	s.packs.mu.RUnlock()
	if loaded {
		return nil
	}
	return s.refreshPacks(ctx)
}

// listPacksFull lists every index object (a collection's view: each
// known pack's modification time is updated from the listing).
func (s *Store) listPacksFull(ctx context.Context) error {
	s.packs.rmu.Lock()
	defer s.packs.rmu.Unlock()
	s.packs.lastStart = time.Now()
	s.packs.lastErr = s.listPacksFrom(ctx, true)
	return s.packs.lastErr
}

func (s *Store) listPacks(ctx context.Context) error { return s.listPacksFrom(ctx, false) }

func (s *Store) listPacksFrom(ctx context.Context, full bool) error {
	p := s.packs
	p.mu.RLock()
	loaded, maxTime := p.loaded && !full, p.maxTime
	p.mu.RUnlock()
	base := s.prefix + "x/"
	lo := minio.ListObjectsOptions{Prefix: base, Recursive: true}
	if loaded {
		from := uint64(0)
		if w := uint64(refreshWindow); maxTime > w {
			from = maxTime - w
		}
		lo.StartAfter = base + fmt.Sprintf("%016x", from)
	}
	var todo []minio.ObjectInfo
	for obj := range s.core.Client.ListObjects(ctx, s.bucket, lo) {
		if obj.Err != nil {
			return s.errorf("list packs", base, asl.Reference{}, obj.Err)
		}
		name := strings.TrimPrefix(obj.Key, base)
		p.mu.Lock()
		m, known := p.packs[name]
		_, bad := p.damaged[obj.Key]
		if known && m.live {
			m.mod = obj.LastModified
		}
		p.mu.Unlock()
		if known && m.live || bad {
			continue
		}
		todo = append(todo, obj)
	}
	errs := make([]error, len(todo))
	s.parallel(len(todo), func(i int) {
		errs[i] = s.loadIndex(ctx, todo[i])
	})
	for i, err := range errs {
		switch {
		case err == nil, errors.Is(err, asl.ErrNotFound):
		case errors.Is(err, asl.ErrIntegrity):
			p.mu.Lock()
			p.damaged[todo[i].Key] = err
			p.mu.Unlock()
		default:
			return err
		}
	}
	p.mu.Lock()
	p.loaded = true
	p.mu.Unlock()
	return nil
}

// loadIndex reads and merges one index object; when it does not decode,
// the pack's own copy of the index (its tail) is read instead.
func (s *Store) loadIndex(ctx context.Context, obj minio.ObjectInfo) error {
	name := path.Base(obj.Key)
	t, _, ok := parsePackName(name)
	if !ok {
		return fmt.Errorf("s3store: list s3://%s/%s: key is no index object key: %w", s.bucket, obj.Key, asl.ErrIntegrity)
	}
	b, err := s.getValueMax(ctx, obj.Key, maxIndexObject, "read pack index")
	if err != nil {
		return err
	}
	x, err := decodeIndex(b)
	if err != nil {
		x2, err2 := s.indexFromPack(ctx, name)
		if err2 != nil {
			return fmt.Errorf("s3store: read pack index s3://%s/%s: %w; the pack's own copy: %w", s.bucket, obj.Key, err, err2)
		}
		x = x2
	}
	s.packs.merge(&packMeta{name: name, time: t, mod: obj.LastModified}, x)
	return nil
}

// indexFromPack reads the index at the tail of pack name (two ranged
// GETs: the trailer, then the index).
func (s *Store) indexFromPack(ctx context.Context, name string) (*packIndex, error) {
	key := s.PackKey(name)
	tail, total, err := s.getRange(ctx, key, -packTrailer, packTrailer)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(tail[4:], packMagic[:]) {
		return nil, fmt.Errorf("pack s3://%s/%s ends with %x, not the pack magic: %w", s.bucket, key, tail[4:], asl.ErrIntegrity)
	}
	ilen := int64(binary.BigEndian.Uint32(tail))
	if ilen > total-8-packTrailer || ilen > maxIndexObject {
		return nil, fmt.Errorf("pack s3://%s/%s: index length %d: %w", s.bucket, key, ilen, asl.ErrIntegrity)
	}
	ib, _, err := s.getRange(ctx, key, total-packTrailer-ilen, ilen)
	if err != nil {
		return nil, err
	}
	x, err := decodeIndex(ib)
	if err != nil {
		return nil, fmt.Errorf("pack s3://%s/%s: %w", s.bucket, key, err)
	}
	if x.PackLen != uint64(total) {
		return nil, fmt.Errorf("pack s3://%s/%s: its index says %d bytes, it has %d: %w", s.bucket, key, x.PackLen, total, asl.ErrIntegrity)
	}
	return x, nil
}

// getRange reads n bytes of key from off (off < 0: from the end), and
// the object's total length. Fewer bytes than asked is damage.
func (s *Store) getRange(ctx context.Context, key string, off, n int64) ([]byte, int64, error) {
	var o minio.GetObjectOptions
	if off < 0 {
		o.SetRange(0, off)
	} else {
		o.SetRange(off, off+n-1)
	}
	body, info, h, err := s.core.GetObject(ctx, s.bucket, key, o)
	if err != nil {
		if code(err) == "InvalidRange" {
			return nil, 0, fmt.Errorf("s3store: read s3://%s/%s: bytes %d+%d are past its end: %w", s.bucket, key, off, n, asl.ErrIntegrity)
		}
		return nil, 0, s.errorf("read", key, asl.Reference{}, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, n+1))
	if err != nil {
		return nil, 0, s.errorf("read", key, asl.Reference{}, err)
	}
	if int64(len(b)) != n {
		return nil, 0, fmt.Errorf("s3store: read s3://%s/%s: %d bytes from %d, asked %d: %w", s.bucket, key, len(b), off, n, asl.ErrIntegrity)
	}
	return b, contentTotal(h, info.Size), nil
}

// packedRefs lists, in ascending ReferenceBytes order, the packed
// artifacts after after, with their Info.
func (p *packSet) packedInfos(after asl.Reference) []asl.Info {
	p.mu.RLock()
	out := make([]asl.Info, 0, len(p.arts))
	ab := after.Bytes()
	for r, l := range p.arts {
		if !l.p.live || !after.IsZero() && bytes.Compare(r.Bytes(), ab) <= 0 {
			continue
		}
		comp := "none"
		if l.a.Codec == codecZstd {
			comp = "zstd"
		}
		out = append(out, asl.Info{Ref: r, Header: l.a.Hdr, StoredSize: int64(l.a.Stored), Compression: comp})
	}
	p.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Ref.Bytes(), out[j].Ref.Bytes()) < 0 })
	return out
}

// damage is every index object neither of whose copies reads.
func (p *packSet) damage() []error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	keys := make([]string, 0, len(p.damaged))
	for k := range p.damaged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]error, len(keys))
	for i, k := range keys {
		out[i] = p.damaged[k]
	}
	return out
}

// scanEntries is the entries of space whose key starts with prefix and
// lies after after (nil: from the start), in ascending key order.
func (p *packSet) scanEntries(space string, prefix, after []byte) (keys, values [][]byte) {
	p.mu.RLock()
	lo := entKey(space, prefix)
	type kv struct{ k, v []byte }
	var out []kv
	for k, e := range p.ents {
		if !strings.HasPrefix(k, lo) || !e.p.live {
			continue
		}
		key := []byte(k[len(space)+1:])
		if after != nil && bytes.Compare(key, after) <= 0 {
			continue
		}
		out = append(out, kv{key, e.value})
	}
	p.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].k, out[j].k) < 0 })
	keys, values = make([][]byte, len(out)), make([][]byte, len(out))
	for i, e := range out {
		keys[i], values[i] = e.k, e.v
	}
	return keys, values
}

// PackedAt says where this process knows ref to be packed: the pack
// object's key and the record's offset and length in it (tests and
// bench damage and measure records through it).
func (s *Store) PackedAt(ref asl.Reference) (key string, off, n int64, ok bool) {
	l, ok := s.packs.lookup(ref)
	if !ok {
		return "", 0, 0, false
	}
	return s.PackKey(l.p.name), int64(l.a.Off), int64(l.a.Stored), true
}
