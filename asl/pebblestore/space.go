package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNoSpace: the file system holding the store is full (ENOSPC). A store
// that ran out of space refuses further writes until it is opened again;
// reads keep working, and read-only opens need no space at all (SPECS.md
// §6.6). Errors wrapping it also wrap syscall.ENOSPC.
var ErrNoSpace = errors.New("no space left on device")

// ReserveFile is the name of the reserve file in the store directory: room
// kept for Pebble to finish its work when the file system fills up
// (SPECS.md §6.6). It holds no data.
const ReserveFile = "RESERVE"

// noSpaceError is the error of every write refused or failed for lack of
// space: one line naming the store and what to do.
type noSpaceError struct {
	dir     string
	cause   error
	detail  string // what needed the space, if not a write of data
	reserve bool   // allocating the reserve failed: Pebble was not opened
}

func (e *noSpaceError) Error() string {
	d := ""
	if e.detail != "" {
		d = " " + e.detail
	}
	return "store " + e.dir + ": no space left on device" + d + "; free space on its file system, then run the command again (reading needs no space)"
}

func (e *noSpaceError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrNoSpace, syscall.ENOSPC}
	}
	return []error{ErrNoSpace, e.cause}
}

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrNoSpace) }

// Space states of a store opened for writing.
const (
	spaceOK        int32 = iota
	spaceFull            // a write failed for lack of space: writes are refused
	spaceExhausted       // space ran out again after the reserve was freed
)

// spaceGuard keeps a writable store usable when its file system fills up
// (SPECS.md §6.6). Pebble does not survive running out of space: a flush
// that fails is retried at once, forever (an Open that replays a log hangs
// in it, creating an empty table per attempt), and a log that cannot be
// rotated panics. So the store keeps a reserve file of a few memtables'
// size, allocated while there is space. Pebble writes through the guard's
// file system: the first write to fail with ENOSPC frees the reserve and is
// retried once, which gives Pebble room to finish the flushes and log
// rotations under way; from then on the store refuses writes (ErrNoSpace).
// A second ENOSPC, with the reserve gone, exhausts the guard: an Open
// waiting for Pebble gives up at once (openWatched), and Pebble's writes are
// throttled (Pebble retries a failed flush without pause) and create no
// file while the file system has less than the reserve free; once space is
// back they succeed again, so an abandoned Open can finish and release the
// store.
//
// The store's own pack and ingest files are written on the unguarded file
// system: their ENOSPC fails the put and marks the store full without
// spending the reserve.
type spaceGuard struct {
	inner   vfs.FS
	dir     string
	reserve string // path of the reserve file
	size    int64  // reserve size; 0: no reserve (in-memory file systems)

	state     atomic.Int32
	gen       atomic.Uint64 // bumped when the reserve is freed
	mu        sync.Mutex
	released  bool
	cause     error         // the first ENOSPC; guarded by mu
	exhausted chan struct{} // closed when the state first becomes spaceExhausted
	exhaust   sync.Once
}

// exhaustedDelay throttles Pebble's retries once space is exhausted (a
// failed flush is rescheduled at once).
const exhaustedDelay = 50 * time.Millisecond

// minFreeToCreate is the free space below which an exhausted guard creates
// no file (when the store has no reserve to measure by).
const minFreeToCreate = 1 << 20

func newSpaceGuard(fs vfs.FS, dir string, size int64) *spaceGuard {
	return &spaceGuard{inner: fs, dir: dir, reserve: fs.PathJoin(dir, ReserveFile), size: size, exhausted: make(chan struct{})}
}

