package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/internal/fileserver"
)

// BenchmarkMissing1000 measures POST /v1/artifacts/missing for 1,000
// absent references, the probe a client batch put makes first.
func BenchmarkMissing1000(b *testing.B) {
	s, _, _ := newTestServer(b, Config{})
	refs := make([]asl.Reference, 1000)
	for i := range refs {
		refs[i] = asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte(fmt.Sprint("absent ", i))))
	}
	body, _ := json.Marshal(httpstore.RefsBody{Refs: refs})
	h := s.Handler()
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest(http.MethodPost, "/v1/artifacts/missing", bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkClientPutBatch1000 puts fresh batches of 1,000 1 KiB artifacts
// through the HTTP client over loopback, as `amduat put` of many files does.
func BenchmarkClientPutBatch1000(b *testing.B) {
	_, ts, _ := newTestServer(b, Config{})
	c, err := httpstore.Open(b.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	seq := 0
	arts := make([]asl.Artifact, 1000)
	b.ResetTimer()
	for range b.N {
		freshBatch(arts, &seq)
		if _, err := c.PutBatch(b.Context(), asl.HashSHA256, arts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmbeddedPutBatch1000 is the baseline of
// BenchmarkClientPutBatch1000: the same batches straight into the store.
func BenchmarkEmbeddedPutBatch1000(b *testing.B) {
	_, _, st := newTestServer(b, Config{})
	seq := 0
	arts := make([]asl.Artifact, 1000)
	b.ResetTimer()
	for range b.N {
		freshBatch(arts, &seq)
		if _, err := st.PutBatch(b.Context(), asl.HashSHA256, arts); err != nil {
			b.Fatal(err)
		}
	}
}

// freshBatch fills arts with 1 KiB artifacts not made before (seq counts).
func freshBatch(arts []asl.Artifact, seq *int) {
	for i := range arts {
		p := make([]byte, 1024)
		copy(p, fmt.Sprint("artifact ", *seq))
		*seq++
		arts[i] = asl.Untagged(p)
	}
}

// largeGetSize is the artifact BenchmarkClientFetchLarge and
// BenchmarkEmbeddedFetchLarge read (the bench's large-get row reads 1 GiB).
const largeGetSize = 64 << 20

// putLargeRandom stores largeGetSize seeded random bytes in st.
func putLargeRandom(b *testing.B, st asl.Store) asl.Reference {
	b.Helper()
	p := make([]byte, largeGetSize)
	rand.NewChaCha8([32]byte{1}).Read(p)
	ref, err := st.Put(b.Context(), asl.HashSHA256, asl.Header{Size: uint64(len(p))}, bytes.NewReader(p))
	if err != nil {
		b.Fatal(err)
	}
	return ref
}

// fetchToEOF reads ref to EOF as the bench's large-get row does (io.Copy
// to io.Discard).
func fetchToEOF(b *testing.B, f asl.Fetcher, ref asl.Reference) {
	rc, _, err := f.Fetch(b.Context(), ref)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil || n != largeGetSize {
		b.Fatal(n, err)
	}
}

// BenchmarkClientFetchLarge reads a 64 MiB artifact through the HTTP
// client over loopback: the server verifies as it sends, the client as it
// receives.
func BenchmarkClientFetchLarge(b *testing.B) {
	_, ts, st := newTestServer(b, Config{})
	ref := putLargeRandom(b, st)
	c, err := httpstore.Open(b.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(largeGetSize)
	b.ResetTimer()
	for range b.N {
		fetchToEOF(b, c, ref)
	}
}

// BenchmarkEmbeddedFetchLarge is the baseline of BenchmarkClientFetchLarge.
func BenchmarkEmbeddedFetchLarge(b *testing.B) {
	_, _, st := newTestServer(b, Config{})
	ref := putLargeRandom(b, st)
	b.SetBytes(largeGetSize)
	b.ResetTimer()
	for range b.N {
		fetchToEOF(b, st, ref)
	}
}

// BenchmarkGetSmall GETs 1 KiB artifacts one at a time over loopback
// from the server (GET /v1/artifacts/REF) and, as the bench's
// server/get-vs-files rows do, from a standard-library file server
// (http.ServeContent) holding the same bytes as files; the client reads
// each body to EOF.
func BenchmarkGetSmall(b *testing.B) {
	_, ts, st := newTestServer(b, Config{})
	dir := b.TempDir()
	refs := putGetSet(b, st, func(ref asl.Reference, a asl.Artifact) {
		if err := os.WriteFile(filepath.Join(dir, ref.String()), a.Bytes, 0o644); err != nil {
			b.Fatal(err)
		}
	})
	n := len(refs)
	order := rand.New(rand.NewPCG(3, 4)).Perm(n)
	fs := httptest.NewServer(fileserver.Handler(dir))
	defer fs.Close()
	for _, c := range []int{1, 16} {
		for _, side := range []struct{ name, prefix string }{{"files", fs.URL + "/f/"}, {"server", ts.URL + httpstore.PathArtifact}} {
			b.Run(fmt.Sprintf("c%d/%s", c, side.name), func(b *testing.B) {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.MaxIdleConnsPerHost = 64
				defer tr.CloseIdleConnections()
				cl := &http.Client{Transport: tr}
				urls := make([]string, n)
				for i, ref := range refs {
					urls[order[i]] = side.prefix + ref.String()
				}
				var next atomic.Int64
				b.SetParallelism((c + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, 32<<10)
					for pb.Next() {
						resp, err := cl.Get(urls[next.Add(1)%int64(n)])
						if err != nil {
							b.Error(err)
							return
						}
						m, err := io.CopyBuffer(io.Discard, resp.Body, buf)
						resp.Body.Close()
						if err != nil || m != 1024 || resp.StatusCode != 200 {
							b.Error(resp.Status, m, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkGetHandler is the server's own work of a GET of a 1 KiB
// artifact, without the network: the root handler called directly, the
// 100,000 artifacts put as for BenchmarkGetSmall, read in a shuffled order.
func BenchmarkGetHandler(b *testing.B) {
	s, _, st := newTestServer(b, Config{})
	var paths []string
	putGetSet(b, st, func(ref asl.Reference, _ asl.Artifact) { paths = append(paths, httpstore.PathArtifact+ref.String()) })
	n := len(paths)
	order := rand.New(rand.NewPCG(3, 4)).Perm(n)
	h := s.Handler()
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := httptest.NewRequest(http.MethodGet, paths[order[i%n]], nil)
		clear(w.h)
		w.code, w.n = 0, 0
		h.ServeHTTP(w, r)
		if w.code != 200 || w.n != 1024 {
			b.Fatal(w.code, w.n)
		}
	}
}

// putGetSet puts the artifacts the GET benchmarks read: as many as the
// bench's server rows read (100,000 of 1 KiB, random), in batches of 1,000
// as they are put there, so that the index lookups go through a realistic
// LSM. each is called with every artifact and its reference, in order.
func putGetSet(b *testing.B, st *pebblestore.Store, each func(asl.Reference, asl.Artifact)) []asl.Reference {
	b.Helper()
	const n, batch = 100_000, 1000
	refs := make([]asl.Reference, 0, n)
	rng := rand.NewChaCha8([32]byte{2})
	arts := make([]asl.Artifact, batch)
	for len(refs) < n {
		for i := range arts {
			p := make([]byte, 1024)
			rng.Read(p)
			arts[i] = asl.Untagged(p)
		}
		got, err := st.PutBatch(b.Context(), asl.HashSHA256, arts)
		if err != nil {
			b.Fatal(err)
		}
		for i, ref := range got {
			each(ref, arts[i])
		}
		refs = append(refs, got...)
	}
	return refs
}

// discardWriter is a ResponseWriter that keeps the status and counts the
// body.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	w.n += len(p)
	return len(p), nil
}
