package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Tests of a full file system (SPECS.md §6.6): a put that runs out of space
// fails with ErrNoSpace naming the store and loses nothing acknowledged;
// afterwards every operation, while the disk is still full, works (reads,
// read-only opens) or fails at once with the same error; once space is
// back, writes work again. Nothing may hang: every step runs under a
// deadline.

// within runs f and fails the test if it has not returned after d.
func within[T any](t *testing.T, d time.Duration, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s hung (more than %v)", what, d)
		panic("unreachable")
	}
}

// within2 is within for functions of two results.
func within2[A, B any](t *testing.T, d time.Duration, what string, f func() (A, B)) (A, B) {
	t.Helper()
	type pair struct {
		a A
		b B
	}
	p := within(t, d, what, func() pair { a, b := f(); return pair{a, b} })
	return p.a, p.b
}

// stepLimit bounds each step: a hang, not a timing (a loaded machine may
// take many seconds for a step).
const stepLimit = 2 * time.Minute

func checkNoSpace(t *testing.T, err error, dir, what string) {
	t.Helper()
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%s: %v, want ErrNoSpace wrapping ENOSPC", what, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "store "+dir+": no space left on device") || strings.Contains(msg, "\n") {
		t.Fatalf("%s: message %q does not name the store in one line", what, msg)
	}
}

// diskModel is an errorfs injector that makes a file system full: while
// full, every write fails with ENOSPC except for budget writes, removing
// the store's reserve adds reserveWrites to the budget (the room the
// reserve gave back), and creating the reserve fails (there is no room for
// it).
type diskModel struct {
	full    atomic.Bool
	budget  atomic.Int64
	reserve string
}

const reserveWrites = 10000

func (m *diskModel) String() string { return "disk model" }

