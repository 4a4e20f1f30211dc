package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
)

// newTestServer serves a fresh embedded store.
func newTestServer(t testing.TB, cfg Config) (*Server, *httptest.Server, *pebblestore.Store) {
	t.Helper()
	st, err := pebblestore.Create(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts, st
}

type call struct {
	method, path string
	header       map[string]string
	body         []byte
	chunked      bool // send the body without Content-Length
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func do(t testing.TB, ts *httptest.Server, c call) reply {
	t.Helper()
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
		if c.chunked {
			body = io.MultiReader(body)
		}
	}
	req, err := http.NewRequest(c.method, ts.URL+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", c.method, c.path, err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

func errorCode(t testing.TB, r reply) string {
	t.Helper()
	var e httpstore.ErrorBody
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("status %d: body %q is not an error body {\"error\",\"code\"}", r.status, r.body)
	}
	return e.Code
}

var (
	hello    = []byte("hello")
	helloRef = asl.MustParseReference("00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4")
)

func TestArtifactRoutes(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{Limits: Limits{MaxArtifactBytes: 1 << 20}})
	tagged := asl.Tagged(0x101, []byte("tagged bytes"))
	tagRef := asl.MustDerive(asl.HashSHA256, tagged)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640,000 bytes: several chunks
	bigRef := asl.MustDerive(asl.HashSHA256, asl.Untagged(big))
	b3 := asl.MustDerive(asl.HashBLAKE3, asl.Untagged(hello))

	for _, c := range []struct {
		name   string
		call   call
		status int
		code   string // error code, when an error
		want   []byte // body, when not an error and not JSON-checked
		check  func(t *testing.T, r reply)
	}{
		{name: "put", call: call{method: "POST", path: "/v1/artifacts", body: hello}, status: 200, check: func(t *testing.T, r reply) {
			var p httpstore.PutResponse
			json.Unmarshal(r.body, &p)
			if p.Ref != helloRef || p.Size != 5 {
				t.Fatalf("put = %+v", p)
			}
		}},
		{name: "put tagged", call: call{method: "POST", path: "/v1/artifacts", body: tagged.Bytes, header: map[string]string{httpstore.HeaderTypeTag: "0x101"}}, status: 200, check: func(t *testing.T, r reply) {
			if r.header.Get(httpstore.HeaderRef) != tagRef.String() {
				t.Fatalf("ref header %q, want %s", r.header.Get(httpstore.HeaderRef), tagRef)
			}
		}},
		{name: "put large", call: call{method: "POST", path: "/v1/artifacts", body: big}, status: 200},
		{name: "put blake3", call: call{method: "POST", path: "/v1/artifacts?hash=blake3", body: hello}, status: 200, check: func(t *testing.T, r reply) {
			if !bytes.Contains(r.body, []byte(b3.String())) {
				t.Fatalf("body %s lacks %s", r.body, b3)
			}
		}},
		{name: "put expect ok", call: call{method: "POST", path: "/v1/artifacts", body: hello, header: map[string]string{httpstore.HeaderExpectRef: helloRef.String()}}, status: 200},
		{name: "put expect mismatch", call: call{method: "POST", path: "/v1/artifacts", body: []byte("hellx"), header: map[string]string{httpstore.HeaderExpectRef: helloRef.String()}}, status: 422, code: httpstore.CodeDigestMismatch},
		{name: "put expect malformed", call: call{method: "POST", path: "/v1/artifacts", body: hello, header: map[string]string{httpstore.HeaderExpectRef: "00zz"}}, status: 400, code: httpstore.CodeBadReference},
		{name: "put expect other hash", call: call{method: "POST", path: "/v1/artifacts?hash=blake3", body: hello, header: map[string]string{httpstore.HeaderExpectRef: helloRef.String()}}, status: 400, code: httpstore.CodeBadRequest},
		{name: "put bad tag", call: call{method: "POST", path: "/v1/artifacts", body: hello, header: map[string]string{httpstore.HeaderTypeTag: "257"}}, status: 400, code: httpstore.CodeBadRequest},
		{name: "put unknown hash", call: call{method: "POST", path: "/v1/artifacts?hash=md5", body: hello}, status: 400, code: httpstore.CodeUnsupported},
		{name: "put without length", call: call{method: "POST", path: "/v1/artifacts", body: hello, chunked: true}, status: 411, code: httpstore.CodeLengthRequired},
		{name: "put too large", call: call{method: "POST", path: "/v1/artifacts", body: make([]byte, 1<<20+1)}, status: 413, code: httpstore.CodeTooLarge},
		{name: "get", call: call{method: "GET", path: "/v1/artifacts/" + helloRef.String()}, status: 200, want: hello, check: func(t *testing.T, r reply) {
			if r.header.Get("ETag") != `"`+helloRef.String()+`"` || !strings.Contains(r.header.Get("Cache-Control"), "immutable") {
				t.Fatalf("headers %v", r.header)
			}
		}},
		{name: "get tagged", call: call{method: "GET", path: "/v1/artifacts/" + tagRef.String()}, status: 200, want: tagged.Bytes, check: func(t *testing.T, r reply) {
			if r.header.Get(httpstore.HeaderTypeTag) != "0x00000101" {
				t.Fatalf("type tag header %q", r.header.Get(httpstore.HeaderTypeTag))
			}
		}},
		{name: "get large", call: call{method: "GET", path: "/v1/artifacts/" + bigRef.String()}, status: 200, want: big},
		{name: "get artifact format", call: call{method: "GET", path: "/v1/artifacts/" + tagRef.String() + "?format=artifact"}, status: 200, want: asl.EncodeArtifact(tagged)},
		{name: "get info", call: call{method: "GET", path: "/v1/artifacts/" + tagRef.String() + "?format=info"}, status: 200, check: func(t *testing.T, r reply) {
			var in httpstore.InfoJSON
			json.Unmarshal(r.body, &in)
			if in.Ref != tagRef || in.Size != uint64(len(tagged.Bytes)) || in.TypeTag == nil || *in.TypeTag != 0x101 {
				t.Fatalf("info %+v", in)
			}
		}},
		{name: "get bad format", call: call{method: "GET", path: "/v1/artifacts/" + helloRef.String() + "?format=zip"}, status: 400, code: httpstore.CodeBadRequest},
		{name: "head", call: call{method: "HEAD", path: "/v1/artifacts/" + bigRef.String()}, status: 200, check: func(t *testing.T, r reply) {
			if r.header.Get("Content-Length") != "640000" || len(r.body) != 0 {
				t.Fatalf("HEAD: length %q body %d", r.header.Get("Content-Length"), len(r.body))
			}
		}},
		{name: "range", call: call{method: "GET", path: "/v1/artifacts/" + bigRef.String(), header: map[string]string{"Range": "bytes=300000-300015"}}, status: 206, want: big[300000:300016], check: func(t *testing.T, r reply) {
			if r.header.Get("Content-Range") != "bytes 300000-300015/640000" {
				t.Fatalf("Content-Range %q", r.header.Get("Content-Range"))
			}
		}},
		{name: "range open", call: call{method: "GET", path: "/v1/artifacts/" + bigRef.String(), header: map[string]string{"Range": "bytes=639990-"}}, status: 206, want: big[639990:]},
		{name: "range suffix", call: call{method: "GET", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"Range": "bytes=-3"}}, status: 206, want: []byte("llo")},
		{name: "range past end", call: call{method: "GET", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"Range": "bytes=5-"}}, status: 416, code: httpstore.CodeRangeNotSatisf},
		{name: "range several", call: call{method: "GET", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"Range": "bytes=0-1,3-4"}}, status: 200, want: hello},
		{name: "not modified", call: call{method: "GET", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"If-None-Match": `"` + helloRef.String() + `"`}}, status: 304},
		{name: "get missing", call: call{method: "GET", path: "/v1/artifacts/0001" + strings.Repeat("00", 32)}, status: 404, code: httpstore.CodeNotFound},
		{name: "head missing", call: call{method: "HEAD", path: "/v1/artifacts/0001" + strings.Repeat("00", 32)}, status: 404},
		{name: "get malformed", call: call{method: "GET", path: "/v1/artifacts/0001abc"}, status: 400, code: httpstore.CodeBadReference},
		{name: "get unregistered hash", call: call{method: "GET", path: "/v1/artifacts/7777abcd"}, status: 501, code: httpstore.CodeUnsupported},
		{name: "missing", call: call{method: "POST", path: "/v1/artifacts/missing", body: []byte(`{"refs":["` + helloRef.String() + `","0001` + strings.Repeat("00", 32) + `"]}`)}, status: 200,
			check: func(t *testing.T, r reply) {
				if string(r.body) != `{"missing":["0001`+strings.Repeat("00", 32)+`"]}`+"\n" {
					t.Fatalf("missing = %s", r.body)
				}
			}},
		{name: "missing malformed ref", call: call{method: "POST", path: "/v1/artifacts/missing", body: []byte(`{"refs":["zz"]}`)}, status: 400, code: httpstore.CodeBadReference},
		{name: "missing unknown field", call: call{method: "POST", path: "/v1/artifacts/missing", body: []byte(`{"refs":[],"x":1}`)}, status: 400, code: httpstore.CodeBadRequest},
		{name: "missing trailing", call: call{method: "POST", path: "/v1/artifacts/missing", body: []byte(`{"refs":[]} {}`)}, status: 400, code: httpstore.CodeBadRequest},
		{name: "list", call: call{method: "GET", path: "/v1/artifacts?limit=2"}, status: 200, check: func(t *testing.T, r reply) {
			var l httpstore.ListResponse
			json.Unmarshal(r.body, &l)
			if len(l.Artifacts) != 2 || l.Next == nil || *l.Next != l.Artifacts[1].Ref {
				t.Fatalf("list %s", r.body)
			}
		}},
		{name: "list bad limit", call: call{method: "GET", path: "/v1/artifacts?limit=0"}, status: 400, code: httpstore.CodeBadRequest},
		{name: "no route", call: call{method: "GET", path: "/v2/artifacts"}, status: 404, code: httpstore.CodeNoRoute},
		{name: "wrong method", call: call{method: "DELETE", path: "/v1/artifacts/" + helloRef.String()}, status: 405, code: httpstore.CodeMethod},
		{name: "healthz", call: call{method: "GET", path: "/healthz"}, status: 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, ts, c.call)
			if r.status != c.status {
				t.Fatalf("status %d, want %d; body %s", r.status, c.status, r.body)
			}
			if c.code != "" && c.call.method != "HEAD" {
				if got := errorCode(t, r); got != c.code {
					t.Fatalf("code %q, want %q; body %s", got, c.code, r.body)
				}
			}
			if c.want != nil && !bytes.Equal(r.body, c.want) {
				t.Fatalf("body %d bytes, want %d", len(r.body), len(c.want))
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
	// A refused put stored nothing.
	if ok, _ := asl.Has(context.Background(), st, asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hellx")))); ok {
		t.Fatal("the put refused with digest_mismatch stored its artifact")
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{Limits: Limits{MaxBatchCount: 3, MaxBatchBytes: 1000}})
	arts := []asl.Artifact{asl.Untagged([]byte("a")), asl.Tagged(7, []byte("b")), asl.Untagged(nil)}
	var body []byte
	for _, a := range arts {
		body = httpstore.AppendFrame(body, a)
	}
	r := do(t, ts, call{method: "POST", path: "/v1/artifacts/batch", body: body})
	if r.status != 200 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	var got httpstore.RefsBody
	json.Unmarshal(r.body, &got)
	for i, a := range arts {
		want := asl.MustDerive(asl.HashSHA256, a)
		if got.Refs[i] != want {
			t.Fatalf("ref %d = %s, want %s", i, got.Refs[i], want)
		}
		if ok, _ := asl.Has(context.Background(), st, want); !ok {
			t.Fatalf("artifact %d not stored", i)
		}
	}
	four := httpstore.AppendFrame(body, asl.Untagged([]byte("d")))
	for _, c := range []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"empty", nil, 200, ""},
		{"too many", four, 413, httpstore.CodeTooLarge},
		{"too many bytes", httpstore.AppendFrame(nil, asl.Untagged(make([]byte, 1000))), 413, httpstore.CodeTooLarge},
		{"truncated frame", body[:len(body)-1], 400, httpstore.CodeBadRequest},
		{"short frame_len", []byte{0, 0, 0, 3, 0, 0, 0}, 400, httpstore.CodeBadRequest},
		{"bytes_len disagrees", []byte{0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 400, httpstore.CodeBadRequest},
		{"bad flag", []byte{0, 0, 0, 9, 2, 0, 0, 0, 0, 0, 0, 0, 0}, 400, httpstore.CodeBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, ts, call{method: "POST", path: "/v1/artifacts/batch", body: c.body})
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.code != "" && errorCode(t, r) != c.code {
				t.Fatalf("code of %s", r.body)
			}
		})
	}
}

