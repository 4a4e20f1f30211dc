package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/report"
)

// launchServeArgs is launchKillableServe with extra flags, and the server
// killed at the test's end if it still runs.
func launchServeArgs(t *testing.T, dir, logPath string, extra ...string) *killableServe {
	t.Helper()
	return launchServeArgsEnv(t, nil, dir, logPath, extra...)
}

// launchServeArgsEnv is launchServeArgs with env added to the server's
// environment (a later entry wins).
func launchServeArgsEnv(t *testing.T, env []string, dir, logPath string, extra ...string) *killableServe {
	t.Helper()
	k := launchKillableServeEnv(t, env, dir, logPath, extra...)
	t.Cleanup(func() {
		if k.cmd.ProcessState == nil {
			k.cmd.Process.Kill()
			k.cmd.Wait()
		}
	})
	return k
}

// TestMaintainOverHTTP runs the same pin, rm and gc commands against a
// store directory and against a server over an identical store: the same
// exit codes and stdout, and the same stderr where the command itself
// writes it (rm's and pin rm's reports); a directory held by the server
// is refused with the command that works.
func TestMaintainOverHTTP(t *testing.T) {
	t.Parallel()
	setup := func() (*cli, string) {
		c := lifeStore(t)
		prog := strings.TrimSpace(c.must(0, "pel", "seed", "concat").stdout)
		return c, prog
	}
	local, prog := setup()
	remote, _ := setup()
	srv := launchServeArgs(t, remote.store, filepath.Join(remote.cwd, "serve.log"))
	var run struct {
		ResultRef  string   `json:"result_ref"`
		OutputRefs []string `json:"output_refs"`
	}
	args := []string{"--json", "pel", "run", "--program", prog, "--input", refHello, "--input", refHiTag}
	looseJSON(t, local.must(0, args...).stdout, &run)
	var run2 struct {
		ResultRef string `json:"result_ref"`
	}
	looseJSON(t, remote.must(0, append([]string{"--store", srv.url}, args...)...).stdout, &run2)
	if run.ResultRef != run2.ResultRef {
		t.Fatalf("the two stores ran to different results: %s, %s", run.ResultRef, run2.ResultRef)
	}
	absent := "0001" + strings.Repeat("ab", 32)
	steps := []struct {
		args       []string
		code       int
		sameStderr bool
	}{
		{[]string{"pin", "add", "run1", run.ResultRef[:16]}, 0, true},
		{[]string{"--json", "pin", "add", "hello", refHello}, 0, true},
		{[]string{"pin", "add", "hello", refHello}, 0, true},
		{[]string{"pin", "add", "hello", refHiTag}, 1, false},
		{[]string{"pin", "add", "tmp", refHiTag}, 0, true},
		{[]string{"pin", "add", "--force", "tmp", refEmpty}, 0, true},
		{[]string{"pin", "add", "x", absent}, 3, false},
		{[]string{"pin", "add", "bad\nname", refHello}, 2, true},
		{[]string{"pin", "ls"}, 0, true},
		{[]string{"--json", "pin", "ls"}, 0, true},
		{[]string{"rm", refHello}, 1, true},
		{[]string{"rm", run.OutputRefs[0], prog}, 1, true},
		{[]string{"--json", "rm", refHiTag, refEmpty, prog}, 1, true},
		{[]string{"pin", "rm", "tmp", "nope"}, 3, true},
		{[]string{"--json", "rm", refEmpty, absent}, 3, true},
		{[]string{"rm", "--force", refHello}, 0, true},
		{[]string{"gc", "--dry-run"}, 0, true},
		{[]string{"--json", "pin", "rm", "hello"}, 0, true},
	}
	for _, st := range steps {
		name := strings.Join(st.args, " ")
		l := local.must(st.code, st.args...)
		r := remote.must(st.code, append([]string{"--store", srv.url}, st.args...)...)
		if l.stdout != r.stdout {
			t.Errorf("%s: stdout differs\ndirectory: %q\nserver:    %q", name, l.stdout, r.stdout)
		}
		if st.sameStderr && l.stderr != r.stderr {
			t.Errorf("%s: stderr differs\ndirectory: %q\nserver:    %q", name, l.stderr, r.stderr)
		}
	}
	// pin log, when this build has it: the same changes (times and actors
	// differ: "local" against "anonymous").
	if l := local.run("pin", "log", "run1"); l.code == 0 {
		r := remote.must(0, "--store", srv.url, "pin", "log", "run1")
		if len(lines(l.stdout)) == 0 || strings.Count(l.stdout, "\n") != strings.Count(r.stdout, "\n") || !strings.Contains(r.stdout, run.ResultRef) {
			t.Errorf("pin log run1:\ndirectory: %q\nserver:    %q", l.stdout, r.stdout)
		}
	} else {
		t.Logf("pin log is not in this build (exit %d): not compared", l.code)
	}
	// gc: the first line (what is deleted) is the same; the second holds
	// the time taken.
	l, r := local.must(0, "gc"), remote.must(0, "--store", srv.url, "gc")
	if first := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }; first(l.stdout) != first(r.stdout) || !strings.HasPrefix(r.stdout, "deleted ") {
		t.Errorf("gc:\ndirectory: %q\nserver:    %q", l.stdout, r.stdout)
	}
	var rep struct {
		Deleted *int64 `json:"deleted"`
		Stored  *int64 `json:"stored"`
	}
	looseJSON(t, remote.must(0, "--store", srv.url, "--json", "gc").stdout, &rep)
	if rep.Deleted == nil || *rep.Deleted != 0 || rep.Stored == nil {
		t.Errorf("second gc --json: %+v", rep)
	}
	// The directory the server holds: the message names the command that
	// works.
	for _, cmd := range [][]string{{"gc"}, {"pin", "add", "y", refHiTag}, {"rm", refHiTag}} {
		res := remote.must(exitIO, cmd...)
		want := "amduat " + cmd[0]
		if cmd[0] == "pin" {
			want += " add"
		}
		if !strings.Contains(res.stderr, "`"+want+" --store http://HOST:PORT") || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("%s on the served directory: %q", strings.Join(cmd, " "), res.stderr)
		}
	}
	srv.stop(t)
}

