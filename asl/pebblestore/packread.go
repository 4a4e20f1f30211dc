package pebblestore

import (
	"runtime/debug"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// packMapBytes is the length of the read-only mapping of a pack: the
// largest pack appends normally reach, plus the largest record. Reads past
// it (a pack grown by one huge batch) go through ReadAt.
const packMapBytes = packMaxBytes + maxPackHead + maxChunkHeader + MaxChunkSize

// packReader reads one pack file. Where the file system gives file
// descriptors, the file is mapped read-only and shared (packs are
// append-only, so mapped bytes never change), and a read of bytes known to
// exist is a copy from the mapping: no system call. Anything else, and any
// read reaching past the known size, goes through ReadAt.
type packReader struct {
	f    vfs.File
	data []byte       // the mapping, or nil
	size atomic.Int64 // bytes of the file known to exist
}

func openPackReader(f vfs.File) *packReader {
	r := &packReader{f: f}
	if st, err := f.Stat(); err == nil {
		r.size.Store(st.Size())
		if fd := f.Fd(); fd != vfs.InvalidFd {
			r.data = mapPack(fd, max(int64(packMapBytes), st.Size()))
		}
	}
	return r
}

// mappedReadMax is the longest read served from the mapping. Longer ones
// (the parts of large artifacts) go through ReadAt: a mapped page once read
// stays in the process's resident set until the mapping goes, and streaming
// a large artifact through the mapping would grow it by the artifact's size
// (TestLargeArtifactBoundedMemory); a system call per part costs nothing
// next to the part's bytes.
const mappedReadMax = 64 << 10

// ReadAt reads len(b) bytes at off, like io.ReaderAt.
func (r *packReader) ReadAt(b []byte, off int64) (int, error) {
	if end := off + int64(len(b)); r.data != nil && len(b) <= mappedReadMax && off >= 0 && end <= r.size.Load() && end <= int64(len(r.data)) {
		return copyMapped(b, r.data[off:end], off)
	}
	return r.f.ReadAt(b, off)
}

// grew records that the file is at least size bytes long.
func (r *packReader) grew(size int64) {
	for {
		old := r.size.Load()
		if size <= old || r.size.CompareAndSwap(old, size) {
			return
		}
	}
}

func (r *packReader) close() error {
	if r.data != nil {
		unmapPack(r.data)
		r.data = nil
	}
	return r.f.Close()
}

// copyMapped copies mapped bytes. A file shrunk under the mapping (by
// something other than this store) makes the copy fault; the fault is
// reported as damage instead of killing the process.
func copyMapped(dst, src []byte, off int64) (n int, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if recover() != nil {
			n, err = 0, damaged("pack bytes at %d are gone: the file is shorter than it was", off)
		}
	}()
	return copy(dst, src), nil
}