func (m *diskModel) MaybeError(op errorfs.Op) error {
	if !m.full.Load() {
		return nil
	}
	switch op.Kind {
	case errorfs.OpCreate:
		if op.Path == m.reserve {
			return &os.PathError{Op: "create", Path: op.Path, Err: syscall.ENOSPC}
		}
	case errorfs.OpRemove:
		if op.Path == m.reserve {
			m.budget.Add(reserveWrites)
		}
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		if m.budget.Add(-1) < 0 {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
	}
	return nil
}

// spaceStore is a store on the disk model, with artifacts it acknowledged.
type spaceStore struct {
	t     *testing.T
	dir   string
	model *diskModel
	opts  Options
	acked map[asl.Reference][]byte
}

func newSpaceStore(t *testing.T, reserve int64) *spaceStore {
	dir := filepath.Join(t.TempDir(), "store")
	m := &diskModel{reserve: filepath.Join(dir, ReserveFile)}
	return &spaceStore{t: t, dir: dir, model: m, acked: map[asl.Reference][]byte{},
		opts: Options{FS: errorfs.Wrap(vfs.Default, m), ReserveSize: reserve, MemTableSize: 1 << 20}}
}

func (ss *spaceStore) open(readOnly bool) (*Store, error) {
	o := ss.opts
	o.ReadOnly = readOnly
	return within2(ss.t, stepLimit, "Open", func() (*Store, error) { return Open(ss.dir, &o) })
}

// putBatch puts arts and records them as acknowledged when it succeeds.
func (ss *spaceStore) putBatch(s *Store, arts []asl.Artifact) error {
	refs, err := within2(ss.t, stepLimit, "PutBatch", func() ([]asl.Reference, error) {
		return s.PutBatch(context.Background(), asl.HashSHA256, arts)
	})
	if err == nil {
		for i, r := range refs {
			ss.acked[r] = arts[i].Bytes
		}
	}
	return err
}

// checkAcked reads every acknowledged artifact through s, and verifies the
// whole store.
func (ss *spaceStore) checkAcked(s *Store) {
	ss.t.Helper()
	refs := make([]asl.Reference, 0, len(ss.acked))
	for r := range ss.acked {
		refs = append(refs, r)
	}
	within(ss.t, stepLimit, "reading acknowledged artifacts", func() bool { readAll(ss.t, s, refs, ss.acked); return true })
	rep, err := within2(ss.t, stepLimit, "verify", func() (aslutil.Report, error) {
		return aslutil.Verify(context.Background(), s, aslutil.VerifyOptions{}, nil)
	})
	if err != nil || len(rep.Failures) != 0 {
		ss.t.Fatalf("verify: %v, failures %v", err, rep.Failures)
	}
}

func batchOf(seed, n, size int) []asl.Artifact {
	arts := make([]asl.Artifact, n)
	for i := range arts {
		arts[i] = asl.Artifact{Bytes: genBytes(uint64(seed*1000+i), size, false)}
	}
	return arts
}

// TestNoSpaceInjected runs out of space at different points on a file
// system whose writes fail with ENOSPC (Pebble's errorfs): a pack write, a
// write of Pebble's, and the flush of a reopened store with no reserve.
func TestNoSpaceInjected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		reserve int64
		// fill makes the disk full and runs the put that meets it; it
		// returns that put's error and the store (nil if closed).
		fill func(t *testing.T, ss *spaceStore, s *Store) (error, *Store)
	}{
		{"pack append", 1 << 20, func(t *testing.T, ss *spaceStore, s *Store) (error, *Store) {
			ss.model.full.Store(true)
			return ss.putBatch(s, batchOf(9, 32, 4000)), s
		}},
		{"pebble log write", 1 << 20, func(t *testing.T, ss *spaceStore, s *Store) (error, *Store) {
			ss.model.full.Store(true)
			// Index entries alone go through Pebble's log only (every
			// payload goes to a pack): their write frees the reserve and
			// succeeds; the next put is refused.
			entries := []asl.IndexEntry{{Space: "test.space", Key: []byte("k"), Value: []byte("v")}}
			if _, err := s.PutIndexed(t.Context(), asl.HashSHA256, nil, entries); err != nil {
				t.Fatalf("the write that frees the reserve: %v", err)
			}
			if _, err := os.Stat(ss.model.reserve); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("reserve after Pebble met ENOSPC: %v", err)
			}
			return ss.putBatch(s, batchOf(10, 1, 100)), s
		}},
		{"flush at open without reserve", -1, func(t *testing.T, ss *spaceStore, s *Store) (error, *Store) {
			// The log of the closed store holds commits: the next Open
			// flushes them, and the flush fails.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ss.model.full.Store(true)
			start := time.Now()
			_, err := ss.open(false)
			if d := time.Since(start); d > stepLimit {
				t.Fatalf("Open took %v to give up", d)
			} else {
				t.Logf("Open gave up after %v: %v", d, err)
			}
			return err, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := newSpaceStore(t, tc.reserve)
			s, err := Create(ss.dir, &ss.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := ss.putBatch(s, batchOf(i, 20, 3000)); err != nil { // packed
					t.Fatal(err)
				}
				if err := ss.putBatch(s, batchOf(100+i, 5, 200)); err != nil { // through Pebble
					t.Fatal(err)
				}
			}
			err, s = tc.fill(t, ss, s)
			checkNoSpace(t, err, ss.dir, "the put that ran out of space")
			if s != nil {
				// The store refuses writes at once from now on; reads
				// work.
				_, err := s.PutBatch(context.Background(), asl.HashSHA256, batchOf(11, 1, 10))
				checkNoSpace(t, err, ss.dir, "a put after running out of space")
				ss.checkAcked(s)
				if err := within(t, stepLimit, "Close", s.Close); err != nil {
					checkNoSpace(t, err, ss.dir, "Close")
				}
			}
			// While the disk is still full: a read-only open reads
			// everything; a writer open works or fails at once.
			r, err := ss.open(true)
			if err != nil {
				t.Fatalf("read-only open of a full store: %v", err)
			}
			ss.checkAcked(r)
			r.Close()
			if w, err := ss.open(false); err == nil {
				_, err = w.PutBatch(context.Background(), asl.HashSHA256, batchOf(12, 8, 5000))
				checkNoSpace(t, err, ss.dir, "a put on a reopened full store")
				w.Close()
			} else if !errors.Is(err, ErrLocked) {
				checkNoSpace(t, err, ss.dir, "a writer open of a full store")
			}
			// Space is back: writes work again (an Open abandoned for
			// lack of space finishes and lets go of the store first).
			ss.model.full.Store(false)
			back := time.Now()
			var w *Store
			for deadline := time.Now().Add(stepLimit); ; {
				w, err = ss.open(false)
				if !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("writer open once space is back: %v", err)
			}
			t.Logf("writer open once space is back: %v after the space came back", time.Since(back))
			if err := ss.putBatch(w, batchOf(13, 20, 3000)); err != nil {
				t.Fatalf("put once space is back: %v", err)
			}
			ss.checkAcked(w)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.reserve > 0 {
				if fi, err := os.Stat(ss.model.reserve); err != nil || fi.Size() != tc.reserve {
					t.Fatalf("reserve once space is back: %v", err)
				}
			}
		})
	}
}

