package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/amduat/amduat/internal/longtest"
)

// newestPack returns the path of the store's newest pack file.
func newestPack(t *testing.T, store string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(store, "packs", "*.pack"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no pack: %v", err)
	}
	sort.Strings(m)
	return m[len(m)-1]
}

// pin add/ls/rm, and rm refusing a pinned or reachable artifact with the
// reason, deleting with --force, and what it deleted staying deleted.
func TestPinAndRm(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	var run struct {
		ResultRef  string   `json:"result_ref"`
		OutputRefs []string `json:"output_refs"`
	}
	r := c.must(0, "--json", "pel", "run", "--program", prog, "--input", refHello, "--input", refHiTag)
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatal(err)
	}
	c.must(0, "pin", "add", "run1", run.ResultRef[:16])
	c.must(0, "pin", "add", "hello", refHello)
	if r := c.must(0, "pin", "ls"); r.stdout != "hello "+refHello+"\nrun1 "+run.ResultRef+"\n" {
		t.Fatalf("pin ls: %q", r.stdout)
	}
	c.must(2, "pin", "add", "bad\nname", refHello)
	if r := c.must(3, "pin", "add", "x", "0001"+strings.Repeat("ab", 32)); !strings.Contains(r.stderr, "not stored") {
		t.Fatalf("pin add of a missing ref: %q", r.stderr)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string // in stdout or stderr
	}{
		{"pinned", []string{"rm", refHello}, 1, "refused: pinned as hello"},
		{"reachable", []string{"rm", run.OutputRefs[0]}, 1, "refused: reachable from pin run1"},
		{"program reachable", []string{"rm", prog}, 1, "reachable from pin run1"},
		{"one refused, none deleted", []string{"rm", refEmpty, prog}, 1, "reachable from pin run1"},
		{"free", []string{"rm", refEmpty}, 0, "deleted " + refEmpty},
		{"missing", []string{"rm", refEmpty}, 3, "not stored"},
		{"forced", []string{"rm", "--force", refHello}, 0, "deleted " + refHello},
		{"no server", []string{"--store", "http://127.0.0.1:1", "rm", refHiTag}, 6, "connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := c.must(tc.code, tc.args...)
			if !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Fatalf("%q / %q, want %q", r.stdout, r.stderr, tc.want)
			}
		})
	}
	c.must(1, "has", refEmpty)
	c.must(0, "has", refHiTag)
	c.must(0, "verify")
	r = c.must(0, "--json", "pin", "rm", "run1", "hello")
	if !strings.Contains(r.stdout, `"removed":["run1","hello"]`) {
		t.Fatalf("pin rm --json: %q", r.stdout)
	}
	c.must(3, "pin", "rm", "run1")
	if r := c.must(0, "--json", "pin", "ls"); r.stdout != "{\"pins\":[]}\n" {
		t.Fatalf("pin ls --json: %q", r.stdout)
	}
	c.must(0, "rm", prog) // no pin reaches it any more
	c.must(1, "has", prog)
}

// Damage a stored artifact's bytes in its pack, then put the same bytes
// again (plain put, and verify --repair): get returns them again.
func TestRepairCLI(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"put", "verify --repair"} {
		t.Run(via, func(t *testing.T) {
			c := newCLI(t)
			c.initStore()
			data := []byte("bytes that will be damaged and repaired")
			file := c.write("f", data)
			ref := strings.TrimSpace(c.must(0, "put", file).stdout)
			pack := newestPack(t, c.store)
			b, err := os.ReadFile(pack)
			if err != nil {
				t.Fatal(err)
			}
			at := bytes.LastIndex(b, data) // the last record's payload (stored raw)
			if at < 0 {
				t.Fatalf("%s does not hold the payload", pack)
			}
			b[at+len(data)-3] ^= 0x20
			if err := os.WriteFile(pack, b, 0o644); err != nil {
				t.Fatal(err)
			}
			c.must(4, "get", ref)
			c.must(4, "verify")
			if via == "put" {
				c.must(0, "put", file)
			} else {
				r := c.must(0, "verify", "--repair", file)
				if r.stdout != ref+" repaired "+file+"\n" {
					t.Fatalf("verify --repair: %q", r.stdout)
				}
				r = c.must(0, "verify", "--repair", "--json", file)
				if !strings.Contains(r.stdout, `"repaired":0`) || !strings.Contains(r.stdout, `"state":"ok"`) {
					t.Fatalf("second verify --repair: %q", r.stdout)
				}
			}
			if r := c.must(0, "get", ref); r.stdout != string(data) {
				t.Fatalf("get after repair: %q", r.stdout)
			}
			c.must(0, "verify")
		})
	}
}

