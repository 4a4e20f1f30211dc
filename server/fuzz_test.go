package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
)

// FuzzRequest sends arbitrary methods, paths, headers and bodies through
// the whole handler: whatever arrives, the answer is a status below 500
// (the store is healthy) with a JSON error body when it is an error, and
// never a panic.
func FuzzRequest(f *testing.F) {
	ref := helloRef.String()
	var frames []byte
	frames = httpstore.AppendFrame(frames, asl.Tagged(5, []byte("x")))
	for _, seed := range []struct {
		method, path, header string
		body                 []byte
	}{
		{"POST", "/v1/artifacts", "0x101", []byte("hello")},
		{"POST", "/v1/artifacts?hash=blake3", "", nil},
		{"POST", "/v1/artifacts/batch", "", frames},
		{"POST", "/v1/artifacts/batch", "", []byte{0xff, 0xff, 0xff, 0xff, 1}},
		{"POST", "/v1/artifacts/missing", "", []byte(`{"refs":["` + ref + `"]}`)},
		{"POST", "/v1/artifacts/batch-read", "", []byte(`{"refs":["` + ref + `","0001"]}`)},
		{"POST", "/v1/pel/run", "", []byte(`{"program_ref":"` + ref + `","input_refs":[]}`)},
		{"POST", "/v1/pel/programs", "", []byte(`{"nodes":[],"roots":[]}`)},
		{"POST", "/v1/pel/verify", "", []byte(`{"result_ref":"` + ref + `"}`)},
		{"GET", "/v1/artifacts/" + ref, "bytes=1-2", nil},
		{"GET", "/v1/artifacts/" + ref + "?format=artifact", "bytes=-9", nil},
		{"GET", "/v1/artifacts?after=" + ref + "&limit=3", "", nil},
		{"GET", "/v1/index/tgk.from?prefix=00&after=0011&limit=2", "", nil},
		{"GET", "/v1/pel/show/" + ref, "", nil},
		{"GET", "/v1/prov/why/" + ref + "?depth=2", "", nil},
		{"HEAD", "/v1/artifacts/0001", "", nil},
	} {
		f.Add(seed.method, seed.path, seed.header, seed.body)
	}
	st, err := pebblestore.Create(filepath.Join(f.TempDir(), "store"), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	s, err := New(Config{Store: st, Limits: Limits{MaxArtifactBytes: 1 << 16, MaxBatchBytes: 1 << 16, MaxJSONBytes: 1 << 16}})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, path, header string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://amduat.test"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set(httpstore.HeaderTypeTag, header)
		req.Header.Set("Range", header)
		req.Header.Set(httpstore.HeaderExpectRef, header)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 && w.Code != http.StatusNotImplemented {
			t.Fatalf("%s %s (header %q, %d body bytes): status %d: %s", method, path, header, len(body), w.Code, w.Body.Bytes())
		}
		if w.Code >= 400 && method != http.MethodHead && !bytes.HasPrefix(w.Body.Bytes(), []byte(`{"error":`)) {
			t.Fatalf("%s %s: status %d without an error body: %q", method, path, w.Code, w.Body.Bytes())
		}
	})
}

// FuzzParseRange checks parseRange's contract: a partial range lies inside
// the artifact, and a whole answer covers it all.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=5-", "bytes=-3", "bytes=3-1", "bytes=0-1,2-3", "items=1-2", "bytes=-0", "bytes=99999999999999999999-"} {
		f.Add(s, uint64(10))
	}
	f.Fuzz(func(t *testing.T, v string, size uint64) {
		size %= 1 << 40
		start, n, partial, err := parseRange(v, size)
		switch {
		case err != nil:
			if partial {
				t.Fatal("error with partial")
			}
		case partial:
			if start < 0 || n <= 0 || uint64(start)+uint64(n) > size {
				t.Fatalf("range %q of %d: start %d n %d", v, size, start, n)
			}
		default:
			if start != 0 || uint64(n) != size {
				t.Fatalf("whole %q of %d: start %d n %d", v, size, start, n)
			}
		}
	})
}
