package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
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
