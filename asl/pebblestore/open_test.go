package pebblestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/internal/longtest"
	"github.com/amduat/amduat/internal/testexit"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Tests of sharing a store (SPECS.md §6.6): the lock between writers,
// read-only opens that write nothing, and readers beside a writer.

// helperEnv makes the test binary, run by startHelper, act as a second
// process on a store instead of running tests.
const helperEnv = "PEBBLESTORE_TEST_HELPER"

// TestHelperProcess is the body of the helper process: it opens the store
// named by its environment for writing and, in mode "write", puts
// artifacts, printing "ref REF" for each once its put returned. Then it
// prints "ready" and waits for its standard input to close before closing
// the store. A parent may kill it instead (a crash).
func TestHelperProcess(t *testing.T) {
	// Not parallel: the helper process's body, run alone in its binary.
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("the helper process of the lock and read-only tests")
	}
	dir := os.Getenv(helperEnv + "_DIR")
	s, err := Open(dir, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	if mode == "write" {
		ctx := context.Background()
		for _, a := range helperArtifacts() {
			refs, err := s.PutBatch(ctx, asl.HashSHA256, a)
			if err != nil {
				fmt.Println("error", err)
				os.Exit(3)
			}
			for _, r := range refs {
				fmt.Println("ref", r)
			}
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	testexit.Exit(0)
}

// helperArtifacts are the batches the helper writes: small artifacts kept
// in Pebble (their index records only in the log: unflushed memtable), a
// batch that goes to a pack (index commit queued), and one artifact larger
// than a chunk (staged, then committed).
func helperArtifacts() [][]asl.Artifact {
	var small, packed []asl.Artifact
	for i := range 8 {
		small = append(small, asl.Artifact{Bytes: genBytes(uint64(100+i), 100+i, false)})
	}
	for i := range 40 {
		packed = append(packed, asl.Artifact{Bytes: genBytes(uint64(200+i), 4000+i, false)})
	}
	large := []asl.Artifact{{Bytes: genBytes(300, DefaultChunkSize+12345, true)}}
	return [][]asl.Artifact{small, packed, large}
}

type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	refs  []asl.Reference
}

// startHelper starts the helper process on dir and waits for it to be
// ready.
func startHelper(t *testing.T, mode, dir string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperEnv+"_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProc{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ready":
			go io.Copy(io.Discard, out)
			return h
		case strings.HasPrefix(line, "ref "):
			r, err := asl.ParseReference(strings.TrimPrefix(line, "ref "))
			if err != nil {
				t.Fatal(err)
			}
			h.refs = append(h.refs, r)
		case strings.HasPrefix(line, "error "):
			t.Fatalf("helper: %s", line)
		}
	}
	t.Fatalf("helper ended before it was ready: %v", sc.Err())
	return nil
}

// stop lets the helper close its store and exit.
func (h *helperProc) stop(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
}

// kill ends the helper without closing its store (a crash).
func (h *helperProc) kill(t *testing.T) {
	t.Helper()
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

func createDiskStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func checkLocked(t *testing.T, err error, dir string) {
	t.Helper()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	msg := err.Error()
	for _, want := range []string{dir, "in use by another process", "amduat serve --store " + dir, "--store http://127.0.0.1:8080"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ErrLocked message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("ErrLocked message %q is not one line", msg)
	}
}

// TestLockedByAnotherProcess: a store held by another process is
// ErrLocked, with a one-line message naming the store and the way to share
// it (SPECS.md §6.6); readers are not refused; once the holder is gone the
// store opens.
func TestLockedByAnotherProcess(t *testing.T) {
	t.Parallel()
	dir := createDiskStore(t)
	h := startHelper(t, "hold", dir)
	_, err := Open(dir, nil)
	checkLocked(t, err, dir)
	_, err = Create(dir, nil)
	checkLocked(t, err, dir)
	r, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open beside the holder: %v", err)
	}
	r.Close()
	h.stop(t)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	s.Close()
}

// TestLockedInProcess: a second writer in the same process is refused the
// same way, on disk and on an in-memory file system.
func TestLockedInProcess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  func(t *testing.T) string
	}{
		{"disk", vfs.Default, func(t *testing.T) string { return filepath.Join(t.TempDir(), "store") }},
		{"mem", vfs.NewMem(), func(*testing.T) string { return "store" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			s, err := Create(dir, &Options{FS: tc.fs})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir, &Options{FS: tc.fs})
			checkLocked(t, err, dir)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(dir, &Options{FS: tc.fs})
			if err != nil {
				t.Fatalf("Open after Close: %v", err)
			}
			s.Close()
		})
	}
}

