// Package memstore is an in-memory asl.Store with the same semantics as the
// embedded Pebble store (SPECS.md §6): idempotent puts, verification on every
// read, the same errors. It is meant for tests and for short-lived tools.
// It is safe for concurrent use.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
)

// Store keeps artifacts in a map. The zero value is not usable; call New.
type Store struct {
	mu    sync.RWMutex
	arts  map[asl.Reference]asl.Artifact
	index map[string]string // space + "\x00" + key -> value
}

var (
	_ asl.Store   = (*Store)(nil)
	_ asl.Indexer = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{arts: make(map[asl.Reference]asl.Artifact), index: make(map[string]string)}
}

func checkRef(ref asl.Reference) error {
	if ref.IsZero() {
		return fmt.Errorf("reference is zero: %w", asl.ErrIntegrity)
	}
	if !ref.Known() {
		return fmt.Errorf("%s: hash id 0x%04x is not registered: %w", ref, uint16(ref.HashID()), asl.ErrUnsupported)
	}
	return nil
}

// preallocMax bounds the buffer Put sizes from the header's claim before
// any byte arrives; a larger payload grows the buffer as it is read.
const preallocMax = 64 << 20

// Put implements asl.Receiver. The payload is read straight into one
// buffer of the size the header claims (up to preallocMax), so an honest
// put copies its bytes once.
func (s *Store) Put(ctx context.Context, id asl.HashID, hdr asl.Header, r io.Reader) (asl.Reference, error) {
	h, err := asl.NewHasher(id, hdr)
	if err != nil {
		return asl.Reference{}, err
	}
	// Room for one byte past the claim (a longer payload is refused) and
	// for ReadFrom's minimum read, so the buffer never grows when the
	// claim is honest. (Buffer.Grow would copy a zeroed slice of that size
	// into a new one.)
	buf := bytes.NewBuffer(make([]byte, 0, int(min(hdr.Size, preallocMax))+bytes.MinRead+1))
	n, err := buf.ReadFrom(io.TeeReader(io.LimitReader(r, int64(hdr.Size)+1), h))
	if err != nil {
		return asl.Reference{}, fmt.Errorf("put: reading payload: %w", err)
	}
	if uint64(n) != hdr.Size {
		return asl.Reference{}, fmt.Errorf("put: payload is %d bytes, header says %d", n, hdr.Size)
	}
	ref, err := h.Sum()
	if err != nil {
		return asl.Reference{}, err
	}
	s.store(ref, asl.Artifact{Bytes: buf.Bytes(), Tag: hdr.Tag, HasTag: hdr.HasTag})
	return ref, ctx.Err()
}

func (s *Store) store(ref asl.Reference, a asl.Artifact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.arts[ref]; !ok {
		s.arts[ref] = a
	}
}

// PutBatch implements asl.BatchReceiver.
func (s *Store) PutBatch(ctx context.Context, id asl.HashID, arts []asl.Artifact) ([]asl.Reference, error) {
	return s.PutIndexed(ctx, id, arts, nil)
}

func indexKey(space string, key []byte) string { return space + "\x00" + string(key) }

