package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/s3store"
	"github.com/amduat/amduat/asl/s3store/miniotest"
	"github.com/amduat/amduat/report"
	"github.com/minio/minio-go/v7"
)

// TestS3TwoServers: `amduat init` and two `amduat serve` on one bucket
// (SPECS.md §6.7): a put through one is readable through the other and
// through the bucket directly, and a run through one is an action-cache
// hit through the other.
func TestS3TwoServers(t *testing.T) {
	t.Parallel()
	m := startMinio(t)
	url := fmt.Sprintf("s3://amduat/e2e?endpoint=%s&insecure=1&path-style=1", m.Endpoint)

	direct := newCLI(t)
	direct.store = url
	direct.must(7, "get", "0001"+strings.Repeat("ab", 32)) // no store yet: exit 7
	direct.initStore()
	direct.must(7, "init") // exists already
	direct.must(7, "init", "--hash", "blake3")
	one, two := newCLI(t), newCLI(t)
	one.store = serveStore(t, url)
	two.store = serveStore(t, url)

	one.write("f", []byte("through one"))
	ref := strings.Fields(one.must(0, "put", "f").stdout)[0]
	if got := two.must(0, "get", ref).stdout; got != "through one" {
		t.Fatalf("get through two = %q", got)
	}
	if got := direct.must(0, "get", ref).stdout; got != "through one" {
		t.Fatalf("get from the bucket = %q", got)
	}

	prog := strings.TrimSpace(one.must(0, "pel", "seed", "concat").stdout)
	two.write("w", []byte(" world"))
	in := strings.Fields(two.must(0, "put", "w").stdout)[0]
	args := []string{"--json", "pel", "run", "--program", prog, "--input", ref, "--input", in}
	var first, second report.Run
	oneJSON(t, one.must(0, args...).stdout, &first)
	oneJSON(t, two.must(0, args...).stdout, &second)
	if first.Status != "OK" || first.Cache == "hit" {
		t.Fatalf("first run through one = %+v", first)
	}
	if second.Cache != "hit" || second.ResultRef != first.ResultRef {
		t.Fatalf("the same run through two = %+v, want a cache hit of %s", second, first.ResultRef)
	}
	if got := direct.must(0, "get", second.OutputRefs[0].String()).stdout; got != "through one world" {
		t.Fatalf("output = %q", got)
	}
}

// TestCopy: amduat copy between store directories and a bucket: --all,
// REF... and --closure of a run; the copies read back verified and the run
// replays on the copy; a second copy is a no-op that succeeds; usage
// errors.
func TestCopy(t *testing.T) {
	t.Parallel()
	bigBytes := demoBytes("copy big", 3<<20+1)
	src, run, big, unrelated := copySource(t, bigBytes)

	stores := map[string]string{"dir": ""}
	if miniotest.Binary() != "" {
		m := startMinio(t)
		stores["s3"] = fmt.Sprintf("s3://copy/t?endpoint=%s&insecure=1&path-style=1", m.Endpoint)
	} else {
		t.Log(miniotest.SkipMessage)
	}
	for name, mid := range stores {
		t.Run(name, func(t *testing.T) {
			hop := newCLI(t)
			if mid != "" {
				hop.store = mid
			}
			hop.initStore()
			src.must(2, "copy", "--from", src.store, "--to", hop.store)
			src.must(2, "copy", "--from", src.store, "--to", src.store, "--all")
			src.must(3, "copy", "--from", src.store, "--to", hop.store, "0001"+strings.Repeat("ab", 32))
			var res copyResult
			oneJSON(t, src.must(0, "--json", "copy", "--from", src.store, "--to", hop.store, "--all").stdout, &res)
			n := strings.Count(src.must(0, "ls").stdout, "\n")
			if res.Artifacts != uint64(n) || n < 5 {
				t.Fatalf("copy --all = %+v, source lists %d", res, n)
			}
			hop.mustStdout(bigBytes, "get", big) // after the copy
			// Again: nothing is missing, nothing is read or sent.
			var again copyResult
			oneJSON(t, src.must(0, "--json", "copy", "--from", src.store, "--to", hop.store, "--all").stdout, &again)
			if again.Artifacts != 0 || again.Present != uint64(n) {
				t.Fatalf("second copy --all = %+v", again)
			}

			// From the hop, only the run's closure goes on.
			dst := newCLI(t)
			dst.initStore()
			dst.must(0, "copy", "--from", hop.store, "--to", dst.store, "--closure", run.ResultRef.String())
			if got := dst.must(0, "get", run.OutputRefs[0].String()).stdout; !strings.HasPrefix(got, "alpha") {
				t.Fatalf("output after the closure copy = %.20q", got)
			}
			dst.must(0, "pel", "verify", run.ResultRef.String())
			hop.must(0, "has", unrelated)
			dst.must(1, "has", unrelated) // not reached from the result
		})
	}
}