// writeRefusingFS wraps inner so that every operation that would create,
// change, sync, lock or remove a file fails and is counted: an independent
// check, under the store's own read-only file system, that a read-only
// open writes nothing.
func writeRefusingFS(inner vfs.FS) (vfs.FS, *atomic.Int64, *sync.Map) {
	var n atomic.Int64
	var ops sync.Map
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() != errorfs.OpIsWrite || op.Kind == errorfs.OpFileClose {
			return nil
		}
		n.Add(1)
		ops.Store(fmt.Sprintf("%v %s", op.Kind, op.Path), true)
		return errors.New("write refused by the test")
	})
	return errorfs.Wrap(inner, inj), &n, &ops
}

// dirSnapshot lists every file under dir with its size, mode and
// modification time.
func dirSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d %v %d", strings.TrimPrefix(p, dir), fi.Size(), fi.Mode(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// readAll checks that every ref is present in s and reads back with the
// bytes of want (when given), and that Enumerate lists them all.
func readAll(t *testing.T, s *Store, refs []asl.Reference, want map[asl.Reference][]byte) {
	t.Helper()
	ctx := context.Background()
	for _, ref := range refs {
		ok, err := asl.Has(ctx, s, ref)
		if err != nil || !ok {
			t.Fatalf("has %s: %v %v", ref, ok, err)
		}
		a, err := asl.Get(ctx, s, ref, 0)
		if err != nil {
			t.Fatalf("get %s: %v", ref, err)
		}
		if b, ok := want[ref]; ok && string(a.Bytes) != string(b) {
			t.Fatalf("get %s: wrong bytes", ref)
		}
	}
	seen := map[asl.Reference]bool{}
	if err := s.Enumerate(ctx, asl.Reference{}, func(in asl.Info) error { seen[in.Ref] = true; return nil }); err != nil {
		t.Fatalf("enumerate: %v", err)
	}
	for _, ref := range refs {
		if !seen[ref] {
			t.Fatalf("enumerate does not list %s", ref)
		}
	}
}

func helperWant() map[asl.Reference][]byte {
	m := map[asl.Reference][]byte{}
	for _, batch := range helperArtifacts() {
		for _, a := range batch {
			ref := asl.MustDerive(asl.HashSHA256, a)
			m[ref] = a.Bytes
		}
	}
	return m
}

// TestReadOnlyWritesNothing opens stores in several states read-only, on
// a file system that refuses and counts every write, and checks that every
// acknowledged artifact is there (also those whose index commit is only in
// Pebble's log, or not even there: a pack record of a killed writer), that
// nothing was attempted and nothing in the directory changed, and that
// writes fail with ErrReadOnly naming the store.
func TestReadOnlyWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// prepare leaves a store in dir and returns the references put;
		// done (if set) runs after the read-only checks.
		prepare func(t *testing.T, dir string) (refs []asl.Reference, done func())
	}{
		{"closed", func(t *testing.T, dir string) ([]asl.Reference, func()) {
			h := startHelper(t, "write", dir)
			h.stop(t)
			return h.refs, nil
		}},
		{"writer open beside", func(t *testing.T, dir string) ([]asl.Reference, func()) {
			h := startHelper(t, "write", dir)
			return h.refs, func() { h.stop(t) }
		}},
		{"writer killed", func(t *testing.T, dir string) ([]asl.Reference, func()) {
			h := startHelper(t, "write", dir)
			h.kill(t)
			return h.refs, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := createDiskStore(t)
			refs, done := tc.prepare(t, dir)
			if len(refs) == 0 {
				t.Fatal("the helper put nothing")
			}
			before := dirSnapshot(t, dir)
			rfs, writes, ops := writeRefusingFS(vfs.Default)
			s, err := Open(dir, &Options{FS: rfs, ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only Open: %v", err)
			}
			if !s.ReadOnly() {
				t.Fatal("ReadOnly() is false")
			}
			readAll(t, s, refs, helperWant())
			checkReadOnlyWrites(t, s, dir)
			if err := s.Sync(); err != nil {
				t.Fatalf("Sync of a read-only store: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if n := writes.Load(); n != 0 {
				var list []string
				ops.Range(func(k, _ any) bool { list = append(list, k.(string)); return true })
				t.Fatalf("read-only open attempted %d writes: %v", n, list)
			}
			if after := dirSnapshot(t, dir); after != before {
				t.Fatalf("read-only open changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if done != nil {
				done()
			}
			// A writer opens it after the readers (recovering what the
			// killed writer left) and sees the same.
			w, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, w, refs, helperWant())
			w.Close()
		})
	}
}

func checkReadOnlyWrites(t *testing.T, s *Store, dir string) {
	t.Helper()
	ctx := context.Background()
	a := asl.Artifact{Bytes: []byte("not written")}
	_, err1 := s.Put(ctx, asl.HashSHA256, a.Header(), strings.NewReader("not written"))
	_, err2 := s.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{a})
	_, err3 := s.PutIndexed(ctx, asl.HashSHA256, []asl.Artifact{a}, []asl.IndexEntry{{Space: "t", Key: []byte("k"), Value: []byte("v")}})
	for i, err := range []error{err1, err2, err3} {
		if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), dir) {
			t.Errorf("write %d on a read-only store: %v, want ErrReadOnly naming %s", i, err, dir)
		}
	}
}

