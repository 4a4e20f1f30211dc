package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// End-to-end tests of sharing a store and of a full disk (SPECS.md §6.6,
// §16.2), through the binary built by TestMain.

// holdStore starts `amduat put` reading from a pipe that stays open: the
// process holds the store for writing until release is called.
func (c *cli) holdStore() (release func() result) {
	c.t.Helper()
	cmd := exec.Command(amduatBin, "put")
	cmd.Dir = c.cwd
	cmd.Env = append(os.Environ(), "AMDUAT_STORE="+c.store, "TMPDIR="+c.cwd, "GORACE=atexit_sleep_ms=20")
	w, err := cmd.StdinPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Wait until it has the lock (probing with a writer of our own could
	// make it fail instead).
	for deadline := time.Now().Add(time.Minute); ; { // a bound for a hang
		if lockHeld(filepath.Join(c.store, "LOCK")) {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the holding put never took the store")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() result {
		io.WriteString(w, "held")
		w.Close()
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{code, out.String(), errb.String()}
	}
}

// lockHeld reports whether another process holds an fcntl lock on path.
func lockHeld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	return syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk) == nil && lk.Type != syscall.F_UNLCK
}

// TestStoreInUse: while one process writes to a store, another writer gets
// exit 6 and one line saying the store is in use and how to share it;
// read-only commands work beside it.
func TestStoreInUse(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	ref := strings.TrimSpace(c.must(0, "put", c.write("a", []byte("shared"))).stdout)
	release := c.holdStore()
	for _, args := range [][]string{{"put", c.write("b", []byte("b"))}, {"pel", "seed", "concat"}} {
		r := c.run(args...)
		if r.code != exitIO {
			t.Fatalf("%v beside a writer: exit %d, want %d: %s", args, r.code, exitIO, r.stderr)
		}
		oneErrorLine(t, r, strings.Join(args[:len(args)-1], " "))
		for _, want := range []string{c.store, "store is in use by another process", "amduat serve --store " + c.store, "--store http://127.0.0.1:8080"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: error %q lacks %q", args, r.stderr, want)
			}
		}
	}
	if r := c.must(0, "get", ref); r.stdout != "shared" {
		t.Fatalf("get beside a writer: %q", r.stdout)
	}
	c.must(0, "has", ref)
	c.must(0, "stat", ref)
	c.must(0, "verify")
	// Several reading processes at once, beside the writer.
	var wg sync.WaitGroup
	results := make([]result, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				results[i] = c.run("verify")
			} else {
				results[i] = c.run("get", ref)
			}
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 || i%2 == 1 && r.stdout != "shared" {
			t.Fatalf("concurrent reader %d: exit %d: %q %s", i, r.code, r.stdout, r.stderr)
		}
	}
	if r := release(); r.code != 0 {
		t.Fatalf("the holding put: exit %d: %s", r.code, r.stderr)
	}
	c.must(0, "put", c.write("c", []byte("after")))
}

// readOnlyCommands runs every read-only command on the CLI's store.
func readOnlyCommands(t *testing.T, c *cli, refs map[string]string) {
	t.Helper()
	if r := c.must(0, "get", refs["data"]); r.stdout != "read-only data" {
		t.Fatalf("get: %q", r.stdout)
	}
	c.must(0, "has", refs["data"], refs["result"])
	c.must(0, "stat", refs["data"])
	if r := c.must(0, "verify"); !strings.Contains(r.stdout, " 0 corrupt, 0 failed") {
		t.Fatalf("verify: %q", r.stdout)
	}
	c.must(0, "pel", "show", refs["result"])
	c.must(0, "prov", "why", refs["output"])
	c.must(0, "prov", "uses", refs["data"])
}

func prepareReadOnlyStore(t *testing.T, c *cli) map[string]string {
	t.Helper()
	c.initStore()
	refs := map[string]string{"data": strings.TrimSpace(c.must(0, "put", c.write("d", []byte("read-only data"))).stdout)}
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	var out struct {
		ResultRef  string   `json:"result_ref"`
		OutputRefs []string `json:"output_refs"`
	}
	r := c.must(0, "--json", "pel", "run", "--program", prog, "--input", refs["data"], "--input", refs["data"])
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.OutputRefs) != 1 {
		t.Fatalf("pel run --json: %v %q", err, r.stdout)
	}
	refs["result"], refs["output"] = out.ResultRef, out.OutputRefs[0]
	return refs
}

// treeSnapshot lists every file under dir with its size, mode and
// modification time.
func treeSnapshot(t *testing.T, dir string) string {
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

// TestReadOnlyCommandsWriteNothing: get, has, stat, verify, pel show, prov
// why and prov uses leave the store directory exactly as they found it,
// and work on a store that cannot be written (a read-only bind mount as
// root, modes 0555/0444 otherwise).
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	refs := prepareReadOnlyStore(t, c)
	before := treeSnapshot(t, c.store)
	readOnlyCommands(t, c, refs)
	if after := treeSnapshot(t, c.store); after != before {
		t.Fatalf("read-only commands changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	ro := c.store
	if os.Geteuid() == 0 {
		ro = filepath.Join(t.TempDir(), "ro")
		os.Mkdir(ro, 0o755)
		if out, err := exec.Command("mount", "--bind", c.store, ro).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot bind-mount (%v: %s): a read-only store cannot be made", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", ro).Run() })
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot remount read-only (%v: %s)", err, out)
		}
	} else {
		filepath.WalkDir(c.store, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				os.Chmod(p, 0o444)
			}
			return nil
		})
		filepath.WalkDir(c.store, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o555)
			}
			return nil
		})
		t.Cleanup(func() {
			filepath.WalkDir(c.store, func(p string, d fs.DirEntry, err error) error {
				os.Chmod(p, 0o755)
				return nil
			})
		})
	}
	rc := &cli{t: t, cwd: c.cwd, store: ro}
	readOnlyCommands(t, rc, refs)
	r := rc.run("put", c.write("e", []byte("e")))
	if r.code != exitIO || !strings.Contains(r.stderr, ro) {
		t.Fatalf("put on a read-only store: exit %d: %s", r.code, r.stderr)
	}
	oneErrorLine(t, r, "put")
}