// TestCopyClosureChain: one run's closure moves directory -> server (an
// `amduat serve` over a bucket) -> bucket -> directory with `amduat copy
// --closure`, each hop copying only what the run reaches; at the end the
// run verifies and replays from the last directory, and an artifact the run
// does not reach is in none of the hops. A large input (above the part
// size) takes the manifest path in both bucket stores.
func TestCopyClosureChain(t *testing.T) {
	t.Parallel()
	m := startMinio(t)
	bucket := func(prefix string) string {
		return fmt.Sprintf("s3://chain/%s?endpoint=%s&insecure=1&path-style=1", prefix, m.Endpoint)
	}
	bigBytes := demoBytes("chain big", 17<<20+3)
	src, run, _, unrelated := copySource(t, bigBytes)

	srvBucket := newCLI(t)
	srvBucket.store = bucket("srv")
	srvBucket.initStore()
	server := newCLI(t)
	server.store = serveStore(t, srvBucket.store)
	dstBucket := newCLI(t)
	dstBucket.store = bucket("dst")
	dstBucket.initStore()
	dst := newCLI(t)
	dst.initStore()

	hops := []*cli{src, server, dstBucket, dst}
	for i := range len(hops) - 1 {
		var res copyResult
		oneJSON(t, src.must(0, "--json", "copy", "--from", hops[i].store, "--to", hops[i+1].store, "--closure", run.ResultRef.String()).stdout, &res)
		if res.Artifacts < 5 {
			t.Fatalf("hop %d: copy --closure = %+v", i, res)
		}
		hops[i+1].must(1, "has", unrelated)
		// Again: the destination holds it all already; nothing is read
		// or sent.
		var again copyResult
		oneJSON(t, src.must(0, "--json", "copy", "--from", hops[i].store, "--to", hops[i+1].store, "--closure", run.ResultRef.String()).stdout, &again)
		if again.Artifacts != 0 || again.Present != res.Artifacts {
			t.Errorf("hop %d: second copy --closure = %+v, first %+v", i, again, res)
		}
	}
	want := append([]byte("alpha"), bigBytes...)
	for _, h := range hops[1:] {
		h.mustStdout(want, "get", run.OutputRefs[0].String())
	}
	dst.must(0, "pel", "verify", run.ResultRef.String())
	dst.must(0, "verify")
	dstBucket.must(0, "verify")
}

