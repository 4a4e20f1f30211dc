package server

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
)

// Behaviours SPECS.md §18 states explicitly so that a client written from
// it alone does not have to guess (issue 23).

// TestRange416ContentRange: a 416 answer carries Content-Range: bytes
// */SIZE (RFC 9110 §15.5.17, §18.2), past-the-end and empty-suffix ranges
// alike; HEAD ignores Range, as RFC 9110 §14.2 says of every method but GET.
func TestRange416ContentRange(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{})
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: hello})
	for _, c := range []call{
		{method: "GET", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"Range": "bytes=5-"}},
		{method: "GET", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"Range": "bytes=-0"}},
	} {
		r := do(t, ts, c)
		if r.status != 416 || r.header.Get("Content-Range") != "bytes */5" {
			t.Errorf("%s %s: status %d Content-Range %q, want 416 bytes */5", c.method, c.header["Range"], r.status, r.header.Get("Content-Range"))
		}
		if errorCode(t, r) != httpstore.CodeRangeNotSatisf {
			t.Errorf("code %s", errorCode(t, r))
		}
	}
	if r := do(t, ts, call{method: "HEAD", path: "/v1/artifacts/" + helloRef.String(), header: map[string]string{"Range": "bytes=5-"}}); r.status != 200 {
		t.Errorf("HEAD with Range: %d, want 200", r.status)
	}
}

// TestTypeTagHeaderCase: a put accepts the prefix 0x or 0X and digits of
// either case; the server always answers 0x and 8 lowercase digits.
func TestTypeTagHeaderCase(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{})
	for _, in := range []string{"0XABCDEF", "0xabcdef", "0x00AbCdEf"} {
		r := do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte("tagged"), header: map[string]string{httpstore.HeaderTypeTag: in}})
		if r.status != 200 {
			t.Fatalf("put with %s: %d %s", in, r.status, r.body)
		}
		var ack struct {
			Ref string `json:"ref"`
		}
		json.Unmarshal(r.body, &ack)
		g := do(t, ts, call{method: "GET", path: "/v1/artifacts/" + ack.Ref})
		if got := g.header.Get(httpstore.HeaderTypeTag); got != "0x00abcdef" {
			t.Errorf("put %s: answered %s %q, want 0x00abcdef", in, httpstore.HeaderTypeTag, got)
		}
	}
}

// TestMissingUnregisteredAndRepeated: a reference under an unregistered
// hash is reported missing (nothing can be stored under it) instead of
// failing the request; an absent reference asked twice is listed twice, in
// request order.
func TestMissingUnregisteredAndRepeated(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{})
	do(t, ts, call{method: "POST", path: "/v1/artifacts", body: hello})
	unknown := "7777" + strings.Repeat("ab", 32)
	absent := "0001" + strings.Repeat("00", 32)
	body := `{"refs":["` + unknown + `","` + absent + `","` + helloRef.String() + `","` + absent + `"]}`
	r := do(t, ts, call{method: "POST", path: "/v1/artifacts/missing", body: []byte(body)})
	want := `{"missing":["` + unknown + `","` + absent + `","` + absent + `"]}` + "\n"
	if r.status != 200 || string(r.body) != want {
		t.Fatalf("missing: %d %s, want %s", r.status, r.body, want)
	}
}

// TestListLimitClamped: a limit above max_list_limit is taken as the
// maximum (with "next" when more follow), not refused; 0, negative and
// non-numeric limits stay 400.
func TestListLimitClamped(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{Limits: Limits{MaxListLimit: 2}})
	for _, b := range []string{"a", "b", "c"} {
		do(t, ts, call{method: "POST", path: "/v1/artifacts", body: []byte(b)})
	}
	for _, q := range []string{"3", "10001", "99999999999999999999"} {
		r := do(t, ts, call{method: "GET", path: "/v1/artifacts?limit=" + q})
		var lr struct {
			Artifacts []json.RawMessage `json:"artifacts"`
			Next      *string           `json:"next"`
		}
		if err := json.Unmarshal(r.body, &lr); r.status != 200 || err != nil || len(lr.Artifacts) != 2 || lr.Next == nil {
			t.Errorf("limit=%s: %d %s", q, r.status, r.body)
		}
	}
	for _, q := range []string{"0", "-1", "x"} {
		if r := do(t, ts, call{method: "GET", path: "/v1/artifacts?limit=" + q}); r.status != 400 || errorCode(t, r) != httpstore.CodeBadRequest {
			t.Errorf("limit=%s: %d %s", q, r.status, r.body)
		}
	}
}

// TestBatchContentTypeNotRequired: the batch body is recognised by its
// route; Content-Type is not checked (clients send
// application/vnd.amduat.artifact-batch).
func TestBatchContentTypeNotRequired(t *testing.T) {
	t.Parallel()
	_, ts, _ := newTestServer(t, Config{})
	frame := httpstore.AppendFrame(nil, asl.Untagged([]byte("hi")))
	for _, ct := range []string{"", "text/plain", httpstore.ContentTypeBatch} {
		h := map[string]string{}
		if ct != "" {
			h["Content-Type"] = ct
		}
		r := do(t, ts, call{method: "POST", path: "/v1/artifacts/batch", body: frame, header: h})
		if r.status != 200 || !bytes.Contains(r.body, []byte("000154e1feb437741edf70be484e348fcf716057a182eef43bcbcfc65d8ec9fe33e0")) {
			t.Errorf("Content-Type %q: %d %s", ct, r.status, r.body)
		}
	}
}

// TestMetaScopesOrder: /v1/meta lists the caller's scopes in the fixed
// order read, write, run, whatever order the token file gives.
func TestMetaScopesOrder(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.json")
	tok, err := AddToken(file, "ci", []string{"run", "read"})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := LoadAuth(file)
	if err != nil {
		t.Fatal(err)
	}
	_, ts, _ := newTestServer(t, Config{Auth: auth})
	r := do(t, ts, call{method: "GET", path: "/v1/meta", header: map[string]string{"Authorization": "Bearer " + tok}})
	var m struct {
		Scopes []string `json:"scopes"`
	}
	if err := json.Unmarshal(r.body, &m); err != nil || strings.Join(m.Scopes, ",") != "read,run" {
		t.Fatalf("scopes %v (%v): %s", m.Scopes, err, r.body)
	}
}