// TestSignalEndsCommand: SIGINT and SIGTERM end a command within about a
// second with exit 130, even one blocked where its context is not watched
// (put reading a pipe that never ends).
func TestSignalEndsCommand(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCLI(t)
			c.initStore()
			cmd := exec.Command(amduatBin, "put")
			cmd.Env = append(os.Environ(), "AMDUAT_STORE="+c.store, "GORACE=atexit_sleep_ms=20")
			w, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			io.WriteString(w, "some bytes, then nothing")
			// The store is open (its lock is held: the signal handler is
			// installed before), and the read blocks.
			for deadline := time.Now().Add(time.Minute); !lockHeld(filepath.Join(c.store, "LOCK")); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("put never opened the store")
				}
			}
			start := time.Now()
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				d := time.Since(start)
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != exitInterrupted {
					t.Fatalf("after %v: %v, want exit %d; stderr %q", sig, err, exitInterrupted, errb.String())
				}
				t.Logf("%v ended the command in %v: %s", sig, d, strings.TrimSpace(errb.String()))
			case <-time.After(time.Minute): // a hang, not a timing
				t.Fatalf("%v did not end the command", sig)
			}
			// Nothing acknowledged was lost, and the store opens.
			c.must(0, "verify")
		})
	}
}

// TestFullDisk fills a store on a 64 MiB tmpfs through the command line:
// the put that runs out of space fails with exit 6 and one line naming the
// store; has, get and verify keep working; a put fails at once with the
// same error; once the tmpfs grows, puts work again.
func TestFullDisk(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a size-limited tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	c := newCLI(t)
	c.store = filepath.Join(mnt, "store")
	c.must(0, "init") // on the small tmpfs: init allocates the reserve there
	type acked struct{ ref, file string }
	var all []acked
	var full result
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("the tmpfs never filled")
		}
		// A batch of files that goes to a pack, then a streamed one.
		var files []string
		for j := range 8 {
			files = append(files, c.write(fmt.Sprintf("f%d-%d", i, j), demoBytes(fmt.Sprint(i, j), 200<<10)))
		}
		files = append(files, c.write(fmt.Sprintf("big%d", i), demoBytes(fmt.Sprint("big", i), 5<<20)))
		start := time.Now()
		r := c.run(append([]string{"put"}, files...)...)
		if d := time.Since(start); d > 2*time.Minute { // a hang, not a timing
			t.Fatalf("put took %v", d)
		}
		if r.code != 0 {
			full = r
			break
		}
		for j, ref := range lines(r.stdout) {
			all = append(all, acked{ref, files[j]})
		}
	}
	if full.code != exitIO || !strings.Contains(full.stderr, "store "+c.store+": no space left on device") {
		t.Fatalf("the put that filled the disk: exit %d: %s", full.code, full.stderr)
	}
	oneErrorLine(t, full, "put")
	t.Logf("%d artifacts stored; then: %s", len(all), strings.TrimSpace(full.stderr))
	check := func() {
		t.Helper()
		var refs []string
		for _, a := range all {
			refs = append(refs, a.ref)
		}
		c.must(0, append([]string{"has"}, refs...)...)
		for _, a := range all[len(all)-3:] {
			want, err := os.ReadFile(a.file)
			if err != nil {
				t.Fatal(err)
			}
			c.mustStdout(want, "get", a.ref)
		}
		if r := c.must(0, "verify"); !strings.Contains(r.stdout, " 0 corrupt, 0 failed") {
			t.Fatalf("verify: %q", r.stdout)
		}
	}
	check()
	// While the disk is full, writers work (what the failed put staged is
	// cleaned up by the next Open, so some may fit) or fail at once with
	// the same error.
	big := c.write("big-again", demoBytes("big again", 5<<20))
	for _, args := range [][]string{{"put", big}, {"put", c.write("small", []byte("small"))}, {"pel", "seed", "concat"}, {"put", c.write("big-2", demoBytes("big 2", 5<<20))}} {
		start := time.Now()
		r := c.run(args...)
		if d := time.Since(start); d > time.Minute { // a retry loop or a hang, not a timing
			t.Fatalf("%v on a full disk took %v", args, d)
		}
		switch {
		case r.code == 0:
			if args[0] == "put" {
				all = append(all, acked{strings.TrimSpace(r.stdout), args[1]})
			}
		case r.code == exitIO && strings.Contains(r.stderr, "store "+c.store+": no space left on device"):
			oneErrorLine(t, r, strings.Join(args[:len(args)-1], " "))
		default:
			t.Fatalf("%v on a full disk: exit %d: %s", args, r.code, r.stderr)
		}
		t.Logf("%v on the full disk: exit %d %s", args[:len(args)-1], r.code, strings.TrimSpace(r.stderr))
	}
	if out, err := exec.Command("mount", "-o", "remount,size=256m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, out)
	}
	r := c.must(0, "put", c.write("after", []byte("space is back")))
	all = append(all, acked{strings.TrimSpace(r.stdout), filepath.Join(c.cwd, "after")})
	check()
}