// TestReadOnlySeesLogOnlyCommits: a reader opened while a writer in this
// process is open sees every artifact put before it opened: small ones
// whose index records are only in Pebble's log (unflushed memtable), a
// packed batch whose index commit is queued or only in the log, and a
// streamed one; puts after its open are not seen (SPECS.md §6.6).
func TestReadOnlySeesLogOnlyCommits(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	w, err := Create(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	want := map[asl.Reference][]byte{}
	var refs []asl.Reference
	for i, batch := range helperArtifacts() {
		got, err := w.PutBatch(ctx, asl.HashSHA256, batch)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range got {
			want[r] = batch[j].Bytes
		}
		refs = append(refs, got...)
		// Right after a packed batch returns its index commit may still
		// be queued: the reader must find it from the pack.
		r, err := Open(dir, &Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only Open after batch %d: %v", i, err)
		}
		readAll(t, r, refs, want)
		r.Close()
	}
	if err := w.Sync(); err != nil { // now every index record is in the log
		t.Fatal(err)
	}
	if n := len(rawKeys(t, w, 's')); n != 0 {
		t.Fatalf("%d staging records", n)
	}
	r, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readAll(t, r, refs, want)
	late := asl.Artifact{Bytes: []byte("put after the reader opened")}
	lref := put(t, w, asl.HashSHA256, late)
	if ok, err := asl.Has(ctx, r, lref); err != nil || ok {
		t.Fatalf("reader sees a put made after its open: %v %v", ok, err)
	}
}

// TestConcurrentReaders: many read-only opens of one store at once, beside
// a writer, all read everything.
func TestConcurrentReaders(t *testing.T) {
	t.Parallel()
	dir := createDiskStore(t)
	h := startHelper(t, "write", dir)
	want := helperWant()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dir, &Options{ReadOnly: true})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for _, ref := range h.refs {
				a, err := asl.Get(context.Background(), s, ref, 0)
				if err != nil {
					errs <- err
					return
				}
				if string(a.Bytes) != string(want[ref]) {
					errs <- fmt.Errorf("%s: wrong bytes", ref)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h.stop(t)
}

// TestReaderBesideBusyWriter: readers open again and again while a writer
// in this process puts, flushes and compacts (tiny memtables). A reader
// sees every artifact acknowledged before its open, never wrong bytes and
// never an integrity error: the only failure allowed is ErrStale (a table of
// its snapshot compacted away; the command is run again).
func TestReaderBesideBusyWriter(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	w, err := Create(dir, &Options{MemTableSize: 256 << 10, PackMin: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var mu sync.Mutex
	var acked []asl.Reference
	want := map[asl.Reference][]byte{}
	stop := make(chan struct{})
	werr := make(chan error, 1)
	// The writer puts batchesPerOpen batches (two memtable flushes) beside
	// every open of the reader, and the next open waits for them: what each
	// open checks grows with the opens and not with how slow the machine
	// is.
	const batchesPerOpen = 16
	credit := make(chan struct{}, batchesPerOpen)
	batchDone := make(chan struct{}, batchesPerOpen)
	go func() {
		defer close(werr)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-credit:
			}
			batch := make([]asl.Artifact, 16)
			for j := range batch {
				batch[j] = asl.Artifact{Bytes: genBytes(uint64(i*16+j), 2000+j, false)}
			}
			refs, err := w.PutBatch(ctx, asl.HashSHA256, batch)
			if err != nil {
				werr <- err
				return
			}
			mu.Lock()
			for j, r := range refs {
				want[r] = batch[j].Bytes
			}
			acked = append(acked, refs...)
			mu.Unlock()
			batchDone <- struct{}{}
		}
	}()
	// n opens that succeed beside the writer (two minutes bound a store
	// that is always stale); AMDUAT_LONG=1 does more. Each open reads all
	// that was acknowledged before it, so the reads grow with the square
	// of n: 6 opens (12 memtable flushes, a few compactions) are a third
	// of 10's reads (issue 25).
	n := longtest.Logf(t, "read-only opens", 6, 60)
	start := time.Now()
	opens, stale := 0, 0
	for i := 0; opens < n && time.Since(start) < 2*time.Minute; i++ {
		for range min(i, 1) * batchesPerOpen {
			select {
			case <-batchDone:
			case err := <-werr:
				t.Fatalf("writer: %v", err)
			}
		}
		for range batchesPerOpen {
			credit <- struct{}{}
		}
		mu.Lock()
		seen := append([]asl.Reference(nil), acked...)
		mu.Unlock()
		r, err := Open(dir, &Options{ReadOnly: true})
		if errors.Is(err, ErrStale) {
			stale++
			continue
		}
		if err != nil {
			t.Fatalf("read-only Open beside the writer: %v", err)
		}
		opens++
		for _, ref := range seen {
			a, err := asl.Get(ctx, r, ref, 0)
			if errors.Is(err, ErrStale) {
				stale++
				break
			}
			if err != nil {
				t.Fatalf("reader: acknowledged %s: %v", ref, err)
			}
			mu.Lock()
			b := want[ref]
			mu.Unlock()
			if string(a.Bytes) != string(b) {
				t.Fatalf("reader: %s: wrong bytes", ref)
			}
		}
		r.Close()
	}
	close(stop)
	if err := <-werr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if opens == 0 {
		t.Fatal("no read-only open succeeded beside the writer")
	}
	t.Logf("%d read-only opens, %d stale, %d artifacts", opens, stale, len(acked))
}

// TestReadOnlyDirectory: a store whose directory and files cannot be
// written (mode 0555/0444; as root, where modes do not stop writes, a
// read-only bind mount) is read by a read-only open; a writer open fails
// at once with an error naming the store.
func TestReadOnlyDirectory(t *testing.T) {
	t.Parallel()
	dir := createDiskStore(t)
	h := startHelper(t, "write", dir)
	h.stop(t)
	ro := dir
	if os.Geteuid() == 0 {
		ro = filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(ro, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "--bind", dir, ro).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot bind-mount (%v: %s): a read-only directory cannot be made", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", ro).Run() })
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot remount read-only (%v: %s)", err, out)
		}
	} else {
		chmodTree(t, dir, 0o555, 0o444)
		t.Cleanup(func() { chmodTree(t, dir, 0o755, 0o644) })
	}
	if f, err := os.Create(filepath.Join(ro, "probe")); err == nil {
		f.Close()
		t.Fatal("the read-only directory is writable")
	}
	s, err := Open(ro, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of a read-only directory: %v", err)
	}
	readAll(t, s, h.refs, helperWant())
	checkReadOnlyWrites(t, s, ro)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Open(ro, nil)
	if err == nil || !strings.Contains(err.Error(), ro) {
		t.Fatalf("writer Open of a read-only directory: %v, want an error naming it", err)
	}
	if d := time.Since(start); d > time.Minute { // a hang, not a timing
		t.Fatalf("writer Open took %v to fail", d)
	}
	t.Logf("writer open: %v", err)
}