// TestS3VerifyDamage: `amduat verify` on a bucket goes on past damaged
// objects (one altered, one cut inside its header, a part of a large
// artifact deleted, a stray key) and reports each, exit 4 (SPECS.md §16);
// `verify --repair FILE` and a plain put repair the artifacts; then verify
// is clean.
func TestS3VerifyDamage(t *testing.T) {
	t.Parallel()
	c, st := bucketCLI(t, "verify/v")
	var files []string
	var refs []asl.Reference
	for i, data := range [][]byte{[]byte("one"), []byte("two"), []byte("three"), []byte("four"), demoBytes("verify big", 17<<20)} {
		f := fmt.Sprintf("f%d", i)
		c.write(f, data)
		files = append(files, f)
		ref, err := asl.ParseReference(strings.Fields(c.must(0, "put", f).stdout)[0])
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	ctx := t.Context()
	put := func(key string, b []byte) {
		if _, err := st.Client().PutObject(ctx, st.Bucket(), key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(st.ArtifactKey(refs[0]), asl.EncodeArtifact(asl.Untagged([]byte("onE")))) // altered payload
	put(st.ArtifactKey(refs[1]), []byte{0, 0, 0})                                 // cut inside its header
	stray := st.Prefix() + "a/0001/ab/not-a-reference"                            // a key that is no artifact key
	put(stray, []byte("stray"))
	obj, err := st.Client().GetObject(ctx, st.Bucket(), st.ArtifactKey(refs[4]), minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.HasPrefix(manifest, []byte("amds3mf")) {
		t.Fatalf("the large artifact's object is no manifest: %.8q, %v", manifest, err)
	}
	var d [32]byte
	copy(d[:], manifest[len(manifest)-32:])
	if err := st.Client().RemoveObject(ctx, st.Bucket(), st.PartKey(d), minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	r := c.must(4, "--json", "verify")
	var res verifyResult
	oneJSON(t, r.stdout, &res)
	if res.Corrupt != 4 || res.Checked != 4 || len(res.Damage) != 2 || len(res.Failures) != 2 {
		t.Fatalf("verify = %+v", res)
	}
	for _, want := range []string{refs[0].String(), refs[1].String(), refs[4].String(), stray} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("verify's report does not name %s:\n%s", want, r.stderr)
		}
	}
	// Repair: verify --repair for two, a plain put for the large one.
	out := c.must(0, "verify", "--repair", files[0], files[1], files[2]).stdout
	for i, state := range []string{"repaired", "repaired", "ok"} {
		if want := refs[i].String() + " " + state + " " + files[i]; !strings.Contains(out, want) {
			t.Errorf("verify --repair printed %q, want a line %q", out, want)
		}
	}
	c.must(0, "put", files[4])
	if err := st.Client().RemoveObject(ctx, st.Bucket(), stray, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	oneJSON(t, c.must(0, "--json", "verify").stdout, &res)
	if res.Corrupt != 0 || res.Checked != 5 {
		t.Fatalf("verify after the repairs = %+v", res)
	}
}

// TestS3KilledPut: `amduat put` of a large file killed (SIGKILL) once some
// of its parts are in the bucket leaves no artifact, only parts no manifest
// names; `amduat gc` on the bucket keeps them while they are younger than
// --older-than, then removes exactly them (SPECS.md §6.7, "Leftovers").
//
// The killed put talks to MinIO through a partGate, which stores its first
// part and holds every later write, so the kill falls between a stored
// part and the manifest by construction, not by racing the upload: a
// 20 MiB artifact (two parts: 16 MiB and 4 MiB) is enough, where a
// 160 MiB one used to give the poll time to see a part before the end.
func TestS3KilledPut(t *testing.T) {
	t.Parallel()
	c, st := bucketCLI(t, "killed/k")
	countParts := func() int {
		n := 0
		for o := range st.Client().ListObjects(t.Context(), st.Bucket(), minio.ListObjectsOptions{Prefix: st.Prefix() + "p/", Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			n++
		}
		return n
	}
	kept := demoBytes("kept", 17<<20)
	c.write("kept", kept)
	keptRef := strings.Fields(c.must(0, "put", "kept").stdout)[0]
	named := countParts() // 2

	big := demoBytes("killed", 20<<20)
	c.write("big", big)
	bigRef := asl.MustDerive(asl.HashSHA256, asl.Untagged(big))
	m := startMinio(t)
	gate := newPartGate(t, m.Endpoint, "/"+st.Bucket()+"/"+st.Prefix()+"p/")
	cmd := exec.Command(amduatBin, "put", "big")
	cmd.Dir = c.cwd
	cmd.Env = append(os.Environ(), "AMDUAT_STORE="+strings.Replace(c.store, "endpoint="+m.Endpoint, "endpoint="+gate.endpoint, 1))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-gate.stored:
		cmd.Process.Kill()
		<-exited
	case err := <-exited:
		t.Fatalf("the put ended (%v) before a part of it was stored; stderr: %s", err, stderr.String())
	}
	if ee, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ee.Signaled() {
		t.Fatalf("the put ended before it was killed: %v", cmd.ProcessState)
	}
	gate.close()
	orphans := countParts() - named
	if orphans != 1 {
		t.Fatalf("the killed put left %d parts in the bucket, want the 1 the gate let through", orphans)
	}
	c.must(1, "has", bigRef.String())

	var grep s3store.GCReport
	oneJSON(t, c.must(0, "--json", "gc").stdout, &grep) // default age 24h
	if rep := grep.Sweep; rep.Removed != 0 || rep.Young != orphans || rep.Referenced != named {
		t.Fatalf("gc = %+v", rep)
	}
	oneJSON(t, c.must(0, "--json", "gc", "--older-than", "0s", "--dry-run").stdout, &grep)
	if rep := grep.Sweep; rep.Removed != orphans || countParts() != named+orphans {
		t.Fatalf("gc --dry-run = %+v, %d parts", rep, countParts())
	}
	out := c.must(0, "gc", "--older-than", "0s").stdout
	if want := fmt.Sprintf("swept %d parts", orphans); !strings.Contains(out, "\n"+want) {
		t.Fatalf("gc printed %q, want a line %q...", out, want)
	}
	if n := countParts(); n != named {
		t.Fatalf("%d parts after gc, want %d", n, named)
	}
	c.mustStdout(kept, "get", keptRef) // after gc
	c.must(2, "gc", "--compact-below", "0.3")
	c.must(0, "put", "big") // the put runs again from the start
	c.mustStdout(big, "get", bigRef.String())
}

// partGate is an HTTP proxy in front of MinIO for one killed put: every
// request but a PUT passes; the first PUT of an object under partPath (a
// part) passes and closes stored once MinIO answered it 2xx; every PUT
// after that first one is held, unforwarded, until its client goes away.
// So a put through the gate stores exactly one part and then waits for
// its kill. The proxy keeps the client's Host header, which SigV4 signs.
type partGate struct {
	endpoint string        // host:port of the proxy
	stored   chan struct{} // closed when the first part is in the bucket
	srv      *httptest.Server
}

func newPartGate(t *testing.T, minioEndpoint, partPath string) *partGate {
	t.Helper()
	g := &partGate{stored: make(chan struct{})}
	target := &url.URL{Scheme: "http", Host: minioEndpoint}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}}
	var mu sync.Mutex
	put := false
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		first := !put && strings.HasPrefix(r.URL.Path, partPath)
		held := put
		put = put || first
		mu.Unlock()
		if held {
			// The server notices the client's end only once the body is
			// read; a body cut off by the kill ends the read instead.
			if _, err := io.Copy(io.Discard, r.Body); err == nil {
				<-r.Context().Done()
			}
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		rp.ServeHTTP(sw, r)
		if first && sw.status/100 == 2 {
			close(g.stored)
		}
	}))
	g.endpoint = strings.TrimPrefix(g.srv.URL, "http://")
	t.Cleanup(g.srv.Close)
	return g
}