// err returns the store's sticky out-of-space error, or nil.
func (g *spaceGuard) err() error {
	if g == nil || g.state.Load() == spaceOK {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return &noSpaceError{dir: g.dir, cause: g.cause}
}

// markFull records that a write failed for lack of space; the reserve is
// kept for Pebble.
func (g *spaceGuard) markFull(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cause == nil {
		g.cause = cause
	}
	g.state.CompareAndSwap(spaceOK, spaceFull)
}

// check turns an error of a write into the store's out-of-space error when
// it is one, and marks the store full.
func (g *spaceGuard) check(err error) error {
	if err == nil || g == nil || !isNoSpace(err) {
		return err
	}
	var ns *noSpaceError
	if errors.As(err, &ns) {
		return err
	}
	g.markFull(err)
	return &noSpaceError{dir: g.dir, cause: err}
}

// onNoSpace handles an ENOSPC met by a Pebble write that started at
// generation gen, and reports whether to retry it: yes if the reserve was
// freed since the write started, or is freed now; no once it is gone.
func (g *spaceGuard) onNoSpace(gen uint64, cause error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cause == nil {
		g.cause = cause
	}
	if g.gen.Load() != gen {
		return true
	}
	if !g.released && g.size > 0 {
		g.released = true
		g.state.Store(spaceFull)
		if err := g.inner.Remove(g.reserve); err == nil || errors.Is(err, os.ErrNotExist) {
			g.gen.Add(1)
			return true
		}
	}
	g.state.Store(spaceExhausted)
	g.exhaust.Do(func() { close(g.exhausted) })
	return false
}

// roomToCreate reports whether an exhausted guard may let a file be
// created: the file system has at least the reserve's size free (or cannot
// tell). Each failed flush attempt would otherwise leave an empty table
// behind.
func (g *spaceGuard) roomToCreate() bool {
	du, err := g.inner.GetDiskUsage(g.dir)
	return err != nil || du.AvailBytes >= uint64(max(g.size, minFreeToCreate))
}

// ensureReserve allocates the reserve file if it is missing or short. It
// fails with the store's out-of-space error when the space is not there:
// opening a store for writing without its reserve would let Pebble run out
// of space with nothing to fall back on.
func (g *spaceGuard) ensureReserve() error {
	if g.size <= 0 {
		return nil
	}
	if fi, err := g.inner.Stat(g.reserve); err == nil && fi.Size() >= g.size {
		return nil
	}
	f, err := g.inner.Create(g.reserve, vfs.WriteCategoryUnspecified)
	if err != nil {
		return g.reserveErr(err)
	}
	if f.Fd() == vfs.InvalidFd {
		// An in-memory file system: there is no space to reserve.
		_ = f.Close()
		_ = g.inner.Remove(g.reserve)
		g.size = 0
		return nil
	}
	err = allocate(f, g.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(g.inner, g.dir)
	}
	if err != nil {
		_ = g.inner.Remove(g.reserve)
		return g.reserveErr(err)
	}
	return nil
}

func (g *spaceGuard) reserveErr(err error) error {
	if isNoSpace(err) {
		g.markFull(err)
		return &noSpaceError{dir: g.dir, cause: err, detail: fmt.Sprintf("for its %d MiB reserve", g.size>>20), reserve: true}
	}
	return fmt.Errorf("allocating its reserve: %w", err)
}

// allocate gives f size bytes of disk blocks: fallocate where the file
// system has it (allocateFile), else zeros written.
func allocate(f vfs.File, size int64) error {
	if done, err := allocateFile(f.Fd(), size); done || err != nil {
		return err
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		n := min(int64(len(zero)), size-off)
		if _, err := f.WriteAt(zero[:n], off); err != nil {
			return err
		}
	}
	return nil
}

// openWatched runs pebble.Open and returns its result, or the store's
// out-of-space error as soon as space is exhausted: Pebble's Open waits for
// the flush of the logs it replayed, and retries a failed flush forever.
// The abandoned Open is left to finish on its own once space is back (its
// writes are throttled meanwhile, see spaceGuard); when it returns, its
// database is closed and the lock released. Until then this process cannot
// open the store for writing again (ErrLocked).
func (g *spaceGuard) openWatched(dir string, po *pebble.Options) (*pebble.DB, error) {
	type result struct {
		db  *pebble.DB
		err error
	}
	ch := make(chan result, 1)
	go func() {
		db, err := pebble.Open(dir, po)
		ch <- result{db, err}
	}()
	select {
	case r := <-ch:
		return r.db, r.err
	case <-g.exhausted:
		go func() {
			if r := <-ch; r.db != nil {
				_ = r.db.Close()
			}
		}()
		return nil, g.err()
	}
}

// guardFS is the file system Pebble writes through (see spaceGuard).
type guardFS struct {
	vfs.FS
	g *spaceGuard
}

// do runs one write-type operation (create: one that makes a file): when
// space is exhausted, throttled, and a create refused while there is no
// room; on ENOSPC, retried once if onNoSpace frees the reserve.
func (fs *guardFS) do(op, name string, create bool, f func() error) error {
	exhausted := fs.g.state.Load() == spaceExhausted
	if exhausted {
		time.Sleep(exhaustedDelay)
		if create && !fs.g.roomToCreate() {
			return &os.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
		}
	}
	gen := fs.g.gen.Load()
	err := f()
	if exhausted && err == nil {
		// Space is back: no more throttling (writes stay refused).
		fs.g.state.CompareAndSwap(spaceExhausted, spaceFull)
	}
	if err != nil && errors.Is(err, syscall.ENOSPC) && fs.g.onNoSpace(gen, err) {
		err = f()
	}
	return err
}

func (fs *guardFS) wrap(f vfs.File, name string) vfs.File {
	if f == nil {
		return nil
	}
	return &guardFile{File: f, fs: fs, name: name}
}

func (fs *guardFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	err := fs.do("create", name, true, func() (err error) { f, err = fs.FS.Create(name, c); return err })
	return fs.wrap(f, name), err
}

func (fs *guardFS) Link(oldname, newname string) error {
	return fs.do("link", newname, true, func() error { return fs.FS.Link(oldname, newname) })
}

func (fs *guardFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	err := fs.do("reuse", newname, false, func() (err error) { f, err = fs.FS.ReuseForWrite(oldname, newname, c); return err })
	return fs.wrap(f, newname), err
}

func (fs *guardFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.do("mkdir", dir, true, func() error { return fs.FS.MkdirAll(dir, perm) })
}

func (fs *guardFS) Rename(oldname, newname string) error {
	return fs.do("rename", newname, false, func() error { return fs.FS.Rename(oldname, newname) })
}

func (fs *guardFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(f, name), err
}

func (fs *guardFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(f, name), err
}

func (fs *guardFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(f, name), err
}

// Lock passes through; it is not a write of data.
func (fs *guardFS) Lock(name string) (io.Closer, error) { return fs.FS.Lock(name) }

// guardFile is a file Pebble writes through the guard.
type guardFile struct {
	vfs.File
	fs   *guardFS
	name string
}

func (f *guardFile) Write(p []byte) (int, error) {
	n := 0
	err := f.fs.do("write", f.name, false, func() error {
		m, err := f.File.Write(p[n:])
		n += m
		return err
	})
	return n, err
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	n := 0
	err := f.fs.do("write", f.name, false, func() error {
		m, err := f.File.WriteAt(p[n:], off+int64(n))
		n += m
		return err
	})
	return n, err
}

// Sync and SyncData are never retried: after a failed fsync the kernel may
// have dropped the dirty pages, and a second fsync would report success
// for data that never reached the disk. An ENOSPC still frees the reserve,
// for Pebble's next writes.
func (f *guardFile) Sync() error { return f.fs.sync(f.File.Sync) }

func (f *guardFile) SyncData() error { return f.fs.sync(f.File.SyncData) }

func (fs *guardFS) sync(f func() error) error {
	gen := fs.g.gen.Load()
	err := f()
	if err != nil && errors.Is(err, syscall.ENOSPC) {
		fs.g.onNoSpace(gen, err)
	}
	return err
}
