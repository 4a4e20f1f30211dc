package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrLocked: the store is held by another writer, normally another process
// (SPECS.md §6.6). One process at a time may open a store for writing;
// read-only opens (Options.ReadOnly) take no lock and are never refused.
var ErrLocked = errors.New("store is in use by another process")

// ErrReadOnly: a write was attempted on a store opened with
// Options.ReadOnly, or a read-only open met something it would have to
// write (SPECS.md §6.6).
var ErrReadOnly = errors.New("store is open read-only")

// ErrStale: a read-only open could not take a consistent snapshot of the
// store, or a file of its snapshot was removed by a writer working beside
// it (SPECS.md §6.6). Running the command again sees the writer's newer
// state.
var ErrStale = errors.New("store changed under a read-only open")

// locked reports whether err from pebble.LockDirectory means that the lock
// is held: fcntl's EAGAIN or EACCES (a bare errno: failing to create the
// LOCK file is an *os.PathError), or Pebble's own in-process refusal.
func locked(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return false
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	return strings.Contains(err.Error(), "lock held by current process")
}

// lsmState summarises what a writer changes when it records a new state of
// the LSM: the MANIFEST files with their sizes and the manifest marker
// (manifest), and the write-ahead logs with their sizes (logs). exists is
// false when the directory holds no Pebble database (no manifest marker).
type lsmState struct {
	manifest, logs string
	exists         bool
}

func readLSMState(fs vfs.FS, dir string) (lsmState, error) {
	names, err := fs.List(dir)
	if err != nil {
		return lsmState{}, err
	}
	slices.Sort(names)
	var m, l strings.Builder
	var st lsmState
	for _, n := range names {
		var b *strings.Builder
		switch {
		case strings.HasPrefix(n, "marker.manifest."), n == "CURRENT":
			st.exists = true
			m.WriteString(n)
			m.WriteByte(';')
			continue
		case strings.HasPrefix(n, "MANIFEST-"):
			b = &m
		case strings.HasSuffix(n, ".log"):
			b = &l
		default:
			continue
		}
		size := int64(-1) // removed between List and Stat
		if fi, err := fs.Stat(fs.PathJoin(dir, n)); err == nil {
			size = fi.Size()
		}
		fmt.Fprintf(b, "%s:%d;", n, size)
	}
	st.manifest, st.logs = m.String(), l.String()
	return st, nil
}

// readOnlyAttempts bounds the read-only opens tried while a writer keeps
// changing the store under them.
const readOnlyAttempts = 5

// openReadOnly opens dir with Pebble's ReadOnly option on a file system
// that refuses every write (roFS), so nothing is created, changed, synced
// or locked (SPECS.md §6.6). Pebble reads the current MANIFEST and replays
// the write-ahead logs into memory, so commits that are only in the log
// (unflushed memtables, queued pack index commits) are seen.
//
// A writer may work beside the reader: the open is retried when the
// MANIFEST changed while it ran (a flush or compaction recorded a new state,
// which may have removed a log the open was about to replay), or when it
// failed while the logs grew (a log read while being appended can look
// damaged). The snapshot is the state of the store at the last attempt.
func openReadOnly(dir string, s settings) (*pebble.DB, *roFS, error) {
	ro := &roFS{FS: s.fs, dir: dir}
	po := pebbleOptions(s)
	po.FS = ro
	po.ReadOnly = true
	po.ErrorIfNotExists = true
	for attempt := 1; ; attempt++ {
		before, err := readLSMState(s.fs, dir)
		if errors.Is(err, os.ErrNotExist) || err == nil && !before.exists {
			return nil, nil, fmt.Errorf("open store %s: %w", dir, ErrNoStore)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("open store %s: %w", dir, err)
		}
		ro.state = before.manifest
		db, err := pebble.Open(dir, po)
		after, aerr := readLSMState(s.fs, dir)
		if aerr != nil {
			after = lsmState{}
		}
		changed := after.manifest != before.manifest
		if err == nil && !changed {
			return db, ro, nil
		}
		if db != nil {
			_ = db.Close()
		}
		if err != nil && !changed && after.logs == before.logs {
			return nil, nil, fmt.Errorf("open store %s read-only: %w", dir, ioErr(err))
		}
		if attempt == readOnlyAttempts {
			return nil, nil, fmt.Errorf("open store %s read-only: a writer changed it during each of %d attempts: %w", dir, attempt, ErrStale)
		}
		time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
	}
}