// PutIndexed implements asl.Indexer.
func (s *Store) PutIndexed(ctx context.Context, id asl.HashID, arts []asl.Artifact, entries []asl.IndexEntry) ([]asl.Reference, error) {
	refs := make([]asl.Reference, len(arts))
	for i, a := range arts {
		ref, err := asl.Derive(id, a)
		if err != nil {
			return nil, err
		}
		refs[i] = ref
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range arts {
		if _, ok := s.arts[refs[i]]; !ok {
			s.arts[refs[i]] = asl.Artifact{Bytes: bytes.Clone(a.Bytes), Tag: a.Tag, HasTag: a.HasTag}
		}
	}
	for _, e := range entries {
		s.index[indexKey(e.Space, e.Key)] = string(e.Value)
	}
	return refs, ctx.Err()
}

// LookupIndex implements asl.Indexer.
func (s *Store) LookupIndex(ctx context.Context, space string, key []byte) ([]byte, bool, error) {
	s.mu.RLock()
	v, ok := s.index[indexKey(space, key)]
	s.mu.RUnlock()
	if !ok {
		return nil, false, ctx.Err()
	}
	return []byte(v), true, ctx.Err()
}

// ScanIndex implements asl.Indexer.
func (s *Store) ScanIndex(ctx context.Context, space string, prefix []byte, fn func(key, value []byte) error) error {
	return s.ScanIndexAfter(ctx, space, prefix, nil, fn)
}

// ScanIndexAfter implements asl.IndexSeeker.
func (s *Store) ScanIndexAfter(ctx context.Context, space string, prefix, after []byte, fn func(key, value []byte) error) error {
	start := indexKey(space, prefix)
	from := ""
	if after != nil {
		from = indexKey(space, after)
	}
	s.mu.RLock()
	var keys []string
	for k := range s.index {
		if strings.HasPrefix(k, start) && (after == nil || k > from) {
			keys = append(keys, k)
		}
	}
	s.mu.RUnlock()
	sort.Strings(keys)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.RLock()
		v := s.index[k]
		s.mu.RUnlock()
		if err := fn([]byte(k[len(space)+1:]), []byte(v)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) lookup(ref asl.Reference) (asl.Artifact, error) {
	if err := checkRef(ref); err != nil {
		return asl.Artifact{}, err
	}
	s.mu.RLock()
	a, ok := s.arts[ref]
	s.mu.RUnlock()
	if !ok {
		return asl.Artifact{}, fmt.Errorf("%s: %w", ref, asl.ErrNotFound)
	}
	return a, nil
}

// Fetch implements asl.Fetcher; the whole artifact is verified before the
// reader is returned.
func (s *Store) Fetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	if err := ctx.Err(); err != nil {
		return nil, asl.Header{}, err
	}
	a, err := s.lookup(ref)
	if err != nil {
		return nil, asl.Header{}, err
	}
	if got := asl.MustDerive(ref.HashID(), a); got != ref {
		return nil, asl.Header{}, fmt.Errorf("%s: stored bytes hash to %s: %w", ref, got, asl.ErrIntegrity)
	}
	return io.NopCloser(bytes.NewReader(a.Bytes)), a.Header(), nil
}

// Stat implements asl.Statter.
func (s *Store) Stat(ctx context.Context, ref asl.Reference) (asl.Info, error) {
	a, err := s.lookup(ref)
	if err != nil {
		return asl.Info{}, err
	}
	return asl.Info{Ref: ref, Header: a.Header(), StoredSize: int64(len(a.Bytes)), Compression: "none"}, ctx.Err()
}

// Enumerate implements asl.Enumerator. It walks a snapshot of the references
// taken when it starts.
func (s *Store) Enumerate(ctx context.Context, after asl.Reference, fn func(asl.Info) error) error {
	s.mu.RLock()
	refs := make([]asl.Reference, 0, len(s.arts))
	for ref := range s.arts {
		refs = append(refs, ref)
	}
	s.mu.RUnlock()
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = string(r.Bytes())
	}
	sort.Sort(byKey{keys, refs})
	start := string(after.Bytes())
	for i, ref := range refs {
		if !after.IsZero() && strings.Compare(keys[i], start) <= 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := s.Stat(ctx, ref)
		if err != nil {
			return err
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

type byKey struct {
	keys []string
	refs []asl.Reference
}

func (b byKey) Len() int           { return len(b.keys) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.refs[i], b.refs[j] = b.refs[j], b.refs[i]
}

// Corrupt replaces the stored bytes of ref, for tests of integrity checking.
// It reports whether ref was present.
func (s *Store) Corrupt(ref asl.Reference, b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.arts[ref]
	if ok {
		a.Bytes = b
		s.arts[ref] = a
	}
	return ok
}

// Len returns the number of stored artifacts.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.arts)
}
