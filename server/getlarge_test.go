package server

import (
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestGetLarge: a chunked artifact is served whole (its chunks written
// where they lie, SPECS.md §18.4) and by ranges that end at its last byte
// or before; when a chunk in the middle of its pack is damaged, the
// response stops before that chunk and everything sent is a prefix of the
// true bytes.
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
	get := func(rng string) (*http.Response, []byte, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
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
	resp, b, err := get("")
	if err == nil || resp.StatusCode != http.StatusOK || len(b) >= n || !bytes.Equal(b, p[:len(b)]) {
		t.Fatalf("GET of a damaged artifact = %d, %d bytes (a prefix: %v), %v; want a body cut short with only true bytes", resp.StatusCode, len(b), bytes.Equal(b, p[:len(b)]), err)
	}
}