// roFS is the file system of a read-only open. It passes reads through and
// refuses, with an error wrapping ErrReadOnly, every operation that would
// create, change, sync or remove a file, so a read-only open writes nothing
// whatever Pebble or this package would try.
//
// Lock takes no lock. That is safe because a read-only open never writes:
// Pebble's lock keeps two writers from interleaving changes to the MANIFEST,
// the logs and the tables, and a reader makes none. What a reader sees
// while a writer works beside it is a snapshot (openReadOnly retries until
// the open was consistent); the one thing a writer can do to that snapshot
// is remove a table or blob file that a flush or compaction made obsolete,
// and Open below reports that as ErrStale instead of damage.
type roFS struct {
	vfs.FS
	dir   string
	state string // lsmState.manifest when the snapshot was taken
}

func (fs *roFS) refuse(op, name string) error {
	return fmt.Errorf("read-only open of store %s: refusing to %s %s: %w", fs.dir, op, name, ErrReadOnly)
}

func (fs *roFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fs.refuse("create", name)
}
func (fs *roFS) Link(oldname, _ string) error { return fs.refuse("link", oldname) }
func (fs *roFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, fs.refuse("open for writing", name)
}
func (fs *roFS) Remove(name string) error                 { return fs.refuse("remove", name) }
func (fs *roFS) RemoveAll(name string) error              { return fs.refuse("remove", name) }
func (fs *roFS) Rename(oldname, _ string) error           { return fs.refuse("rename", oldname) }
func (fs *roFS) MkdirAll(dir string, _ os.FileMode) error { return fs.refuse("create", dir) }
func (fs *roFS) ReuseForWrite(oldname, _ string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, fs.refuse("reuse", oldname)
}

// Lock takes no lock (see roFS).
func (fs *roFS) Lock(string) (io.Closer, error) { return noLock{}, nil }

type noLock struct{}

func (noLock) Close() error { return nil }

// Open opens name for reading. A table or blob file of the snapshot that is
// gone while the MANIFEST changed since the open was removed by a writer
// (ErrStale; Pebble would report any missing table as corruption); gone
// while the MANIFEST is unchanged, it is damage, reported as it is.
func (fs *roFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, done, err := openOSReadOnly(fs.FS, name, opts)
	if !done {
		f, err = fs.FS.Open(name, opts...)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && (strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")) {
			if now, serr := readLSMState(fs.FS, fs.dir); serr == nil && now.manifest != fs.state {
				return nil, fmt.Errorf("store %s: %s was removed by a writer after this read-only open; run the command again: %w", fs.dir, fs.PathBase(name), ErrStale)
			}
		}
		return nil, err
	}
	return roFile{File: f, fs: fs, name: name}, nil
}

func (fs *roFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return roFile{File: f, fs: fs, name: name}, nil
}

// roFile is a file of a read-only open: reads pass, writes and syncs fail.
type roFile struct {
	vfs.File
	fs   *roFS
	name string
}

func (f roFile) Write([]byte) (int, error)          { return 0, f.fs.refuse("write", f.name) }
func (f roFile) WriteAt([]byte, int64) (int, error) { return 0, f.fs.refuse("write", f.name) }
func (f roFile) Preallocate(int64, int64) error     { return f.fs.refuse("allocate", f.name) }
func (f roFile) Sync() error                        { return f.fs.refuse("sync", f.name) }
func (f roFile) SyncData() error                    { return f.fs.refuse("sync", f.name) }
func (f roFile) SyncTo(int64) (bool, error)         { return false, f.fs.refuse("sync", f.name) }

// indexReader is what Enumerate walks: the database, or on a read-only
// store whose Open found pack records that no index record names, the
// database seen through the indexed batch holding their records.
func (s *Store) indexReader() pebble.Reader {
	if s.roIndex != nil {
		return s.roIndex
	}
	return s.db
}
