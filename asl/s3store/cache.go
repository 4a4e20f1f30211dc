package s3store

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/amduat/amduat/asl"
)

// diskCache is the bounded local cache of verified artifacts (SPECS.md
// §6.7, "Local cache"): one file per artifact, DIR/REFHEX, holding its
// ArtifactBytes, written only from bytes that hashed to the reference, and
// read back only through the same check. Least recently used files go
// first when the total would pass max.
type diskCache struct {
	dir string
	max int64

	mu    sync.Mutex
	lru   *list.List // of *cacheEntry, most recent first
	byRef map[string]*list.Element
	total int64
}

type cacheEntry struct {
	name string // REFHEX
	size int64
}

// openCache opens (creating) dir as a cache of at most max bytes: files
// left by an earlier process count, oldest first out; unfinished
// temporary files are removed.
func openCache(dir string, max int64) (*diskCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3store: cache %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("s3store: cache %s: %w", dir, err)
	}
	c := &diskCache{dir: dir, max: max, lru: list.New(), byRef: map[string]*list.Element{}}
	type old struct {
		name string
		size int64
		mod  int64
	}
	var olds []old
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		if _, err := asl.ParseReference(name); err != nil || !e.Type().IsRegular() {
			continue // not ours
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		olds = append(olds, old{name, info.Size(), info.ModTime().UnixNano()})
	}
	sort.Slice(olds, func(i, j int) bool {
		return olds[i].mod > olds[j].mod || olds[i].mod == olds[j].mod && olds[i].name < olds[j].name
	})
	for _, o := range olds {
		c.byRef[o.name] = c.lru.PushBack(&cacheEntry{o.name, o.size})
		c.total += o.size
	}
	c.mu.Lock()
	c.evict()
	c.mu.Unlock()
	return c, nil
}

// evict removes least recently used files until the total fits. c.mu held.
func (c *diskCache) evict() {
	for c.total > c.max && c.lru.Len() > 0 {
		c.drop(c.lru.Back())
	}
}

func (c *diskCache) drop(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.byRef, e.name)
	c.total -= e.size
	os.Remove(filepath.Join(c.dir, e.name))
}

// forget removes ref's file (found damaged).
func (c *diskCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byRef[name]; ok {
		c.drop(el)
	}
}

// has says whether ref has a file, marking it used.
func (c *diskCache) has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byRef[name]
	if ok {
		c.lru.MoveToFront(el)
	}
	return ok
}

// add records the finished temporary file tmp as ref's.
func (c *diskCache) add(name, tmp string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byRef[name]; ok {
		os.Remove(tmp) // a concurrent fetch was first
		return
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, name)); err != nil {
		os.Remove(tmp)
		return
	}
	c.byRef[name] = c.lru.PushFront(&cacheEntry{name, size})
	c.total += size
	c.evict()
}