func chmodTree(t *testing.T, dir string, dirMode, fileMode os.FileMode) {
	t.Helper()
	var paths []string
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	// Files first, directories last and deepest first.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		m := fileMode
		if fi.IsDir() {
			m = dirMode
		}
		if err := os.Chmod(p, m); err != nil && !errors.Is(err, syscall.ENOENT) {
			t.Fatal(err)
		}
	}
}

// TestReadOnlyRecoversPacksInMemory: after a crash that lost a packed
// batch's index commit (the pack was synced, Pebble's log was not), a
// read-only open finds the records in the pack and serves them from memory
// (Get, Has, Enumerate), writing nothing; the pack is not sealed or synced.
func TestReadOnlyRecoversPacksInMemory(t *testing.T) {
	t.Parallel()
	mem := vfs.NewCrashableMem()
	w, err := Create("store", &Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var batch []asl.Artifact
	want := map[asl.Reference][]byte{}
	for i := range 32 {
		batch = append(batch, asl.Artifact{Bytes: genBytes(uint64(i), 5000+i, false)})
	}
	refs, err := w.PutBatch(ctx, asl.HashSHA256, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range refs {
		want[r] = batch[i].Bytes
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	w.Close()

	rfs, writes, ops := writeRefusingFS(clone)
	s, err := Open("store", &Options{FS: rfs, ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of the crash clone: %v", err)
	}
	if s.packRecovered != len(refs) {
		t.Fatalf("read-only open indexed %d pack records in memory, want %d", s.packRecovered, len(refs))
	}
	readAll(t, s, refs, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 0 {
		var list []string
		ops.Range(func(k, _ any) bool { list = append(list, k.(string)); return true })
		t.Fatalf("read-only open attempted %d writes: %v", n, list)
	}
	// A writer then indexes them for good.
	s, err = Open("store", &Options{FS: clone})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.packRecovered != len(refs) {
		t.Fatalf("writer open indexed %d pack records, want %d", s.packRecovered, len(refs))
	}
	readAll(t, s, refs, want)
}
