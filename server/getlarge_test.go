package server

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
)

// TestGetLarge: a chunked artifact is served whole (its chunks written
// where they lie, SPECS.md §18.4), to a client that checks the digest
// itself (X-Amduat-Verify: client) too, and by ranges that end at its last
// byte or before; when a chunk in the middle of its pack is damaged, the
// response stops before that chunk and everything sent is a prefix of the
// true bytes, whether the client checks the digest or not.
func TestGetLarge(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{})
	p := make([]byte, 3<<20+12345)
	rand.NewChaCha8([32]byte{2}).Read(p)
	ref, err := st.Put(t.Context(), asl.HashSHA256, asl.Header{Size: uint64(len(p))}, bytes.NewReader(p))
	if err != nil {
		t.Fatal(err)
	}
	url := ts.URL + "/v1/artifacts/" + ref.String()
	get := func(rng string, clientVerifies ...bool) (*http.Response, []byte, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		if len(clientVerifies) > 0 && clientVerifies[0] {
			req.Header.Set(httpstore.HeaderVerify, httpstore.VerifyClient)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	n := len(p)
	for _, tc := range []struct {
		rng        string
		code       int
		start, end int
	}{
		{"", http.StatusOK, 0, n},
		{"bytes=1000-", http.StatusPartialContent, 1000, n},
		{"bytes=262144-", http.StatusPartialContent, 262144, n},
		{"bytes=" + strconv.Itoa(n-1) + "-", http.StatusPartialContent, n - 1, n},
		{"bytes=5-300000", http.StatusPartialContent, 5, 300001},
	} {
		resp, b, err := get(tc.rng)
		if err != nil || resp.StatusCode != tc.code || !bytes.Equal(b, p[tc.start:tc.end]) {
			t.Errorf("GET Range %q = %d, %d bytes, %v; want %d and bytes %d-%d", tc.rng, resp.StatusCode, len(b), err, tc.code, tc.start, tc.end)
		}
	}

	// A client that checks the digest itself gets the same bytes, kept out
	// of shared caches (the server checked every chunk, not the digest).
	for _, cv := range []bool{false, true} {
		resp, b, err := get("", cv)
		want := "public, max-age=31536000, immutable"
		if cv {
			want = "private, max-age=31536000, immutable"
		}
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, p) || resp.Header.Get("Cache-Control") != want {
			t.Errorf("GET, %s %v: %d, %d bytes, Cache-Control %q, %v; want 200, the %d bytes, %q", httpstore.HeaderVerify, cv, resp.StatusCode, len(b), resp.Header.Get("Cache-Control"), err, n, want)
		}
	}
	c, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := asl.Get(t.Context(), c, ref, 0); err != nil || !bytes.Equal(got.Bytes, p) {
		t.Fatalf("client Get: %d bytes, %v", len(got.Bytes), err)
	}

	// Flip a byte in the middle of the pack that holds the artifact.
	var pack string
	filepath.WalkDir(st.Dir(), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil && fi.Size() > int64(n) {
				pack = path
			}
		}
		return nil
	})
	if pack == "" {
		t.Fatal("no file in the store holds the artifact")
	}
	f, err := os.OpenFile(pack, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	var one [1]byte
	off := fi.Size() / 2
	f.ReadAt(one[:], off)
	one[0] ^= 0x10
	if _, err := f.WriteAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, cv := range []bool{false, true} {
		resp, b, err := get("", cv)
		if err == nil || resp.StatusCode != http.StatusOK || len(b) >= n || !bytes.Equal(b, p[:len(b)]) {
			t.Fatalf("GET of a damaged artifact, %s %v = %d, %d bytes (a prefix: %v), %v; want a body cut short with only true bytes", httpstore.HeaderVerify, cv, resp.StatusCode, len(b), bytes.Equal(b, p[:len(b)]), err)
		}
	}
	if _, err := asl.Get(t.Context(), c, ref, 0); !errors.Is(err, asl.ErrIntegrity) {
		t.Fatalf("client Get of a damaged artifact: %v, want ErrIntegrity", err)
	}
}