// TestNoSpaceTmpfs fills a small tmpfs for real, through packed batches
// and through streamed puts (chunks through Pebble's log and memtables, the
// path whose failed flushes used to hang every later Open), then makes
// room and writes again.
func TestNoSpaceTmpfs(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs")
	}
	for _, mode := range []string{"packed", "streamed"} {
		t.Run(mode, func(t *testing.T) {
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
				t.Skipf("cannot mount a size-limited tmpfs: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", mnt).Run() })
			dir := filepath.Join(mnt, "store")
			ss := &spaceStore{t: t, dir: dir, acked: map[asl.Reference][]byte{},
				opts: Options{MemTableSize: 1 << 20, ChunkSize: 64 << 10}}
			s, err := Create(dir, &ss.opts)
			if err != nil {
				t.Fatal(err)
			}
			var full error
			for i := 0; full == nil; i++ {
				if i > 1000 {
					t.Fatal("the tmpfs never filled")
				}
				if mode == "packed" {
					full = ss.putBatch(s, batchOf(i, 10, 20000))
					continue
				}
				a := asl.Artifact{Bytes: genBytes(uint64(i), 300<<10, false)}
				ref, err := within2(t, stepLimit, "Put", func() (asl.Reference, error) {
					return s.Put(context.Background(), asl.HashSHA256, a.Header(), bytes.NewReader(a.Bytes))
				})
				if full = err; err == nil {
					ss.acked[ref] = a.Bytes
				}
			}
			t.Logf("%d artifacts acknowledged before the tmpfs filled: %v (cause: %v)", len(ss.acked), full, causeOf(full))
			checkNoSpace(t, full, dir, "the put that filled the tmpfs")
			_, err = s.PutBatch(context.Background(), asl.HashSHA256, batchOf(9999, 1, 10))
			checkNoSpace(t, err, dir, "a put after running out of space")
			ss.checkAcked(s)
			if err := within(t, stepLimit, "Close", s.Close); err != nil {
				checkNoSpace(t, err, dir, "Close")
			}
			r, err := ss.open(true)
			if err != nil {
				t.Fatalf("read-only open of the full store: %v", err)
			}
			ss.checkAcked(r)
			r.Close()
			if w, err := ss.open(false); err == nil {
				_, err = w.PutBatch(context.Background(), asl.HashSHA256, batchOf(9998, 8, 20000))
				checkNoSpace(t, err, dir, "a put on a reopened full store")
				w.Close()
			} else {
				checkNoSpace(t, err, dir, "a writer open of the full store")
			}
			// Space is back.
			if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
				t.Fatalf("growing the tmpfs: %v: %s", err, out)
			}
			w, err := ss.open(false)
			if err != nil {
				t.Fatalf("writer open once space is back: %v", err)
			}
			if err := ss.putBatch(w, batchOf(7777, 10, 20000)); err != nil {
				t.Fatalf("put once space is back: %v", err)
			}
			ss.checkAcked(w)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func causeOf(err error) error {
	var ns *noSpaceError
	if errors.As(err, &ns) {
		return ns.cause
	}
	return nil
}