// close waits until every request through the gate has ended (the held
// ones end with their client).
func (g *partGate) close() { g.srv.Close() }

// statusWriter records the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// TestS3ServeCache: `amduat serve --store s3://… --cache-dir DIR` keeps
// verified copies of what it serves in DIR; the flags are refused without
// a bucket.
func TestS3ServeCache(t *testing.T) {
	t.Parallel()
	m := startMinio(t)
	url := fmt.Sprintf("s3://cache/c?endpoint=%s&insecure=1&path-style=1", m.Endpoint)
	direct := newCLI(t)
	direct.store = url
	direct.initStore()
	direct.write("f", []byte("cached"))
	ref := strings.Fields(direct.must(0, "put", "f").stdout)[0]
	dir := t.TempDir()
	c := newCLI(t)
	c.store = serveStore(t, url, "--cache-dir", dir, "--cache-size", "1M")
	for range 2 {
		if got := c.must(0, "get", ref).stdout; got != "cached" {
			t.Fatalf("get through the caching server = %q", got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ref)); err != nil {
		t.Fatalf("no cache file: %v", err)
	}
	local := newCLI(t)
	local.initStore()
	local.must(2, "serve", "--cache-dir", dir)
	direct.must(2, "serve", "--cache-size", "1M")
}

// bucketCLI starts a MinIO, sets the credentials, and returns a CLI whose
// store is the bucket path bucketPrefix there (initialized), and the same
// store opened directly for tampering.
func bucketCLI(t *testing.T, bucketPrefix string, env ...string) (*cli, *s3store.Store) {
	t.Helper()
	m := startMinio(t)
	c := newCLI(t)
	c.env = env
	c.store = fmt.Sprintf("s3://%s?endpoint=%s&insecure=1&path-style=1", bucketPrefix, m.Endpoint)
	c.initStore()
	st, err := s3store.OpenURL(t.Context(), c.store, false, s3store.Options{AccessKey: m.AccessKey, SecretKey: m.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return c, st
}

// copySource makes a store directory holding a run of concat over "alpha"
// and big, and an artifact the run does not reach.
func copySource(t *testing.T, big []byte) (src *cli, run report.Run, bigRef, unrelated string) {
	t.Helper()
	src = newCLI(t)
	src.initStore()
	src.write("a", []byte("alpha"))
	src.write("big", big)
	a := strings.Fields(src.must(0, "put", "a").stdout)[0]
	bigRef = strings.Fields(src.must(0, "put", "big").stdout)[0]
	src.write("c", []byte("unrelated"))
	unrelated = strings.Fields(src.must(0, "put", "c").stdout)[0]
	prog := strings.TrimSpace(src.must(0, "pel", "seed", "concat").stdout)
	oneJSON(t, src.must(0, "--json", "pel", "run", "--program", prog, "--input", a, "--input", bigRef).stdout, &run)
	return src, run, bigRef, unrelated
}

// startMinio: minio_shared_test.go.