// gc keeps what the pins reach and deletes the rest, with the action
// cache, node memo and run log entries of the runs it deletes.
func TestGcCLI(t *testing.T) {
	t.Parallel()
	c := lifeStore(t)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	type runOut struct {
		ResultRef  string   `json:"result_ref"`
		TraceRef   string   `json:"trace_ref"`
		OutputRefs []string `json:"output_refs"`
		Cache      string   `json:"cache"`
	}
	run := func(in ...string) runOut {
		args := []string{"--json", "pel", "run", "--memo-nodes", "--program", prog}
		for _, i := range in {
			args = append(args, "--input", i)
		}
		var r runOut
		if err := json.Unmarshal([]byte(c.must(0, args...).stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := run(refHello, refHiTag)
	b := run(refHiTag, refHello)
	c.must(0, "pin", "add", "a", a.ResultRef)
	var dry struct {
		Deleted int64          `json:"deleted"`
		Entries map[string]int `json:"entries_deleted"`
	}
	if err := json.Unmarshal([]byte(c.must(0, "--json", "gc", "--dry-run").stdout), &dry); err != nil {
		t.Fatal(err)
	}
	// b's result, trace, output and provenance edge; "empty" and the
	// 3000-byte artifact.
	if dry.Deleted != 6 || dry.Entries["surf.action"] != 1 || dry.Entries["surf.log"] != 1 || dry.Entries["surf.trace"] != 1 || dry.Entries["surf.node"] != 1 || dry.Entries["tgk.to"] == 0 {
		t.Fatalf("gc --dry-run: %+v", dry)
	}
	c.must(0, "has", b.ResultRef)
	r := c.must(0, "gc")
	if !strings.HasPrefix(r.stdout, "deleted 6 of ") {
		t.Fatalf("gc: %q", r.stdout)
	}
	c.must(1, "has", b.ResultRef, b.TraceRef, b.OutputRefs[0], refEmpty)
	c.must(0, "has", a.ResultRef, a.TraceRef, a.OutputRefs[0], prog, refHello, refHiTag)
	c.must(0, "verify")
	if r := c.must(0, "--json", "log"); strings.Count(r.stdout, `"result_ref"`) != 1 || !strings.Contains(r.stdout, a.ResultRef) {
		t.Fatalf("log after gc: %q", r.stdout)
	}
	// The action cache no longer answers b (its result is gone): it runs.
	if again := run(refHiTag, refHello); again.Cache != "miss" || again.ResultRef != b.ResultRef {
		t.Fatalf("b again: %+v", again)
	}
	if again := run(refHello, refHiTag); again.Cache != "hit" {
		t.Fatalf("a again: %+v", again)
	}
	// --keep-runs 2 keeps the two newest runs (b run again, then a hit).
	c.must(0, "gc", "--keep-runs", "2")
	c.must(0, "has", b.ResultRef, a.ResultRef)
	r = c.must(0, "gc")
	if !strings.HasPrefix(r.stdout, "deleted 4 of ") {
		t.Fatalf("gc: %q", r.stdout)
	}
	c.must(0, "verify")
	c.must(6, "--store", "http://127.0.0.1:1", "gc")
}

// copyTree copies the regular files under src to dst. Each file goes
// file to file (io.Copy between two *os.File: copy_file_range on Linux),
// not through a buffer of this process: under -race reading a store's
// 24 MiB RESERVE into memory and writing it out cost the race runtime
// a range check per byte, most of TestGcKill9's own CPU.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		return copyFile(p, filepath.Join(dst, rel), info.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the file src to a new file dst with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

// kill -9 of `amduat gc` at evenly spread moments of its run, each on a
// fresh copy of a store: afterwards the store verifies, the pinned run
// replays (everything it reaches is there), and a second gc finishes the
// job (a dry run then finds nothing to delete). The default run kills at
// 3 moments of a gc over a store of 400 files and 3 runs (one pinned),
// AMDUAT_LONG=1 at 24 moments over 3,000 files and 10 runs
// (internal/longtest); the moments are fractions of the whole gc's
// measured time, so either size spreads them over it.
func TestGcKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	c := newCLI(t)
	c.initStore()
	dir := filepath.Join(c.cwd, "files")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := longtest.Logf(t, "files in the store", 400, 3000)
	for i := range files {
		b := make([]byte, 1024+i%7*4096)
		copy(b, fmt.Sprintf("file %d", i))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refs := strings.Fields(c.must(0, "put", "-r", dir).stdout)
	prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
	var res string
	for i := range longtest.Count(3, 10) {
		c.must(0, "pel", "run", "--quiet", "--program", prog, "--input", refs[i], "--input", refs[i+1])
		if i == 0 {
			var run struct {
				ResultRef string `json:"result_ref"`
			}
			out := c.must(0, "--json", "pel", "run", "--program", prog, "--input", refs[i], "--input", refs[i+1])
			if err := json.Unmarshal([]byte(out.stdout), &run); err != nil {
				t.Fatal(err)
			}
			res = run.ResultRef
		}
	}
	c.must(0, "pin", "add", "keep", res)
	template := filepath.Join(c.cwd, "template")
	copyTree(t, c.store, template)
	// How long a whole gc takes here.
	full := filepath.Join(c.cwd, "full")
	copyTree(t, template, full)
	start := time.Now()
	out := c.must(0, "--store", full, "--json", "gc")
	whole := time.Since(start)
	var fullRep struct {
		Deleted int `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &fullRep); err != nil || fullRep.Deleted == 0 {
		t.Fatalf("gc: %s %v", out.stdout, err)
	}
	trials := longtest.Logf(t, "gc kill -9 trials", 3, 24)
	killed, before, mid, after := 0, 0, 0, 0
	for i := range trials {
		st := filepath.Join(c.cwd, fmt.Sprintf("trial%02d", i))
		copyTree(t, template, st)
		cmd := exec.Command(amduatBin, "--store", st, "gc")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(whole * time.Duration(i) * 5 / 4 / time.Duration(trials))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok && !ee.Exited() {
			killed++
		}
		c.must(0, "--store", st, "verify")
		c.must(0, "--store", st, "pel", "verify", res)
		var left struct {
			Deleted int `json:"deleted"`
		}
		_ = json.Unmarshal([]byte(c.must(0, "--store", st, "--json", "gc", "--dry-run").stdout), &left)
		switch {
		case left.Deleted == fullRep.Deleted:
			before++
		case left.Deleted > 0:
			mid++
		default:
			after++
		}
		c.must(0, "--store", st, "gc")
		r := c.must(0, "--store", st, "--json", "gc", "--dry-run")
		if !strings.Contains(r.stdout, `"deleted":0,`) {
			t.Fatalf("trial %d: a second gc left work: %s", i, r.stdout)
		}
		c.must(0, "--store", st, "verify")
		c.must(0, "--store", st, "pel", "verify", res)
		os.RemoveAll(st)
	}
	t.Logf("gc kill -9: %d trials over a %s gc (process included) deleting %d artifacts; %d killed; afterwards %d stores had all the deletions left, %d some, %d none; every store verified, its pinned run replayed, and a second gc finished the job", trials, whole.Round(time.Millisecond), fullRep.Deleted, killed, before, mid, after)
}