// TestGCWhileServing: two clients run programs and pin their results while
// `amduat gc --store http://…` collects again and again; each client also
// puts garbage. Every run whose pin was acknowledged keeps its result,
// trace, output and inputs (its closure) with their bytes: 0 lost.
func TestGCWhileServing(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	dir := filepath.Join(work, "store")
	if out, err := exec.Command(amduatBin, "--store", dir, "init").CombinedOutput(); err != nil {
		t.Fatalf("init: %v: %s", err, out)
	}
	srv := launchServeArgs(t, dir, filepath.Join(work, "serve.log"))
	ctx := context.Background()
	open := func() *httpstore.Client {
		c, err := httpstore.Open(ctx, srv.url, httpstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	admin := open()
	defer admin.Close()
	prog := `{"nodes":[{"id":1,"op":"pel.bytes.concat","version":1,"inputs":[{"input":0},{"input":1}]}],"roots":[{"node":1}]}`
	var build report.Build
	if err := admin.DoJSON(ctx, "POST", "/v1/pel/programs", false, json.RawMessage(prog), &build); err != nil {
		t.Fatal(err)
	}
	if err := admin.Pin(ctx, "program", build.Ref, asl.PinOptions{}); err != nil {
		t.Fatal(err)
	}

	type acked struct {
		run  report.Run
		a, b []byte
	}
	var (
		mu      sync.Mutex
		done    []acked
		retries int
		junk    int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	for client := 0; client < 2; client++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := open()
			defer c.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := []byte(fmt.Sprintf("client %d input a %d ", client, i))
				b := []byte(fmt.Sprintf("client %d input b %d\n", client, i))
				if _, err := asl.PutArtifact(ctx, c, asl.HashSHA256, asl.Untagged([]byte(fmt.Sprintf("client %d junk %d", client, i)))); err != nil {
					errc <- err
					return
				}
				ra, err1 := asl.PutArtifact(ctx, c, asl.HashSHA256, asl.Untagged(a))
				rb, err2 := asl.PutArtifact(ctx, c, asl.HashSHA256, asl.Untagged(b))
				if err := errors.Join(err1, err2); err != nil {
					errc <- err
					return
				}
				var run report.Run
				err := c.DoJSON(ctx, "POST", "/v1/pel/run", true, report.RunRequest{ProgramRef: build.Ref, InputRefs: []asl.Reference{ra, rb}}, &run)
				if err != nil {
					errc <- err
					return
				}
				// An input collected between its put and the run, or a
				// result between the run and the pin, is not acknowledged:
				// the client tries again.
				if run.Status != "OK" {
					mu.Lock()
					retries++
					mu.Unlock()
					continue
				}
				err = c.Pin(ctx, fmt.Sprintf("c%d-%d", client, i), run.ResultRef, asl.PinOptions{})
				if errors.Is(err, asl.ErrNotFound) {
					mu.Lock()
					retries++
					mu.Unlock()
					continue
				}
				if err != nil {
					errc <- err
					return
				}
				mu.Lock()
				done = append(done, acked{run, a, b})
				junk++
				mu.Unlock()
			}
		}()
	}
	// A reader reads the output of the newest acknowledged run over and
	// over: reads go on while gc runs, and never fail.
	var (
		collecting         atomic.Bool
		reads, readsDuring atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := open()
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			var d acked
			if len(done) > 0 {
				d = done[len(done)-1]
			}
			mu.Unlock()
			if len(d.a) == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			during := collecting.Load()
			got, err := asl.Get(ctx, c, d.run.OutputRefs[0], 0)
			if err != nil || !bytes.Equal(got.Bytes, append(append([]byte{}, d.a...), d.b...)) {
				errc <- fmt.Errorf("reading the output of an acknowledged run: %v", err)
				return
			}
			reads.Add(1)
			if during && collecting.Load() {
				readsDuring.Add(1)
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(done) }
	// Collect while they work: each round starts once both clients made
	// progress since the last.
	type gcOut struct {
		Deleted        int64 `json:"deleted"`
		KeptConcurrent int64 `json:"kept_concurrent"`
	}
	var deleted, kept int64
	rounds := 6
	c := &cli{t: t, cwd: work, store: dir}
	for round := 0; round < rounds; round++ {
		for before := count(); count() < before+4; {
			select {
			case err := <-errc:
				t.Fatalf("client: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		var rep gcOut
		collecting.Store(true)
		out := c.must(0, "--store", srv.url, "--json", "gc").stdout
		collecting.Store(false)
		looseJSON(t, out, &rep)
		deleted += rep.Deleted
		kept += rep.KeptConcurrent
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatalf("client: %v", err)
	default:
	}
	var last gcOut
	looseJSON(t, c.must(0, "--store", srv.url, "--json", "gc").stdout, &last)
	deleted += last.Deleted

	// Every acknowledged run: result, trace, output and inputs present, the
	// output's bytes the concatenation.
	lost, checked := 0, 0
	for _, d := range done {
		refs := []asl.Reference{d.run.ResultRef, d.run.TraceRef, d.run.OutputRefs[0],
			asl.MustDerive(asl.HashSHA256, asl.Untagged(d.a)), asl.MustDerive(asl.HashSHA256, asl.Untagged(d.b))}
		missing, err := admin.Missing(ctx, refs)
		if err != nil {
			t.Fatal(err)
		}
		checked += len(refs)
		lost += len(missing)
		got, err := asl.Get(ctx, admin, d.run.OutputRefs[0], 0)
		if len(missing) == 0 && (err != nil || !bytes.Equal(got.Bytes, append(append([]byte{}, d.a...), d.b...))) {
			t.Errorf("output of %s: %v", d.run.ResultRef, err)
		}
	}
	// The junk is gone: everything stored is reached from a pin.
	var stored int
	if err := admin.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { stored++; return nil }); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d gc rounds while 2 clients worked: %d runs acknowledged (%d pinned or reachable artifacts checked), %d lost; %d attempts retried; gc deleted %d artifacts, kept %d put or read while it ran; %d stored at the end; %d reads by a third client, %d of them while a gc command ran, 0 failed",
		rounds+1, len(done), checked, lost, retries, deleted, kept, stored, reads.Load(), readsDuring.Load())
	if lost > 0 {
		t.Fatalf("%d acknowledged artifacts lost", lost)
	}
	if deleted < int64(junk) {
		t.Errorf("gc deleted %d artifacts, fewer than the %d junk artifacts put", deleted, junk)
	}
	srv.stop(t)
}

// metricValue reads one series of /metrics (0 when absent).
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// TestServeMaxSize fills a server started with --max-size past its bound:
// the least recently used unpinned artifacts are evicted (counted in
// /metrics), and the pinned run, with everything it reaches, survives.
func TestServeMaxSize(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.initStore()
	const max = 64 << 10
	srv := launchServeArgs(t, c.store, filepath.Join(c.cwd, "serve.log"), "--max-size", "64K")
	prog := strings.TrimSpace(c.must(0, "--store", srv.url, "pel", "seed", "concat").stdout)
	a := strings.TrimSpace(c.must(0, "--store", srv.url, "put", c.write("a", bytes.Repeat([]byte("a"), 5000))).stdout)
	b := strings.TrimSpace(c.must(0, "--store", srv.url, "put", c.write("b", bytes.Repeat([]byte("b"), 5000))).stdout)
	var run struct {
		ResultRef  string   `json:"result_ref"`
		TraceRef   string   `json:"trace_ref"`
		OutputRefs []string `json:"output_refs"`
	}
	looseJSON(t, c.must(0, "--store", srv.url, "--json", "pel", "run", "--program", prog, "--input", a, "--input", b).stdout, &run)
	c.must(0, "--store", srv.url, "pin", "add", "kept", run.ResultRef)

	// 100 artifacts of 2000 incompressible bytes: three times the bound.
	ctx := context.Background()
	cl, err := httpstore.Open(ctx, srv.url, httpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 100; i++ {
		buf := killBytes(uint64(i), 2000)
		if _, err := asl.PutArtifact(ctx, cl, asl.HashSHA256, asl.Untagged(buf)); err != nil {
			t.Fatal(err)
		}
	}
	// Eviction runs in the background after the put that passes the
	// bound: wait for the gauge to come back under it.
	deadline := time.Now().Add(2 * time.Minute)
	for metricValue(t, srv.url, "amduat_store_size_bytes") > max || metricValue(t, srv.url, "amduat_store_evicted_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no eviction within 2 minutes: size %v, evicted %v", metricValue(t, srv.url, "amduat_store_size_bytes"), metricValue(t, srv.url, "amduat_store_evicted_total"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	evicted := metricValue(t, srv.url, "amduat_store_evicted_total")
	evictedBytes := metricValue(t, srv.url, "amduat_store_evicted_bytes_total")
	c.must(0, "--store", srv.url, "has", run.ResultRef, run.TraceRef, run.OutputRefs[0], prog, a, b)
	if got := c.must(0, "--store", srv.url, "get", run.OutputRefs[0]).stdout; got != strings.Repeat("a", 5000)+strings.Repeat("b", 5000) {
		t.Fatalf("the pinned run's output: %d bytes", len(got))
	}
	t.Logf("bound %d: evicted %v artifacts (%v bytes); size now %v; the pinned run and its closure kept", max, evicted, evictedBytes, metricValue(t, srv.url, "amduat_store_size_bytes"))
	if evicted < 50 {
		t.Errorf("evicted %v artifacts of 100 × 2000 bytes under a 64 KiB bound", evicted)
	}
	srv.stop(t)
}

// looseJSON decodes the one line stdout holds into the fields of v that
// the test reads.
func looseJSON(t *testing.T, stdout string, v any) {
	t.Helper()
	if strings.Count(stdout, "\n") != 1 || json.Unmarshal([]byte(stdout), v) != nil {
		t.Fatalf("stdout %q: want one JSON line", stdout)
	}
}
