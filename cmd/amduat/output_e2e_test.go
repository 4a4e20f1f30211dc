package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputTargets: -o onto a device or a FIFO writes into it and never
// replaces it, -o onto a symlink writes through it and keeps the link, and
// export -o follows the same rules (SPECS.md §16.2, "Output files").
func TestOutputTargets(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	data := bytes.Repeat([]byte("output target "), 1000)
	ref := strings.TrimSpace(c.must(0, "put", c.write("in", data)).stdout)

	// A device: /dev/null stays a character device.
	c.must(0, "get", ref, "-o", os.DevNull)
	if st, err := os.Lstat(os.DevNull); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s after get -o: %v %v (no longer a character device)", os.DevNull, st.Mode(), err)
	}
	c.must(0, "export", "-o", os.DevNull, ref)

	// A FIFO: written in place, read by the other end.
	fifo := filepath.Join(c.cwd, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	c.must(0, "get", ref, "-o", fifo)
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("read %d bytes from the FIFO, want %d", len(b), len(data))
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("FIFO after get -o: %v %v", st.Mode(), err)
	}

	// A symlink to a regular file, a chain of two links, and a dangling
	// link: the links stay, the file they name gets the bytes.
	target := c.write("target", []byte("old"))
	link := filepath.Join(c.cwd, "link")
	link2 := filepath.Join(c.cwd, "link2")
	dangling := filepath.Join(c.cwd, "dangling")
	for _, l := range [][2]string{{"target", link}, {"link", link2}, {"created", dangling}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ link, file string }{
		{link, target},
		{link2, target},
		{dangling, filepath.Join(c.cwd, "created")},
	} {
		os.WriteFile(tc.file, []byte("old"), 0o644)
		c.must(0, "get", ref, "-o", tc.link)
		if st, err := os.Lstat(tc.link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s after get -o: not a symlink any more (%v %v)", tc.link, st.Mode(), err)
		}
		if b, err := os.ReadFile(tc.file); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s: %d bytes, %v; want the artifact's %d", tc.file, len(b), err, len(data))
		}
	}

	// A loop of links and a socket are refused with one line.
	loop1, loop2 := filepath.Join(c.cwd, "loop1"), filepath.Join(c.cwd, "loop2")
	os.Symlink("loop2", loop1)
	os.Symlink("loop1", loop2)
	oneErrorLine(t, c.must(exitIO, "get", ref, "-o", loop1), "get")
	if left, _ := filepath.Glob(filepath.Join(c.cwd, ".*amduat-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestInterruptedPutLeavesNoSpool: SIGINT or SIGTERM during a put of a
// long pipe removes the spool file from $TMPDIR (SPECS.md §16.2).
func TestInterruptedPutLeavesNoSpool(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			c := newCLI(t)
			c.initStore()
			tmp := t.TempDir()
			cmd := exec.Command(amduatBin, "put")
			cmd.Dir = c.cwd
			cmd.Env = append(os.Environ(), "AMDUAT_STORE="+c.store, "TMPDIR="+tmp, "GORACE=atexit_sleep_ms=20")
			w, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Feed the pipe until the spool file exists, then signal.
			fed := make(chan error, 1)
			go func() {
				buf := make([]byte, 1<<20)
				for {
					if _, err := w.Write(buf); err != nil {
						fed <- err
						return
					}
				}
			}()
			for {
				m, _ := filepath.Glob(filepath.Join(tmp, "amduat-put-*"))
				if len(m) > 0 {
					break
				}
				select {
				case err := <-fed:
					t.Fatalf("put stopped reading before spooling: %v; stderr %s", err, errb.String())
				default:
				}
				time.Sleep(10 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			err = cmd.Wait()
			w.Close()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != exitInterrupted {
				t.Fatalf("put after %v: %v, want exit %d; stderr %s", sig, err, exitInterrupted, errb.String())
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("$TMPDIR after %v holds %d files (%s …)", sig, len(left), left[0].Name())
			}
		})
	}
}
