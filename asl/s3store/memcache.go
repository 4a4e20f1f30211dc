package s3store

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"sync"

	"github.com/amduat/amduat/asl"
)

// memItemMax is the largest payload the memory cache keeps: the artifacts
// Fetch verifies whole before it returns (fetchWholeMax).
const memItemMax = fetchWholeMax

// DefaultMemCacheSize is the memory cache `amduat serve` gives a bucket
// (SPECS.md §6.7, "Requests per operation").
const DefaultMemCacheSize = 16 << 20

// memCache keeps the payloads of small artifacts this process put or read
// in memory, least recently used out first once the total passes max. An
// entry is added only from bytes that hashed to its reference (a put's,
// hashed to derive the reference, or a fetch's, verified), and artifacts
// are immutable by reference, so an entry never needs to be invalidated:
// it answers Fetch without a request (SPECS.md §6.7, "Requests per
// operation"). Stat, puts and index operations still go to the bucket.
type memCache struct {
	max int64

	mu    sync.Mutex
	lru   *list.List // of *memEntry, most recent first
	byRef map[asl.Reference]*list.Element
	total int64
}

type memEntry struct {
	ref     asl.Reference
	hdr     asl.Header
	payload []byte // never written after add
}

func newMemCache(max int64) *memCache {
	return &memCache{max: max, lru: list.New(), byRef: map[asl.Reference]*list.Element{}}
}

// get returns ref's payload and header, marking it used. The payload is
// shared: callers only read it.
func (c *memCache) get(ref asl.Reference) ([]byte, asl.Header, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byRef[ref]
	if !ok {
		return nil, asl.Header{}, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*memEntry)
	return e.payload, e.hdr, true
}

// add keeps payload (owned by the cache from now on) as ref's. The caller
// has checked that payload hashes to ref under hdr.
func (c *memCache) add(ref asl.Reference, hdr asl.Header, payload []byte) {
	size := int64(len(payload))
	if size > memItemMax || size > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byRef[ref]; ok {
		c.lru.MoveToFront(el)
		return
	}
	c.byRef[ref] = c.lru.PushFront(&memEntry{ref: ref, hdr: hdr, payload: payload})
	c.total += size
	for c.total > c.max && c.lru.Len() > 0 {
		e := c.lru.Remove(c.lru.Back()).(*memEntry)
		delete(c.byRef, e.ref)
		c.total -= int64(len(e.payload))
	}
}

// remember keeps a copy of the payload of an artifact just put (its
// reference was derived from these bytes) when the memory cache is on.
func (s *Store) remember(ref asl.Reference, hdr asl.Header, payload []byte) {
	if s.mem == nil || uint64(len(payload)) > memItemMax {
		return
	}
	s.mem.add(ref, hdr, bytes.Clone(payload))
}

// memFetch is Fetch through the memory cache: a hit costs no request; a
// small artifact read from the local disk cache or the bucket (verified
// whole before it is returned, as Fetch does up to fetchWholeMax) is kept.
func (s *Store) memFetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	if b, hdr, ok := s.mem.get(ref); ok {
		return io.NopCloser(bytes.NewReader(b)), hdr, nil
	}
	var rc io.ReadCloser
	var hdr asl.Header
	var err error
	if s.cache != nil {
		rc, hdr, err = s.cachedFetch(ctx, ref)
	} else {
		rc, hdr, err = s.fetch(ctx, ref)
	}
	if err != nil || hdr.Size > memItemMax {
		return rc, hdr, err
	}
	defer rc.Close()
	b, err := asl.ReadWhole(rc, hdr.Size)
	if err != nil {
		return nil, asl.Header{}, err
	}
	s.mem.add(ref, hdr, b)
	return io.NopCloser(bytes.NewReader(b)), hdr, nil
}

// memGet is the memory cache's copy of ref, if any.
func (s *Store) memGet(ref asl.Reference) ([]byte, asl.Header, bool) {
	if s.mem == nil {
		return nil, asl.Header{}, false
	}
	return s.mem.get(ref)
}
