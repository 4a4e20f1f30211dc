package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/amduat/amduat/asl"
)

// TestArtifactRouteAgreesWithMux: the requests artifactRoute takes past
// the mux are those the mux routes to the same pattern with the same
// {ref}; the others it leaves to the mux.
func TestArtifactRouteAgreesWithMux(t *testing.T) {
	s, _, _ := newTestServer(t, Config{})
	ref := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("x"))).String()
	for _, tc := range []struct {
		method, target string
		fast           bool
	}{
		{"GET", "/v1/artifacts/" + ref, true},
		{"HEAD", "/v1/artifacts/" + ref, true},
		{"GET", "/v1/artifacts/" + ref + "?format=info", true},
		{"GET", "/v1/artifacts/0001", true},
		{"GET", "/v1/artifacts/abc", true}, // odd length: the handler's 400
		{"GET", "/v1/artifacts/" + ref + "/", false},
		{"GET", "/v1/artifacts/" + ref + "/x", false},
		{"GET", "/v1/artifacts/", false},
		{"GET", "/v1/artifacts", false},
		{"GET", "/v1/artifacts/missing", false},
		{"GET", "/v1/artifacts/ABCD", false},
		{"GET", "/v1/artifacts/%61bcd", false},
		{"GET", "/v1//artifacts/" + ref, false},
		{"GET", "/v1/artifacts/../artifacts/" + ref, false},
		{"GET", "/v2/artifacts/" + ref, false},
		{"POST", "/v1/artifacts/" + ref, false},
		{"PUT", "/v1/artifacts/" + ref, false},
		{"DELETE", "/v1/artifacts/" + ref, false},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		h, pattern, got := s.artifactRoute(r)
		if (h != nil) != tc.fast {
			t.Errorf("%s %s: taken past the mux: %v, want %v", tc.method, tc.target, h != nil, tc.fast)
			continue
		}
		if h == nil {
			continue
		}
		// What the mux would have done with the same request.
		mr := httptest.NewRequest(tc.method, tc.target, nil)
		var muxRef, muxPattern string
		mux := http.NewServeMux()
		for _, p := range []string{patternGetRef, patternHeadRef} {
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { muxRef, muxPattern = r.PathValue("ref"), r.Pattern })
		}
		if _, p := s.mux.Handler(mr); p != pattern {
			t.Errorf("%s %s: server mux pattern %q, artifactRoute %q", tc.method, tc.target, p, pattern)
		}
		mux.ServeHTTP(httptest.NewRecorder(), mr)
		if muxPattern != pattern || muxRef != got {
			t.Errorf("%s %s: mux gives %q {ref}=%q, artifactRoute %q {ref}=%q", tc.method, tc.target, muxPattern, muxRef, pattern, got)
		}
	}
}

// TestArtifactRouteServes: a GET and a HEAD taken past the mux reach the
// handler with the pattern and {ref} set, and count in the metrics under
// the route's pattern.
func TestArtifactRouteServes(t *testing.T) {
	_, ts, st := newTestServer(t, Config{})
	ref, err := asl.PutArtifact(t.Context(), st, asl.HashSHA256, asl.Untagged([]byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []call{{method: "GET", path: "/v1/artifacts/" + ref.String()}, {method: "HEAD", path: "/v1/artifacts/" + ref.String()}} {
		rep := do(t, ts, c)
		if rep.status != 200 || rep.header.Get("Content-Length") != "5" {
			t.Fatalf("%s: %d %v", c.method, rep.status, rep.header)
		}
		if c.method == "GET" && string(rep.body) != "hello" {
			t.Fatalf("GET: body %q", rep.body)
		}
	}
	m := do(t, ts, call{method: "GET", path: "/metrics"})
	for _, want := range []string{
		`amduat_http_requests_total{code="200",method="GET",route="GET /v1/artifacts/{ref}"} 1`,
		`amduat_http_requests_total{code="200",method="HEAD",route="HEAD /v1/artifacts/{ref}"} 1`,
	} {
		if !bytes.Contains(m.body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