// fetchCached serves ref from the cache when it holds a file that hashes to
// ref: an artifact up to fetchWholeMax is read and checked whole; a larger
// one is hashed once through, then streamed through the check again. A
// file that does not hash to ref is removed and ok is false (the caller
// reads the bucket); so is a missing or unreadable one.
func (c *diskCache) fetchCached(ref asl.Reference) (rc io.ReadCloser, hdr asl.Header, ok bool) {
	name := ref.String()
	if !c.has(name) {
		return nil, asl.Header{}, false
	}
	path := filepath.Join(c.dir, name)
	check := func() (asl.Header, io.Reader, *os.File, error) {
		f, err := os.Open(path)
		if err != nil {
			return asl.Header{}, nil, nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return asl.Header{}, nil, nil, err
		}
		hdr, err := readHeader(f)
		if err == nil && st.Size() != headerLen(hdr)+int64(hdr.Size) {
			err = fmt.Errorf("cache file %s is %d bytes, its header says %d: %w", path, st.Size(), headerLen(hdr)+int64(hdr.Size), asl.ErrIntegrity)
		}
		if err != nil {
			f.Close()
			return asl.Header{}, nil, nil, err
		}
		vr, err := asl.VerifyReader(ref, hdr, f)
		if err != nil {
			f.Close()
			return asl.Header{}, nil, nil, err
		}
		return hdr, vr, f, nil
	}
	hdr, vr, f, err := check()
	if err != nil {
		c.forget(name)
		return nil, asl.Header{}, false
	}
	if hdr.Size <= fetchWholeMax {
		defer f.Close()
		b, err := asl.ReadWhole(vr, hdr.Size)
		if err != nil {
			c.forget(name)
			return nil, asl.Header{}, false
		}
		return io.NopCloser(bytes.NewReader(b)), hdr, true
	}
	_, err = io.Copy(io.Discard, vr)
	f.Close()
	if err != nil {
		c.forget(name)
		return nil, asl.Header{}, false
	}
	hdr, vr, f, err = check()
	if err != nil {
		c.forget(name)
		return nil, asl.Header{}, false
	}
	return struct {
		io.Reader
		io.Closer
	}{vr, f}, hdr, true
}

// filling tees a fetch from the bucket into a temporary file of the cache;
// the file becomes ref's only when the fetch reader ends with io.EOF (the
// bytes hashed to ref) after exactly the artifact's bytes.
type filling struct {
	c     *diskCache
	rc    io.ReadCloser // the bucket's verifying reader
	name  string
	tmp   *os.File
	want  int64
	wrote int64
	done  bool
}

// fill wraps rc (the bucket's reader of ref, header hdr) so that a complete,
// verified read leaves a copy in the cache. Artifacts larger than a quarter
// of the cache are not kept.
func (c *diskCache) fill(ref asl.Reference, hdr asl.Header, rc io.ReadCloser) io.ReadCloser {
	size := headerLen(hdr) + int64(hdr.Size)
	if size > c.max/4 {
		return rc
	}
	var r [8]byte
	rand.Read(r[:])
	tmp, err := os.Create(filepath.Join(c.dir, ref.String()+"."+hex.EncodeToString(r[:])+".tmp"))
	if err != nil {
		return rc
	}
	if _, err := tmp.Write(hdr.AppendHeader(nil)); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return rc
	}
	return &filling{c: c, rc: rc, name: ref.String(), tmp: tmp, want: size, wrote: headerLen(hdr)}
}

func (f *filling) Read(p []byte) (int, error) {
	n, err := f.rc.Read(p)
	if f.tmp != nil && n > 0 {
		if _, werr := f.tmp.Write(p[:n]); werr != nil {
			f.abandon()
		} else {
			f.wrote += int64(n)
		}
	}
	if f.tmp != nil && err == io.EOF && f.wrote == f.want {
		name := f.tmp.Name()
		if cerr := f.tmp.Close(); cerr == nil {
			f.tmp = nil
			f.c.add(f.name, name, f.want)
		} else {
			f.tmp = nil
			os.Remove(name)
		}
	} else if err != nil && f.tmp != nil {
		f.abandon()
	}
	return n, err
}

func (f *filling) abandon() {
	name := f.tmp.Name()
	f.tmp.Close()
	f.tmp = nil
	os.Remove(name)
}

func (f *filling) Close() error {
	if f.tmp != nil {
		f.abandon()
	}
	return f.rc.Close()
}

// cachedFetch is Fetch through the cache: a verified hit, else the bucket
// with the bytes kept on the way.
func (s *Store) cachedFetch(ctx context.Context, ref asl.Reference) (io.ReadCloser, asl.Header, error) {
	if rc, hdr, ok := s.cache.fetchCached(ref); ok {
		return rc, hdr, nil
	}
	rc, hdr, err := s.fetch(ctx, ref)
	if err != nil {
		return nil, asl.Header{}, err
	}
	return s.cache.fill(ref, hdr, rc), hdr, nil
}