// runConcat stores the concat seed's inputs and returns a run request body.
func putProgram(t *testing.T, ts *httptest.Server) asl.Reference {
	t.Helper()
	prog := `{"nodes":[{"id":1,"op":"pel.bytes.concat","version":1,"inputs":[{"input":0},{"input":1}]}],"roots":[{"node":1}]}`
	r := do(t, ts, call{method: "POST", path: "/v1/pel/programs", body: []byte(prog)})
	if r.status != 200 {
		t.Fatalf("build: %d %s", r.status, r.body)
	}
	var b report.Build
	json.Unmarshal(r.body, &b)
	if !b.Valid || b.Nodes != 1 {
		t.Fatalf("build %s", r.body)
	}
	return b.Ref
}

func TestPELRoutes(t *testing.T) {
	t.Parallel()
	s, ts, _ := newTestServer(t, Config{Limits: Limits{MaxConcurrentRuns: 1, RunQueueLength: -1}})
	prog := putProgram(t, ts)
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("hello, ")})
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("amduat\n")})
	a := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("hello, ")))
	b := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("amduat\n")))
	body, _ := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: []asl.Reference{a, b}})
	var runs [2]report.Run
	for i := range runs {
		r := do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body})
		if r.status != 200 {
			t.Fatalf("run: %d %s", r.status, r.body)
		}
		json.Unmarshal(r.body, &runs[i])
	}
	if runs[0].Status != "OK" || runs[0].Cache != report.CacheMiss || runs[1].Cache != report.CacheHit ||
		runs[0].ResultRef != runs[1].ResultRef || len(runs[0].OutputRefs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	out := do(t, ts, call{method: "GET", path: "/v1/artifacts/" + runs[0].OutputRefs[0].String()})
	if string(out.body) != "hello, amduat\n" {
		t.Fatalf("output %q", out.body)
	}
	// A failing run is a 200 with its status: the run is recorded.
	bad, _ := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: []asl.Reference{a}})
	r := do(t, ts, call{method: "POST", path: "/v1/pel/run", body: bad})
	var failed report.Run
	json.Unmarshal(r.body, &failed)
	if r.status != 200 || failed.Status != pel.StatusInvalidInputs.String() {
		t.Fatalf("failing run: %d %s", r.status, r.body)
	}

	vbody, _ := json.Marshal(report.VerifyRequest{ResultRef: runs[0].ResultRef})
	r = do(t, ts, call{method: "POST", path: "/v1/pel/verify", body: vbody})
	var v report.Verification
	json.Unmarshal(r.body, &v)
	if r.status != 200 || !v.Verified || v.TraceRef == nil || *v.TraceRef != runs[0].TraceRef {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "GET", path: "/v1/pel/show/" + runs[0].ResultRef.String()})
	var shown report.Result
	json.Unmarshal(r.body, &shown)
	if r.status != 200 || shown.Type != "result" || shown.TraceRef == nil || *shown.TraceRef != runs[0].TraceRef {
		t.Fatalf("show: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "GET", path: "/v1/prov/why/" + runs[0].OutputRefs[0].String()})
	var g report.Graph
	json.Unmarshal(r.body, &g)
	if r.status != 200 || len(g.Edges) != 1 || g.Edges[0].Ref != runs[0].EdgeRef {
		t.Fatalf("why: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "GET", path: "/v1/prov/uses/" + a.String() + "?depth=1"})
	if r.status != 200 || !bytes.Contains(r.body, []byte(runs[0].EdgeRef.String())) {
		t.Fatalf("uses: %d %s", r.status, r.body)
	}
	// The index routes serve what the run recorded.
	r = do(t, ts, call{method: "GET", path: httpstore.IndexKeyPath("surf.trace", runs[0].ResultRef.Bytes())})
	if r.status != 200 || !bytes.Contains(r.body, []byte(hex.EncodeToString(runs[0].TraceRef.Bytes()))) {
		t.Fatalf("index lookup: %d %s", r.status, r.body)
	}
	r = do(t, ts, call{method: "GET", path: "/v1/index/tgk.from?prefix=" + hex.EncodeToString(asl.AppendEncodedRef(nil, a))})
	var scan httpstore.IndexScan
	json.Unmarshal(r.body, &scan)
	if r.status != 200 || len(scan.Entries) != 2 { // the OK run and the failing one both read a
		t.Fatalf("index scan: %d %s", r.status, r.body)
	}

	for _, c := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"run no program", "POST", "/v1/pel/run", `{}`, 400, httpstore.CodeBadRequest},
		{"run bad json", "POST", "/v1/pel/run", `{"program_ref":`, 400, httpstore.CodeBadRequest},
		{"run bad ref", "POST", "/v1/pel/run", `{"program_ref":"xyz"}`, 400, httpstore.CodeBadReference},
		{"run unknown field", "POST", "/v1/pel/run", `{"program_ref":"` + prog.String() + `","nope":1}`, 400, httpstore.CodeBadRequest},
		{"run bad hash", "POST", "/v1/pel/run", `{"program_ref":"` + prog.String() + `","hash":"md5"}`, 400, httpstore.CodeUnsupported},
		{"run negative timeout", "POST", "/v1/pel/run", `{"program_ref":"` + prog.String() + `","timeout_ms":-1}`, 400, httpstore.CodeBadRequest},
		{"build bad json", "POST", "/v1/pel/programs", `{"nodes":[{"id":1}]`, 400, httpstore.CodeBadRequest},
		{"show not pel", "GET", "/v1/pel/show/" + a.String(), "", 422, httpstore.CodeBadRequest},
		{"show missing", "GET", "/v1/pel/show/0001" + strings.Repeat("11", 32), "", 404, httpstore.CodeNotFound},
		{"verify not a result", "POST", "/v1/pel/verify", `{"result_ref":"` + a.String() + `"}`, 422, httpstore.CodeBadRequest},
		{"why bad depth", "GET", "/v1/prov/why/" + a.String() + "?depth=-1", "", 400, httpstore.CodeBadRequest},
		{"index bad space", "GET", "/v1/index/Bad%20Space", "", 400, httpstore.CodeBadRequest},
		{"index bad key", "GET", "/v1/index/surf.trace/zz", "", 400, httpstore.CodeBadRequest},
		{"index absent", "GET", "/v1/index/surf.trace/00", "", 404, httpstore.CodeNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b []byte
			if c.body != "" {
				b = []byte(c.body)
			}
			r := do(t, ts, call{method: c.method, path: c.path, body: b})
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if got := errorCode(t, r); got != c.code {
				t.Fatalf("code %q, want %q: %s", got, c.code, r.body)
			}
		})
	}

	// Every run slot busy and no queue (RunQueueLength -1): 429 with
	// Retry-After at once (runqueue_test.go tests the queue).
	release, _, err := s.runs.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r = do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body})
	release()
	if r.status != 429 || r.header.Get("Retry-After") == "" || errorCode(t, r) != httpstore.CodeTooManyRequests {
		t.Fatalf("busy: %d %v %s", r.status, r.header, r.body)
	}

	m := do(t, ts, call{method: "GET", path: "/metrics"})
	for _, want := range []string{`amduat_runs_total{status="OK"} 2`, `amduat_run_cache_total{result="hit"} 1`,
		`amduat_http_requests_total{code="200",method="POST",route="POST /v1/pel/run"}`, "amduat_http_request_duration_seconds_bucket", "amduat_store_puts_total",
		`amduat_run_queue_refused_total{reason="full"} 1`, "amduat_run_queue_length 0", "amduat_run_queue_capacity 0", "amduat_run_queue_wait_seconds_bucket"} {
		if !bytes.Contains(m.body, []byte(want)) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.json")
	reader, err := AddToken(file, "reader", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := AddToken(file, "writer", []string{"read", "write"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddToken(file, "reader", []string{"read"}); err == nil {
		t.Fatal("a second token named reader was added")
	}
	auth, err := LoadAuth(file)
	if err != nil {
		t.Fatal(err)
	}
	_, ts, _ := newTestServer(t, Config{Auth: auth})
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	put := call{method: "POST", path: "/v1/artifacts", body: hello}
	get := call{method: "GET", path: "/v1/artifacts/" + helloRef.String()}
	for _, c := range []struct {
		name   string
		call   call
		header map[string]string
		status int
	}{
		{"put without token", put, nil, 401},
		{"put wrong token", put, bearer("amduat_wrong"), 401},
		{"put not bearer", put, map[string]string{"Authorization": "Basic " + writer}, 401},
		{"put read scope", put, bearer(reader), 403},
		{"put write scope", put, bearer(writer), 200},
		{"get without token", get, nil, 401},
		{"get read scope", get, bearer(reader), 200},
		{"run without run scope", call{method: "POST", path: "/v1/pel/run", body: []byte(`{}`)}, bearer(writer), 403},
		{"metrics without token", call{method: "GET", path: "/metrics"}, nil, 401},
		{"healthz open", call{method: "GET", path: "/healthz"}, nil, 200},
		{"meta open", call{method: "GET", path: "/v1/meta"}, nil, 200},
		{"meta wrong token", call{method: "GET", path: "/v1/meta"}, bearer("nope"), 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.call.header = c.header
			r := do(t, ts, c.call)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if c.status >= 400 {
				errorCode(t, r)
			}
		})
	}
	r := do(t, ts, call{method: "GET", path: "/v1/meta", header: bearer(writer)})
	var m httpstore.Meta
	json.Unmarshal(r.body, &m)
	if strings.Join(m.Scopes, ",") != "read,write" || m.DefaultHash != "sha256" || m.API != httpstore.APIName {
		t.Fatalf("meta %s", r.body)
	}
	list, err := ListTokens(file)
	if err != nil || len(list) != 2 || strings.Contains(string(mustRead(t, file)), reader) {
		t.Fatalf("token file lists %v (%v) or holds a token's text", list, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWebView(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{})
	prog := putProgram(t, ts)
	r := do(t, ts, call{method: "GET", path: "/"})
	if r.status != 200 || !bytes.Contains(r.body, []byte("<form")) {
		t.Fatalf("/ (redirected to /ui/): %d %.200s", r.status, r.body)
	}
	r = do(t, ts, call{method: "GET", path: "/ui/a/" + prog.String()})
	if r.status != 200 || !bytes.Contains(r.body, []byte("pel.bytes.concat")) || !bytes.Contains(r.body, []byte("/v1/artifacts/"+prog.String())) {
		t.Fatalf("program page: %d %.300s", r.status, r.body)
	}
}

func TestBatchRead(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{Limits: Limits{MaxBatchBytes: 3000}})
	c, err := httpstore.Open(t.Context(), ts.URL, httpstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	small := asl.Tagged(9, []byte("small"))
	big := asl.Untagged(bytes.Repeat([]byte("b"), 2000))
	big2 := asl.Untagged(bytes.Repeat([]byte("c"), 2000)) // past the 3000-byte budget after big
	damaged := asl.Untagged([]byte("to be damaged"))
	refs, err := c.PutBatch(t.Context(), asl.HashSHA256, []asl.Artifact{small, big, big2, damaged})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Corrupt(refs[3], []byte("to be damagex")) {
		t.Fatal("Corrupt found nothing")
	}
	absent := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent")))
	ask := []asl.Reference{refs[0], absent, refs[1], refs[2], refs[3], refs[0], {}}
	var got []string
	err = c.GetBatch(t.Context(), ask, 0, func(i int, a asl.Artifact, err error) error {
		switch {
		case errors.Is(err, asl.ErrNotFound):
			got = append(got, "missing")
		case errors.Is(err, asl.ErrIntegrity):
			got = append(got, "damaged")
		case err != nil:
			got = append(got, err.Error())
		default:
			if asl.MustDerive(asl.HashSHA256, a) != ask[i] {
				t.Fatalf("entry %d: wrong artifact", i)
			}
			got = append(got, fmt.Sprint(len(a.Bytes)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// big2 passes the answer's budget and is fetched alone; the zero
	// reference is refused before asking.
	if want := "5 missing 2000 2000 damaged 5 damaged"; strings.Join(got, " ") != want {
		t.Fatalf("GetBatch = %q, want %q", strings.Join(got, " "), want)
	}
	// The generic helper gives the same answers on the embedded store.
	var direct []string
	asl.GetBatch(t.Context(), st, ask[:6], 0, func(i int, a asl.Artifact, err error) error {
		direct = append(direct, fmt.Sprint(len(a.Bytes), err == nil))
		return nil
	})
	if strings.Join(direct, " ") != "5 true 0 false 2000 true 2000 true 0 false 5 true" {
		t.Fatalf("asl.GetBatch on the store = %q", direct)
	}
	r := do(t, ts, call{method: "POST", path: "/v1/artifacts/batch-read", body: []byte(`{"refs":["zz"]}`)})
	if r.status != 400 || errorCode(t, r) != httpstore.CodeBadReference {
		t.Fatalf("malformed: %d %s", r.status, r.body)
	}
}

// TestBatchReadExample is the worked example of SPECS.md §18.4.
func TestBatchReadExample(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{})
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: hello})
	absent := "0001" + strings.Repeat("00", 32)
	r := do(t, ts, call{method: "POST", path: "/v1/artifacts/batch-read", body: []byte(`{"refs":["` + helloRef.String() + `","` + absent + `"]}`)})
	if got := hex.EncodeToString(r.body); r.status != 200 || got != "000000000e00"+"0000000000000005"+"68656c6c6f01" {
		t.Fatalf("batch-read: %d %s", r.status, got)
	}
}

// TestPutDerivesIndexEntries: a trace put through POST /v1/artifacts or
// /batch gets its surf.trace index entry (SPECS.md §18.4), so the result's
// trace is found on a store that received the run by copy.
func TestPutDerivesIndexEntries(t *testing.T) {
	t.Parallel()
	_, ts, st := newTestServer(t, Config{})
	prog := putProgram(t, ts)
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("a")})
	a := asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("a")))
	body, _ := json.Marshal(report.RunRequest{ProgramRef: prog, InputRefs: []asl.Reference{a, a}})
	var run report.Run
	json.Unmarshal(do(t, ts, call{method: "POST", path: "/v1/pel/run", body: body}).body, &run)
	tr, err := asl.Get(t.Context(), st, run.TraceRef, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range []bool{false, true} {
		_, ts2, st2 := newTestServer(t, Config{})
		var r reply
		if batch {
			b := asl.EncodeArtifact(tr)
			r = do(t, ts2, call{method: "POST", path: "/v1/artifacts/batch", body: append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)})
		} else {
			r = do(t, ts2, call{method: "POST", path: "/v1/artifacts", body: tr.Bytes,
				header: map[string]string{httpstore.HeaderTypeTag: fmt.Sprintf("0x%08x", uint32(tr.Tag))}})
		}
		if r.status != 200 {
			t.Fatalf("batch %v: put of the trace: %d %s", batch, r.status, r.body)
		}
		v, ok, err := st2.LookupIndex(t.Context(), surf.TraceIndexSpace, run.ResultRef.Bytes())
		if err != nil || !ok || !bytes.Equal(v, run.TraceRef.Bytes()) {
			t.Fatalf("batch %v: trace index entry = %x, %v, %v; want %s", batch, v, ok, err, run.TraceRef)
		}
	}
}
